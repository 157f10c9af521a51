"""Property-based tests (hypothesis) of the core invariants of the matrix mechanism.

E_p(A; W) = ||A||_p^2 trace(W^T W (A^T A)^+) (Li 2013, Sec. 3.2; ARCHITECTURE.md) depends on W
only through W^T W and on A through A^T A and its column norms, which gives the invariances:

* W -> Q W and A -> Q A (Q orthogonal) leave E_2 unchanged (W -> Q W leaves every E_p unchanged);
* permuting the cells (columns of W and A together) leaves E_p unchanged;
* A -> c A leaves E_p unchanged (degree-0 homogeneity);
* the SVD bound (Li 2013, Thm 4.1) is below E_2 and E_1 of every supporting strategy;
* support (W A^+ A = W) agrees with the rank test rank([A; W]) = rank(A);
* least-squares answers are unbiased: their mean over seeds is W x within sampling error;
* every file format round-trips exactly.
"""

import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from strategy_opt import answers as answer_files
from strategy_opt import histograms
from strategy_opt import io as sio
from strategy_opt.error import per_query_variances, supports, svd_bound, unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.executor import run
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.strategy import Strategy
from strategy_opt.workload import from_matrix

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RTOL = 1e-8


@st.composite
def problems(draw, extra_rows=(0, 4)):
    """A random workload W (m x n, small integers) and a full-column-rank strategy A (p x n)."""
    n = draw(st.integers(2, 6))
    m = draw(st.integers(1, 7))
    W = draw(hnp.arrays(float, (m, n), elements=st.integers(-3, 3).map(float)))
    if not W.any():
        W[0, 0] = 1.0
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p = n + draw(st.integers(*extra_rows))
    A = rng.normal(size=(p, n))
    while np.linalg.matrix_rank(A) < n:
        A = rng.normal(size=(p, n))
    return W, A, rng


def orthogonal(k: int, rng) -> np.ndarray:
    """A random k x k orthogonal matrix (QR of a Gaussian matrix)."""
    Q, R = np.linalg.qr(rng.normal(size=(k, k)))
    return Q * np.sign(np.diag(R))


@SETTINGS
@given(problems())
def test_orthogonal_row_transform_of_workload_leaves_error_unchanged(prob):
    W, A, rng = prob
    QW = orthogonal(W.shape[0], rng) @ W
    for p in (1, 2):
        assert unit_error(A, from_matrix(QW), p) == pytest.approx(unit_error(A, from_matrix(W), p), rel=RTOL)


@SETTINGS
@given(problems())
def test_orthogonal_row_transform_of_strategy_leaves_e2_unchanged(prob):
    W, A, rng = prob
    QA = orthogonal(A.shape[0], rng) @ A
    # A^T A and the column L2 norms are unchanged; E_1 is not invariant (column L1 norms change)
    assert unit_error(QA, from_matrix(W), 2) == pytest.approx(unit_error(A, from_matrix(W), 2), rel=RTOL)


@SETTINGS
@given(problems(), st.randoms(use_true_random=False))
def test_cell_permutation_leaves_error_unchanged(prob, random):
    W, A, _ = prob
    perm = list(range(W.shape[1]))
    random.shuffle(perm)
    for p in (1, 2):
        assert unit_error(A[:, perm], from_matrix(W[:, perm]), p) == pytest.approx(unit_error(A, from_matrix(W), p), rel=RTOL)
        np.testing.assert_allclose(
            per_query_variances(A[:, perm], from_matrix(W[:, perm]), p), per_query_variances(A, from_matrix(W), p), rtol=1e-7, atol=1e-9
        )


@SETTINGS
@given(problems(), st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3))
def test_error_is_homogeneous_of_degree_zero_in_the_strategy(prob, c):
    W, A, _ = prob
    for p in (1, 2):
        assert unit_error(c * A, from_matrix(W), p) == pytest.approx(unit_error(A, from_matrix(W), p), rel=RTOL)


@SETTINGS
@given(problems())
def test_svd_bound_is_below_every_strategy(prob):
    W, A, _ = prob
    Wl = from_matrix(W)
    bound = svd_bound(Wl)
    e2, e1 = unit_error(A, Wl, 2), unit_error(A, Wl, 1)
    assert bound <= e2 * (1 + 1e-9) and e2 <= e1 * (1 + 1e-9)


@st.composite
def rank_deficient(draw):
    """A strategy of rank r < n (possibly with zero columns) and a workload in or out of its row space."""
    n = draw(st.integers(2, 6))
    r = draw(st.integers(1, n - 1))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(r + 2, r)) @ rng.normal(size=(r, n))
    zero = draw(st.lists(st.integers(0, n - 1), max_size=n - 1, unique=True))
    A[:, zero] = 0.0
    inside = draw(st.booleans())
    W = rng.normal(size=(3, A.shape[0])) @ A if inside else rng.normal(size=(3, n))
    if not np.abs(W).max() > 1e-9:  # all-zero workloads are refused; avoid them
        W = A[:1].copy()
        if not np.abs(W).max() > 1e-9:
            W = A.copy()
    return A, W, inside


def _rank_test(A, W) -> bool:
    tol = 1e-8 * max(1.0, np.abs(A).max(), np.abs(W).max())
    return np.linalg.matrix_rank(np.vstack([A, W]), tol=tol) == np.linalg.matrix_rank(A, tol=tol)


@SETTINGS
@given(rank_deficient())
def test_support_agrees_with_rank_test(case):
    A, W, inside = case
    Wl = from_matrix(W)
    expected = _rank_test(A, W)
    if inside:
        assert expected
    assert supports(A, Wl) == expected
    if not expected:
        with pytest.raises(InputError, match="does not support"):
            unit_error(A, Wl, 2)
        with pytest.raises(InputError, match="does not support"):
            run(A, np.ones(A.shape[1]), Wl, PureDP(1.0), rng=0)


@settings(max_examples=8, deadline=None)
@given(problems(extra_rows=(0, 2)), st.sampled_from(["pure", "approx"]))
def test_least_squares_answers_are_unbiased(prob, notion):
    W, A, rng = prob
    Wl = from_matrix(W)
    x = rng.integers(0, 20, W.shape[1]).astype(float)
    privacy = PureDP(1.0) if notion == "pure" else ApproxDP(1.0, 1e-6)
    seeds = 150
    answers = np.array([run(A, x, Wl, privacy, rng=s, intervals=False).answers for s in range(seeds)])
    var = per_query_variances(A, Wl, privacy.p, privacy.noise_variance_factor())
    se = np.sqrt(var / seeds)
    z = (answers.mean(axis=0) - W @ x) / np.where(se > 0, se, 1.0)
    # |z| <= 4.5 for each of at most 7 queries: a false alarm has probability < 1e-4
    assert np.all(np.abs(z) <= 4.5), z
    # and the empirical variance matches the prediction (loose: 150 draws)
    np.testing.assert_allclose(answers.var(axis=0), var, rtol=0.5, atol=1e-9)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def matrices(draw):
    shape = draw(st.tuples(st.integers(1, 6), st.integers(1, 6)))
    M = draw(hnp.arrays(float, shape, elements=finite | st.sampled_from([0.0, 1.0, -1.0, 1e-300, 5e-324])))
    return M


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(matrices(), st.sampled_from(["dense.npz", "sparse.npz", "a.mtx", "a.csv"]), st.dictionaries(st.sampled_from(["method", "description", "note"]), st.text(max_size=12)))
def test_strategy_files_round_trip_exactly(tmp_path_factory, M, name, meta):
    """Free text in metadata round-trips; a recorded workload must be a SPEC (tests/test_hostile.py)."""
    d = tmp_path_factory.mktemp("rt")
    s = Strategy(sp.csr_matrix(M) if name.startswith("sparse") else M, dict(meta))
    f = d / name
    sio.write_strategy(s, f)
    back = sio.read_strategy(f)
    np.testing.assert_array_equal(back.dense(), M)
    for k, v in meta.items():
        assert back.meta[k] == v
    assert back.meta["content_sha256"] == sio.content_hash(M)
    assert back.meta["strategy_opt_version"] and back.meta["format_version"] >= 2


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(matrices(), st.sampled_from(["w.npy", "w.npz", "ws.npz", "w.mtx", "w.csv"]))
def test_workload_files_round_trip_exactly(tmp_path_factory, M, name):
    if not M.any():
        M[0, 0] = 1.0
    f = tmp_path_factory.mktemp("w") / name
    if name == "w.npy":
        np.save(f, M)
    elif name == "w.npz":
        np.savez(f, W=M)
    elif name == "ws.npz":
        sp.save_npz(f, sp.csr_matrix(M))
    elif name == "w.mtx":
        scipy.io.mmwrite(f, M, precision=17)
    else:
        np.savetxt(f, M, delimiter=",", fmt="%.17g")
    np.testing.assert_array_equal(sio.read_workload_file(f).matrix().toarray(), M)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hnp.arrays(float, st.integers(1, 30), elements=st.floats(0, 1e9)), st.sampled_from(["x.npy", "x.csv"]))
def test_histogram_files_round_trip_exactly(tmp_path_factory, x, name):
    f = tmp_path_factory.mktemp("h") / name
    if name == "x.npy":
        np.save(f, x)
    else:
        np.savetxt(f, x, fmt="%.17g")
    np.testing.assert_array_equal(histograms.read_histogram(f, x.size), x)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hnp.arrays(float, st.integers(1, 20), elements=finite), st.booleans(), st.sampled_from(["a.npy", "a.csv"]))
def test_answer_files_round_trip_exactly_with_sidecar(tmp_path_factory, answers, with_intervals, name):
    f = tmp_path_factory.mktemp("a") / name
    lower, upper = (answers - 1.5, answers + 1.5) if with_intervals else (None, None)
    answer_files.write_answers(f, answers, lower, upper, meta={"workload": "identity:3", "sampler": "opendp"})
    got, lo, hi, meta = answer_files.read_answers(f)
    np.testing.assert_array_equal(got, answers)
    if name == "a.csv":
        if with_intervals:
            np.testing.assert_array_equal(lo, lower)
            np.testing.assert_array_equal(hi, upper)
        else:
            assert np.isnan(lo).all() and np.isnan(hi).all()
    assert meta["sha256"] == sio.file_sha256(f) and meta["m"] == answers.size
    assert meta["workload"] == "identity:3" and meta["sampler"] == "opendp" and meta["strategy_opt_version"]
    assert json.loads((f.parent / (name + ".json")).read_text()) == meta
