"""Fuzzing (hypothesis) of the SPEC parser and the file readers: only InputError may escape.

Random text and grammar-built SPECs with random edits go through `parse_spec`; random bytes
and mutated valid files (flipped, inserted, deleted bytes; truncation) go through
`read_strategy`, `read_workload_file`, `read_histogram`. Any exception other than `InputError`
(or a crash of the process: SciPy's Matrix Market reader segfaulted on such files, which is why
strategy_opt parses .mtx itself) fails the test. A mutated strategy file that still loads must
be the original strategy: its hashes make corruption visible. The memory available is capped
with STRATEGY_OPT_MEMORY so that random sizes are refused by the estimates, not allocated.
"""

import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategy_opt as so
from strategy_opt import histograms
from strategy_opt import io as sio
from strategy_opt.exceptions import InputError
from strategy_opt.spec import canonical_spec, parse_spec

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def small_memory():
    """Pretend the machine has 200 MB so that huge random sizes are refused before allocation."""
    old = os.environ.get("STRATEGY_OPT_MEMORY")
    os.environ["STRATEGY_OPT_MEMORY"] = "200M"
    yield
    if old is None:
        del os.environ["STRATEGY_OPT_MEMORY"]
    else:
        os.environ["STRATEGY_OPT_MEMORY"] = old


# ------------------------------------------------------------------------------------------ SPECs
def _parse_or_refuse(text):
    try:
        W = parse_spec(text)
    except InputError as exc:
        assert str(exc).strip()  # a message for the user, never empty
        return None
    assert W.n >= 1 and W.m >= 1
    return W


@FUZZ
@given(st.text(alphabet=st.sampled_from(list("identotalprefixall-rangemrgns:*+()x0123456789 \t٣")), max_size=40) | st.text(max_size=40))
def test_parse_spec_random_text(text):
    _parse_or_refuse(text)


atoms = st.one_of(
    st.builds("{}:{}".format, st.sampled_from(["identity", "total", "prefix", "all-range", "all-predicate"]), st.integers(0, 12)),
    st.builds("random-range:{}:{}:{}".format, st.integers(0, 12), st.integers(0, 9), st.integers(0, 2**70)),
    st.builds("marginals:{}:{}".format, st.lists(st.integers(0, 4), min_size=1, max_size=4).map(lambda d: "x".join(map(str, d))), st.integers(0, 4)),
)
specs = st.recursive(atoms, lambda inner: st.one_of(
    st.builds("{}*{}".format, inner, inner), st.builds("{}+{}".format, inner, inner), st.builds("({})".format, inner)
), max_leaves=5)


@st.composite
def edited(draw, base):
    """A SPEC with a few random character edits (insert, delete, replace)."""
    text = list(draw(base))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        ch = draw(st.sampled_from(list(":*+()x0-9a ")))
        if op == "insert":
            text.insert(i, ch)
        elif i < len(text):
            if op == "delete":
                del text[i]
            else:
                text[i] = ch
    return "".join(text)


@FUZZ
@given(specs)
def test_parse_spec_grammar(text):
    W = _parse_or_refuse(text)
    if W is not None:
        # a valid SPEC has a canonical form denoting the same workload
        again = parse_spec(canonical_spec(text))
        assert (again.n, again.m) == (W.n, W.m)


@FUZZ
@given(edited(specs))
def test_parse_spec_grammar_with_edits(text):
    _parse_or_refuse(text)


def test_parse_spec_refuses_deep_nesting_and_huge_sizes():
    with pytest.raises(InputError, match="nests"):
        parse_spec("(" * 500 + "identity:2" + ")" * 500)
    with pytest.raises(InputError, match="needs about"):
        parse_spec("identity:1000000000")  # 16 GB of interval bounds > the 200 MB cap
    with pytest.raises(InputError, match="needs about"):
        parse_spec("marginals:" + "x".join(["2"] * 29) + ":14")  # 7.8e7 Kronecker objects


# ------------------------------------------------------------------------------------------ files
@pytest.fixture(scope="module")
def valid_files(tmp_path_factory):
    """Valid files of every format, as bytes: {name: bytes} (+ the strategy sidecar JSON)."""
    d = tmp_path_factory.mktemp("valid")
    sparse = so.solve("prefix:6", privacy="pure", method="hierarchical", branching=2)
    dense = Strategy_dense(sparse)
    sio.write_strategy(sparse, d / "s.npz")
    sio.write_strategy(dense, d / "d.npz")
    sio.write_strategy(sparse, d / "s.mtx")
    sio.write_strategy(dense, d / "s.csv")
    W = np.array([[1.0, 0, 2], [0, 1, 1], [1, 1, 1]])
    np.save(d / "w.npy", W)
    np.savez(d / "w.npz", W=W)
    sp.save_npz(d / "ws.npz", sp.csr_matrix(W))
    scipy.io.mmwrite(d / "w.mtx", sp.csr_matrix(W))
    scipy.io.mmwrite(d / "wa.mtx", W)
    np.savetxt(d / "w.csv", W, delimiter=",")
    np.save(d / "x.npy", np.arange(6.0).reshape(2, 3))
    np.savetxt(d / "x.csv", np.arange(6.0))
    files = {f.name: f.read_bytes() for f in d.iterdir()}
    strategies = {name: sio.read_strategy(d / name) for name in ("s.npz", "d.npz", "s.mtx", "s.csv")}
    return files, strategies


def Strategy_dense(s):
    from strategy_opt.strategy import Strategy

    return Strategy(s.dense(), dict(s.meta))


STRATEGY_FILES = ["s.npz", "d.npz", "s.mtx", "s.csv", "s.json"]
WORKLOAD_FILES = ["w.npy", "w.npz", "ws.npz", "w.mtx", "wa.mtx", "w.csv"]
HISTOGRAM_FILES = ["x.npy", "x.csv"]


@st.composite
def mutations(draw, data: bytes):
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(b) - 1, 0)))
        if kind == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and b:
            b[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and b:
            del b[i : i + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del b[i:]
    return bytes(b)


def _read(reader, path):
    try:
        return reader(path)
    except InputError:
        return None


def _same_strategy(a, b) -> bool:
    return np.array_equal(a.dense(), b.dense()) and a.meta == b.meta


@FUZZ
@given(st.sampled_from(STRATEGY_FILES), st.data())
def test_mutated_strategy_files_are_refused_or_unchanged(tmp_path_factory, valid_files, target, data):
    files, strategies = valid_files
    d = tmp_path_factory.mktemp("m")
    name = "s.csv" if target == "s.json" else target
    for f in {name, target, "s.json"} if name == "s.csv" else {name}:
        (d / f).write_bytes(files[f])
    (d / target).write_bytes(data.draw(mutations(files[target])))
    got = _read(sio.read_strategy, d / name)
    assert got is None or _same_strategy(got, strategies[name])


@FUZZ
@given(st.sampled_from(WORKLOAD_FILES + HISTOGRAM_FILES), st.data())
def test_mutated_workload_and_histogram_files_are_refused_or_read(tmp_path_factory, valid_files, name, data):
    files, _ = valid_files
    f = tmp_path_factory.mktemp("m") / name
    f.write_bytes(data.draw(mutations(files[name])))
    if name.startswith("w"):
        W = _read(sio.read_workload_file, f)
        assert W is None or np.all(np.isfinite(W.matrix().toarray()))
    else:
        x = _read(lambda p: histograms.read_histogram(p, 6), f)
        assert x is None or (x.shape == (6,) and np.all(np.isfinite(x)))


#: Headers that promise more than the file holds (a truncated zip, a 1e11-entry array, a 1e16-cell matrix).
_CRAFTED = [b"PK\x03\x04", b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999,), }", b"%%MatrixMarket matrix coordinate real general\n99999999 99999999 99999999999\n1 1 1"]


@FUZZ
@given(st.sampled_from([".npz", ".mtx", ".csv", ".npy"]), st.binary(max_size=300) | st.sampled_from(_CRAFTED))
def test_random_bytes_are_refused_or_read_as_valid(tmp_path_factory, suffix, blob):
    # every reader either refuses with an InputError or returns something valid (random bytes can be a
    # valid CSV, e.g. b"1"); the crafted headers are always refused
    f = tmp_path_factory.mktemp("r") / f"f{suffix}"
    f.write_bytes(blob)
    W = _read(sio.read_workload_file, f)
    assert W is None or (W.n >= 1 and np.all(np.isfinite(W.matrix().toarray())))
    if suffix != ".npy":
        S = _read(sio.read_strategy, f)
        assert S is None or (min(S.shape) >= 1 and np.all(np.isfinite(S.dense())))
    if suffix in (".npy", ".csv"):
        x = _read(lambda p: histograms.read_histogram(p, 3), f)
        assert x is None or (x.shape == (3,) and np.all(np.isfinite(x)))
    if blob in _CRAFTED:
        assert W is None
