"""Hostile input through the CLI: exit status 2, one line on stderr, no output file.

Decisions recorded here (and in strategy_opt.io / strategy_opt.executor):

* A zero column in a *workload* is allowed: the cell is never queried, which is harmless for
  the error (``E_p`` depends on ``W^T W`` only); ``solve`` works on such workloads.
* A zero column in a *strategy* is allowed only under such unqueried cells; a strategy with a
  zero column under a queried cell never measures that cell and is refused (it does not
  support the workload), by a cheap column check that also covers domains too large for the
  full support check.
* An all-zero or empty workload matrix is refused.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.io

from strategy_opt.cli import main

N = 8


def cli(*args):
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A valid strategy in every format, valid data, and a scratch directory."""
    d = tmp_path_factory.mktemp("hostile")
    assert cli("-q", "solve", "--workload", f"prefix:{N}", "--method", "hierarchical", "--branching", 2, "--privacy", "pure", "--out", d / "s.npz") == 0
    assert cli("-q", "export", d / "s.npz", "--out", d / "s.mtx") == 0
    assert cli("-q", "export", d / "s.npz", "--out", d / "s.csv") == 0
    np.save(d / "x.npy", np.arange(float(N)))
    return d


def refused(capsys, d: Path, *args, match: str | None = None, out: Path | None = None):
    """Run the CLI; assert exit 2, exactly one stderr line, and that no output was written."""
    before = set(os.listdir(d))
    capsys.readouterr()
    code = cli(*args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("strategy-opt: error:"), err
    if match:
        assert match.lower() in err.lower(), err
    if out is not None:
        assert not out.exists() and not Path(str(out) + ".json").exists()
    assert set(os.listdir(d)) == before, "a file was left behind"
    return err


def run_args(d, strategy="s.npz", data="x.npy", workload=f"prefix:{N}", epsilon=1):
    return ("run", d / strategy, "--data", d / data, "--workload", workload, "--epsilon", epsilon, "--out", d / "out.csv")


# --------------------------------------------------------------------------- NaN / inf anywhere
def _bad_values(value):
    W = np.tril(np.ones((N, N)))
    W[2, 1] = value
    return W


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("fmt", ["npy", "npz", "mtx", "csv"])
def test_non_finite_workload_files(files, capsys, value, fmt):
    d = files
    W = _bad_values(value)
    f = d / f"wbad.{fmt}"
    {"npy": lambda: np.save(f, W), "npz": lambda: np.savez(f, W=W), "mtx": lambda: scipy.io.mmwrite(f, W), "csv": lambda: np.savetxt(f, W, delimiter=",")}[fmt]()
    try:
        refused(capsys, d, "solve", "--workload", f"file:{f}", "--method", "identity", "--out", d / "o.npz", match="NaN or infinite", out=d / "o.npz")
    finally:
        f.unlink()


@pytest.mark.parametrize("fmt", ["npy", "csv", "records"])
def test_non_finite_data_files(files, capsys, fmt):
    d = files
    f = d / f"xbad.{'csv' if fmt != 'npy' else 'npy'}"
    if fmt == "npy":
        np.save(f, np.array([1.0, np.nan, 0, 0, 0, 0, 0, 0]))
    elif fmt == "csv":
        f.write_text("1\n2\ninf\n0\n0\n0\n0\n0\n")
    else:
        f.write_text("age\n1\nnan\n3\n")
    extra = ("--column", "age", "--bins", f"0:{N}") if fmt == "records" else ()
    try:
        refused(capsys, d, *run_args(d, data=f.name), *extra, match="NaN or infinite", out=d / "out.csv")
    finally:
        f.unlink()


@pytest.mark.parametrize("fmt", ["npz", "mtx", "csv"])
def test_non_finite_strategy_files(files, capsys, fmt):
    d = files
    A = np.eye(N)
    A[3, 3] = np.inf if fmt == "mtx" else np.nan
    f = d / f"sbad.{fmt}"
    {"npz": lambda: np.savez(f, A=A), "mtx": lambda: scipy.io.mmwrite(f, A), "csv": lambda: np.savetxt(f, A, delimiter=",")}[fmt]()
    try:
        refused(capsys, d, *run_args(d, strategy=f.name), match="NaN or infinite", out=d / "out.csv")
        refused(capsys, d, "error", f, "--workload", f"prefix:{N}", match="NaN or infinite")
    finally:
        f.unlink()


@pytest.mark.parametrize("flag, value", [("--epsilon", "nan"), ("--epsilon", "inf"), ("--delta", "nan"), ("--option", "rounds=nan")])
def test_non_finite_parameters(files, capsys, flag, value):
    d = files
    if flag == "--option":
        args = ("release", "--method", "identity", "--data", d / "x.npy", "--workload", f"prefix:{N}", "--epsilon", 1, "--out", d / "out.csv", flag, value)
    else:
        args = (*run_args(d), "--privacy", "approx", flag, value)
    refused(capsys, d, *args, match="finite", out=d / "out.csv")


# --------------------------------------------------------------------------- empty workloads and zero columns
@pytest.mark.parametrize("case", ["rows", "cols", "csv", "allzero", "mtx"])
def test_empty_workloads(files, capsys, case):
    d = files
    f = d / ("wempty.csv" if case == "csv" else "wempty.mtx" if case == "mtx" else "wempty.npy")
    if case == "rows":
        np.save(f, np.zeros((0, N)))
    elif case == "cols":
        np.save(f, np.zeros((3, 0)))
    elif case == "allzero":
        np.save(f, np.zeros((3, N)))
    elif case == "csv":
        f.write_text("")
    else:
        f.write_text(f"%%MatrixMarket matrix coordinate real general\n3 {N} 0\n")
    try:
        refused(capsys, d, "solve", "--workload", f"file:{f}", "--method", "identity", "--out", d / "o.npz", match="all zeros" if case in ("allzero", "mtx") else "empty", out=d / "o.npz")
    finally:
        f.unlink()


def test_zero_workload_column_is_allowed(files, capsys, tmp_path):
    W = np.tril(np.ones((N, N)))
    W[:, 2] = 0.0
    np.save(tmp_path / "w.npy", W)
    spec = f"file:{tmp_path / 'w.npy'}"
    for method in ("identity", "wavelet", "hierarchical"):
        assert cli("-q", "solve", "--workload", spec, "--method", method, "--out", tmp_path / f"{method}.npz") == 0
    assert cli("-q", "error", tmp_path / "wavelet.npz", "--workload", spec, "--json") == 0
    # a strategy that skips the unqueried cell is fine; one that skips a queried cell is refused
    A = np.eye(N)
    A[2, 2] = 0.0
    np.savez(tmp_path / "skip2.npz", A=A)
    np.save(tmp_path / "x.npy", np.ones(N))
    assert cli("-q", "run", tmp_path / "skip2.npz", "--data", tmp_path / "x.npy", "--workload", spec, "--epsilon", 1, "--seed", 0, "--out", tmp_path / "a.npy") == 0
    A[3, 3] = 0.0
    np.savez(tmp_path / "skip3.npz", A=A)
    refused(capsys, tmp_path, "run", tmp_path / "skip3.npz", "--data", tmp_path / "x.npy", "--workload", spec, "--epsilon", 1, "--out", tmp_path / "b.npy", match="column(s) 3", out=tmp_path / "b.npy")


def test_unsupported_strategies(files, capsys):
    d = files
    pairs = np.kron(np.eye(N // 2), np.ones((1, 2)))  # measures only sums of cell pairs: rank N/2
    np.savez(d / "pairs.npz", A=pairs)
    try:
        refused(capsys, d, "error", d / "pairs.npz", "--workload", f"prefix:{N}", match="does not support")
        refused(capsys, d, *run_args(d, strategy="pairs.npz"), match="does not support", out=d / "out.csv")
    finally:
        (d / "pairs.npz").unlink()


def test_strategy_for_another_workload_or_domain(files, capsys):
    d = files
    refused(capsys, d, *run_args(d, workload=f"all-range:{N}"), match="pass --force", out=d / "out.csv")
    refused(capsys, d, "error", d / "s.npz", "--workload", "prefix:4*identity:2", match="pass --force")
    refused(capsys, d, "error", d / "s.npz", "--workload", "prefix:9", match="columns")
    # the same workload written differently is the same workload
    assert cli("-q", "error", d / "s.npz", "--workload", f" (prefix:{N}) ") == 0


def test_equivalent_workload_note_follows_success_only(files, capsys):
    """A workload accepted for having the recorded Gram matrix is noted after success; an error stays one line."""
    d = files
    rows = np.tril(np.ones((N, N)))[::-1]  # prefix queries in another order: the same W^T W
    np.save(d / "W.npy", rows)
    equivalent = f"file:{d / 'W.npy'}"
    try:
        refused(capsys, d, *run_args(d, workload=equivalent, epsilon=0), match="epsilon", out=d / "out.csv")
        refused(capsys, d, *run_args(d, workload=equivalent, data="missing.npy"), match="missing.npy", out=d / "out.csv")
        capsys.readouterr()
        assert cli("error", d / "s.npz", "--workload", equivalent, "--json") == 0
        err = capsys.readouterr().err
        assert err.count("equivalent workloads") == 1, err
    finally:
        (d / "W.npy").unlink()


def test_unwritable_outputs_are_refused_before_any_work(files, capsys):
    d = files
    (d / "adir.csv").mkdir()
    try:
        refused(capsys, d, *run_args(d)[:-2], "--out", d / "adir.csv", match="is a directory")
        refused(capsys, d, *run_args(d)[:-2], "--out", d / "x.npy", match="input files")
        refused(capsys, d, "solve", "--workload", "prefix:8", "--method", "identity", "--out", d / "nodir" / "s.npz", match="does not exist")
        refused(capsys, d, "solve", "--workload", "prefix:8", "--method", "identity", "--out", d / "x.npy" / "s.npz", match="x.npy is not a directory")
        refused(capsys, d, "export", d / "s.npz", "--out", d / "s.txt", match="format")
    finally:
        (d / "adir.csv").rmdir()


# --------------------------------------------------------------------------- epsilon / delta
@pytest.mark.parametrize(
    "extra, match",
    [
        (("--epsilon", "-1"), "epsilon"),
        (("--epsilon", "0"), "epsilon"),
        (("--epsilon", "abc"), "epsilon"),
        (("--epsilon", "1e-320"), "epsilon"),
        (("--epsilon", "1e999"), "finite"),
        (("--delta", "0", "--privacy", "approx"), "delta"),
        (("--delta", "1", "--privacy", "approx"), "delta"),
        (("--delta", "1.5", "--privacy", "approx"), "delta"),
        (("--delta", "-0.1", "--privacy", "approx"), "delta"),
        (("--delta", "x", "--privacy", "approx"), "delta"),
        (("--delta", "-1e-6", "--privacy", "approx"), "-1e-6"),  # was argparse's "expected one argument"
        (("--epsilon", "-inf"), "-inf"),
        (("--epsilon", "1e-300"), "scale 4e+300 for sensitivity 4, whose variance"),  # the scale is finite (was "scale inf")
        (("--epsilon", "1_0"), "1_0"),  # float() reads 10
        (("--epsilon", "\u0661"), "must be a number"),  # float() reads an Arabic-Indic 1 as 1
        (("--delta", "1e-0_6", "--privacy", "approx"), "1e-0_6"),
        (("--seed", "1_0"), "1_0"),
        (("--seed", "-3"), "-3"),
        (("--delta", "1e-6", "--privacy", "pure"), "delta"),
    ],
)
def test_epsilon_delta_out_of_range_or_not_numbers(files, capsys, extra, match):
    d = files
    args = list(run_args(d))
    i = args.index("--epsilon")
    if extra[0] == "--epsilon":
        args[i + 1] = extra[1]
        extra = extra[2:]
    refused(capsys, d, *args, *extra, match=match, out=d / "out.csv")


@pytest.mark.parametrize(
    "flag, value, rounded",
    [
        ("--delta", "1e-400", 0.0),  # in (0, 1) as typed, 0.0 as a float
        ("--delta", "0.99999999999999999999", 1.0),
        ("--delta", "1.50", None),
        ("--epsilon", "1e999", np.inf),
        ("--epsilon", "1e-400", 0.0),
        ("--epsilon", "-0.50", None),
    ],
)
def test_epsilon_delta_messages_show_the_value_as_typed(files, capsys, flag, value, rounded):
    d = files
    args = list(run_args(d))
    if flag == "--epsilon":
        args[args.index("--epsilon") + 1] = value
    else:
        args += ["--privacy", "approx", flag, value]
    err = refused(capsys, d, *args, match=flag, out=d / "out.csv")
    assert f"got {value}" in err, err  # the text typed, not the float it became
    assert float(value) == rounded or rounded is None
    assert ("rounds to" in err) == (rounded is not None), err
    if rounded is not None:
        assert f"rounds to {rounded!r}" in err, err


# --------------------------------------------------------------------------- huge specs
@pytest.mark.parametrize(
    "command, spec",
    [("solve", "all-range:200000"), ("error", "all-range:200000"), ("run", "identity:1000000000"), ("solve", "marginals:" + "x".join(["2"] * 29) + ":14")],
)
def test_huge_specs_are_refused_with_an_estimate(files, capsys, command, spec):
    d = files
    if command == "solve":
        args = ("solve", "--workload", spec, "--method", "hierarchical", "--out", d / "o.npz")  # the identity needs O(n): see test_identity_on_flat_domains_beyond_the_dense_limit
    elif command == "error":
        args = ("error", d / "s.npz", "--workload", spec)
    else:
        args = run_args(d, workload=spec)
    err = refused(capsys, d, *args, match="needs about", out=d / "o.npz")
    assert "available" in err
    if spec == "all-range:200000":
        assert "320 GB each" in err  # the dense 200000 x 200000 Gram matrix


def test_memory_cap_from_environment(files, capsys, monkeypatch):
    d = files
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "50M")
    err = refused(capsys, d, "solve", "--workload", "all-range:2000", "--method", "hierarchical", "--out", d / "o.npz", match="needs about", out=d / "o.npz")
    assert "192 MB" in err and "50 MB is available" in err  # 6 dense 2000x2000 float64 matrices
    # the identity's analysis is O(n) (128 bytes per cell), not n x n: its own estimate refuses it
    err = refused(capsys, d, "solve", "--workload", "prefix:1000000", "--method", "identity", "--out", d / "o.npz", match="needs about", out=d / "o.npz")
    assert "144 MB" in err and "1,000,000-cell diagonal strategy" in err  # 128 MB and building prefix:1000000 (16 MB)
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "lots")
    refused(capsys, d, "solve", "--workload", "prefix:8", "--method", "identity", "--out", d / "o.npz", match="STRATEGY_OPT_MEMORY")


def test_oversized_file_headers_are_refused_before_loading(files, capsys, monkeypatch):
    d = files
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "100M")
    f = d / "huge.npy"
    with open(f, "wb") as fh:  # header of a 10^6 x 10^6 array, no data: never allocated
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    g = d / "huge.mtx"
    g.write_text("%%MatrixMarket matrix coordinate real general\n1000000 1000000 100000000000\n1 1 1\n")
    try:
        refused(capsys, d, "solve", "--workload", f"file:{f}", "--method", "identity", "--out", d / "o.npz", match="too large to load", out=d / "o.npz")
        # an .mtx size line is checked against the file first: more entries than lines is impossible, not large (audit A4)
        refused(capsys, d, "solve", "--workload", f"file:{g}", "--method", "identity", "--out", d / "o.npz", match="declares 100,000,000,000 entries but the file has 1 non-blank lines", out=d / "o.npz")
        refused(capsys, d, *run_args(d, data="huge.npy"), match="too large to load", out=d / "out.csv")
    finally:
        f.unlink()
        g.unlink()


@pytest.mark.parametrize(
    "fmt, indices, indptr, match",
    [
        ("csr", [0, 1, 2, 9], [0, 1, 2, 3, 4], "outside"),  # read out of bounds before: garbage or a crash
        ("csr", [0, 1, 2, -1], [0, 1, 2, 3, 4], "outside"),
        ("csr", [0, 1, 2, 3], [0, 3, 2, 3, 4], "never decrease"),
        ("csr", [0, 1, 2, 3], [0, 1, 2, 3], "entries"),
        ("csr", [0, 1, 2], [0, 1, 2, 3, 4], "indices"),
        ("csc", [0, 1, 2, 3], [0, 1, 2, 3, 4, 4, 4, 4, 4], "entries"),
        ("csr", [0.0, 1.0, 2.0, 3.0], [0, 1, 2, 3, 4], "integers"),
    ],
)
def test_malformed_compressed_sparse_files(files, capsys, fmt, indices, indptr, match):
    """CSR/CSC members that do not describe a matrix of the stated shape, as a workload and as a strategy."""
    d = files
    arrays = dict(data=np.ones(len(indices)), indices=np.array(indices), indptr=np.array(indptr), format=np.array(fmt))
    np.savez(d / "bad.npz", shape=np.array([4, N] if fmt == "csr" else [N, 4]), **arrays)
    np.savez(d / "badA.npz", shape=np.array([4, N] if fmt == "csr" else [N, 4]), **arrays)
    try:
        refused(capsys, d, "solve", "--workload", f"file:{d / 'bad.npz'}", "--method", "identity", "--out", d / "o.npz", match=match, out=d / "o.npz")
        refused(capsys, d, "error", d / "badA.npz", "--workload", f"prefix:{N}", match=match)
        refused(capsys, d, "export", d / "badA.npz", "--out", d / "b.mtx", match=match, out=d / "b.mtx")
    finally:
        (d / "bad.npz").unlink()
        (d / "badA.npz").unlink()


def test_malformed_specs(files, capsys):
    d = files
    for spec in ("(" * 60 + "prefix:8" + ")" * 60, "prefix:" + "9" * 20, "prefix:٨", "prefix:8+", "identity:8+identity:4", "x" * 20000):
        refused(capsys, d, "solve", "--workload", spec, "--method", "identity", "--out", d / "o.npz", out=d / "o.npz")


# --------------------------------------------------------------------------- pickles and object arrays
def test_pickled_and_object_arrays(files, capsys):
    d = files
    np.save(d / "xobj.npy", np.array([1, None] * (N // 2), dtype=object), allow_pickle=True)
    np.save(d / "wobj.npy", np.array([[1, None]], dtype=object), allow_pickle=True)
    np.savez(d / "sobj.npz", A=np.array([[1, None]], dtype=object))
    (d / "spkl.npz").write_bytes(__import__("pickle").dumps({"A": np.eye(N)}))
    np.save(d / "xcplx.npy", np.ones(N) + 1j)
    try:
        refused(capsys, d, *run_args(d, data="xobj.npy"), match="pickled", out=d / "out.csv")
        refused(capsys, d, "solve", "--workload", f"file:{d / 'wobj.npy'}", "--method", "identity", "--out", d / "o.npz", match="pickled", out=d / "o.npz")
        refused(capsys, d, *run_args(d, strategy="sobj.npz"), match="pickled", out=d / "out.csv")
        refused(capsys, d, *run_args(d, strategy="spkl.npz"), match="pickled", out=d / "out.csv")
        refused(capsys, d, *run_args(d, data="xcplx.npy"), match="real numbers", out=d / "out.csv")
    finally:
        for name in ("xobj.npy", "wobj.npy", "sobj.npz", "spkl.npz", "xcplx.npy"):
            (d / name).unlink()


# --------------------------------------------------------------------------- TOML problem and solver files
@pytest.mark.parametrize(
    "kind, text, match",
    [
        ("problem", "workload = [unclosed", "malformed TOML"),
        ("problem", "workload = 5", "must be a string"),
        ("problem", 'workload = "prefix:8"\nmethod = ["a"]', "must be a string"),
        ("problem", 'workload = "prefix:8"\nsolver = 7', "must be a string"),
        ("problem", 'workload = "prefix:8"\nspeed = "max"', "unknown keys"),
        ("problem", 'workload = "prefix:8"\noptions = 3', "must be a table"),
        ("problem", b"\xff\xfe\x00", "cannot read"),
        ("solver", "backend = [", "malformed TOML"),
        ("solver", "max_iters = inf", "bad value"),
        ("solver", "tol = nan", "tol"),
        ("solver", "time_limit = -1", "time_limit"),
        ("solver", 'backend = "gpu"', "backend"),
        ("solver", "options = 5", "bad value"),
        ("solver", "colour = 1", "unknown keys"),
        ("solver", b"\xff\xfe = 1", "cannot read"),
    ],
)
def test_malformed_toml(files, capsys, tmp_path, kind, text, match):
    f = tmp_path / f"{kind}.toml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = tmp_path / "o.npz"
    if kind == "problem":
        args = ("solve", f, "--method", "identity", "--out", out)
    else:
        args = ("solve", "--workload", "prefix:8", "--method", "identity", "--solver", f, "--out", out)
    refused(capsys, tmp_path, *args, match=match, out=out)


def test_unknown_solver_profile_and_problem(files, capsys):
    d = files
    refused(capsys, d, "solve", "--workload", "prefix:8", "--method", "identity", "--solver", "gurobi-fast", "--out", d / "o.npz", match="unknown solver profile", out=d / "o.npz")
    refused(capsys, d, "solve", "--workload", "prefix:8", "--method", "identity", "--solver", d / "missing.toml", "--out", d / "o.npz", match="not found", out=d / "o.npz")
    refused(capsys, d, "solve", "no-such-problem", "--out", d / "o.npz", match="not found", out=d / "o.npz")


# --------------------------------------------------------------------------- corrupted strategy files
def _flip(path: Path, offset: int, mask: int = 0x01) -> bytes:
    raw = path.read_bytes()
    b = bytearray(raw)
    b[offset] ^= mask
    path.write_bytes(bytes(b))
    return raw


@pytest.mark.parametrize("name", ["s.npz", "s.mtx", "s.csv", "s.json"])
def test_flipped_byte_in_strategy_file_is_detected(files, capsys, name):
    d = files
    f = d / name
    raw = f.read_bytes()
    # a byte of the matrix (npz: inside the compressed members; mtx: a value; csv: a digit)
    # and a byte of the metadata (json: the workload field)
    if name == "s.npz":
        offsets = [len(raw) // 3, len(raw) // 2]
    elif name == "s.json":
        offsets = [raw.index(b'"workload"') + 14]
    else:
        offsets = [raw.rindex(b"1"), raw.index(b"prefix") + 2 if name == "s.mtx" else raw.index(b"1")]
    strategy = d / ("s.csv" if name == "s.json" else name)
    for offset in offsets:
        _flip(f, offset)
        try:
            err = refused(capsys, d, *run_args(d, strategy=strategy.name), out=d / "out.csv")
            assert "corrupted" in err or "cannot read" in err or "malformed" in err, err
        finally:
            f.write_bytes(raw)
    assert cli("-q", *run_args(d, strategy=strategy.name), "--seed", 1) == 0  # restored: it loads again
    (d / "out.csv").unlink()
    (d / "out.csv.json").unlink()


@pytest.mark.parametrize("fmt", [".npz", ".mtx", ".csv", ".json"])
def test_every_flipped_byte_is_detected(tmp_path, fmt):
    # every byte, one bit or all eight: zip headers and timestamps, digits that parse to the
    # same float, header letter case -- the whole-file seal of format version 3 sees them all
    from strategy_opt.exceptions import InputError
    from strategy_opt.io import read_strategy

    for ext in (".npz", ".csv"):
        assert cli("-q", "solve", "--workload", "prefix:6+total:6", "--method", "hierarchical", "--privacy", "pure", "--out", tmp_path / f"s{ext}") == 0
    assert cli("-q", "export", tmp_path / "s.npz", "--out", tmp_path / "s.mtx") == 0
    target = tmp_path / ("s.csv" if fmt == ".json" else f"s{fmt}")
    f = tmp_path / f"s{fmt}"
    raw = f.read_bytes()
    read_strategy(target)  # intact: loads
    undetected, unnamed = [], []
    for offset in range(len(raw)):
        for mask in (0x01, 0xFF):
            b = bytearray(raw)
            b[offset] ^= mask
            f.write_bytes(bytes(b))
            try:
                read_strategy(target)
                undetected.append((offset, mask))
            except InputError as exc:
                if fmt == ".csv" and "corrupted" not in str(exc):  # the seal is checked before the text is parsed
                    unnamed.append((offset, mask, str(exc)))
                if " at 0x" in str(exc):  # a parser's object repr (NumPy's header: <ast.Name object at 0x...>)
                    unnamed.append((offset, mask, str(exc)))
    f.write_bytes(raw)
    assert undetected == [] and unnamed == []


def test_damaged_array_header_is_named_without_internals(tmp_path):
    # a header NumPy cannot parse (a bare name where a dtype string belongs) makes its parser fail
    # with "malformed node or string ... <ast.Name object at 0x...>"; the message names the damage
    import zipfile

    from strategy_opt.exceptions import InputError
    from strategy_opt.io import read_strategy

    header = b"{'descr': x, 'fortran_order': False, 'shape': (2, 2), }"
    header += b" " * (117 - len(header)) + b"\n"
    f = tmp_path / "d.npz"
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("A.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(32))
    with pytest.raises(InputError) as err:
        read_strategy(f)
    msg = str(err.value)
    assert "damaged array header (ValueError)" in msg and " at 0x" not in msg and "\n" not in msg


# --------------------------------------------------------------------------- interrupted writes
def test_interrupted_write_in_process_leaves_no_file(files, capsys, monkeypatch, tmp_path):
    d = files
    out = tmp_path / "a.npy"

    def interrupted(fh, arr, *a, **k):
        fh.write(b"\x93NUMPY partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "save", interrupted)
    assert cli("run", d / "s.npz", "--data", d / "x.npy", "--workload", f"prefix:{N}", "--epsilon", 1, "--out", out) == 130
    assert list(tmp_path.iterdir()) == []


CHILD = """
import sys, time
from pathlib import Path
import numpy as np

def stalled(self, data):
    with open(self, "wb") as fh:  # the strategy file's bytes, cut short
        fh.write(data[:10])
        fh.flush()
        Path(sys.argv[1]).write_text("writing")
        time.sleep(120)

Path.write_bytes = stalled
from strategy_opt.cli import main
sys.exit(main(["solve", "--workload", "prefix:8", "--method", "identity", "--out", sys.argv[2]]))
"""


def _unnamed_files_work(directory) -> bool:
    """Whether ``directory``'s filesystem gives unnamed (O_TMPFILE) files, which `atomic_path` then uses."""
    try:
        os.close(os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o600))
    except (AttributeError, OSError):
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_process_killed_mid_write_leaves_no_file(tmp_path, sig):
    ready, out = tmp_path / "ready", tmp_path / "out" / "s.npz"
    out.parent.mkdir()
    unnamed = _unnamed_files_work(out.parent)
    child = subprocess.Popen([sys.executable, "-c", CHILD, ready, out], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "child never started writing"
            time.sleep(0.05)
        visible = [p.name for p in out.parent.iterdir()]
        if unnamed:  # the partial file has no name at all
            assert visible == []
        else:  # the partial file is a hidden temporary one
            assert len(visible) == 1 and visible[0].startswith(".s.npz.")
        child.send_signal(sig)
        code = child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert not out.exists()
    assert code == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
    if sig == signal.SIGTERM:
        assert "terminated" in child.stderr.read()
    if sig == signal.SIGTERM or unnamed:
        assert list(out.parent.iterdir()) == []  # nothing left, not even a temporary file
    else:  # SIGKILL allows no clean-up of a named temporary file
        assert all(p.name.startswith(".s.npz.") and p.name.endswith(".tmp") for p in out.parent.iterdir())


# --------------------------------------------------------------------------- from outside
def test_console_script_refuses_hostile_input(files):
    d = files
    args = [*map(str, run_args(d)[:-2]), "--out", str(d / "o.csv"), "--epsilon", "nan"]
    r = subprocess.run([sys.executable, "-m", "strategy_opt.cli", *args], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip() == "strategy-opt: error: in 'strategy-opt run': argument --epsilon: must be a finite number, got nan", r.stderr
    assert not (d / "o.csv").exists() and not (d / "o.csv.json").exists()


@pytest.mark.parametrize(
    ("method", "data", "epsilon"),
    [("dawa", np.full(64, 1e308), 1.0), ("identity", np.full(64, 1e308), 1.0), ("dawa", np.arange(64.0), 1e-320)],
)
def test_floating_point_failures_give_one_line(tmp_path, method, data, epsilon):
    # counts near the float64 limit and epsilon below it: one error line, no NumPy RuntimeWarnings with source paths
    np.save(tmp_path / "x.npy", data)
    res = subprocess.run(
        [sys.executable, "-m", "strategy_opt.cli", "-q", "release", "--method", method, "--data", str(tmp_path / "x.npy"),
         "--workload", "prefix:64", "--epsilon", repr(epsilon), "--seed", "1", "--out", str(tmp_path / "a.npy")],
        capture_output=True, text=True,
    )
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "error:" in res.stderr, res.stderr
    assert not (tmp_path / "a.npy").exists()


def test_online_refuses_a_bad_output_path_before_anything_else(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(16.0))
    code = cli("-q", "online", "--data", tmp_path / "x.npy", "--queries", "identity:16", "--budget", 1, "--half-width", 50, "--seed", 1, "--out", tmp_path / "missing" / "a.csv")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"strategy-opt: error: output directory does not exist: {tmp_path / 'missing'}"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc (a directory no file can be created in)")
def test_an_unwritable_output_directory_is_refused_before_the_work(tmp_path, capsys, monkeypatch):
    """An outside audit: --out /sys/a.npz ran a 13.5 s solve, and run drew its noise, before 'cannot write in /sys'."""
    from dataclasses import replace

    import strategy_opt.registry as registry

    def never(problem):
        raise AssertionError("the method ran before the output path was checked")

    monkeypatch.setitem(registry._METHODS, "identity", replace(registry._METHODS["identity"], func=never))
    assert cli("-q", "solve", "--workload", "prefix:16", "--method", "identity", "--out", "/proc/strategy_opt_test.npz") == 2
    assert capsys.readouterr().err.strip().splitlines() == ["strategy-opt: error: cannot write in /proc: No such file or directory"]
    np.save(tmp_path / "x.npy", np.arange(16.0))
    code = cli("-q", "online", "--data", tmp_path / "x.npy", "--queries", "identity:16", "--budget", 1, "--half-width", 50, "--seed", 1, "--out", "/proc/a.csv")
    assert code == 2 and capsys.readouterr().err.strip().splitlines() == ["strategy-opt: error: cannot write in /proc: No such file or directory"]


# --------------------------------------------------------------------------- raw records through the CLI
def test_records_with_bom_on_hi_and_duplicate_columns(files, capsys, tmp_path):
    d = files
    age = np.array([0, 3, 3, 7, 8, 8, 9, -1, 2, 7])  # 8 = HI of --bins 0:8 (prefix:8 has 8 cells)
    f = tmp_path / "bom.csv"
    f.write_text("age,name\n" + "".join(f"{a},n{i}\n" for i, a in enumerate(age)), encoding="utf-8-sig")
    args = ("-q", "run", d / "s.npz", "--data", f, "--column", "age", "--bins", f"0:{N}", "--workload", f"prefix:{N}", "--epsilon", 1e9, "--seed", 0)
    assert cli(*args, "--out", tmp_path / "a.npy") == 0
    counts = np.array([np.sum(age == k) for k in range(N)])  # by hand: records on HI and beyond are dropped
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), np.cumsum(counts), atol=1e-3)
    assert np.cumsum(counts)[-1] == np.sum((age >= 0) & (age < N)) == len(age) - 4
    dup = tmp_path / "dup.csv"
    dup.write_text("age,age\n1,5\n2,6\n")
    err = refused(capsys, tmp_path, *args[:4], dup, *args[5:], "--out", tmp_path / "b.npy", match="column 'age' appears 2 times", out=tmp_path / "b.npy")
    assert err.startswith(f"strategy-opt: error: {dup}:"), err


# --------------------------------------------------------------------------- file: paths with SPEC operators
def test_file_paths_holding_spec_operators_are_quoted(files, capsys, tmp_path):
    d = files
    W = np.tril(np.ones((N, N)))  # prefix:N as a matrix
    (tmp_path / "d+x").mkdir()
    np.savez(tmp_path / "d+x" / "W.npz", W=W)
    np.save(tmp_path / "a*b.npy", W)
    np.save(tmp_path / "plain.npy", W)
    from strategy_opt.io import read_strategy

    A = read_strategy(d / "s.npz").dense()
    expected = np.abs(A).sum(axis=0).max() ** 2 * np.trace(W.T @ W @ np.linalg.pinv(A.T @ A))  # E_1 by hand
    for spec in (f"file:{tmp_path / 'plain.npy'}", f"file:'{tmp_path / 'd+x' / 'W.npz'}'", f'file:"{tmp_path / "a*b.npy"}"'):
        capsys.readouterr()
        assert cli("-q", "error", d / "s.npz", "--workload", spec, "--json") == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["unit_total_squared_error"] == pytest.approx(expected, rel=1e-9)
    # a quoted path inside a Kronecker product; the strategy records a SPEC that reads back
    spec = f"file:'{tmp_path / 'd+x' / 'W.npz'}'*identity:2"
    assert cli("-q", "solve", "--workload", spec, "--method", "identity", "--out", tmp_path / "k.npz") == 0
    k = read_strategy(tmp_path / "k.npz")
    assert k.shape == (2 * N, 2 * N) and f"'{tmp_path / 'd+x' / 'W.npz'}'" in k.meta["workload"]
    assert cli("-q", "error", tmp_path / "k.npz", "--workload", k.meta["workload"]) == 0
    # unquoted: one line saying how to quote it; an unclosed quote is named too
    for path in (tmp_path / "d+x" / "W.npz", tmp_path / "a*b.npy"):
        err = refused(capsys, tmp_path, "error", d / "s.npz", "--workload", f"file:{path}", match="must be quoted")
        assert err.endswith(f"must be quoted: file:'{path}'"), err
    refused(capsys, tmp_path, "error", d / "s.npz", "--workload", f"file:'{tmp_path / 'a*b.npy'}", match="no closing")
    refused(capsys, tmp_path, "error", d / "s.npz", "--workload", f"file:'{tmp_path / 'a*b.npy'}'x", match="nothing after the closing quote")


# --------------------------------------------------------------------------- strategy files without metadata
def test_strategy_without_metadata_is_warned_and_has_one_default_privacy(files, capsys, tmp_path):
    d = files
    from strategy_opt.io import read_strategy

    A = read_strategy(d / "s.npz").dense()
    np.savetxt(tmp_path / "bare.csv", A, delimiter=",")  # no bare.json beside it
    np.savez(tmp_path / "bare.npz", A=A)  # no 'meta' member
    l1, l2 = np.abs(A).sum(axis=0).max(), np.sqrt((A**2).sum(axis=0)).max()  # sensitivities by hand
    W = np.tril(np.ones((N, N)))
    trace = np.trace(W.T @ W @ np.linalg.pinv(A.T @ A))

    def unverified(err):
        return [line for line in err.splitlines() if "not verified" in line]

    for bare in (tmp_path / "bare.csv", tmp_path / "bare.npz"):
        capsys.readouterr()
        assert cli("-q", "error", bare, "--workload", f"prefix:{N}", "--json") == 0
        out, err = capsys.readouterr()
        report = json.loads(out)
        assert report["privacy"] == "pure" and report["sensitivity"] == pytest.approx(l1, rel=1e-12)
        assert report["unit_total_squared_error"] == pytest.approx(l1**2 * trace, rel=1e-9)
        assert len(unverified(err)) == 1 and "privacy pure" in unverified(err)[0] and str(bare) in unverified(err)[0], err
        # run without --delta: the same privacy as error; noise calibrated to the computed L1 sensitivity
        run = ("-q", "run", bare, "--data", d / "x.npy", "--workload", f"prefix:{N}", "--epsilon", 2, "--seed", 0)
        assert cli(*run, "--out", tmp_path / "a.npy") == 0
        err = capsys.readouterr().err
        side = json.loads((tmp_path / "a.npy.json").read_text())
        assert side["privacy"]["notion"] == "pure" and side["noise_scale"] == pytest.approx(l1 / 2, rel=1e-12)
        assert len(unverified(err)) == 1, err
        # with --delta, (epsilon, delta)-DP; error under approx uses the L2 sensitivity of the matrix
        assert cli(*run, "--delta", 1e-5, "--out", tmp_path / "b.npy") == 0
        assert json.loads((tmp_path / "b.npy.json").read_text())["privacy"]["notion"] == "approx"
        capsys.readouterr()
        assert cli("-q", "error", bare, "--workload", f"prefix:{N}", "--privacy", "approx", "--json") == 0
        assert json.loads(capsys.readouterr().out)["sensitivity"] == pytest.approx(l2, rel=1e-12)
    # a strategy with its metadata: no warning
    capsys.readouterr()
    assert cli("-q", "error", d / "s.npz", "--workload", f"prefix:{N}") == 0
    assert unverified(capsys.readouterr().err) == []
    # an outside audit: a .json beside the .csv that holds {} was reported as missing ("has no bare.json beside it")
    (tmp_path / "bare.json").write_text("{}")
    assert cli("-q", "error", tmp_path / "bare.csv", "--workload", f"prefix:{N}") == 0
    (line,) = unverified(capsys.readouterr().err)
    assert "has empty metadata in bare.json" in line and "beside it" not in line


def test_export_of_a_bare_matrix_stays_unverified(files, capsys, tmp_path):
    # export seals the file (hashes) but cannot invent a workload or privacy: error still warns
    A = np.tril(np.ones((4, 4)))
    np.savetxt(tmp_path / "bare.csv", A, delimiter=",")
    capsys.readouterr()
    assert cli("-q", "export", tmp_path / "bare.csv", "--out", tmp_path / "bare.npz") == 0
    assert "stays unverified" in capsys.readouterr().err
    assert cli("-q", "error", tmp_path / "bare.npz", "--workload", "identity:4", "--json") == 0
    out, err = capsys.readouterr()
    warned = [line for line in err.splitlines() if "not verified" in line]
    assert len(warned) == 1 and "no recorded workload or privacy" in warned[0] and "privacy pure" in warned[0]
    assert json.loads(out)["sensitivity"] == pytest.approx(4.0)  # largest column L1 norm of tril(ones)


def test_npz_that_is_not_a_zip_archive_says_what_it_is(files, capsys):
    """A text file or a .npy named .npz is named as such, not as a pickle (NumPy's message)."""
    d = files
    (d / "text.npz").write_text("hello world\n")
    np.save(d / "arr.npy", np.eye(N))
    (d / "arr.npy").rename(d / "arr.npz")
    try:
        refused(capsys, d, *run_args(d, strategy="text.npz"), match="not a .npz archive", out=d / "out.csv")
        refused(capsys, d, "solve", "--workload", f"file:{d / 'text.npz'}", "--method", "identity", "--out", d / "o.npz", match="not a .npz archive", out=d / "o.npz")
        refused(capsys, d, *run_args(d, strategy="arr.npz"), match="rename it to .npy", out=d / "out.csv")
    finally:
        for name in ("text.npz", "arr.npz"):
            (d / name).unlink()


# --------------------------------------------------------------------------- counts too large for the noise
@pytest.mark.parametrize("value", [1e17, 2.0**62, 1.7e308])
def test_counts_too_large_to_carry_the_noise_are_refused(files, capsys, tmp_path, value):
    # at 1e17 float64 values are 16 apart: Laplace noise of scale 1 would be rounded away and
    # every answer released exactly (the audit saw 1e17 four times, exit 0)
    d = files
    data = tmp_path / "big.npy"
    np.save(data, np.full(N, value))
    out = tmp_path / "o.csv"
    for sampler in (["--seed", 1], ["--sampler", "opendp"]):
        err = refused(capsys, tmp_path, "-q", "release", "--method", "identity", "--data", data, "--workload", f"identity:{N}", "--epsilon", 1, *sampler, "--out", out, out=out)
        assert err.startswith(f"strategy-opt: error: {data}: the exact strategy answers: a value reaches "), err
        # the public threshold of scale 1 (2^49: spacing 1/8 > 1/16), never the data's value
        assert "a value reaches 2^49 = 5.6295e+14, where float64 values are 0.125 apart, too coarse for noise of scale 1 " in err and "rescale" in err, err
        assert f"{value:.6g}" not in err, err
        refused(capsys, tmp_path, "-q", *run_args(d, data=data)[:-2], *sampler, "--out", out, match=str(data), out=out)
        err = refused(capsys, tmp_path, "-q", "release", "--method", "mwem", "--data", data, "--workload", f"prefix:{N}", "--epsilon", 1, *sampler, "--out", out, out=out)
        assert err.startswith(f"strategy-opt: error: {data}: the total count"), err  # MWEM measures N first (1.7e308 ones overflow)
    err = refused(capsys, tmp_path, "-q", "online", "--data", data, "--queries", f"identity:{N}", "--budget", 1, "--half-width", 50, "--out", out, out=out)
    assert err.startswith(f"strategy-opt: error: {data}: the query's exact answer: a value reaches "), err


def test_dawa_names_its_input_when_its_total_is_too_large(capsys, tmp_path):
    # a flat histogram has bucket costs near 0 but bucket totals near 1e16; one check on the total before any
    # noise refuses it (per-stage refusals told neighbouring histograms apart: an outside audit)
    data = tmp_path / "flat.npy"
    np.save(data, np.full(64, 1e15))
    out = tmp_path / "o.csv"
    err = refused(capsys, tmp_path, "-q", "release", "--method", "dawa", "--data", data, "--workload", "prefix:64", "--epsilon", 1, "--seed", 1, "--out", out, out=out)
    assert err.startswith(f"strategy-opt: error: {data}: DAWA's input: a histogram whose total count reaches "), err


# --------------------------------------------------------------------------- --out naming a directory
@pytest.mark.parametrize("tail", ["/", "/."])
def test_an_out_path_ending_in_a_separator_is_refused_by_every_command(files, capsys, tmp_path, tail):
    # POSIX reads 'a.npy/' as a directory: the OS refuses to create such a file; pathlib drops
    # the '/' (Path('a.npy/') == Path('a.npy')), so the commands used to write a.npy and a.npy.json
    d = files
    with pytest.raises(OSError):
        open(f"{tmp_path}/probe.npy/", "w")
    assert Path(f"{tmp_path}/a.npy{tail}") == tmp_path / "a.npy"
    commands = {
        ".npz": ("solve", "--workload", f"prefix:{N}", "--method", "identity"),
        ".csv": ("export", d / "s.npz"),
        ".npy": run_args(d)[:-2],
        ".csv ": ("release", "--method", "identity", "--data", d / "x.npy", "--workload", f"prefix:{N}", "--epsilon", 1),
        ".npy ": ("online", "--data", d / "x.npy", "--queries", f"identity:{N}", "--budget", 1, "--half-width", 50),
    }
    for suffix, args in commands.items():
        out = f"{tmp_path}/a{suffix.strip()}{tail}"
        err = refused(capsys, tmp_path, "-q", *args, "--out", out)
        assert f"--out {out!r} names a directory" in err, err
        assert list(tmp_path.iterdir()) == [], args[0]


# --------------------------------------------------------------------------- hand-written metadata
def _hand(d: Path, name: str, A: np.ndarray, **meta) -> Path:
    np.savez(d / name, A=A, meta=json.dumps(meta))
    return d / name


@pytest.mark.parametrize(
    "meta, match",
    [
        ({"shape": [5, N]}, "shape"),
        ({"privacy": "pure", "sensitivity_norm": "l2"}, "sensitivity_norm"),
        ({"privacy": "pure", "sensitivity": 0.01}, "sensitivity 0.01"),  # 100x too little noise for a reader who trusts it
        ({"sensitivity_norm": "l2", "sensitivity": "1"}, "must be a number"),
    ],
)
def test_metadata_contradicting_the_matrix_is_refused(files, capsys, meta, match):
    d = files
    f = _hand(d, "hand.npz", np.eye(N), **meta)
    try:
        refused(capsys, d, "error", f, "--workload", f"prefix:{N}", "--force", match=match)
        refused(capsys, d, "export", f, "--out", d / "sealed.mtx", match=match, out=d / "sealed.mtx")
    finally:
        f.unlink()


@pytest.mark.parametrize(
    "claims, match",
    [
        ({"privacy": "foo"}, "privacy 'foo'; strategy files record 'pure' or 'approx'"),
        ({"privacy": 1}, "privacy 1; strategy files record"),
        ({"workload": 5}, "'workload' must be a SPEC string, got 5"),
        ({"workload": {"a": 1}}, "'workload' must be a SPEC string"),
        ({"workload": "prefix:zz"}, "records workload 'prefix:zz', which is not a SPEC"),
        ({"workload": "prefix:16"}, "records workload 'prefix:16', but it has 16 cells and the matrix 8 columns"),
        ({"domain": "x"}, "domain 'x'; it must be a list of positive integers whose product is the matrix's 8 columns"),
        ({"domain": [2, 2]}, "domain [2, 2]"),
    ],
)
def test_export_refuses_hand_written_metadata_no_reader_could_use(files, capsys, claims, match):
    """Each of these used to be sealed with format_version and unchecked_fields [] (error/run refused it later)."""
    d = files
    src = _hand(d, "h.npz", np.tril(np.ones((8, 8))), **claims)
    try:
        refused(capsys, d, "export", src, "--out", d / "o.npz", match=match, out=d / "o.npz")
    finally:
        src.unlink()


def test_export_checks_hand_written_claims_before_sealing_them(files, capsys):
    """E_1 of the identity on prefix:N is trace(W^T W) = N (N + 1) / 2 (the closed form checked here)."""
    d = files
    truth = N * (N + 1) / 2
    base = {"workload": f"prefix:{N}", "privacy": "pure"}
    wrong_error = _hand(d, "e.npz", np.eye(N), **base, unit_total_squared_error=0.5)
    high_bound = _hand(d, "b.npz", np.eye(N), **base, unit_total_squared_error=truth, lower_bound=truth * 2)
    good = _hand(d, "g.npz", np.eye(N), **base, unit_total_squared_error=truth, lower_bound=truth / 4)
    moved = _hand(d, "m.npz", np.eye(N), workload="file:gone.npy", privacy="pure", unit_total_squared_error=truth)
    try:
        refused(capsys, d, "export", wrong_error, "--out", d / "o.mtx", match=f"gives {truth:g}", out=d / "o.mtx")
        refused(capsys, d, "export", high_bound, "--out", d / "o.mtx", match="above the matrix's error", out=d / "o.mtx")
        for src, unchecked in ((good, ["lower_bound"]), (moved, ["unit_total_squared_error"])):
            assert cli("-q", "export", src, "--out", d / "o.mtx") == 0
            with open(d / "o.mtx") as fh:
                fh.readline()
                meta = json.loads(fh.readline().lstrip("%"))
            assert meta["metadata_origin"] == "hand-written" and meta["unchecked_fields"] == unchecked
            assert meta["format_version"] >= 3
            (d / "o.mtx").unlink()
        # a file strategy_opt wrote keeps its metadata as it is
        assert cli("-q", "export", d / "s.npz", "--out", d / "o.mtx") == 0
        with open(d / "o.mtx") as fh:
            fh.readline()
            assert "metadata_origin" not in json.loads(fh.readline().lstrip("%"))
        (d / "o.mtx").unlink()
    finally:
        for f in (wrong_error, high_bound, good, moved):
            f.unlink()


def test_out_never_overwrites_a_workload_file(files, capsys):
    """--out naming a file: atom of the workload SPEC is refused (it replaced the workload before)."""
    d = files
    W = np.tril(np.ones((N, N)))
    np.savetxt(d / "W.csv", W, delimiter=",")
    np.savez(d / "W.npz", W=W)
    spec = f"file:{d / 'W.csv'}"
    try:
        refused(capsys, d, "solve", "--workload", spec, "--method", "identity", "--out", d / "W.csv", match="input files")
        refused(capsys, d, "solve", "--workload", f"prefix:2*file:{d / 'W.npz'}", "--method", "identity", "--out", d / "W.npz", match="input files")
        refused(capsys, d, "run", d / "s.npz", "--data", d / "x.npy", "--workload", spec, "--epsilon", 1, "--out", d / "W.csv", match="input files")
        refused(capsys, d, "release", "--method", "identity", "--data", d / "x.npy", "--workload", spec, "--epsilon", 1, "--out", d / "W.csv", match="input files")
        refused(capsys, d, "online", "--data", d / "x.npy", "--queries", spec, "--budget", 1, "--half-width", 50, "--out", d / "W.csv", match="input files")
        np.testing.assert_array_equal(np.loadtxt(d / "W.csv", delimiter=","), W)
        np.testing.assert_array_equal(np.load(d / "W.npz")["W"], W)
    finally:
        (d / "W.csv").unlink()
        (d / "W.npz").unlink()


def test_identity_estimates_per_cell_on_flat_domains_only():
    """A Kronecker SPEC keeps the identity per factor (prefix:10000*prefix:10000 solved in 3.6 GB): no per-cell term;
    a flat domain is charged DIAGONAL_BYTES_PER_CELL per cell instead of dense n x n matrices."""
    from strategy_opt.resources import DIAGONAL_BYTES_PER_CELL, WorkloadSize, operation_bytes

    kron = WorkloadSize(n=10**8, m=10**8, build_bytes=1e6, kron_blocks=[10**4, 10**4])
    for op in ("solve", "error", "release"):
        assert operation_bytes(kron, f"{op}-diagonal") == operation_bytes(kron, op)
    flat = WorkloadSize(n=10**6, m=10**6, build_bytes=0.0)
    nbytes, why = operation_bytes(flat, "solve-diagonal")
    assert nbytes == DIAGONAL_BYTES_PER_CELL * 10**6 and "diagonal strategy" in why
    assert operation_bytes(flat, "solve")[0] > 1e12  # the dense route: 6 dense 10^6 x 10^6 matrices


def test_error_report_leaves_out_the_largest_variance_when_the_queries_do_not_fit(monkeypatch):
    import scipy.sparse as sp

    from strategy_opt.api import error_report
    from strategy_opt.strategy import Strategy

    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "100M")
    n = 30000  # 450 million queries: 21 GB of variances
    report = error_report(Strategy(sp.identity(n, format="csr")), f"all-range:{n}", privacy="approx")
    assert report["unit_max_query_variance"] is None
    assert report["unit_total_squared_error"] == n * (n + 1) * (n + 2) // 6


def test_out_never_overwrites_the_metadata_of_a_csv_strategy(files, capsys):
    """An outside audit: `run o.csv.csv ... --out o.csv` exited 0 and wrote its record o.csv.json over the strategy's
    metadata (o.csv.json too), so the strategy could never be read again. Refused now, for every command."""
    d = files
    assert cli("-q", "export", d / "s.npz", "--out", d / "o.csv.csv") == 0
    meta = (d / "o.csv.json").read_bytes()
    try:
        refused(capsys, d, "run", d / "o.csv.csv", "--data", d / "x.npy", "--workload", f"prefix:{N}", "--epsilon", 1, "--seed", 1, "--out", d / "o.csv", match="metadata of the input")
        refused(capsys, d, "export", d / "o.csv.csv", "--out", d / "o.csv.CSV", match="metadata of the input")
        assert (d / "o.csv.json").read_bytes() == meta
        assert cli("-q", "error", d / "o.csv.csv", "--workload", f"prefix:{N}") == 0  # still readable
        # a data file has no metadata beside it (a regression audit: d.csv.csv as --data was refused)
        np.savetxt(d / "d.csv.csv", np.arange(float(N)))
        assert cli("-q", "run", d / "s.npz", "--data", d / "d.csv.csv", "--workload", f"prefix:{N}", "--epsilon", 1, "--seed", 1, "--out", d / "d.csv") == 0
    finally:
        for f in ("o.csv.csv", "o.csv.json", "d.csv.csv", "d.csv", "d.csv.json"):
            (d / f).unlink(missing_ok=True)


def test_deeply_nested_toml_is_one_line_not_a_traceback(tmp_path, capsys):
    """An outside audit: TOML arrays 600-700 deep raised RecursionError (3000 lines of traceback, exit 1) from a
    problem file, a solver profile and an --option value."""
    deep = "[" * 700 + "]" * 700
    (tmp_path / "deep.toml").write_text(f'workload = "prefix:8"\nx = {deep}\n')
    (tmp_path / "deepsolver.toml").write_text(f'backend = "native"\nx = {deep}\n')
    out = tmp_path / "o.npz"
    refused(capsys, tmp_path, "solve", tmp_path / "deep.toml", "--out", out, match="nested too deeply")
    refused(capsys, tmp_path, "solve", "--workload", "prefix:8", "--solver", tmp_path / "deepsolver.toml", "--out", out, match="nested too deeply")
    refused(capsys, tmp_path, "solve", "--workload", "prefix:8", "--method", "hierarchical", "--option", f"branching={deep}", "--out", out, match="nested too deeply")


def test_memory_refusals_give_advice_that_applies(monkeypatch, tmp_path):
    # a workload that already is a Kronecker product was told to use a Kronecker-structured SPEC, and a .csv
    # export of the identity to use a sparser method (identity, hierarchical); the .csv is what is dense
    import scipy.sparse as sp

    from strategy_opt.exceptions import InputError
    from strategy_opt.io import write_strategy
    from strategy_opt.spec import parse_spec
    from strategy_opt.strategy import Strategy

    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1M")
    with pytest.raises(InputError) as kron:
        parse_spec("all-range:64*all-range:64", operation="run")
    assert "Kronecker-structured SPEC" not in str(kron.value) and "smaller domain" in str(kron.value)
    with pytest.raises(InputError) as flat:
        parse_spec("all-range:4096", operation="run")
    assert "Kronecker-structured SPEC (SPEC*SPEC)" in str(flat.value)
    with pytest.raises(InputError) as csv:
        write_strategy(Strategy(sp.identity(2000, format="csr")), tmp_path / "id.csv")
    assert "a .csv file is dense: write .npz or .mtx" in str(csv.value) and "sparser method" not in str(csv.value)
