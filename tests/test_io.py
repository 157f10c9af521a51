"""Strategy files: layouts of CLI.md, round trips, atomic writes, corruption, no pickles."""

import json
import os
import warnings

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import strategy_opt as so
from strategy_opt import answers
from strategy_opt import histograms
from strategy_opt import atomic
from strategy_opt import io as sio
from strategy_opt.exceptions import InputError
from strategy_opt.strategy import Strategy


@pytest.fixture
def sparse_strategy():
    return so.solve("all-range:32", privacy="pure", method="hierarchical", branching=2)


@pytest.fixture
def dense_strategy():
    return so.solve("marginals:2x2x2:2", privacy="approx", method="fourier")


def test_npz_sparse_layout_readable_without_strategy_opt(tmp_path, sparse_strategy):
    f = tmp_path / "s.npz"
    sio.write_strategy(sparse_strategy, f)
    with np.load(f, allow_pickle=False) as z:
        assert {"data", "indices", "indptr", "shape", "format", "meta"} <= set(z.files)
        meta = json.loads(str(z["meta"]))
    A = sp.load_npz(f)
    np.testing.assert_array_equal(A.toarray(), sparse_strategy.dense())
    for key in ("format_version", "workload", "shape", "privacy", "sensitivity_norm", "method", "objective",
                "unit_total_squared_error", "lower_bound", "lower_bound_kind", "solver", "solve_seconds",
                "strategy_opt_version", "created", "content_sha256"):
        assert key in meta, key
    assert meta["sensitivity_norm"] == "l1" and meta["privacy"] == "pure"


def test_npz_dense_layout(tmp_path, dense_strategy):
    f = tmp_path / "d.npz"
    sio.write_strategy(dense_strategy, f)
    with np.load(f, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["A"], dense_strategy.dense())


def test_mtx_and_csv_layouts(tmp_path, sparse_strategy):
    sio.write_strategy(sparse_strategy, tmp_path / "s.mtx")
    A = scipy.io.mmread(tmp_path / "s.mtx")
    np.testing.assert_array_equal(A.toarray(), sparse_strategy.dense())
    header = (tmp_path / "s.mtx").read_text().splitlines()[1]
    assert json.loads(header.lstrip("%").strip())["method"] == "hierarchical"
    sio.write_strategy(sparse_strategy, tmp_path / "s.csv")
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "s.csv", delimiter=","), sparse_strategy.dense())
    assert json.loads((tmp_path / "s.json").read_text())["method"] == "hierarchical"


def all_range_gram(n: int) -> np.ndarray:
    """W^T W of all ranges on n cells, from the explicit 0/1 matrix."""
    W = np.array([[1.0 if a <= j <= b else 0.0 for j in range(n)] for a in range(n) for b in range(a, n)])
    return W.T @ W


def test_round_trip_all_formats(tmp_path):
    rng = np.random.default_rng(0)
    s = Strategy(rng.normal(size=(7, 5)) / 3, {"method": "test", "workload": "identity:5"})
    sio.write_strategy(s, tmp_path / "a.npz")
    b = sio.read_strategy(tmp_path / "a.npz")
    sio.write_strategy(b, tmp_path / "b.mtx")
    c = sio.read_strategy(tmp_path / "b.mtx")
    sio.write_strategy(c, tmp_path / "c.csv")
    d = sio.read_strategy(tmp_path / "c.csv")
    sio.write_strategy(d, tmp_path / "d.npz")
    e = sio.read_strategy(tmp_path / "d.npz")
    np.testing.assert_allclose(e.dense(), s.dense(), rtol=1e-12, atol=1e-15)
    assert e.meta["method"] == "test" and e.meta["workload"] == "identity:5"


@pytest.fixture(params=["unnamed", "named"])
def temporary_files(request, monkeypatch):
    """Both routes of `atomic_path`: unnamed O_TMPFILE files where the filesystem has them, named hidden ones elsewhere."""
    if request.param == "named":
        monkeypatch.setattr(atomic, "_anonymous_file", lambda directory: None)
    return request.param


def test_failed_write_leaves_no_file(tmp_path, sparse_strategy, monkeypatch, temporary_files):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(OSError):
        sio.write_strategy(sparse_strategy, tmp_path / "s.npz")
    assert list(tmp_path.iterdir()) == []


def test_write_replaces_an_existing_file_and_leaves_nothing_else(tmp_path, dense_strategy, temporary_files):
    f = tmp_path / "s.csv"
    sio.write_strategy(Strategy(np.eye(dense_strategy.shape[1]), {}), f)  # an older strategy and its metadata
    sio.write_strategy(dense_strategy, f)
    np.testing.assert_array_equal(sio.read_strategy(f).dense(), dense_strategy.dense())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.json"]
    mode = f.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # the usual permissions, not a temporary file's private 0600


def test_a_filesystem_that_cannot_link_unnamed_files_gets_a_copy(tmp_path, dense_strategy, monkeypatch):
    """O_TMPFILE worked but linkat did not (some network or overlay filesystems): the bytes are copied into place."""
    fd = atomic._anonymous_file(tmp_path)
    if fd is None:
        pytest.skip("this filesystem makes no unnamed files")
    os.close(fd)

    def no_link(*args, **kwargs):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(atomic.os, "link", no_link)
    sio.write_strategy(dense_strategy, tmp_path / "s.csv")
    np.testing.assert_array_equal(sio.read_strategy(tmp_path / "s.csv").dense(), dense_strategy.dense())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv", "s.json"]


def test_flipped_byte_is_detected(tmp_path, dense_strategy):
    f = tmp_path / "s.csv"
    sio.write_strategy(dense_strategy, f)
    text = f.read_text()
    f.write_text(text.replace("1,", "2,", 1))
    with pytest.raises(InputError, match="corrupted"):
        sio.read_strategy(f)


def test_truncated_npz_is_refused(tmp_path, sparse_strategy):
    f = tmp_path / "s.npz"
    sio.write_strategy(sparse_strategy, f)
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError):
        sio.read_strategy(f)


def test_object_arrays_are_never_unpickled(tmp_path):
    f = tmp_path / "w.npy"
    np.save(f, np.array([[1, None]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickled"):
        sio.read_workload_file(f)


def test_workload_file_formats(tmp_path):
    W = np.array([[1.0, 0, 2], [0, 1, 1]])
    np.save(tmp_path / "w.npy", W)
    np.savez(tmp_path / "w.npz", W=W)
    sp.save_npz(tmp_path / "ws.npz", sp.csr_matrix(W))
    scipy.io.mmwrite(tmp_path / "w.mtx", sp.csr_matrix(W))
    np.savetxt(tmp_path / "w.csv", W, delimiter=",")
    for name in ("w.npy", "w.npz", "ws.npz", "w.mtx", "w.csv"):
        np.testing.assert_allclose(sio.read_workload_file(tmp_path / name).matrix().toarray(), W)
    np.savetxt(tmp_path / "bad.csv", np.array([[1.0, np.nan]]), delimiter=",")
    with pytest.raises(InputError, match="NaN"):
        sio.read_workload_file(tmp_path / "bad.csv")


def test_histograms(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(histograms.read_histogram(tmp_path / "x.npy", 12, (3, 4)), np.arange(12.0))
    with pytest.raises(InputError, match="has 12 cells"):
        histograms.read_histogram(tmp_path / "x.npy", 10)
    (tmp_path / "r.csv").write_text("age,income\n3,10\n4,11\n4,12\n9,50\n")
    x = histograms.histogram_from_records(tmp_path / "r.csv", ["age"], ["0:10"])
    np.testing.assert_array_equal(x, [0, 0, 0, 1, 2, 0, 0, 0, 0, 1])
    x2 = histograms.histogram_from_records(tmp_path / "r.csv", ["age", "income"], ["0:10:5", "0:60:30"])
    np.testing.assert_array_equal(x2, [[3, 0], [0, 1]])  # one axis per column, in the order given
    with pytest.raises(InputError, match="no column"):
        histograms.histogram_from_records(tmp_path / "r.csv", ["zip"], ["0:5"])


def test_a_csv_histogram_on_one_line_is_refused(tmp_path):
    # "1,2,...,8" on one line was read as 8 cells; a CSV histogram has one count per line (CLI.md)
    (tmp_path / "row.csv").write_text("1,2,3,4,5,6,7,8\n")
    with pytest.raises(InputError, match="one count per line, got 8 columns"):
        histograms.read_histogram(tmp_path / "row.csv", 8)
    (tmp_path / "two.csv").write_text("1,2\n3,4\n")
    with pytest.raises(InputError, match="one count per line, got 2 columns"):
        histograms.read_histogram(tmp_path / "two.csv", 4)
    (tmp_path / "one.csv").write_text("7\n")
    (tmp_path / "col.csv").write_text("1\n2\n3\n\n")
    assert histograms.read_histogram(tmp_path / "one.csv", 1).tolist() == [7.0]
    assert histograms.read_histogram(tmp_path / "col.csv", 3).tolist() == [1.0, 2.0, 3.0]


def test_answers_csv(tmp_path):
    answers.write_answers(tmp_path / "a.csv", np.array([1.5, 2.0]), np.array([1.0, np.nan]), np.array([2.0, np.nan]))
    assert (tmp_path / "a.csv").read_text().splitlines() == ["query,answer,lower,upper", "0,1.5,1.0,2.0", "1,2.0,,"]


def test_answers_do_not_overwrite_a_csv_strategy(tmp_path, capsys):
    # the strategy's .json metadata was left beside the answers, describing a file that was gone
    from strategy_opt.cli import main

    s = tmp_path / "s.csv"
    identity = so.solve("prefix:4", method="identity")
    sio.write_strategy(identity, s)
    before = s.read_bytes(), (tmp_path / "s.json").read_bytes()
    with pytest.raises(InputError, match=r"cannot write answers to .*s.csv: it is a strategy file \(its metadata is s.json\)"):
        answers.write_answers(s, np.zeros(4))
    np.savetxt(tmp_path / "d.csv", np.arange(4.0))
    t = tmp_path / "t.csv"
    sio.write_strategy(identity, t)
    args = ["run", str(t), "--data", str(tmp_path / "d.csv"), "--workload", "prefix:4", "--epsilon", "1", "--seed", "1", "-q"]
    assert main([*args, "--out", str(s)]) == 2
    assert "it is a strategy file" in capsys.readouterr().err
    assert (s.read_bytes(), (tmp_path / "s.json").read_bytes()) == before and not (tmp_path / "s.csv.json").exists()
    # an answers file is replaced as before, and a .json beside it that is not a strategy's does not matter
    (tmp_path / "a.json").write_text("{}")
    for _ in range(2):
        assert main([*args, "--out", str(tmp_path / "a.csv")]) == 0


def test_a_csv_strategy_does_not_overwrite_an_answers_file(tmp_path, capsys):
    # solve --out a.csv over run's answers left a.csv.json describing answers beside a strategy
    from strategy_opt.cli import main

    np.savetxt(tmp_path / "d.csv", np.arange(4.0))
    s = tmp_path / "s.npz"
    sio.write_strategy(so.solve("prefix:4", method="identity"), s)
    a = tmp_path / "a.csv"
    assert main(["run", str(s), "--data", str(tmp_path / "d.csv"), "--workload", "prefix:4", "--epsilon", "1", "--seed", "1", "-q", "--out", str(a)]) == 0
    before = a.read_bytes(), (tmp_path / "a.csv.json").read_bytes()
    assert main(["solve", "--workload", "prefix:4", "--method", "identity", "-q", "--out", str(a)]) == 2
    assert "it is an answers file (its record is a.csv.json)" in capsys.readouterr().err
    assert (a.read_bytes(), (tmp_path / "a.csv.json").read_bytes()) == before and not (tmp_path / "a.json").exists()
    # a CSV strategy is still replaced by another, and a stray a.csv.json that is not a record does not matter
    t = tmp_path / "t.csv"
    (tmp_path / "t.csv.json").write_text("{}")
    for _ in range(2):
        assert main(["solve", "--workload", "prefix:4", "--method", "identity", "-q", "--out", str(t)]) == 0


# --------------------------------------------------------------------------- raw records: bins, header
def _records(tmp_path, seed=3, n=400):
    """Records with values below LO, exactly on HI, beyond HI, and on interior bin edges."""
    rng = np.random.default_rng(seed)
    age = rng.integers(-2, 13, n).astype(float)
    income = rng.choice([-1.0, 0.0, 15.0, 29.5, 30.0, 45.0, 59.999, 60.0, 61.0], n)
    f = tmp_path / "rec.csv"
    f.write_text("age,income\n" + "".join(f"{a:g},{b:g}\n" for a, b in zip(age, income)))
    return f, age, income


def test_records_equal_to_hi_are_dropped_like_any_value_outside(tmp_path):
    f, age, income = _records(tmp_path)
    assert np.any(age == 10) and np.any(income == 60)  # records sit exactly on HI
    x = histograms.histogram_from_records(f, ["age"], ["0:10"])
    np.testing.assert_array_equal(x, [np.sum(age == k) for k in range(10)])  # counted by hand: bins [k, k+1)
    assert x.sum() == np.sum((age >= 0) & (age < 10))
    # a record on HI is dropped exactly as one beyond it: moving it to HI + 5 changes nothing
    g = tmp_path / "moved.csv"
    g.write_text("age\n" + "".join(f"{a + 5 * (a == 10):g}\n" for a in age))
    np.testing.assert_array_equal(histograms.histogram_from_records(g, ["age"], ["0:10"]), x)
    # WIDTH not dividing HI - LO: the last bin [9, 12) still stops at HI = 10
    x3 = histograms.histogram_from_records(f, ["age"], ["0:10:3"])
    np.testing.assert_array_equal(x3, [np.sum((age >= lo) & (age < min(lo + 3, 10))) for lo in (0, 3, 6, 9)])


def test_records_on_hi_are_dropped_in_two_dimensions(tmp_path):
    f, age, income = _records(tmp_path, seed=4)
    x = histograms.histogram_from_records(f, ["age", "income"], ["0:10:5", "0:60:30"])
    expected = [np.sum((age >= a) & (age < a + 5) & (income >= b) & (income < b + 30)) for a in (0, 5) for b in (0, 30)]
    np.testing.assert_array_equal(x.ravel(), expected)
    inside = (age >= 0) & (age < 10) & (income >= 0) & (income < 60)
    assert x.sum() == inside.sum() < len(age)  # a record out of range in either column is dropped


def test_records_header_with_bom_and_duplicate_names(tmp_path):
    f = tmp_path / "bom.csv"
    f.write_text("age,name\n1,a\n2,b\n3,c\n3,d\n", encoding="utf-8-sig")
    assert f.read_bytes()[:3] == b"\xef\xbb\xbf"
    np.testing.assert_array_equal(histograms.histogram_from_records(f, ["age"], ["0:5"]), [0, 1, 1, 2, 0])
    dup = tmp_path / "dup.csv"
    dup.write_text("age,age,name,name\n1,5,a,b\n2,6,c,d\n")
    with pytest.raises(InputError, match=r"column 'age' appears 2 times"):
        histograms.histogram_from_records(dup, ["age"], ["0:8"])
    # a duplicated column that is not asked for is no ambiguity
    other = tmp_path / "other.csv"
    other.write_text("age,name,name\n1,a,b\n2,c,d\n")
    np.testing.assert_array_equal(histograms.histogram_from_records(other, ["age"], ["0:3"]), [0, 1, 1])


def test_records_rows_must_match_the_header(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("age,x\n1,2\n3\n")
    with pytest.raises(InputError, match="line 3 has 1 fields, the header 2"):
        histograms.histogram_from_records(short, ["age"], ["0:5"])
    extra = tmp_path / "extra.csv"
    extra.write_text("age,x\n1,2\n\n3,4,5\n")  # the blank line is skipped, the row with a third field is not
    with pytest.raises(InputError, match="line 4 has 3 fields"):
        histograms.histogram_from_records(extra, ["age"], ["0:5"])
    binary = tmp_path / "x.npy"
    np.save(binary, np.arange(4.0))
    with pytest.raises(InputError, match="UTF-8 CSV file with a header row"):
        histograms.histogram_from_records(binary, ["age"], ["0:5"])


@pytest.mark.parametrize("bins", ["0:1_0", "0:10:\u0662", "0x0:10"])
def test_bins_are_ascii_decimals(tmp_path, bins):
    f = tmp_path / "r.csv"
    f.write_text("age\n1\n")
    with pytest.raises(InputError, match="decimal numbers"):
        histograms.histogram_from_records(f, ["age"], [bins])


def test_narrow_last_bin_is_noted():
    assert histograms.narrow_last_bin("0:95:10") == "--bins '0:95:10': the last bin [90, 95) is narrower than the others (HI - LO is not a multiple of WIDTH)"
    assert histograms.narrow_last_bin("0:1:0.1") is None and histograms.narrow_last_bin("-5:5") is None
    assert "[0.9, 1)" in histograms.narrow_last_bin("0:1:0.3")


def test_csv_matrices_with_a_byte_order_mark(tmp_path):
    """Spreadsheet exports start with a BOM; it was read as part of the first number."""
    f = tmp_path / "W.csv"
    f.write_text("1,0\n1,1\n", encoding="utf-8-sig")
    np.testing.assert_array_equal(sio.read_workload_file(f).matrix().toarray(), [[1, 0], [1, 1]])


def test_workload_file_spec_is_quoted_when_the_path_holds_operators(tmp_path):
    from strategy_opt.spec import canonical_spec, parse_spec

    d = tmp_path / "d+x(1)"
    d.mkdir()
    W = np.tril(np.ones((4, 4)))
    np.savez(d / "W*.npz", W=W)
    wl = sio.read_workload_file(d / "W*.npz")
    assert wl.spec == f"file:'{d / 'W*.npz'}'"
    assert canonical_spec(wl.spec) == wl.spec  # the recorded SPEC parses back to the same file
    np.testing.assert_array_equal(parse_spec(wl.spec).matrix().toarray(), W)


def test_kronecker_strategy_too_large_to_write_flat_is_refused_before_expanding(tmp_path, monkeypatch):
    # 2x2 dense factors on 10 attributes: 4^10 = 1048576 non-zeros once multiplied out (48 B each)
    from strategy_opt.error import KroneckerMatrix

    s = Strategy(KroneckerMatrix([np.array([[1.0, 1.0], [1.0, -1.0]])] * 10))
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(48 * 4**10))  # below 48 B/non-zero plus the row pointers
    with pytest.raises(InputError, match=r"writing the 1024x1024 strategy \(1.05e\+06 non-zeros"):
        sio.write_strategy(s, tmp_path / "k.npz")
    assert not (tmp_path / "k.npz").exists()
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1G")
    sio.write_strategy(s, tmp_path / "k.npz")
    np.testing.assert_array_equal(sio.read_strategy(tmp_path / "k.npz").dense(), s.dense())


def test_a_hand_written_file_with_metadata_but_no_format_version_is_read(tmp_path):
    """README: users may write the metadata fields themselves; format_version marks a file written by
    strategy_opt, whose seal is then required."""
    meta = {"workload": "identity:4", "privacy": "pure", "method": "mine", "unit_total_squared_error": 4.0}
    np.savez(tmp_path / "h.npz", A=np.eye(4), meta=json.dumps(meta))
    s = sio.read_strategy(tmp_path / "h.npz")
    assert np.array_equal(s.dense(), np.eye(4)) and s.meta["method"] == "mine"
    np.savez(tmp_path / "v.npz", A=np.eye(4), meta=json.dumps({**meta, "format_version": 3}))
    with pytest.raises(InputError, match="requires a whole-file seal"):
        sio.read_strategy(tmp_path / "v.npz")


def test_hand_written_claims_are_marked_unchecked_on_reading(tmp_path):
    """An outside audit: a file without format_version stating E = 12390 (the matrix gives 19207) and a lower bound
    of 1e12 was read with its claims as given and no mark. Reading does not analyse the workload; it marks the
    metadata hand-written and lists the claims it did not check; `error` recomputes (identity on prefix:4:
    E_1 = trace(W^T W) = 10), export refuses the contradiction."""
    meta = {"workload": "prefix:4", "privacy": "pure", "unit_total_squared_error": 5.0, "lower_bound": 1e12, "method": "mine"}
    np.savez(tmp_path / "h.npz", A=np.eye(4), meta=json.dumps(meta))
    s = sio.read_strategy(tmp_path / "h.npz")
    assert s.meta["metadata_origin"] == "hand-written" and s.meta["unchecked_fields"] == ["lower_bound", "unit_total_squared_error"]
    assert so.error_report(s, "prefix:4", "pure")["unit_total_squared_error"] == pytest.approx(10.0)
    with pytest.raises(InputError, match="states unit_total_squared_error 5.0 but the matrix gives 10"):
        sio.write_strategy(s, tmp_path / "out.npz")
    written = so.solve("prefix:4", privacy="pure", method="identity")
    sio.write_strategy(written, tmp_path / "w.npz")
    assert "metadata_origin" not in sio.read_strategy(tmp_path / "w.npz").meta  # strategy_opt's own file: not marked


def test_write_refuses_metadata_that_no_longer_describes_the_matrix(tmp_path):
    """A solved strategy whose matrix was changed afterwards keeps E = 120 in its metadata; the true E_1 is 144.

    Closed forms: the identity on all-range:8 has E_1 = trace(W^T W) = 120; with cell 8
    measured at half weight its sensitivity stays 1 and the cell's term 8 becomes 32.
    """
    s = so.solve("all-range:8", privacy="pure", method="identity")
    assert s.meta["unit_total_squared_error"] == pytest.approx(120)
    s.matrix = np.diag([1.0] * 7 + [0.5])
    assert so.error_report(s, "all-range:8", "pure")["unit_total_squared_error"] == pytest.approx(144)
    with pytest.raises(InputError, match="matrix changed after its metadata was computed"):
        sio.write_strategy(s, tmp_path / "s.npz")
    h = so.solve("all-range:8", privacy="pure", method="hierarchical")
    A = h.dense().copy()
    A[0] *= 0.5  # the stated sensitivity is stale too: written, this file would be refused on reading
    h.matrix = A
    with pytest.raises(InputError, match="sensitivity|matrix changed"):
        sio.write_strategy(h, tmp_path / "h.npz")
    assert not list(tmp_path.iterdir())


def test_metadata_edited_after_the_solve_or_the_read_is_checked_like_metadata_written_by_hand(tmp_path):
    s = so.solve("all-range:16", method="minerror-l2")
    A = s.dense()
    E = np.max(np.sum(A**2, axis=0)) * np.trace(all_range_gram(16) @ np.linalg.inv(A.T @ A))  # independent E_2
    s.meta.update(unit_total_squared_error=1.0, lower_bound=0.5)
    with pytest.raises(InputError, match=rf"metadata states unit_total_squared_error 1.0 but the matrix gives {E:.6f}"):
        sio.write_strategy(s, tmp_path / "edited.npz")
    s = so.solve("all-range:16", method="minerror-l2")
    sio.write_strategy(s, tmp_path / "solved.npz")  # as computed: written as it is
    read = sio.read_strategy(tmp_path / "solved.npz")
    assert "metadata_origin" not in read.meta
    sio.write_strategy(read, tmp_path / "copy.mtx")  # as read: unchanged
    assert "metadata_origin" not in sio.read_strategy(tmp_path / "copy.mtx").meta
    read.meta["lower_bound"] = 1e9
    with pytest.raises(InputError, match="metadata states lower_bound 1000000000.0, above the matrix's error"):
        sio.write_strategy(read, tmp_path / "bound.npz")
    read.meta.update(lower_bound=s.meta["lower_bound"], note="mine")  # an added note: written, marked as edited by hand
    sio.write_strategy(read, tmp_path / "noted.npz")
    meta = sio.read_strategy(tmp_path / "noted.npz").meta
    assert meta["metadata_origin"] == "hand-written" and meta["note"] == "mine"
    assert meta["unit_total_squared_error"] == pytest.approx(E, rel=1e-9)
    # the solve's own claims (its status, the dual value, the bound's kind) can no longer be told from edits
    assert meta["unchecked_fields"] == ["lower_bound", "lower_bound_kind", "native_dual", "native_primal", "solver_status"]
    assert not (tmp_path / "edited.npz").exists() and not (tmp_path / "bound.npz").exists()


def test_write_checks_and_marks_metadata_built_by_hand(tmp_path):
    claims = {"workload": "all-range:8", "privacy": "pure", "sensitivity_norm": "l1"}
    with pytest.raises(InputError, match="gives 120"):
        sio.write_strategy(Strategy(np.eye(8), {**claims, "unit_total_squared_error": 1.0}), tmp_path / "f.npz")
    with pytest.raises(InputError, match="above the matrix's error"):
        sio.write_strategy(Strategy(np.eye(8), {**claims, "unit_total_squared_error": 120.0, "lower_bound": 500.0}), tmp_path / "f.npz")
    sio.write_strategy(Strategy(np.eye(8), {**claims, "unit_total_squared_error": 120.0, "lower_bound": 50.0}), tmp_path / "f.npz")
    meta = sio.read_strategy(tmp_path / "f.npz").meta
    assert meta["metadata_origin"] == "hand-written" and meta["unchecked_fields"] == ["lower_bound"]
    # an outside audit: solver claims were sealed unchecked (a "dual" of 1e6 beside an error of 36 on prefix:8)
    facts = {"workload": "prefix:8", "privacy": "approx", "unit_total_squared_error": 36.0, "solver_status": "optimal", "native_dual": 1e6}
    sio.write_strategy(Strategy(np.eye(8), facts), tmp_path / "g.npz")
    assert sio.read_strategy(tmp_path / "g.npz").meta["unchecked_fields"] == ["native_dual", "solver_status"]
    with pytest.raises(InputError, match="supports_workload False, but the matrix supports"):
        sio.write_strategy(Strategy(np.eye(8), {**facts, "supports_workload": False}), tmp_path / "h.npz")
    # a regression audit: the new log10 fields were sealed unchecked (svd_bound_log10 99, true 1.2188), and a kind
    # stated without its bound was listed as unchecked though the bound (and its kind) are computed here
    base = {"workload": "prefix:8", "privacy": "pure"}
    with pytest.raises(InputError, match="metadata states svd_bound_log10 99 but the matrix gives 1.21883"):
        sio.write_strategy(Strategy(np.eye(8), {**base, "svd_bound_log10": 99}), tmp_path / "i.npz")
    sio.write_strategy(Strategy(np.eye(8), {**base, "objective": "relative", "objective_lower_bound_log10": 50}), tmp_path / "j.npz")
    assert sio.read_strategy(tmp_path / "j.npz").meta["unchecked_fields"] == ["objective_lower_bound_log10"]
    sio.write_strategy(Strategy(np.eye(8), {**base, "lower_bound_kind": "dual-certificate"}), tmp_path / "k.npz")
    meta = sio.read_strategy(tmp_path / "k.npz").meta
    assert meta["unchecked_fields"] == [] and meta["lower_bound_kind"] == "svd-bound"
    # with no workload recorded, a kind with no bound describes nothing and is dropped (a second regression audit)
    sio.write_strategy(Strategy(np.eye(8), {"lower_bound_kind": "dual-certificate", "objective_lower_bound_kind": "x"}), tmp_path / "l.npz")
    meta = sio.read_strategy(tmp_path / "l.npz").meta
    assert meta.get("lower_bound_kind") is None and meta.get("objective_lower_bound_kind") is None
    # what strategy_opt computed is written as it is, and read back unmarked
    s = so.solve("all-range:8", privacy="pure", method="identity")
    sio.write_strategy(s, tmp_path / "s.npz")
    assert "metadata_origin" not in sio.read_strategy(tmp_path / "s.npz").meta


def test_metadata_not_sealed_by_strategy_opt_is_checked_even_with_a_format_version(tmp_path):
    """An outside audit wrote E_1 = 5 for the identity on prefix:8 (trace(W^T W) = 36) by adding format_version,
    and E_1 = 2 by copying a solved strategy's metadata into a new Strategy."""
    fake = {"workload": "prefix:8", "privacy": "pure", "unit_total_squared_error": 5.0, "format_version": 3}
    with pytest.raises(InputError, match="states unit_total_squared_error 5.0 but the matrix gives 36"):
        sio.write_strategy(Strategy(np.eye(8), fake), tmp_path / "a.npz")
    s = so.solve("prefix:8", privacy="pure", method="identity")
    copy = Strategy(s.matrix, dict(s.meta))
    copy.meta["unit_total_squared_error"] = 2.0
    with pytest.raises(InputError, match="gives 36"):
        sio.write_strategy(copy, tmp_path / "b.npz")
    sio.write_strategy(Strategy(s.matrix, dict(s.meta)), tmp_path / "c.npz")  # an unedited copy: checked, written, marked
    meta = sio.read_strategy(tmp_path / "c.npz").meta
    assert meta["metadata_origin"] == "hand-written" and meta["unit_total_squared_error"] == 36
    assert not (tmp_path / "a.npz").exists() and not (tmp_path / "b.npz").exists()


@pytest.mark.parametrize(
    "key, value, truth",
    [
        # prefix:8, identity, pure: E_1 = 36; svd bound (sum of singular values of W)^2 / n; lower bound 17.8659 (l2-optimum)
        ("ratio_to_lower_bound", 0.5, None),
        ("svd_bound", 1e9, None),
        ("ratio_to_identity", 3.0, 1.0),
        ("relative_gap", 0.1, None),
        ("unit_total_squared_error_log10", 0.5, np.log10(36)),
        ("objective_value", 1.0, 36.0),
    ],
)
def test_derived_numbers_in_edited_metadata_must_agree_with_the_matrix(tmp_path, key, value, truth):
    s = so.solve("prefix:8", privacy="pure", method="identity")
    W = so.workload.prefix(8).matrix().toarray()
    independent = {  # numpy: E_1 of the identity is trace(W^T W); the SVD bound is (sum sigma)^2 / n
        "svd_bound": np.linalg.svd(W, compute_uv=False).sum() ** 2 / 8,
        "ratio_to_lower_bound": 36 / s.meta["lower_bound"],
        "relative_gap": 36 / s.meta["lower_bound"] - 1,
    }
    truth = independent.get(key, truth)
    assert s.meta[key] == pytest.approx(truth, rel=1e-9)  # what strategy_opt wrote is right
    s.meta[key] = value
    with pytest.raises(InputError, match=rf"metadata states {key} {value!r}"):
        sio.write_strategy(s, tmp_path / "edited.npz")
    s.meta[key] = float(truth) * (1 + 1e-9)  # the right number, stated by hand (to 1e-9): written, marked
    sio.write_strategy(s, tmp_path / "fixed.npz")
    assert sio.read_strategy(tmp_path / "fixed.npz").meta["metadata_origin"] == "hand-written"


def test_objective_numbers_other_than_the_total_are_listed_unchecked(tmp_path):
    s = so.solve("prefix:8", method="minerror-l2", objective="max")
    s.meta["note"] = "edited"
    sio.write_strategy(s, tmp_path / "m.npz")
    meta = sio.read_strategy(tmp_path / "m.npz").meta
    assert {"objective_value", "objective_lower_bound", "lower_bound"} <= set(meta["unchecked_fields"])


def test_a_stated_sensitivity_must_be_the_matrix_s_with_or_without_a_recorded_norm(tmp_path):
    """Two stacked identities: largest column L1 norm 2, L2 norm sqrt(2); a stated 0.1 (too little noise) is neither."""
    A = np.vstack([np.eye(4)] * 2)
    for stated in (2.0, 2**0.5):  # without privacy or norm either is a sensitivity of this matrix
        sio.write_strategy(Strategy(A, {"sensitivity": stated}), tmp_path / "ok.npz")
        assert sio.read_strategy(tmp_path / "ok.npz").meta["sensitivity"] == stated
    with pytest.raises(InputError, match=r"states sensitivity 0.1 but the matrix's largest column l1 norm is 2 or l2 norm is 1.414213562"):
        sio.write_strategy(Strategy(A, {"sensitivity": 0.1}), tmp_path / "a.npz")
    with pytest.raises(InputError, match="metadata field 'sensitivity' must be a number, got 'abc'"):
        sio.write_strategy(Strategy(A, {"sensitivity": "abc"}), tmp_path / "a.npz")
    with pytest.raises(InputError, match=r"largest column l1 norm is 2$"):
        sio.write_strategy(Strategy(A, {"sensitivity": 2**0.5, "privacy": "pure"}), tmp_path / "a.npz")
    # a file edited by hand outside strategy_opt is refused on reading too
    np.savez(tmp_path / "hand.npz", A=A, meta=json.dumps({"sensitivity": 0.1}))
    with pytest.raises(InputError, match="states sensitivity 0.1"):
        sio.read_strategy(tmp_path / "hand.npz")
    assert not (tmp_path / "a.npz").exists()


def test_every_written_file_holds_the_contract_fields(tmp_path):
    """CLI.md's meta fields are in every file: computed from a recorded workload and privacy, null when unknown."""
    A = np.vstack([np.eye(8), np.ones((1, 8))])
    sio.write_strategy(A, tmp_path / "bare.npz")  # nothing known but the matrix
    meta = json.loads(str(np.load(tmp_path / "bare.npz")["meta"]))
    assert set(sio.CONTRACT_META_FIELDS) <= set(meta)
    assert meta["shape"] == [9, 8] and meta["created"] and meta["workload"] is None and meta["sensitivity_norm"] is None
    sio.write_strategy(Strategy(A, {"workload": "prefix:8", "privacy": "pure", "method": "mine"}), tmp_path / "hand.npz")
    meta = json.loads(str(np.load(tmp_path / "hand.npz")["meta"]))
    assert set(sio.CONTRACT_META_FIELDS) <= set(meta) and meta["sensitivity_norm"] == "l1" and meta["objective"] is None
    G = np.tril(np.ones((8, 8))).T @ np.tril(np.ones((8, 8)))
    expected = np.max(np.abs(A).sum(axis=0)) ** 2 * np.trace(G @ np.linalg.inv(A.T @ A))  # E_1, computed independently
    assert meta["unit_total_squared_error"] == pytest.approx(expected, rel=1e-12) and meta["unchecked_fields"] == []
    svd_bound = np.linalg.svd(np.tril(np.ones((8, 8))), compute_uv=False).sum() ** 2 / 8
    assert meta["lower_bound_kind"] == "svd-bound" and meta["lower_bound"] == pytest.approx(svd_bound, rel=1e-9)


def test_write_refuses_a_recorded_workload_or_privacy_the_matrix_contradicts(tmp_path):
    with pytest.raises(InputError, match=r"records workload 'prefix:9', but it has 9 cells and the matrix 8 columns"):
        sio.write_strategy(Strategy(np.eye(8), {"privacy": "pure", "workload": "prefix:9"}), tmp_path / "a.npz")
    with pytest.raises(InputError, match=r"records workload 'prefix:8', but strategy does not support the workload \(W A\+ A != W"):
        sio.write_strategy(Strategy(np.ones((1, 8)), {"privacy": "pure", "workload": "prefix:8"}), tmp_path / "a.npz")
    with pytest.raises(InputError, match="metadata states privacy 'renyi'; strategy files record 'pure' or 'approx'"):
        sio.write_strategy(Strategy(np.eye(3), {"privacy": "renyi"}), tmp_path / "a.npz")
    assert not (tmp_path / "a.npz").exists()
    # the total query is answered by one row of ones: recorded and sealed
    sio.write_strategy(Strategy(np.ones((1, 8)), {"privacy": "pure", "workload": "total:8"}), tmp_path / "t.npz")
    assert sio.read_strategy(tmp_path / "t.npz").meta["unchecked_fields"] == []


def test_reading_refuses_an_unknown_privacy(tmp_path):
    np.savez(tmp_path / "r.npz", A=np.eye(3), meta=json.dumps({"privacy": "renyi"}))
    with pytest.raises(InputError, match="privacy 'renyi'"):
        sio.read_strategy(tmp_path / "r.npz")


def test_metadata_with_numpy_values_is_written_as_json_numbers(tmp_path):
    s = so.solve("all-range:8", privacy="pure", method="identity")
    s.meta.update(note=np.float32(1.5), counts=np.arange(3), nested={"k": np.int64(2)}, flag=np.bool_(True))
    sio.write_strategy(s, tmp_path / "s.npz")
    meta = sio.read_strategy(tmp_path / "s.npz").meta
    assert (meta["note"], meta["counts"], meta["nested"], meta["flag"]) == (1.5, [0, 1, 2], {"k": 2}, True)
    for bad, match in ((float("nan"), "no NaN"), (object(), "type object")):
        s.meta["bad"] = bad
        with pytest.raises(InputError, match=match):
            sio.write_strategy(s, tmp_path / "t.npz")
    assert not (tmp_path / "t.npz").exists()


def test_a_csv_strategy_does_not_take_another_csvs_metadata_file(tmp_path):
    s = Strategy(np.eye(3), {})
    sio.write_strategy(s, tmp_path / "s.csv")
    with pytest.raises(InputError, match=r"its metadata file s.json is also that of s.csv"):
        sio.write_strategy(Strategy(2 * np.eye(3), {}), tmp_path / "s.CSV")
    assert sio.read_strategy(tmp_path / "s.csv").matrix.tolist() == np.eye(3).tolist()  # its seal still holds
    sio.write_strategy(s, tmp_path / "s.csv")  # rewriting the same file is fine


def test_a_csv_strategy_does_not_replace_a_users_own_json(tmp_path):
    # export --out mine.csv silently replaced the user's unrelated mine.json
    s = Strategy(np.eye(3), {})
    for text in ('{"mine": 1}', "not json", '{"csv_sha256": "x"}'):
        (tmp_path / "mine.json").write_text(text)
        with pytest.raises(InputError, match=r"mine.json exists and is not a strategy's metadata"):
            sio.write_strategy(s, tmp_path / "mine.csv")
        assert (tmp_path / "mine.json").read_text() == text and not (tmp_path / "mine.csv").exists()
    sio.write_strategy(s, tmp_path / "s.csv")
    sio.write_strategy(Strategy(2 * np.eye(3), {}), tmp_path / "s.csv")  # a strategy's own metadata is replaced
    assert sio.read_strategy(tmp_path / "s.csv").matrix.tolist() == (2 * np.eye(3)).tolist()
    (tmp_path / "s.csv").unlink()  # an orphaned strategy record is still a strategy's: replaced
    sio.write_strategy(s, tmp_path / "s.csv")
    assert sio.read_strategy(tmp_path / "s.csv").matrix.tolist() == np.eye(3).tolist()


@pytest.mark.parametrize("suffix", [".npz", ".mtx", ".csv"])
def test_a_kronecker_strategy_is_read_back_as_its_factors(tmp_path, suffix):
    """Files store the product; reading takes the factors off it (error analysis per factor), the product stays bit for bit."""
    from strategy_opt.error import KroneckerMatrix, unit_error
    from strategy_opt.spec import parse_spec

    for spec, method in (("prefix:8*prefix:4", "hierarchical"), ("all-range:8*prefix:8", "auto")):  # auto: p-identity's float factors
        s = so.solve(spec, privacy="pure", method=method)
        assert isinstance(s.matrix, KroneckerMatrix)
        f = tmp_path / f"k{suffix}"
        sio.write_strategy(s, f)
        back = sio.read_strategy(f)
        assert isinstance(back.matrix, KroneckerMatrix) and len(back.matrix.factors) == 2
        assert sio.content_hash(back.matrix) == back.meta["content_sha256"]
        assert unit_error(back.matrix, parse_spec(spec), 1) == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-12)
        sio.write_strategy(back, tmp_path / f"again{suffix}")  # export: the same bytes of matrix
        assert sio.read_strategy(tmp_path / f"again{suffix}").meta["content_sha256"] == back.meta["content_sha256"]


def test_factors_are_taken_only_off_a_true_product(tmp_path):
    from strategy_opt.error import KroneckerMatrix

    A = np.arange(1.0, 17.0).reshape(4, 4)  # not a Kronecker product of 2 x 2 factors
    np.savez(tmp_path / "h.npz", A=A, meta=json.dumps({"kronecker_factor_shapes": [[2, 2], [2, 2]]}))
    back = sio.read_strategy(tmp_path / "h.npz")
    assert not isinstance(back.matrix, KroneckerMatrix) and np.array_equal(back.dense(), A)


def test_error_of_a_2d_strategy_file_beyond_the_dense_limit(tmp_path, capsys):
    """150 x 150 = 22500 cells: refused before (a dense 22500^2 matrix); per factor, E(H x H; P x P) = E(H; P)^2."""
    from strategy_opt.cli import main
    from strategy_opt.error import unit_error
    from strategy_opt.workload import prefix

    f = tmp_path / "h.npz"
    assert main(["-q", "solve", "--workload", "prefix:150*prefix:150", "--privacy", "pure", "--method", "hierarchical", "--branching", "4", "--out", str(f)]) == 0
    capsys.readouterr()
    assert main(["error", str(f), "--workload", "prefix:150*prefix:150", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["unit_total_squared_error"]
    from strategy_opt.bases import hierarchical_matrix

    one = unit_error(hierarchical_matrix(150, 4), prefix(150), 1)
    assert got == pytest.approx(one**2, rel=1e-10)


def test_a_stored_zero_is_no_pivot_for_the_factors():
    from strategy_opt.error import KroneckerMatrix, kronecker_factors

    A = sp.coo_matrix(sp.kron(np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([[1.0, 2.0], [0.0, 3.0]])))
    stored = sp.coo_matrix((np.append(0.0, A.data), (np.append(0, A.row), np.append(0, A.col))), shape=A.shape)  # an explicit 0 at (0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by the stored zero
        K = kronecker_factors(stored, [[2, 2], [2, 2]])
    assert isinstance(K, KroneckerMatrix) and np.allclose(sp.kron(*K.factors).toarray(), A.toarray())


def test_a_workload_label_in_hand_written_metadata_stays_unchecked(tmp_path):
    """solve records 'matrix' for a workload given as a matrix: a label, not SPEC syntax."""
    s = Strategy(np.eye(6), {"privacy": "pure", "workload": "matrix", "unit_total_squared_error": 21.0})
    sio.write_strategy(s, tmp_path / "m.npz")
    assert sio.read_strategy(tmp_path / "m.npz").meta["unchecked_fields"] == ["unit_total_squared_error"]


def test_a_kronecker_strategy_too_large_to_flatten_is_stored_as_its_factors(tmp_path, monkeypatch, capsys):
    """Past defaults.FLAT_MAX_NONZEROS (lowered here) a Kronecker strategy's .npz holds its factors: np.kron of them is the
    strategy, it reads back as the product, a changed factor is refused, .mtx is refused, and run answers exactly as the
    flat strategy does (same seed: same noise, least squares per factor)."""
    import json

    from strategy_opt import error as error_module
    from strategy_opt.api import solve
    from strategy_opt.cli import main
    from strategy_opt.executor import run
    from strategy_opt.privacy import ApproxDP

    s = solve("prefix:8*all-range:6", privacy="approx", method="hierarchical", branching=2)
    flat = s.matrix.tocsr().toarray()
    monkeypatch.setattr(error_module, "FLAT_MAX_NONZEROS", 10)
    f = tmp_path / "k.npz"
    sio.write_strategy(s, f)
    z = np.load(f)
    assert sorted(z.files) == ["factor_0", "factor_1", "meta"] and json.loads(str(z["meta"]))["layout"] == "kronecker-factors"
    np.testing.assert_allclose(np.kron(z["factor_0"], z["factor_1"]), flat, rtol=0, atol=1e-15)
    back = sio.read_strategy(f)
    assert back.meta["unit_total_squared_error"] == s.meta["unit_total_squared_error"]
    np.testing.assert_allclose(back.matrix.tocsr().toarray(), flat, atol=1e-15)
    x = np.random.default_rng(3).poisson(4, 48).astype(float)
    factored_run = run(back, x, "prefix:8*all-range:6", ApproxDP(1.0, 1e-6), rng=7)
    monkeypatch.setattr(error_module, "FLAT_MAX_NONZEROS", 10**12)
    flat_run = run(s, x, "prefix:8*all-range:6", ApproxDP(1.0, 1e-6), rng=7)
    np.testing.assert_allclose(factored_run.answers, flat_run.answers, rtol=1e-9, atol=1e-9)
    monkeypatch.setattr(error_module, "FLAT_MAX_NONZEROS", 10)
    assert main(["-q", "export", str(f), "--out", str(tmp_path / "k.mtx")]) == 2
    assert "write .npz, which stores its factors" in capsys.readouterr().err
    members = {k: z[k] for k in z.files}
    members["factor_1"] = members["factor_1"] * 1.5  # a changed factor: the recorded per-factor hashes no longer match
    np.savez(tmp_path / "bad.npz", **members)
    with pytest.raises(InputError, match="corrupted"):
        sio.read_strategy(tmp_path / "bad.npz")


def test_factor_files_without_metadata_and_huge_mtx_headers(tmp_path, capsys):
    """A hand-made factor file without 'meta' is read as the product (it raised StopIteration); a .mtx header promising
    10^12 rows is refused from its header (a 10^9 one got the process killed)."""
    from strategy_opt.cli import main

    P = np.tril(np.ones((4, 4)))
    np.savez(tmp_path / "f.npz", factor_0=P, factor_1=P)
    s = sio.read_strategy(tmp_path / "f.npz")
    np.testing.assert_array_equal(s.matrix.tocsr().toarray(), np.kron(P, P))
    (tmp_path / "big.mtx").write_text("%%MatrixMarket matrix coordinate real general\n1000000000000 1000000000000 1\n1 1 3\n")
    assert main(["-q", "error", str(tmp_path / "big.mtx"), "--workload", "prefix:16", "--force"]) == 2
    assert "too large to load" in capsys.readouterr().err


def test_factored_runs_refuse_other_estimators_before_drawing_noise(tmp_path, monkeypatch, capsys):
    from strategy_opt import error as error_module
    from strategy_opt.api import solve
    from strategy_opt.cli import main

    s = solve("prefix:8*all-range:6", privacy="approx", method="hierarchical", branching=2)
    monkeypatch.setattr(error_module, "FLAT_MAX_NONZEROS", 10)
    sio.write_strategy(s, tmp_path / "k.npz")
    np.save(tmp_path / "x.npy", np.ones(48))
    for estimator in ("nnls", "hybrid"):
        assert main(["run", str(tmp_path / "k.npz"), "--data", str(tmp_path / "x.npy"), "--workload", "prefix:8*all-range:6", "--epsilon", "1",
                     "--delta", "1e-6", "--seed", "1", "--estimator", estimator, "--out", str(tmp_path / "a.npy")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].endswith("this Kronecker strategy is kept as its factors: use estimator='ls' (--estimator ls)")


@pytest.mark.parametrize(
    "spec, kwargs",
    [
        ("all-predicate:6", {"privacy": "pure", "method": "identity"}),  # a rescaled Gram (log_scale)
        ("all-predicate:40", {"method": "auto"}),
        ("marginals:3x4x5:2", {"method": "auto"}),
        ("prefix:16*all-range:8", {"method": "auto", "privacy": "pure"}),
        ("prefix:12+identity:12", {"method": "eigen-design"}),
        ("random-range:20:30:4", {"method": "minerror-l2", "objective": "max"}),
        ("all-range:32", {"method": "l1-weighting", "privacy": "pure", "basis": "wavelet"}),
    ],
)
def test_a_note_added_to_solved_metadata_keeps_every_derived_number_consistent(tmp_path, spec, kwargs):
    """Editing solved metadata sends it through the hand-written checks: what strategy_opt computed must pass them
    (ratio_to_identity on all-predicate was compared without the Gram's log scale: 16 against 1)."""
    s = so.solve(spec, **kwargs)
    s.meta["note"] = "checked"
    sio.write_strategy(s, tmp_path / "noted.npz")
    meta = sio.read_strategy(tmp_path / "noted.npz").meta
    assert meta["metadata_origin"] == "hand-written" and meta["note"] == "checked"
    assert meta["ratio_to_identity"] == s.meta["ratio_to_identity"]


def _write_pair(path: str, seed: int, barrier) -> None:
    from strategy_opt.answers import write_answers

    answers = np.full(200000, float(seed))
    barrier.wait()
    write_answers(path, answers, meta={"writer": seed})


def test_concurrent_writers_of_one_answers_file_never_mix_file_and_record(tmp_path):
    """An outside audit: two `run`s to one --out left the answers of one beside the record of the other in 2 of 12
    rounds (the two renames interleaved). The renames of a pair now happen under a lock on the directory: two
    processes released together write the pair, 40 times over, and the file and its record always belong together."""
    import multiprocessing as mp

    from strategy_opt.answers import read_answers

    path = str(tmp_path / "c.npy")
    ctx = mp.get_context("fork")
    mixed = 0
    for _ in range(40):
        barrier = ctx.Barrier(2)
        procs = [ctx.Process(target=_write_pair, args=(path, seed, barrier)) for seed in (1, 2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            assert p.exitcode == 0
        answers, _, _, meta = read_answers(path, verify=False)
        mixed += answers[0] != meta["writer"]
    assert mixed == 0


def test_a_ragged_csv_is_refused_without_numpys_advice(tmp_path):
    # numpy's message ends "use `usecols` to select a subset", an argument no user of the CLI has
    from strategy_opt.matrix_files import read_csv_matrix

    f = tmp_path / "ragged.csv"
    f.write_text("1,2\n3\n")
    with pytest.raises(InputError) as info:
        read_csv_matrix(f, "workload file")
    assert "usecols" not in str(info.value)
    assert str(info.value).endswith("malformed CSV (the number of columns changed from 2 to 1 at row 2); every line needs the same number of comma-separated numbers")


def test_a_strategy_records_the_blas_thread_count_it_was_computed_with(tmp_path):
    """Audit D1: the same command gave a weighted basis on one thread and the identity on two (l1-weighting, Fourier
    basis, prefix:200), and nothing in the files told them apart: meta.blas_threads does, and survives the file."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from strategy_opt.io import read_strategy, write_strategy

    for limit in (1, 2):
        with threadpool_limits(limit, user_api="blas"):
            expected = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=1)
            s = so.solve("prefix:8", privacy="pure", method="hierarchical")
        assert s.meta["blas_threads"] == expected <= limit
        write_strategy(s, tmp_path / f"s{limit}.npz")
        assert read_strategy(tmp_path / f"s{limit}.npz").meta["blas_threads"] == expected
