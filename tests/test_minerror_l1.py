"""MINERROR under epsilon-DP: Program 3.4.1 by convex iteration (Li 2013, Sec. 3.4.1)."""

import numpy as np
import pytest

from strategy_opt.api import solve
from strategy_opt.error import unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.programs.minerror_l1 import l1_error
from strategy_opt.spec import parse_spec
from strategy_opt.workload import all_range, from_matrix, prefix, random_range
from oracles import e1_from_gram


def test_l1_error_matches_an_independent_computation():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((7, 5))
    G = all_range(5).gram()
    assert l1_error(A, G) <= e1_from_gram(A, G) * (1 + 1e-9)  # completion never hurts
    full = np.vstack([A, np.diag(np.abs(A).sum(axis=0).max() - np.abs(A).sum(axis=0))])
    assert l1_error(A, G) == pytest.approx(e1_from_gram(full, G), rel=1e-8)
    blocks = np.array([[1.0, 1, 0, 0, 0], [0, 0, 1, 1, 1]])  # complete columns, but rank 2
    assert l1_error(blocks, G) == np.inf


@pytest.mark.parametrize("W", [prefix(8), random_range(6, 8, seed=3)], ids=lambda w: w.spec)
def test_no_worse_than_svd_approx_l2_route_and_identity(W):
    s = solve(W, privacy="pure", method="minerror-l1", iterations=4)
    E = s.meta["unit_total_squared_error"]
    G = W.gram()
    assert E == pytest.approx(e1_from_gram(s.dense(), G), rel=1e-8)
    assert E <= np.trace(G) * (1 + 1e-9)
    assert E <= solve(W, privacy="pure", method="svd-approx").meta["unit_total_squared_error"] * (1 + 1e-9)
    l2 = solve(W, privacy="approx", method="minerror-l2").matrix
    assert E <= unit_error(l2, W, 1) * (1 + 1e-9)
    assert s.meta["lower_bound_kind"] == "l2-optimum" and s.meta["lower_bound"] <= E
    history = [h for run in s.meta["history"].values() for h in run]
    assert history and {"iteration", "rank_residual", "objective", "unit_error"} <= set(history[0])


def test_iteration_improves_a_poor_start():
    """From the L2 route (E_1 83.9 on prefix:8) the rank-penalised rounds reach strictly better strategies."""
    s = solve(prefix(8), privacy="pure", method="minerror-l1", iterations=3)
    errors = [h["unit_error"] for h in s.meta["history"]["l2-route"] if h["unit_error"] is not None]
    assert min(errors) < 0.9 * s.meta["candidate_errors"]["l2-route"]
    assert s.meta["unit_total_squared_error"] <= min(s.meta["candidate_errors"].values()) * (1 + 1e-9)


def test_refuses_large_domains_and_bad_options():
    with pytest.raises(InputError, match="exceeds"):
        solve("prefix:64", privacy="pure", method="minerror-l1")
    with pytest.raises(InputError, match="rows"):
        solve("prefix:6", privacy="pure", method="minerror-l1", rows=2)
    with pytest.raises(InputError, match="memory"):  # refused before the SDP is built (Clarabel: ~2 (rows + n)^4 bytes)
        solve("prefix:6", privacy="pure", method="minerror-l1", rows=100_000)


def test_no_worse_than_the_p_identity_method():
    W = prefix(12)
    s = solve(W, privacy="pure", method="minerror-l1", iterations=2)
    pid = solve(W, privacy="pure", method="p-identity").meta["unit_total_squared_error"]
    assert s.meta["unit_total_squared_error"] <= pid * (1 + 1e-9)


def test_equal_start_matrices_are_iterated_once():
    # on all ranges of 8 cells p-identity's optimum is the identity itself: one iteration run, not two
    s = solve("all-range:8", privacy="pure", method="minerror-l1", iterations=2)
    errors = s.meta["candidate_errors"]
    assert errors["p-identity"] == errors["identity"] == 120.0  # trace(G) of all ranges on 8 cells
    assert len({"identity", "p-identity"} & set(s.meta["history"])) == 1


def test_a_failing_sdp_round_keeps_the_best_strategy_seen(monkeypatch):
    """A solver failure ends that start's iteration; the best strategy seen is still returned."""
    import cvxpy as cp

    calls = {"n": 0}
    solve_sdp = cp.Problem.solve

    def flaky(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] % 2 == 0:  # every second round fails
            raise cp.error.SolverError("injected failure")
        return solve_sdp(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "solve", flaky)
    W = prefix(6)
    s = solve(W, privacy="pure", method="minerror-l1", iterations=5)
    E = s.meta["unit_total_squared_error"]
    assert E == pytest.approx(e1_from_gram(s.dense(), W.gram()), rel=1e-8)
    assert E <= min(s.meta["candidate_errors"].values()) * (1 + 1e-9)
    assert set(s.meta["iteration_statuses"].values()) == {"solver-failed"}
    # the result is a start or an iterate before a failed round: its status says which, not that the method failed
    assert s.meta["solver_status"] == ("start-kept" if not s.meta["winner"].startswith("iteration from ") else "best-of-iterates")
    assert all(run[-1].get("solver_failed") for run in s.meta["history"].values())


def test_duplicate_columns_start_from_the_merged_cells():
    """Prefix sums over 6 pairs of equal cells: the identity on merged cells, kron(I_6, [1 1]), has E_1 = 21."""
    W = from_matrix(np.kron(np.tril(np.ones((6, 6))), np.ones((1, 2))))
    merged_identity = np.kron(np.eye(6), np.ones((1, 2)))
    assert e1_from_gram(merged_identity, W.gram()) == pytest.approx(21.0)
    s = solve(W, privacy="pure", method="minerror-l1", iterations=2)
    assert s.meta["unit_total_squared_error"] <= 21.0 * (1 + 1e-9)
    assert s.meta["candidate_errors"]["p-identity/merged-cells"] == pytest.approx(21.0)
    if s.meta["winner"].startswith("iteration from "):
        assert s.meta["solver_status"] == s.meta["iteration_statuses"][s.meta["winner"].removeprefix("iteration from ")]
    else:
        assert s.meta["solver_status"] == "start-kept"


def test_a_strategy_meeting_the_lower_bound_is_reported_optimal():
    """total:3: the row of ones answers the one query with E_1 = 1, the (eps, delta) optimum; the iteration stalls there."""
    s = solve("total:3", privacy="pure", method="minerror-l1")
    assert s.meta["unit_total_squared_error"] == pytest.approx(1.0, rel=1e-9)
    assert s.meta["lower_bound"] == pytest.approx(1.0, rel=1e-6)
    assert s.meta["solver_status"] == "optimal" and "stalled" in s.meta["iteration_statuses"].values()


def test_the_p_identity_methods_marginal_template_is_a_start():
    """marginals:3x5:1: every flat start (and the iteration from it) stayed at the identity's 30 while the
    p-identity method's weighted-marginals template gives 27.264; that method's strategy is now a candidate.
    Independent value: the best stack [w M_rows; (1 - w) M_cols] (every column sums to 1), by a scalar search."""
    from scipy.optimize import minimize_scalar

    W = parse_spec("marginals:3x5:1")
    G = W.gram()
    rows, cols = np.kron(np.eye(3), np.ones((1, 5))), np.kron(np.ones((1, 3)), np.eye(5))

    def e1(w):
        A = np.vstack([w * rows, (1 - w) * cols])
        return np.abs(A).sum(0).max() ** 2 * np.trace(G @ np.linalg.pinv(A.T @ A))

    best = minimize_scalar(e1, bounds=(0.01, 0.99), method="bounded", options={"xatol": 1e-10}).fun
    assert best == pytest.approx(27.264, abs=1e-3)
    s = solve(W, privacy="pure", method="minerror-l1", iterations=1)
    assert s.meta["unit_total_squared_error"] <= best * (1 + 1e-6)
    assert "p-identity/method" in s.meta["candidate_errors"]


def test_the_l2_route_starts_from_both_cholesky_orders():
    # a rank-2 workload over 6 cells: the iteration from the L2 route's factor in cell order ends at 56.71
    # (the svd-approx start wins), from the factor in reversed order at 48.88; both factors have the L2
    # optimum's Gram, so the L2 error is the same and only the L1 norms differ
    from strategy_opt.programs.minerror_l1 import _candidates

    rng = np.random.default_rng(1)
    rng.normal(size=(10, 2))
    W = rng.normal(size=(10, 2)) @ rng.normal(size=(2, 6))
    cands, _, _ = _candidates(from_matrix(W), W.T @ W, 6, 5.0)
    A, B = cands["l2-route"], cands["l2-route/reversed"]
    np.testing.assert_allclose(B.T @ B, A.T @ A, atol=1e-9 * np.abs(A.T @ A).max())
    s = solve(from_matrix(W), privacy="pure", method="minerror-l1")
    assert s.meta["unit_total_squared_error"] == pytest.approx(e1_from_gram(s.dense(), W.T @ W), rel=1e-9)
    assert s.meta["unit_total_squared_error"] < 50.0
