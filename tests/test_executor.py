"""Executor: noise calibration, reconstruction, intervals, estimators."""

import numpy as np
import scipy.sparse as sp
import pytest

import strategy_opt as so
from strategy_opt.bases import hierarchical_matrix
from strategy_opt.error import unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.executor import reconstruct, run
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.workload import all_range, from_matrix, identity, prefix, random_range, total


def test_huge_epsilon_gives_exact_answers():
    W = random_range(64, 40, seed=0)
    x = np.random.default_rng(1).integers(0, 100, 64).astype(float)
    for A in (np.eye(64), hierarchical_matrix(64, 2)):
        rel = run(A, x, W, PureDP(1e6), rng=0)
        np.testing.assert_allclose(rel.answers, W.matvec(x), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("privacy", [PureDP(1.0), ApproxDP(1.0, 1e-6)])
def test_empirical_error_matches_prediction(privacy):
    W = random_range(128, 60, seed=3)
    A = hierarchical_matrix(128, 4)
    x = np.random.default_rng(2).integers(0, 50, 128).astype(float)
    truth = W.matvec(x)
    errs = [np.sum((run(A, x, W, privacy, rng=s, intervals=False).answers - truth) ** 2) for s in range(300)]
    predicted = unit_error(A, W, privacy.p) * privacy.noise_variance_factor()
    assert np.mean(errs) == pytest.approx(predicted, rel=0.12)


def test_interval_coverage_gaussian():
    W = prefix(32)
    A = hierarchical_matrix(32, 2)
    x = np.full(32, 5.0)
    truth = W.matvec(x)
    hits = []
    for s in range(200):
        rel = run(A, x, W, ApproxDP(1.0, 1e-6), rng=s)
        hits.append(np.mean((rel.lower <= truth) & (truth <= rel.upper)))
    assert np.mean(hits) == pytest.approx(0.95, abs=0.02)


def test_laplace_intervals_are_exact_for_the_identity():
    # one Laplace count per answer: P(|L| > t) = exp(-t / b) = 5% at t = b ln 20
    W = identity(64)
    x = np.full(64, 5.0)
    rel = run(np.eye(64), x, W, PureDP(0.5), rng=0)
    np.testing.assert_allclose(rel.upper - rel.answers, np.log(20) / 0.5)
    hits = [np.mean((r.lower <= x) & (x <= r.upper)) for r in (run(np.eye(64), x, W, PureDP(0.5), rng=s) for s in range(300))]
    assert np.mean(hits) == pytest.approx(0.95, abs=0.006)  # the normal quantile gives 93.7%


@pytest.mark.parametrize("c", [[1.0, 1.0], [1.0, 0.2], [1.0, 0.1, 0.1], [1.0] * 5, [0.3, 1.0, 0.7, 0.2]])
def test_laplace_interval_width_is_conservative_for_sums_of_laplace_noise(c):
    # the exact two-sided tail of sum_k c_k L_k at the interval's half-width, by Gil-Pelaez
    # inversion of the characteristic function prod_k 1 / (1 + c_k^2 u^2), is at most 5%
    from scipy import integrate

    from strategy_opt.executor import answer_intervals

    c = np.asarray(c)
    A = np.diag(1.0 / c)  # answering x_1 + ... + x_k from counts x_k / c_k: error sum_k c_k L_k / eps
    W = total(len(c))
    lo, hi = answer_intervals(A, W, PureDP(1.0), np.zeros(1))
    t = hi[0] * 1.0 / np.abs(1.0 / c).max()  # noise scale b = Delta / eps with Delta = max 1/c_k
    phi = lambda u: np.prod(1.0 / (1.0 + (c * u) ** 2))  # noqa: E731
    val, _ = integrate.quad(lambda u: np.sin(u * t) * phi(u) / u, 0, np.inf, limit=2000)
    tail = 1.0 - 2.0 * val / np.pi
    assert 0.035 < tail <= 0.05 + 1e-6


def test_lsmr_agrees_with_dense_lstsq():
    from scipy.sparse import csr_matrix

    import strategy_opt.executor as ex

    A = hierarchical_matrix(50, 3)
    y = np.random.default_rng(0).normal(size=A.shape[0])
    dense = np.linalg.lstsq(A.toarray(), y, rcond=None)[0]
    old = ex.DENSE_LSTSQ_ENTRIES
    try:
        ex.DENSE_LSTSQ_ENTRIES = 0
        sparse = reconstruct(csr_matrix(A), y, "ls")
    finally:
        ex.DENSE_LSTSQ_ENTRIES = old
    np.testing.assert_allclose(sparse, dense, atol=1e-8)


def test_nnls_and_hybrid_are_nonnegative_and_help_on_sparse_data():
    W = all_range(32)
    A = hierarchical_matrix(32, 2)
    x = np.zeros(32)
    x[[3, 17]] = [40, 10]
    truth = W.matvec(x)
    err = {e: 0.0 for e in ("ls", "nnls", "hybrid")}
    for s in range(20):
        for e in err:
            rel = run(A, x, W, PureDP(0.5), estimator=e, rng=s, intervals=False)
            if e != "ls":
                assert rel.x_hat.min() >= -1e-9
            err[e] += np.sum((rel.answers - truth) ** 2)
    assert err["nnls"] < err["ls"] and err["hybrid"] < err["ls"]


def test_hybrid_equals_direct_nnls_on_workload():
    from scipy.optimize import nnls

    W = prefix(12)
    A = np.eye(12)
    y = np.random.default_rng(4).normal(3, 5, 12)
    got = reconstruct(A, y, "hybrid", W)
    Wm = W.matrix().toarray()
    direct = nnls(Wm, Wm @ np.linalg.lstsq(A, y, rcond=None)[0])[0]
    np.testing.assert_allclose(Wm @ got, Wm @ direct, atol=1e-6)


@pytest.mark.parametrize("scale", [3e4, 1e5, 1e9])
def test_hybrid_keeps_a_query_far_smaller_than_the_others(scale):
    # the last query is `scale` times smaller than the others and alone on its cell: its Gram eigenvalue
    # (1 against ~1e11 at 1e5) fell under the rank cutoff, and hybrid answered it with 0 (true count 1000)
    from scipy.optimize import nnls

    Wm = np.zeros((6, 6))
    Wm[:5, :5] = scale * np.tril(np.ones((5, 5)))
    Wm[5, 5] = 1.0
    y = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 999.86])
    got = reconstruct(np.eye(6), y, "hybrid", from_matrix(Wm))
    direct = nnls(Wm, Wm @ y)[0]
    np.testing.assert_allclose(Wm @ got, Wm @ direct, rtol=1e-7)
    assert got[5] == pytest.approx(999.86, rel=1e-9)


def test_hybrid_with_an_unread_cell_reaches_the_optimum():
    # a cell no query reads left a rounding-level column in the Gram factor; scipy's NNLS took it into its
    # active set at ~1e17 and missed the optimum on 44 of 100 draws (residual up to 4.3x); checked against BVLS
    from scipy.optimize import lsq_linear

    rng = np.random.default_rng(1)
    Wm = rng.integers(-1, 3, size=(14, 10)).astype(float)
    Wm[:, 5] = 0.0
    for _ in range(30):
        y = rng.normal(5, 20, 10)
        got = reconstruct(np.eye(10), y, "hybrid", from_matrix(Wm))
        ref = lsq_linear(Wm, Wm @ y, bounds=(0, np.inf), method="bvls", tol=1e-13).x
        assert got[5] == 0.0 and np.all(got >= 0)
        assert np.linalg.norm(Wm @ got - Wm @ y) <= np.linalg.norm(Wm @ ref - Wm @ y) * (1 + 1e-9) + 1e-9


def _near_singular_factor() -> np.ndarray:
    """The identity on 8 cells with its last row replaced by e_6 + 1e-7 e_7: singular value ~1e-7 (eigenvalue
    ~1e-14 of A^T A, under the error profile's cutoff `EIG_RTOL` = 1e-10), so cell 7 counts as unmeasured."""
    F = np.eye(8)
    F[7] = 0.0
    F[7, 6], F[7, 7] = 1.0, 1e-7
    return F


def test_every_estimator_takes_the_support_checks_rank_cutoff():
    """An outside audit's case: a workload that reads cell 7 only at 1e-5 (accepted by the support check, which
    counts cell 7 as unmeasured). ls reconstructs through the error profile; hybrid's least-squares step used
    lstsq's machine-precision cutoff instead, weighting the 1e-7 direction by 1e7: RMS error 16-60x ls's. Both
    now agree with an independent pseudo-inverse at the same cutoff (singular values below 1e-5 dropped)."""
    from scipy.optimize import nnls

    A = np.kron(_near_singular_factor(), np.eye(4))
    q = np.zeros(8)
    q[0], q[7] = 1.0, 1e-5
    W = from_matrix(np.kron(np.vstack([np.eye(8)[:7], q]), np.eye(4)))
    x = np.random.default_rng(0).poisson(10, 32).astype(float)
    truth = W.matvec(x)
    Wm = W.matrix().toarray()
    pinv = np.linalg.pinv(A, rcond=1e-5)
    err = {"ls": 0.0, "hybrid": 0.0}
    for seed in range(20):
        y = A @ x + np.random.default_rng(seed).laplace(0, 2.0, A.shape[0])
        for e in err:
            rel = run(A, x, W, PureDP(1.0), estimator=e, rng=seed, sampler="simulate", intervals=False)
            err[e] += float(np.sum((rel.answers - truth) ** 2))
        if seed < 3:  # hybrid is NNLS on W x = W A^+ y, with A^+ at the cutoff
            direct = nnls(Wm, Wm @ (pinv @ y))[0]
            np.testing.assert_allclose(Wm @ reconstruct(A, y, "hybrid", W), Wm @ direct, atol=1e-6)
    assert err["hybrid"] < 1.5 * err["ls"]


def test_a_kronecker_strategy_is_inverted_per_factor_with_the_support_checks_cutoff(monkeypatch):
    """Least squares factor by factor (a strategy kept as its factors: monkeypatched limit) and on the flat
    product (plain reconstruct, no profile given) must both equal the independent pinv at the error profile's
    cutoff: with numpy's default cutoffs a 1e-7 direction was amplified 1e7 times (an outside audit: 95%
    intervals covered 1% of the answers that read it)."""
    from strategy_opt import error
    from strategy_opt.error import KroneckerMatrix

    F, G = _near_singular_factor(), np.eye(3) + 0.1 * np.random.default_rng(1).standard_normal((3, 3))
    y = np.random.default_rng(2).standard_normal(24)
    expected = np.linalg.pinv(np.kron(F, G), rcond=1e-5) @ y
    np.testing.assert_allclose(reconstruct(KroneckerMatrix([F, G]), y), expected, rtol=1e-9, atol=1e-9)
    monkeypatch.setattr(error, "FLAT_MAX_NONZEROS", 10)
    assert error.factored(KroneckerMatrix([F, G]))
    np.testing.assert_allclose(reconstruct(KroneckerMatrix([F, G]), y), expected, rtol=1e-9, atol=1e-9)


def test_nnls_on_a_diagonal_strategy_keeps_a_tiny_column_as_the_error_profile_does():
    """Disjoint columns need no rank cutoff (the error profile and the support check invert them exactly), so
    nnls measures a cell scaled by 1e-9 too: argmin_{x >= 0} ||A x - y|| is max(y_i / a_i, 0) cell by cell."""
    a = np.ones(16)
    a[5] = 1e-9
    y = np.random.default_rng(3).normal(0, 1e-8, 16)
    y[5] = 4e-9
    np.testing.assert_allclose(reconstruct(np.diag(a), y, "nnls"), np.clip(y / a, 0, None), rtol=1e-12)


def test_nnls_ignores_rounding_level_directions_of_a_dense_strategy():
    """Cells no query reads, where an optimiser left ~1e-16 instead of 0: NNLS must not use them.

    Independent reference: bounded-variable least squares on the same strategy with
    those entries exactly 0 (the strategy the optimiser meant), whose workload answers
    the reconstruction must match; before the cutoff the error was ~1e-1 at noise 1e-4.
    """
    from scipy.optimize import lsq_linear

    rng = np.random.default_rng(0)
    B = (rng.random((3, 12)) < 0.5).astype(float)
    B[:, [1, 10, 11]] = 0.0
    Wm = rng.integers(0, 3, (10, 3)).astype(float) @ B
    clean = np.vstack([B, rng.random((4, 3)) @ B])
    A = clean.copy()
    A[:, [1, 10, 11]] = rng.normal(0, 1e-16, (A.shape[0], 3))  # rank-level junk under unread cells
    x = rng.poisson(30, 12).astype(float)
    for seed in range(20):
        y = clean @ x + np.random.default_rng(seed).normal(0, 1e-4, clean.shape[0])
        got = reconstruct(A, y, "nnls")
        ref = lsq_linear(clean, y, bounds=(0, np.inf), method="bvls").x
        assert got.min() >= 0
        np.testing.assert_allclose(Wm @ got, Wm @ ref, atol=1e-6)
        assert np.abs(Wm @ got - Wm @ x).max() < 1e-2


def test_run_refuses_unsupported_and_mismatched():
    W = prefix(4)
    A = np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]])
    with pytest.raises(InputError, match="does not support"):
        run(A, np.ones(4), W, PureDP(1.0), rng=0)
    with pytest.raises(InputError, match="data has 3 cells"):
        run(np.eye(4), np.ones(3), W, PureDP(1.0), rng=0)
    # a query far smaller than the others is still checked on its own (not against ||W||_F^2)
    with pytest.raises(InputError, match="0.5 of query 1's squared norm"):
        run(np.array([[1.0, 1.0]]), np.ones(2), from_matrix([[1e10, 1e10], [0, 1.0], [1.0, 0]]), PureDP(1.0), rng=0)


def test_opendp_sampler_error_statistics_match_simulate():
    n = 4000
    W = identity(n)
    x = np.zeros(n)
    A = sp.identity(n, format="csr")
    for privacy in (PureDP(1.0), ApproxDP(1.0, 1e-6)):
        sim = run(A, x, W, privacy, rng=0, intervals=False).answers
        odp = run(A, x, W, privacy, sampler="opendp", intervals=False).answers  # unseeded
        target = privacy.noise_variance(1.0)
        # a sample variance of 4000 Laplace draws has relative sd sqrt((kurtosis - 1) / n) = 0.035
        # (Gaussian: 0.022); 0.2 is 5.7 sd (with 400 draws and 0.35 it failed about 1 run in 500)
        assert np.var(sim) == pytest.approx(target, rel=0.2)
        assert np.var(odp) == pytest.approx(target, rel=0.2)


def test_strategy_object_is_accepted():
    s = so.solve("prefix:16", privacy="pure", method="identity")
    rel = run(s, np.arange(16.0), prefix(16), PureDP(1e7), rng=0)
    np.testing.assert_allclose(rel.answers, np.cumsum(np.arange(16.0)), atol=1e-3)


def test_run_checks_its_arguments_like_solve():
    # workloads as for solve/error_report (SPEC string, matrix); privacy only as an object; counts >= 0
    rel = run(np.eye(4), np.arange(4.0), "prefix:4", PureDP(1e7), rng=0)
    np.testing.assert_allclose(rel.answers, np.cumsum(np.arange(4.0)), atol=1e-3)
    with pytest.raises(InputError, match=r"privacy must be PureDP\(epsilon\) or ApproxDP\(epsilon, delta\), got 'pure'"):
        run(np.eye(4), np.ones(4), prefix(4), "pure", rng=0)
    with pytest.raises(InputError, match="negative counts.*; counts must be >= 0"):
        run(np.eye(4), np.array([1.0, -2.0, 0.0, 1.0]), prefix(4), PureDP(1.0), rng=0)
    with pytest.raises(InputError, match="rng must be a non-negative integer seed or a numpy Generator, got -1"):
        run(np.eye(4), np.ones(4), prefix(4), PureDP(1.0), rng=-1)
    with pytest.raises(InputError, match="dense array of counts"):
        run(np.eye(4), sp.csr_matrix(np.ones(4)), prefix(4), PureDP(1.0), rng=0)


def test_noise_lost_in_float_rounding_is_refused():
    # the audit's case, checked independently: at 1e17 float64 values are 16 apart, so
    # 1e17 + Laplace(1) rounds back to exactly 1e17 nearly always (no privacy at all)
    from strategy_opt.exceptions import PrecisionError
    from strategy_opt.executor import check_noise_resolution, measure

    noisy = 1e17 + np.random.default_rng(0).laplace(0.0, 1.0, 1000)
    assert np.mean(noisy == 1e17) > 0.7
    for value in (1e17, 2.0**62, 1.7e308):
        x = np.full(4, value)
        for privacy in (PureDP(1.0), ApproxDP(1.0, 1e-6)):
            for sampler, rng in (("simulate", 0), ("opendp", None)):
                with pytest.raises(PrecisionError, match="lost in rounding"):
                    measure(np.eye(4), x, privacy, rng=rng, sampler=sampler)
            with pytest.raises(PrecisionError, match="lost in rounding"):
                run(np.eye(4), x, identity(4), privacy, rng=0)
    # the limit, by hand: float64 values at 2^k are 2^(k-52) apart, so under scale 1 counts up to
    # 2^48 (spacing 1/16) are resolved finely enough and 2^49 (spacing 1/8) is not
    check_noise_resolution([2.0**48, 5.0], 1.0)
    with pytest.raises(PrecisionError, match=r"a value reaches 2\^49 = 5\.6295e\+14, where float64 values are 0\.125 apart, too coarse for noise of scale 1 "):
        check_noise_resolution([5.0, 2.0**49], 1.0)
    # the message names the public threshold of the scale, not the data's value (2^49 for 1e300 as for 2^49)
    with pytest.raises(PrecisionError, match=r"a value reaches 2\^49 = 5\.6295e\+14,"):
        check_noise_resolution([5.0, 1e300], 1.0)
    check_noise_resolution([2.0**49], 2.0)  # twice the scale: resolved again
    with pytest.raises(PrecisionError, match=r"a value reaches 2\^50 = 1\.1259e\+15, where float64 values are 0\.25 apart, too coarse for noise of scale 2 "):
        check_noise_resolution([2.0**50], 2.0)
    with pytest.raises(PrecisionError, match="overflow float64"):
        check_noise_resolution([np.inf], 1.0)
    rel = run(np.eye(4), np.full(4, 2.0**30), identity(4), PureDP(1.0), rng=0)  # ordinary large counts still pass
    assert np.all(rel.answers != 2.0**30)


def test_run_refuses_more_answers_than_memory_holds_before_drawing_noise(monkeypatch):
    """all-range:100000 has 5e9 queries: refused up front (numpy's MemoryError came after the noise was drawn)."""
    import strategy_opt.executor as ex

    drawn = []
    monkeypatch.setattr(ex, "resolve_sampler", lambda *a: drawn.append(a) or "simulate")
    with pytest.raises(InputError, match="answering the 5,000,050,000 queries"):
        run(sp.eye(100000, format="csr"), np.ones(100000), "all-range:100000", PureDP(1.0), rng=1)
    assert not drawn


@pytest.mark.parametrize("dense_max_n, rtol", [(None, 1e-9), (100, 1e-7)])
def test_sparse_nnls_reaches_the_active_set_optimum(monkeypatch, dense_max_n, rtol):
    """Both NNLS paths against scipy's active-set NNLS on the full system: the reduced n x n factor (up to
    NNLS_DENSE_MAX_N cells) and L-BFGS-B beyond it (forced here at 512 cells). Measured at 256 x 256 cells
    (BeijingTaxiE, eps = 1): the trust-region lsq_linear L-BFGS-B replaced stopped at 200 iterations with
    RMS 1317 against least squares' 65.5."""
    import strategy_opt.executor as ex
    from scipy.optimize import nnls

    if dense_max_n is not None:
        monkeypatch.setattr(ex, "NNLS_DENSE_MAX_N", dense_max_n)
    n = 512
    A = hierarchical_matrix(n, 2)
    rng = np.random.default_rng(0)
    x = np.maximum(rng.normal(2, 3, n), 0)
    y = A @ x + rng.laplace(0, 20, A.shape[0])
    got = reconstruct(A, y, "nnls")
    direct = nnls(A.toarray(), y, maxiter=50 * n)[0]
    objective = lambda z: np.sum((A @ z - y) ** 2)  # noqa: E731
    assert got.min() >= 0
    assert objective(got) == pytest.approx(objective(direct), rel=rtol)  # the reduced path before (200 iterations, LSMR tolerance auto): +1.2e-3
    # rank-deficient (a repeated column): the n x n factor keeps only the row space, the objective still matches
    B = sp.hstack([A, A[:, :1]], format="csr")
    got = reconstruct(B, y, "nnls")
    direct = nnls(B.toarray(), y, maxiter=50 * n)[0]
    assert np.sum((B @ got - y) ** 2) == pytest.approx(np.sum((B @ direct - y) ** 2), rel=rtol)


@pytest.mark.parametrize("scale", [1.0, 1e7])
def test_sparse_nnls_reaches_the_optimum_on_large_counts(monkeypatch, scale):
    """The L-BFGS-B path on counts of 1e5 (DPBench scale, 8192 cells: SEARCHLOGS + INCOME): dividing the
    objective by ||b||^2 (~1e14 here) left it far below 1, and L-BFGS-B stopped after one step at the clipped
    least-squares start (audit: objective 1.59e9 against the optimum's 4.83e6, prefix MSE 2.0e8 against 340).
    At 1e12 per cell (scale 1e7) the objective at 1 still left a gradient of 1e-12, L-BFGS-B's absolute
    gtol: the cells are now divided by the largest count too (before: 1.54x the optimum on 4200 cells)."""
    import strategy_opt.executor as ex
    from scipy.optimize import nnls

    monkeypatch.setattr(ex, "NNLS_DENSE_MAX_N", 100)
    n = 512
    A = hierarchical_matrix(n, 2)
    rng = np.random.default_rng(1)
    x = scale * rng.choice([0.0, 1e5, 3e5], size=n, p=[0.6, 0.3, 0.1])
    y = A @ x + rng.laplace(0, 10 * scale, A.shape[0])
    got = reconstruct(A, y, "nnls")
    direct = nnls(A.toarray(), y, maxiter=50 * n)[0]
    objective = lambda z: np.sum((A @ z - y) ** 2)  # noqa: E731
    assert got.min() >= 0
    assert objective(got) == pytest.approx(objective(direct), rel=1e-7)
    start = np.clip(np.linalg.lstsq(A.toarray(), y, rcond=None)[0], 0, None)
    assert objective(start) > 1.5 * objective(direct)  # the start is far from the optimum: the run must move


@pytest.mark.parametrize("spec, scale", [("prefix:300", 1.0), ("prefix:300", 1e8), ("random-range:300:200:3", 1.0), ("all-range:300", 1.0), ("prefix:12*prefix:25", 1.0)])
def test_hybrid_past_the_dense_nnls_limit_reaches_its_optimum(monkeypatch, spec, scale):
    """Past NNLS_DENSE_MAX_N cells (forced to 100 here) hybrid's second step is L-BFGS-B on
    ||W (x - x_ls)||^2 through the workload's products (prefix, random ranges, a Kronecker product) or its dense Gram matrix
    (all ranges: m = 45150 > n^2 / 8), never a factor of W^T W; against scipy's active-set NNLS on a factor
    of W^T W from numpy's eigh (||W d||^2 = ||R d||^2).
    Before: NNLS on an n x n factor by the mis-scaled L-BFGS-B (4200 cells: 133 s, 16x the optimum)."""
    import strategy_opt.executor as ex
    from scipy.optimize import nnls
    from strategy_opt.spec import parse_spec

    monkeypatch.setattr(ex, "NNLS_DENSE_MAX_N", 100)
    W = parse_spec(spec)
    n = W.n
    A = hierarchical_matrix(n, 2)
    rng = np.random.default_rng(2)
    x = scale * rng.choice([0.0, 1e4, 5e4], size=n, p=[0.7, 0.2, 0.1])  # scale 1e8: 1e12 per cell
    y = A @ x + rng.laplace(0, 30 * scale, A.shape[0])
    x_ls = np.linalg.lstsq(A.toarray(), y, rcond=None)[0]
    got = reconstruct(A, y, "hybrid", W)
    Wm = W.matrix().toarray()
    lam, V = np.linalg.eigh(Wm.T @ Wm)
    kept = lam > 1e-9 * lam.max()  # random ranges leave cells unread: W^T W is singular
    R = np.sqrt(lam[kept])[:, None] * V[:, kept].T
    direct = nnls(R, R @ x_ls, maxiter=50 * n)[0]
    objective = lambda z: np.sum((Wm @ (z - x_ls)) ** 2)  # noqa: E731
    assert got.min() >= 0
    assert objective(got) == pytest.approx(objective(direct), rel=1e-6)


def test_hybrid_beyond_the_dense_limit_is_refused_naming_the_estimators_that_run():
    from strategy_opt.error import KroneckerMatrix
    from strategy_opt.spec import parse_spec

    W = parse_spec("prefix:150*prefix:150")  # 22500 cells
    A = KroneckerMatrix([sp.identity(150, format="csr"), sp.identity(150, format="csr")])
    with pytest.raises(InputError, match=r"hybrid estimator runs up to 20000 cells .*this workload has 22500; use.*estimator='ls' \(--estimator ls\) or estimator='nnls' \(--estimator nnls\)$"):
        run(A, np.ones(22500), W, PureDP(1.0), estimator="hybrid", rng=0)
    assert run(A, np.ones(22500), W, PureDP(1e6), estimator="nnls", rng=0).answers.shape == (22500,)


@pytest.mark.parametrize("privacy", [PureDP(0.5), ApproxDP(1.0, 1e-6)], ids=["pure", "approx"])
def test_kronecker_strategies_beyond_the_dense_limit_get_intervals(monkeypatch, privacy):
    """Past the dense n x n limit a product strategy on a product workload is checked and analysed factor by factor:
    the intervals equal those from the dense error profile, query by query (rows in the workload's order)."""
    from strategy_opt import executor
    from strategy_opt.error import KroneckerMatrix
    from strategy_opt.workload import kronecker, union

    A = KroneckerMatrix([hierarchical_matrix(4, 2).toarray(), np.vstack([np.eye(5), np.ones((1, 5))])])
    W = union(kronecker(prefix(4), all_range(5)), kronecker(identity(4), total(5)), weights=[1.0, 2.0])
    x = np.arange(20.0)
    dense = run(A, x, W, privacy, rng=7)  # 20 cells: the dense route
    monkeypatch.setattr(executor, "MAX_DENSE_N", 10)
    factored = run(A, x, W, privacy, rng=7)
    np.testing.assert_allclose(factored.answers, dense.answers, rtol=1e-10)
    np.testing.assert_allclose(factored.upper - factored.answers, dense.upper - dense.answers, rtol=1e-10)
    # and against the formula itself: half-width z sd_i, sd_i^2 = Var(noise) w_i (A^T A)^-1 w_i^T
    Af, Wm = A.tocsr().toarray(), W.matrix().toarray()
    sd = np.sqrt(privacy.noise_variance(executor.sensitivity(Af, privacy.p)) * np.einsum("ij,jk,ik->i", Wm, np.linalg.inv(Af.T @ Af), Wm))
    z = 1.959963984540054 if privacy.p == 2 else np.log(20) / np.sqrt(2)
    np.testing.assert_allclose(factored.upper - factored.answers, z * sd, rtol=1e-9)
    bad = KroneckerMatrix([np.eye(4)[:3], np.eye(5)])  # the first factor leaves cell 3 unmeasured
    with pytest.raises(InputError, match="does not support the workload"):
        run(bad, x, W, privacy, rng=7)


def _random_strategies_and_workloads():
    """Pairs of a flat strategy and a workload on 24 cells (4 x 6), supported or not, drawn at random."""
    from strategy_opt.workload import kronecker, union

    rng = np.random.default_rng(11)
    workloads = [prefix(24), kronecker(total(4), identity(6)), kronecker(prefix(4), total(6)),
                 union(kronecker(total(4), all_range(6)), kronecker(identity(4), total(6)))]
    for W in workloads:
        Wm = W.matrix().toarray()
        for k in (1, 3, 6, 23, 24):
            B = rng.standard_normal((k, Wm.shape[0]))
            yield W, B @ Wm  # rows in W's row space: supported exactly when k reaches rank(W)
            yield W, np.vstack([B @ Wm, rng.standard_normal((2, 24))])  # two extra directions: never hurts
            C = rng.standard_normal((k, 24))
            C[:, rng.integers(24)] = 0.0
            yield W, sp.csr_matrix(C)  # random rows with a gap


def test_support_probes_agree_with_the_dense_support_check():
    """The randomised test (for domains past the dense limit) gives the dense test's verdict on every pair."""
    from strategy_opt.error import ErrorProfile
    from strategy_opt.executor import probe_support

    seen = set()
    for W, A in _random_strategies_and_workloads():
        gap = ErrorProfile(A).support_gap(W.gram(), W)
        if gap is None:
            assert probe_support(A, W) is True
        else:
            with pytest.raises(InputError, match="does not support the workload"):
                probe_support(A, W)
        seen.add(gap is None)
    assert seen == {True, False}


def test_run_past_the_dense_limit_refuses_an_unsupported_flat_strategy(monkeypatch):
    """A flat (not Kronecker) strategy on a product domain past the dense limit: the random probes refuse one that
    measures only the column sums, and answer through one that supports the workload, equal to the dense route."""
    from strategy_opt import executor
    from strategy_opt.workload import kronecker

    W = kronecker(identity(16), identity(16))
    x = np.random.default_rng(0).integers(0, 9, 256).astype(float)
    sums = sp.kron(sp.csr_matrix(np.ones((1, 16))), sp.identity(16)).tocsr()  # 16 rows for 256 queried cells
    good = sp.vstack([sums, sp.identity(256)]).tocsr()
    dense = run(good, x, W, PureDP(1.0), rng=3)
    monkeypatch.setattr(executor, "MAX_DENSE_N", 100)
    with pytest.raises(InputError, match="does not support the workload"):
        run(sums, x, W, PureDP(1.0), rng=3)
    with pytest.raises(InputError, match="does not support the workload"):
        run(sums, x, kronecker(prefix(16), prefix(16)), PureDP(1.0), rng=3)
    far = run(good, x, W, PureDP(1.0), rng=3)
    np.testing.assert_allclose(far.answers, dense.answers, rtol=1e-8, atol=1e-8)
    assert far.lower is None
    assert run(sums, x, kronecker(total(16), identity(16)), PureDP(1.0), rng=3).answers.shape == (16,)  # what it does support


def test_support_probes_see_a_small_unsupported_query():
    """Six large queries and two small ones the strategy measures only as their sum: a random combination of the
    queries hides the small ones (share ~1e-8), the null-space probe does not (0.5 of each), as the dense check."""
    from strategy_opt.error import ErrorProfile
    from strategy_opt.executor import probe_support

    W = from_matrix(np.diag([1e4] * 6 + [1.0, 1.0]))
    A = np.vstack([np.eye(8)[:6], [0, 0, 0, 0, 0, 0, 1, 1]])
    assert "0.5 of query" in ErrorProfile(A).support_gap(W.gram(), W)
    for seed in range(10):
        with pytest.raises(InputError, match=r"of query [67]'s squared norm"):
            probe_support(A, W, seed=seed)


def _pairs_and_one_straddling_range(n: int, m: int, straddle: int):
    """A strategy measuring only the sums of cell pairs (2k, 2k+1), m ranges aligned to the pairs, and a last
    range [0, straddle] (straddle even) that needs cell ``straddle`` alone: share 0.5 / (straddle + 1) outside."""
    rng = np.random.default_rng(0)
    A = sp.kron(sp.identity(n // 2), sp.csr_matrix(np.ones((1, 2)))).tocsr()
    ab = np.sort(rng.integers(0, n // 2, (m, 2)), axis=1)
    starts, ends = np.r_[2 * ab[:, 0], 0], np.r_[2 * ab[:, 1] + 1, straddle]
    rows = np.repeat(np.arange(m + 1), ends - starts + 1)
    cols = np.concatenate([np.arange(a, b + 1) for a, b in zip(starts, ends)])
    return A, from_matrix(sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(m + 1, n)))


def test_support_probes_see_one_bad_query_among_many_and_a_large_null_space():
    """An outside audit's case: supported ranges and one that straddles a measured pair (share 3.1e-5 of its norm
    outside the row space), on a strategy with a null space of n/2 = 8192 dimensions. Dividing the probe by its own
    norm diluted that share by the null space's size (to ~4e-9, under the 1e-8 cutoff: accepted, and the answer
    wrong by half a cell's count); the estimate does not depend on it."""
    from strategy_opt.error import ErrorProfile
    from strategy_opt.executor import probe_support

    A, W = _pairs_and_one_straddling_range(64, 30, 20)  # the share, checked densely on a small twin
    assert ErrorProfile(A).unsupported_query(W) == (30, pytest.approx(0.5 / 21, rel=1e-9))
    A, W = _pairs_and_one_straddling_range(16384, 300, 16000)
    for seed in range(5):
        with pytest.raises(InputError, match=r"of query 300's squared norm"):
            probe_support(A, W, seed=seed)
    A_ok, W_ok = _pairs_and_one_straddling_range(16384, 300, 16001)  # [0, 16001] ends on a pair: supported
    assert probe_support(A_ok, W_ok) is True


def test_the_support_probe_estimates_the_dense_share_without_bias():
    """The refused query's estimate in the message, over 200 seeds, averages the dense test's share
    (chi-square with one degree of freedom: the mean of 200 has a relative standard deviation of 0.1)."""
    import re

    from strategy_opt.executor import probe_support

    A, W = _pairs_and_one_straddling_range(256, 40, 100)
    estimates = []
    for seed in range(200):
        with pytest.raises(InputError) as info:
            probe_support(A, W, probes=1, seed=seed)
        estimates.append(float(re.search(r"about (\S+) of query 40's", str(info.value)).group(1)))
    assert np.mean(estimates) == pytest.approx(0.5 / 101, rel=0.35)


def test_a_huge_epsilon_is_named_as_the_cause():
    """Noise of scale 1e-300 cannot survive rounding on any count: the message blames epsilon, not the data."""
    from strategy_opt.exceptions import PrecisionError
    from strategy_opt.executor import check_noise_resolution

    with pytest.raises(PrecisionError, match=r"noise of scale 1e-300 is finer .* use a smaller epsilon$"):
        check_noise_resolution([0.0, 1.0, 7.0], 1e-300)
    with pytest.raises(PrecisionError, match="rescale the data"):  # a large count at ordinary noise: the data's scale
        check_noise_resolution([1e17], 1.0)


def test_an_undecided_support_test_past_the_dense_limit_is_refused_unless_forced(monkeypatch, tmp_path, capsys):
    # a rank-deficient bidiagonal strategy with every column measured: LSMR cannot decide support, and run answered
    # identity:30000 with exit 0 and a warning (squared error 30000 at epsilon 1e6, half of ||x||^2). Here on 300
    # cells, with the probe forced (dense limit 100) and its LSMR cut at 5 iterations, where 30000 cells needed 5000
    import scipy.sparse as sp

    import strategy_opt.executor as ex
    from strategy_opt.cli import main
    from strategy_opt.exceptions import InputError
    from strategy_opt.privacy import PureDP

    monkeypatch.setattr(ex, "MAX_DENSE_N", 100)
    real_limit = ex.SUPPORT_PROBE_MAX_ITER
    monkeypatch.setattr(ex, "SUPPORT_PROBE_MAX_ITER", 5)
    n = 300
    B = (sp.identity(n) + sp.eye(n, k=1)).tolil()
    B[n - 1, n - 1] = 0
    B = B.tocsr()
    x = 1 + (-1.0) ** np.arange(n)
    assert np.linalg.matrix_rank(B.toarray()) == n - 1 and B.getnnz(axis=0).min() > 0
    with pytest.raises(InputError, match="whether the strategy supports the workload could not be decided.*pass --force"):
        ex.run(B, x, "identity:300", PureDP(1e6), rng=1)
    forced = ex.run(B, x, "identity:300", PureDP(1e6), rng=1, allow_undecided_support=True)
    assert np.sum((forced.answers - x) ** 2) > 10  # what --force accepts: wrong answers, as the refusal says
    sp.save_npz(tmp_path / "b.npz", B)
    np.save(tmp_path / "x.npy", x)
    args = ["run", str(tmp_path / "b.npz"), "--data", str(tmp_path / "x.npy"), "--workload", "identity:300", "--epsilon", "1", "--seed", "1", "-q", "--out"]
    assert main([*args, str(tmp_path / "a.npy")]) == 2 and not (tmp_path / "a.npy").exists()
    assert "could not be decided" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "a.npy"), "--force"]) == 0
    # with the real iteration limit, a supporting, well-conditioned strategy is decided and runs
    monkeypatch.setattr(ex, "SUPPORT_PROBE_MAX_ITER", real_limit)
    good = ex.run(hierarchical_matrix(n, 2), x, "identity:300", PureDP(1e6), rng=1)
    np.testing.assert_allclose(good.answers, x, atol=1e-3)


@pytest.mark.parametrize("privacy", [ApproxDP(1.0, 1e-6), PureDP(0.5)])
def test_run_keeps_a_small_kronecker_strategy_as_its_factors(privacy):
    """An outside audit: `run` multiplied a Kronecker strategy out below the flat limit and formed its Gram as a
    sparse product (prefix:64*all-range:64: 72 s, against 2 s per factor). Per factor, the answers and intervals
    equal those through the flat matrix with the same noise."""
    from strategy_opt.error import KroneckerMatrix
    from strategy_opt.problem import Problem
    from strategy_opt.programs.auto import per_attribute_optimum
    from strategy_opt.workload import kronecker

    W = kronecker(prefix(8), all_range(6))
    s = per_attribute_optimum(Problem(W, privacy="approx"))
    assert isinstance(s.matrix, KroneckerMatrix)
    x = np.random.default_rng(1).poisson(3, 48).astype(float)
    mine, flat = run(s, x, W, privacy, rng=3), run(s.matrix.tocsr(), x, W, privacy, rng=3)
    assert mine.noise_scale == pytest.approx(flat.noise_scale, rel=1e-12)
    np.testing.assert_allclose(mine.answers, flat.answers, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mine.upper - mine.lower, flat.upper - flat.lower, rtol=1e-9)
    nn = run(s, x, W, privacy, rng=3, estimator="nnls")  # the other estimators still take the flat matrix
    assert nn.answers.shape == (W.m,) and np.all(nn.x_hat >= 0)


def test_gram_of_a_dense_ish_sparse_strategy_by_dense_row_blocks(monkeypatch):
    """`_gram_of` multiplies a sparse A with dense rows as dense blocks of rows (several blocks here); the result
    equals the dense product."""
    import strategy_opt.error as error

    rng = np.random.default_rng(0)
    D = rng.standard_normal((50, 30)) * (rng.random((50, 30)) < 0.9)
    monkeypatch.setattr(error, "GRAM_CHUNK_ENTRIES", 7 * 30)  # 7 rows a block: 8 blocks
    np.testing.assert_allclose(error._gram_of(sp.csr_matrix(D)), D.T @ D, rtol=1e-12, atol=1e-12)
    S = sp.random(400, 30, density=0.01, format="csr", random_state=1)  # sparse rows: the sparse product
    np.testing.assert_allclose(error._gram_of(S), (S.T @ S).toarray(), rtol=1e-12, atol=1e-12)
