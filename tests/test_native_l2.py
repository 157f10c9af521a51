"""Native certified solver for the total-error (epsilon, delta) program (strategy_opt.native_l2)."""

import logging

import numpy as np
import pytest

from strategy_opt.certificates import dual_bound, gram_factor
from strategy_opt.error import sensitivity, supports, unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.native_l2 import cell_classes, solve_total_l2
from strategy_opt.workload import all_range, from_matrix, identity, prefix, random_range

# Issue 3 reference values (unit normalisation, total objective, certified to < 1e-7).
REFERENCES = [
    (all_range, 8, 80.464265),
    (all_range, 32, 2143.53671),
    (all_range, 64, 11024.3815),
    (all_range, 256, 276929.309),
    (prefix, 256, 1631.4030),
]


@pytest.mark.parametrize("make, n, ref", REFERENCES)
def test_reference_values(make, n, ref):
    W = make(n)
    res = solve_total_l2(W.gram(), factor=gram_factor(eigh=W.gram_eigh()), tol=1e-8)
    assert res.status == "optimal"
    assert res.gap <= 1e-8
    # The reference is printed to ~9 digits: both bounds bracket it at that precision.
    assert res.primal == pytest.approx(ref, rel=1e-6)
    assert res.dual <= ref * (1 + 1e-7) and res.primal >= ref * (1 - 1e-7)
    # The returned strategy has exactly the certified error and unit sensitivity.
    assert unit_error(res.A, W, 2) == pytest.approx(res.primal, rel=1e-10)
    assert sensitivity(res.A, 2) == pytest.approx(1.0, rel=1e-12)
    # The dual weights reproduce the bound.
    assert dual_bound(W.gram(), res.u) == pytest.approx(res.dual, rel=1e-10)


@pytest.mark.slow
def test_reference_all_range_1024():
    W = all_range(1024)
    res = solve_total_l2(W.gram(), factor=gram_factor(eigh=W.gram_eigh()), tol=1e-8)
    assert res.primal == pytest.approx(6484329.00, rel=1e-6)
    assert res.dual == pytest.approx(6484329.00, rel=1e-6)
    assert res.gap <= 1e-6


def test_factor_from_closed_form_and_from_eigh_agree():
    W = all_range(48)
    a = solve_total_l2(W.gram(), factor=gram_factor(eigh=W.gram_eigh()), tol=1e-10)
    b = solve_total_l2(W.gram(), tol=1e-10)
    assert a.primal == pytest.approx(b.primal, rel=1e-9)


def _clarabel_optimum(G):
    """Independent optimum: the SDP through cvxpy + Clarabel."""
    import cvxpy as cp

    n = G.shape[0]
    L = gram_factor(G)
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(L, X)), [cp.diag(X) <= 1])
    prob.solve(solver="CLARABEL")
    return prob.value


@pytest.mark.parametrize(
    "W",
    [
        from_matrix(np.random.default_rng(0).random((3, 10))),  # rank 3: sparse optimal support
        from_matrix(np.random.default_rng(1).integers(-1, 2, (6, 12)).astype(float)),
        random_range(12, 5, 2),  # duplicate and zero columns
        from_matrix(np.random.default_rng(2).normal(size=(20, 9))),
    ],
)
def test_general_workloads_match_an_sdp_solver(W):
    res = solve_total_l2(W.gram(), tol=1e-9)
    assert res.status == "optimal"
    ref = _clarabel_optimum(W.gram())
    assert res.primal == pytest.approx(ref, rel=1e-6)
    assert res.dual <= ref * (1 + 1e-7)
    assert supports(res.A, W)
    assert unit_error(res.A, W, 2) == pytest.approx(res.primal, rel=1e-9)


@pytest.mark.parametrize("m", [5, 20])
def test_few_queries_sparse_support_converges(m):
    # r = m << n: the optimal weights live on at most m(m+1)/2 cells; the active-set Newton
    # phase certifies them in a few dozen iterations (the multiplicative update alone took
    # thousands on (5, 1024)).
    W = from_matrix(np.random.default_rng(m).random((m, 200)))
    res = solve_total_l2(W.gram(), tol=1e-8, max_iters=200)
    assert res.status == "optimal"
    assert np.count_nonzero(res.u > 1e-9) <= m * (m + 1) // 2
    assert unit_error(res.A, W, 2) == pytest.approx(res.primal, rel=1e-9)
    assert dual_bound(W.gram(), res.u) == pytest.approx(res.dual, rel=1e-9)


def test_duplicate_and_zero_columns_are_merged():
    rng = np.random.default_rng(5)
    core = rng.random((4, 5))
    # cells: 0 zero, 1-2 copies of core col 0, 3 core col 1, 4 zero, 5-7 core cols 2-4, 8 copy of col 3
    M = np.c_[np.zeros(4), core[:, 0], core[:, 0], core[:, 1], np.zeros(4), core[:, 2:], core[:, 3]]
    reps, cls = cell_classes(M.T @ M)
    assert len(reps) == 5
    assert cls[0] == cls[4] == -1 and cls[1] == cls[2] and cls[6] == cls[8]
    full = solve_total_l2(M.T @ M, tol=1e-10)
    small = solve_total_l2(core.T @ core, tol=1e-10)
    # Minimized workloads have the same optimum (Li 2013, Prop. 4.1).
    assert full.cells == 5
    assert full.primal == pytest.approx(small.primal, rel=1e-8)
    W = from_matrix(M)
    assert supports(full.A, W)
    assert unit_error(full.A, W, 2) == pytest.approx(full.primal, rel=1e-9)


def test_identity_and_total_are_solved_at_once():
    res = solve_total_l2(identity(10).gram())
    assert res.primal == pytest.approx(10.0) and res.iterations == 1
    res = solve_total_l2(np.ones((6, 6)))  # the total query: optimum 1 (A = [1 ... 1])
    assert res.primal == pytest.approx(1.0, rel=1e-9)


def test_budget_returns_a_certified_strategy():
    W = prefix(64)
    res = solve_total_l2(W.gram(), max_iters=2, tol=1e-12)
    assert res.status == "budget" and res.iterations == 2
    assert 0 < res.gap < 0.1
    assert unit_error(res.A, W, 2) == pytest.approx(res.primal, rel=1e-9)
    assert res.dual <= 282.2014195 <= res.primal  # prefix:64 optimum (Clarabel: 282.20141953)
    res = solve_total_l2(W.gram(), time_limit=0.0, tol=1e-12)
    assert res.status == "budget" and res.iterations == 1


def test_progress_is_logged(caplog):
    logger = logging.getLogger("strategy_opt")
    logger.addHandler(caplog.handler)  # the CLI may have stopped propagation to the root logger
    try:
        with caplog.at_level(logging.INFO, logger="strategy_opt"):
            solve_total_l2(prefix(32).gram(), log_every=0.0)
    finally:
        logger.removeHandler(caplog.handler)
    lines = [r.getMessage() for r in caplog.records]
    assert any("iteration 1 primal" in line and "gap" in line for line in lines)
    assert "optimal after" in lines[-1]


@pytest.mark.parametrize("G", [np.zeros((3, 3)), np.ones((2, 3)), np.array([[1.0, np.inf], [np.inf, 1.0]])])
def test_bad_gram_is_refused(G):
    with pytest.raises(InputError):
        solve_total_l2(G)
