"""Error analysis: E_p, support, SVD bound, against direct pseudo-inverse computations."""

import math

import numpy as np
import scipy.sparse as sp
import pytest

from strategy_opt.bases import hierarchical_matrix, wavelet_matrix
from strategy_opt.error import (
    ErrorProfile,
    KroneckerMatrix,
    diagonal_inverse,
    log_svd_bound,
    per_query_variances,
    sensitivity,
    supports,
    svd_bound,
    unit_error,
)
from strategy_opt.defaults import SUPPORT_RTOL
from strategy_opt.exceptions import InputError
from strategy_opt.workload import all_range, from_matrix, kronecker, prefix, random_range
from oracles import direct_error


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("W", [all_range(16), prefix(12), random_range(20, 15, seed=2)], ids=repr)
def test_unit_error_matches_definition(W, p):
    rng = np.random.default_rng(5)
    for A in (np.eye(W.n), hierarchical_matrix(W.n, 3), rng.normal(size=(W.n + 3, W.n))):
        assert unit_error(A, W, p) == pytest.approx(direct_error(A, W, p), rel=1e-9)


def test_identity_error_is_trace_of_gram():
    W = all_range(32)
    assert unit_error(np.eye(32), W, 1) == np.trace(W.gram())
    assert unit_error(np.eye(32), W, 2) == np.trace(W.gram())


def test_rank_deficient_strategy_that_supports():
    W = from_matrix([[1.0, 1, 0, 0], [0, 0, 1, 1]])
    A = np.array([[1.0, 1, 0, 0], [0, 0, 2, 2]])
    assert supports(A, W)
    assert unit_error(A, W, 1) == pytest.approx(direct_error(A, W, 1))


@pytest.mark.parametrize("scale", [1e5, 1e9, 1e-9])
def test_disjoint_columns_of_any_scale_support_every_workload(scale):
    """diag(c, 1, 1, 1) has full rank however far c is from 1 (it was refused from c = 1e5 by the rank cutoff).

    Closed form: E_p = max(c, 1)^2 * sum_j G_jj / d_j with d = (c^2, 1, 1, 1).
    """
    W = prefix(4)
    A = np.diag([scale, 1.0, 1.0, 1.0])
    G = W.gram()
    assert supports(A, W)
    expected = max(scale, 1.0) ** 2 * (G[0, 0] / scale**2 + G[1, 1] + G[2, 2] + G[3, 3])
    assert unit_error(A, W, 1) == pytest.approx(expected, rel=1e-12)


def test_refusal_states_the_rank_cutoff():
    A = np.array([[1e6, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1 + 1e-3]])  # not diagonal: the eigenvalue route
    with pytest.raises(InputError, match="singular value below 1e-05"):
        unit_error(A, prefix(4), 2)


def test_unsupported_strategy_is_refused():
    W = prefix(4)
    A = np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]])
    assert not supports(A, W)
    with pytest.raises(InputError, match="does not support"):
        unit_error(A, W, 2)


@pytest.mark.parametrize("t, supported", [(1e-2, False), (1e-3, False), (1e-5, True)])
def test_support_tolerance_sits_between_rounding_and_a_real_share(t, supported):
    # W = [1, t] and A = e_1: the share of ||W||_F^2 outside A's row space is t^2 / (1 + t^2), 1e-4 and 1e-6
    # (real: refused) or 1e-10 (rounding level: accepted). Every other support test uses a share of 0 or ~1,
    # so a tolerance loosened 1e5-fold (1e-3) passed them and dropped a 1e-4 share of the query silently
    A = np.array([[1.0, 0.0]])
    W = from_matrix([[1.0, t]])
    share = t**2 / (1 + t**2)
    assert (share <= SUPPORT_RTOL) == supported
    assert supports(A, W) == supported
    if supported:
        assert unit_error(A, W, 1) == pytest.approx(1.0)
    else:
        with pytest.raises(InputError, match="does not support"):
            unit_error(A, W, 1)


def test_small_unsupported_query_is_refused_per_query():
    # query 1 carries 1e-10 of ||W||_F^2, below the Gram test's tolerance: only the per-query test sees it
    W = from_matrix([[1e5, 0.0], [0.0, 1.0]])
    A = np.array([[1.0, 0.0]])
    prof = ErrorProfile(A)
    assert prof.unsupported_fraction(W.gram()) < SUPPORT_RTOL
    assert prof.unsupported_query(W) == (1, pytest.approx(1.0))
    with pytest.raises(InputError, match="query 1's squared norm"):
        per_query_variances(A, W, 1)
    # a supported rank-deficient strategy passes both tests
    W2 = from_matrix([[1e5, 1e5], [2.0, 2.0]])
    # (a strategy of few rows keeps its row space, and a query's outside share is its norm minus the inside: rounding)
    assert ErrorProfile(np.array([[1.0, 1.0]])).unsupported_query(W2)[1] < 1e-12


def test_error_scale_invariance_and_sensitivity():
    A = hierarchical_matrix(8, 2)
    W = all_range(8)
    assert unit_error(3.5 * A, W, 1) == pytest.approx(unit_error(A, W, 1))
    assert sensitivity(A, 1) == 4 and sensitivity(A, 2) == pytest.approx(2.0)


def test_per_query_variances_sum_to_unit_error():
    W = all_range(10)
    A = wavelet_matrix(10)
    v = per_query_variances(A, W, 2)
    assert v.sum() == pytest.approx(unit_error(A, W, 2))
    Ad = A.toarray()
    Wm = W.matrix().toarray()
    direct = sensitivity(A, 2) ** 2 * np.sum((Wm @ np.linalg.pinv(Ad)) ** 2, axis=1)
    np.testing.assert_allclose(v, direct, rtol=1e-9)


def test_svd_bound_examples():
    # Li 2013, Example 4.4: [[1,1,1],[0,1,1]] -> 2.61
    assert svd_bound(from_matrix([[1, 1, 1], [0, 1, 1]])) == pytest.approx(2.6095, abs=1e-4)
    # Table 4.1: all ranges on 2048 cells, 3.034e7
    assert svd_bound(all_range(2048)) == pytest.approx(3.0342e7, rel=1e-4)
    # Kronecker: SVDB(W1 x W2) = SVDB(W1) SVDB(W2) (Thm 4.13); 64x32 -> 2.261e7
    assert svd_bound(kronecker(all_range(64), all_range(32))) == pytest.approx(svd_bound(all_range(64)) * svd_bound(all_range(32)))
    assert svd_bound(kronecker(all_range(64), all_range(32))) == pytest.approx(2.2605e7, rel=1e-4)
    # ten binary attributes: (1 + sqrt 3)^20 / 1024
    ten = kronecker(*[all_range(2)] * 10)
    assert svd_bound(ten) == pytest.approx((1 + math.sqrt(3)) ** 20 / 1024)


def test_svd_bound_is_below_every_strategy():
    W = random_range(24, 40, seed=1)
    lb = svd_bound(W)
    rng = np.random.default_rng(0)
    for A in (np.eye(24), hierarchical_matrix(24, 2), wavelet_matrix(24), rng.normal(size=(30, 24))):
        assert lb <= unit_error(A, W, 2) * (1 + 1e-12)
        assert lb <= unit_error(A, W, 1) * (1 + 1e-12)


def test_log_svd_bound_matches_dense():
    W = all_range(50)
    ev = np.linalg.eigvalsh(W.gram())
    assert math.exp(log_svd_bound(W)) == pytest.approx(np.sqrt(np.clip(ev, 0, None)).sum() ** 2 / 50)


def test_kronecker_strategy_error_equals_dense():
    W = kronecker(all_range(8), prefix(4))
    A = KroneckerMatrix([hierarchical_matrix(8, 2), wavelet_matrix(4)])
    dense = A.tocsr()
    for p in (1, 2):
        assert unit_error(A, W, p) == pytest.approx(unit_error(dense, W, p), rel=1e-10)


@pytest.mark.parametrize(
    "strategy, expected",
    [("identity", 47.253), ("hierarchical", 1.773), ("wavelet", 1.545)],
)
def test_table_4_1_all_range_2048(strategy, expected):
    """Li 2013 Table 4.1 (recomputed): ratios to the SVD bound under (eps, delta)."""
    n = 2048
    W = all_range(n)
    A = {"identity": np.eye(n), "hierarchical": hierarchical_matrix(n, 2), "wavelet": wavelet_matrix(n)}[strategy]
    assert unit_error(A, W, 2) / svd_bound(W) == pytest.approx(expected, abs=6e-4)


def test_solve_normal_takes_blocks_of_right_hand_sides_on_rank_deficient_strategies():
    """Regression: a rank-deficient A with k right-hand sides (k = rank made it silently wrong)."""
    from strategy_opt.error import ErrorProfile

    rng = np.random.default_rng(3)
    A = rng.standard_normal((3, 5))  # rank 3 on 5 cells: eigendecomposition path
    B = A.T @ rng.standard_normal((3, 3))  # three right-hand sides in the row space
    X = ErrorProfile(A).solve_normal(B)
    np.testing.assert_allclose(X, np.linalg.pinv(A.T @ A) @ B, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ErrorProfile(A).solve_normal(B[:, 0]), X[:, 0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_diagonal_gram_profile_matches_pinv(sparse):
    """Strategies with disjoint column supports (A^T A diagonal) skip the factorisation; same numbers as pinv."""
    import scipy.sparse as sps

    from strategy_opt.error import ErrorProfile

    rng = np.random.default_rng(5)
    n = 9
    A = np.vstack([np.diag(rng.uniform(0.2, 2.0, n)), np.diag(rng.uniform(0.0, 1.0, n))])
    A = sps.csr_matrix(A) if sparse else A
    dense = A.toarray() if sparse else A
    prof = ErrorProfile(A)
    P = np.linalg.pinv(dense.T @ dense)
    assert prof.full_rank and prof.null_space.shape == (n, 0)
    np.testing.assert_allclose(prof.pinv(), P, rtol=1e-12, atol=1e-14)
    G = random_range(n, 7, seed=1).gram()
    assert prof.trace_with(G) == pytest.approx(np.trace(G @ P), rel=1e-12)
    B = rng.standard_normal((n, 3))
    np.testing.assert_allclose(prof.solve_normal(B), P @ B, rtol=1e-12)
    np.testing.assert_allclose(prof.solve_normal(B[:, 1]), P @ B[:, 1], rtol=1e-12)
    W = random_range(n, 7, seed=1)
    for p in (1, 2):
        assert unit_error(A, W, p) == pytest.approx(direct_error(A, W, p), rel=1e-10)


@pytest.mark.parametrize("spec", ["random-range:40:17:3", "random-range:40:39:1", "file"])
def test_gram_eigvals_of_wide_workloads_from_the_row_gram(spec):
    """m < n: the spectrum comes from W W^T; it equals the spectrum of W^T W."""
    from strategy_opt.spec import parse_spec

    if spec == "file":
        W = from_matrix(np.random.default_rng(2).integers(0, 2, (6, 15)).astype(float))
    else:
        W = parse_spec(spec)
    assert W.m < W.n
    np.testing.assert_allclose(W.gram_eigvals(), np.linalg.eigvalsh(W.matrix().toarray().T @ W.matrix().toarray()), atol=1e-10)


@pytest.mark.parametrize("privacy", ["pure", "approx"])
def test_max_query_variance_of_kronecker_strategies(privacy):
    """Kronecker strategy on a weighted union of products: the largest variance from factors equals the dense one."""
    from strategy_opt.api import error_report
    from strategy_opt.bases import hierarchical_matrix, wavelet_matrix
    from strategy_opt.spec import parse_spec
    from strategy_opt.strategy import Strategy
    from strategy_opt.workload import Union

    W = Union([parse_spec("all-range:4*prefix:3"), parse_spec("identity:4*total:3")], [1.0, 2.5])
    K = KroneckerMatrix([hierarchical_matrix(4, 2).toarray(), wavelet_matrix(4).toarray()[:3, :3] + np.eye(3)])
    Wm, A = W.matrix().toarray(), K.tocsr().toarray()
    s2 = np.abs(A).sum(axis=0).max() ** 2 if privacy == "pure" else (A**2).sum(axis=0).max()
    dense = s2 * np.max(np.einsum("ij,jk,ik->i", Wm, np.linalg.pinv(A.T @ A), Wm))
    assert error_report(Strategy(K), W, privacy)["unit_max_query_variance"] == pytest.approx(dense, rel=1e-10)


@pytest.mark.parametrize(("scale", "words"), [(1e155, "too large"), (1e-160, "too small"), (np.inf, "NaN or infinite")])
def test_strategies_beyond_float64_range_are_refused_for_what_they_are(scale, words):
    """E_p is scale-invariant, but A^T A of 1e155 * A overflows and of 1e-160 * A is subnormal: say so, not 'unsupported'."""
    A = hierarchical_matrix(8, 2).toarray()
    A = A * scale if np.isfinite(scale) else np.where(A != 0, scale, 0.0)
    with pytest.raises(InputError, match=words):
        ErrorProfile(A)
    assert unit_error(hierarchical_matrix(8, 2).toarray() * 1e100, prefix(8), 1) == pytest.approx(unit_error(hierarchical_matrix(8, 2), prefix(8), 1), rel=1e-12)


@pytest.mark.parametrize("n", [1, 7, 600, 1100])
def test_cholesky_profile_pinv_is_the_symmetric_inverse(n):
    """The full-rank profile mirrors dpotri's lower triangle by blocks (512): equals inv(A^T A), symmetric, across block edges."""
    rng = np.random.default_rng(n)
    A = np.vstack([np.eye(n), rng.standard_normal((3, n))])
    prof = ErrorProfile(A)
    P = prof.pinv()
    assert prof.full_rank
    assert np.array_equal(P, P.T)
    np.testing.assert_allclose(P, np.linalg.inv(A.T @ A), rtol=1e-9, atol=1e-12)


def test_diagonal_inverse_sees_single_entry_rows_only():
    A = np.array([[2.0, 0.0, 0.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    np.testing.assert_array_equal(diagonal_inverse(A), [1 / 5, 1.0, 1 / 9])
    np.testing.assert_array_equal(diagonal_inverse(sp.csr_matrix(A)), [1 / 5, 1.0, 1 / 9])
    assert diagonal_inverse(hierarchical_matrix(4, 2)) is None  # rows over several cells
    assert diagonal_inverse(np.array([[1.0, 0.0], [1.0, 0.0]])) is None  # cell 1 never measured
    # an explicit stored zero is no second entry
    assert diagonal_inverse(sp.csr_matrix((np.array([1.0, 0.0, 1.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))) is not None


def test_diagonal_strategies_are_analysed_beyond_the_dense_limit():
    """Weighted identity diag(w) on 50000 cells (a dense A^T A would be 20 GB): E_1 = max(w)^2 sum_j G_jj / w_j^2,
    with G_jj from the closed forms (prefix: n - j; all ranges: (j + 1)(n - j)) and, for a file workload, by hand."""
    n = 50_000
    j = np.arange(n, dtype=float)
    w = 1.0 + (np.arange(n) % 3)
    A = sp.diags(w, format="csr")
    assert unit_error(A, prefix(n), 1) == pytest.approx(9.0 * np.sum((n - j) / w**2), rel=1e-12)
    assert unit_error(A, all_range(n), 2) == pytest.approx(9.0 * np.sum((j + 1) * (n - j) / w**2), rel=1e-12)
    rng = np.random.default_rng(4)
    rows, cols = rng.integers(0, 30, 400), rng.integers(0, n, 400)
    vals = rng.normal(size=400)
    Wm = sp.csr_matrix((vals, (rows, cols)), shape=(30, n))
    dense_rows = {}
    for r, c, v in zip(rows, cols, vals):  # duplicates add up, as in the sparse matrix
        dense_rows.setdefault(r, {}).setdefault(c, 0.0)
        dense_rows[r][c] += v
    by_hand = np.array([sum(v * v / w[c] ** 2 for c, v in dense_rows.get(r, {}).items()) for r in range(30)])
    W = from_matrix(Wm)
    np.testing.assert_allclose(per_query_variances(A, W, 1), 9.0 * by_hand, rtol=1e-12)
    assert unit_error(A, W, 1) == pytest.approx(9.0 * by_hand.sum(), rel=1e-12)
    assert supports(A, W)


def test_diagonal_strategy_on_a_kronecker_workload_keeps_every_digit():
    """diag(1e-9, 1, 1, 1) per factor pair: the queries not touching the tiny column keep their variances
    (2 and 4 exactly; they came out 0 from differences of prefix sums)."""
    from strategy_opt.workload import IntervalWorkload

    A = np.diag(np.kron([1.0, 1.0], [1e-9, 1.0, 1.0, 1.0]))
    W = kronecker([prefix(2), IntervalWorkload(4, [0, 1, 2], [3, 2, 3])])
    got = per_query_variances(A, W, 2)
    M = W.matrix().toarray()
    expected = np.einsum("ij,ij->i", M @ np.linalg.inv(A.T @ A), M)  # exact here; pinv would cut the 1e-18 eigenvalue
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(got[[1, 2, 4, 5]], [2.0, 2.0, 4.0, 4.0], rtol=1e-14)


@pytest.mark.parametrize("m", [10, 45])
def test_few_queries_are_answered_by_triangular_solves(m):
    """m <= n / 2 queries: E and the per-query variances from ||L^{-1} w_i||^2, no inverse formed; more queries:
    through the inverse. Both against numpy's pinv by the definition."""
    rng = np.random.default_rng(m)
    n = 60
    A = rng.normal(size=(80, n))
    Wm = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.3)
    for W in (from_matrix(Wm), random_range(n, m, 2)):
        M = W.matrix().toarray()
        P = np.linalg.pinv(A.T @ A)
        prof = ErrorProfile(A)
        np.testing.assert_allclose(prof.query_variances(W), np.einsum("ij,ij->i", M @ P, M), rtol=1e-10)
        assert (prof._pinv is None) == (m <= n // 2)
        assert unit_error(A, W, 1) == pytest.approx(direct_error(A, W, 1), rel=1e-10)


def test_unit_error_is_the_true_value_on_all_predicate_workloads():
    """all-predicate keeps its Gram divided by 2^(N-2); the public errors are still the true values (numpy on the 2^N rows)."""
    from oracles import direct_error
    from strategy_opt.error import expected_total_error, per_query_variances, scaled_unit_error
    from strategy_opt.privacy import PureDP
    from strategy_opt.workload import all_predicate

    W = all_predicate(5)
    A = np.vstack([np.eye(5), np.ones((1, 5))])
    true = direct_error(A, W, 1)
    assert unit_error(A, W, 1) == pytest.approx(true, rel=1e-12)
    assert per_query_variances(A, W, 1).sum() == pytest.approx(true, rel=1e-12)
    assert expected_total_error(A, W, PureDP(0.5)) == pytest.approx(true * 2 / 0.25, rel=1e-12)
    assert scaled_unit_error(A, W, 1) == pytest.approx(true / 2**3, rel=1e-12)
    assert unit_error(np.eye(1100), all_predicate(1100), 1) == np.inf  # 2^1100 queries: beyond float64, never a wrong finite number


def test_without_a_spectrum_strategies_are_still_built_and_analysed(tmp_path):
    """all-range x total + total x all-range on 256 x 256: the union's Gram eigenvalues need a dense 65536^2 matrix and its
    65792 queries are too many for W W^T, so there is no SVD bound; identity and hierarchical are still solved, written and
    analysed per factor (they were refused). E_2 by numpy on the 256-cell factors: sum over the two parts of
    prod_f trace(G_f (A_f^T A_f)^+), times the sensitivity^2."""
    from oracles import dense
    from strategy_opt.api import solve
    from strategy_opt.cli import main
    from strategy_opt.io import read_strategy

    spec = "all-range:256*total:256+total:256*all-range:256"
    R = np.array([[1.0 if a <= j <= b else 0.0 for j in range(256)] for a in range(256) for b in range(a, 256)])
    Gr, Gt = R.T @ R, np.ones((256, 256))
    ident = solve(spec, privacy="approx", method="identity")
    assert ident.meta["unit_total_squared_error"] == pytest.approx(2 * np.trace(Gr) * np.trace(Gt), rel=1e-12)
    assert ident.meta["lower_bound"] is None and "SVD bound" in ident.meta["lower_bound_unavailable"]
    out = tmp_path / "h.npz"
    assert main(["-q", "solve", "--workload", spec, "--privacy", "approx", "--method", "hierarchical", "--out", str(out)]) == 0
    s = read_strategy(out)
    F = [dense(f) for f in s.matrix.factors]
    inv = [np.linalg.pinv(f.T @ f) for f in F]
    sens2 = np.prod([(f * f).sum(0).max() for f in F])
    E = sens2 * (np.trace(Gr @ inv[0]) * np.trace(Gt @ inv[1]) + np.trace(Gt @ inv[0]) * np.trace(Gr @ inv[1]))
    assert s.meta["unit_total_squared_error"] == pytest.approx(E, rel=1e-9)
    assert main(["-q", "error", str(out), "--workload", spec]) == 0


def test_few_queries_past_the_dense_limit_get_their_bound_from_w_wt():
    """prefix x total + total x prefix on 256 x 256 has 512 queries: the SVD bound from the 512 x 512 W W^T, built here from
    its blocks (256 P P^T on the diagonal, the outer product of P's row sums off it)."""
    from strategy_opt.api import solve

    P = np.tril(np.ones((256, 256)))
    p = P.sum(axis=1)
    C = np.block([[256 * P @ P.T, np.outer(p, p)], [np.outer(p, p), 256 * P @ P.T]])
    bound = np.sqrt(np.clip(np.linalg.eigvalsh(C), 0, None)).sum() ** 2 / 65536
    s = solve("prefix:256*total:256+total:256*prefix:256", privacy="approx", method="hierarchical")
    assert s.meta["svd_bound"] == pytest.approx(bound, rel=1e-9)


def _with_singular_values(s: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """A 30 x n strategy A = U diag(s) V^T with random orthonormal U, V; returns A and V."""
    n = s.size
    U = np.linalg.qr(rng.standard_normal((30, n)))[0]
    V = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return (U * s) @ V.T, V


@pytest.mark.parametrize("sparse", [False, True])
def test_an_ill_conditioned_strategy_is_analysed_from_its_qr_factor(sparse):
    # forming A^T A squares cond(A): at cond(A) = 1e5 the error came out 7e-8 too low, and a valid dual bound
    # above it was dropped as untrustworthy (audit: minerror-l2, relative objective, a rank-deficient file workload)
    from strategy_opt.error import ErrorProfile

    rng = np.random.default_rng(0)
    s = np.logspace(0, -5, 20)
    A, V = _with_singular_values(s, rng)
    W = rng.standard_normal((15, 20))
    G = W.T @ W
    # closed form from the SVD A = U diag(s) V^T: (A^T A)^{-1} = V diag(1/s^2) V^T, no squared condition number
    expected = float(np.einsum("ik,ij,jk->k", V, G, V) @ (1.0 / s**2))
    profile = ErrorProfile(sp.csr_matrix(A) if sparse else A)
    assert profile.trace_with(G) == pytest.approx(expected, rel=1e-10)
    np.testing.assert_allclose(profile.pinv(), (V / s**2) @ V.T, rtol=1e-9, atol=1e-9 * np.max(1 / s**2))
    x = rng.standard_normal(20)
    np.testing.assert_allclose(profile.solve_normal(x), (V / s**2) @ (V.T @ x), rtol=1e-9)


def test_an_ill_conditioned_strategy_answers_queries_by_triangular_solves():
    # many queries (15 > n / 2) that need only A's weakest directions: the sum of squares of L^{-1} w_i does not
    # cancel; before, the error through the inverse of the formed A^T A was 8e-9 off
    from strategy_opt.error import ErrorProfile
    from strategy_opt.workload import from_matrix

    rng = np.random.default_rng(1)
    s = np.logspace(0, -4.5, 20)
    A, V = _with_singular_values(s, rng)
    W = rng.standard_normal((15, 8)) @ V[:, -8:].T
    per_query = np.sum((W @ V) ** 2 / s**2, axis=1)  # closed form from the SVD of A
    profile = ErrorProfile(A)
    np.testing.assert_allclose(profile.query_variances(from_matrix(W)), per_query, rtol=1e-10)
    assert profile.workload_trace(from_matrix(W)) == pytest.approx(per_query.sum(), rel=1e-10)


def test_the_svd_bound_is_skipped_past_the_eigenvalue_size_limit():
    # 20000 ranges over 65536 cells: the bound's 20000 x 20000 eigenproblem fit in memory (12.8 GB) and kept an
    # identity solve in one uninterruptible LAPACK call for 9 minutes; it is now skipped with its reason
    from strategy_opt.error import log_svd_bound_or_reason
    from strategy_opt.spec import parse_spec

    W = parse_spec("random-range:65536:9000:1")
    with pytest.raises(InputError, match=r"dense 9000x9000 symmetric eigenvalue problem"):
        W.gram_eigvals()
    bound, why = log_svd_bound_or_reason(W)
    assert bound == -math.inf and "9000x9000" in why
    assert parse_spec("random-range:65536:100:1").gram_eigvals().size == 65536  # few queries: from W W^T, as before


def test_svd_bound_counts_singular_values_above_the_rank_cutoff_only():
    """An outside audit: rows scaled from 1e-3 to 1e2 give an SVD bound 2.4e-5 below the formula; the singular values
    under 1e-5 of the largest (Gram eigenvalues under EIG_RTOL) count as zero, as the docstring says."""
    from strategy_opt.defaults import EIG_RTOL
    from strategy_opt.error import svd_bound
    from strategy_opt.workload import from_matrix

    M = np.diag(10.0 ** np.linspace(-3, 2, 16)) @ np.tril(np.ones((16, 16)))
    s = np.linalg.svd(M, compute_uv=False)
    kept = s[s**2 > EIG_RTOL * s[0] ** 2]
    assert kept.size < s.size  # the case: some singular values fall under the cutoff
    assert svd_bound(from_matrix(M)) == pytest.approx(kept.sum() ** 2 / 16, rel=1e-9)
    assert svd_bound(from_matrix(M)) < s.sum() ** 2 / 16
    P = np.tril(np.ones((16, 16)))  # a well-conditioned workload: the formula exactly
    assert svd_bound(from_matrix(P)) == pytest.approx(np.linalg.svd(P, compute_uv=False).sum() ** 2 / 16, rel=1e-12)


def test_a_kronecker_identity_is_diagonal_without_forming_the_product(monkeypatch):
    """An outside audit: `error` on the identity over 1000 x 1000 x 1000 cells formed its 10^9 non-zeros (killed at 24 GB)."""
    from strategy_opt.error import KroneckerMatrix, diagonal_gram, diagonal_inverse

    small = KroneckerMatrix([np.diag([1.0, 2.0]), np.diag([3.0, 0.5, 1.0])])
    flat = np.kron(np.diag([1.0, 2.0]), np.diag([3.0, 0.5, 1.0]))
    expected = 1.0 / (flat**2).sum(axis=0)
    monkeypatch.setattr(KroneckerMatrix, "tocsr", lambda self: (_ for _ in ()).throw(AssertionError("formed the product")))
    assert diagonal_gram(small) and diagonal_gram(KroneckerMatrix([np.eye(1000)] * 3))
    np.testing.assert_allclose(diagonal_inverse(small), expected, rtol=1e-15)
    assert not diagonal_gram(KroneckerMatrix([np.eye(2), np.ones((1, 3))]))  # a row with three non-zeros
    assert not diagonal_gram(KroneckerMatrix([np.eye(2), np.array([[1.0, 0.0], [0.0, 0.0]])]))  # an unmeasured cell
    monkeypatch.undo()
    # the scale checks a flat A gets, on the product (a second audit: per factor they disagreed with the flat check)
    for factors in ([1e-100 * np.eye(2), 1e-100 * np.eye(2)], [1e-130 * np.eye(2), 1e130 * np.eye(2)], [1e-160 * np.eye(2), 1e-160 * np.eye(3)]):
        K = KroneckerMatrix(factors)
        flat = diagonal_inverse(K.tocsr()) is not None
        assert diagonal_gram(K) == (diagonal_inverse(K) is not None) == flat


def test_error_on_a_huge_kronecker_identity_is_analysed_per_factor(tmp_path, capsys, monkeypatch):
    """An outside audit: `error` on the identity over 1000^3 cells formed its 10^9 non-zeros (killed at 24 GB). The
    strategy and the workload are Kronecker products: E_2, the largest variance and the mean come per factor, under 8 GB."""
    import json

    from strategy_opt import resources
    from strategy_opt.cli import main

    monkeypatch.setattr(resources, "available_memory", lambda: 8 * 10**9)
    spec = "prefix:1000*prefix:1000*prefix:1000"
    assert main(["-q", "solve", "--workload", spec, "--method", "identity", "--out", str(tmp_path / "i.npz")]) == 0
    capsys.readouterr()
    assert main(["-q", "error", str(tmp_path / "i.npz"), "--workload", spec, "--privacy", "approx", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    trace = 1000 * 1001 / 2  # trace of prefix:1000's Gram: 1 + 2 + ... + 1000
    assert report["unit_total_squared_error"] == pytest.approx(trace**3, rel=1e-12)
    assert report["unit_max_query_variance"] == pytest.approx(1000.0**3, rel=1e-12)  # the full prefix in every factor
    assert report["unit_mean_squared_error_per_query"] == pytest.approx(trace**3 / 1000.0**3, rel=1e-12)
