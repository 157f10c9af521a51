"""Program 5.1.1 (optimal query weighting): native interior point vs closed forms, cvxpy and the notes."""

import logging
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategy_opt.exceptions import InputError
from strategy_opt.solvers import SolverProfile, load_profile
from strategy_opt.weighting import dual_value, solve_weighting, weights_from_dual
from strategy_opt.workload import all_range


def _eigen_queries(n):
    lam, V = all_range(n).gram_eigh()
    return lam, V.T


def test_box_constraints_give_unit_weights():
    # B = I: each u_i <= 1 alone, so u = 1 and the value is sum(c)
    r = solve_weighting(np.array([4.0, 1.0, 9.0]), np.eye(3))
    np.testing.assert_allclose(r.u, 1.0, rtol=1e-7)
    assert r.value == pytest.approx(14.0, rel=2e-8)  # profile tol 1e-8
    assert r.dual_value == pytest.approx(14.0, rel=1e-7)
    assert r.status == "optimal"


@given(st.integers(0, 10_000), st.integers(1, 12))
@settings(max_examples=25, deadline=None)
def test_single_constraint_closed_form(seed, k):
    # min sum c_i/u_i s.t. sum b_i u_i <= 1: u_i ∝ sqrt(c_i/b_i), value (sum sqrt(c_i b_i))^2 (Lagrange)
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.1, 10.0, k)
    b = rng.uniform(0.1, 10.0, k)
    r = solve_weighting(c, b[None, :])
    assert r.value == pytest.approx(np.sqrt(c * b).sum() ** 2, rel=1e-7)
    np.testing.assert_allclose(r.u / r.u.sum(), np.sqrt(c / b) / np.sqrt(c / b).sum(), rtol=1e-4)


@given(st.integers(0, 10_000))
@settings(max_examples=25, deadline=None)
def test_weak_duality_and_feasibility(seed):
    rng = np.random.default_rng(seed)
    n, k = rng.integers(2, 15, size=2)
    c = rng.uniform(0.01, 5.0, k)
    B = rng.uniform(0.0, 1.0, (n, k)) ** 3
    r = solve_weighting(c, B)
    assert (B @ r.u).max() == pytest.approx(1.0, rel=1e-12)
    assert r.value == pytest.approx((c / r.u).sum(), rel=1e-12)
    assert r.dual_value <= r.value * (1 + 1e-12)
    assert r.gap <= 1e-6
    # any y >= 0 gives a lower bound; its primal recovery is feasible, hence an upper bound
    y = rng.uniform(0.0, 1.0, n)
    assert dual_value(c, B, y) <= r.value * (1 + 1e-9)
    u = weights_from_dual(c, B, y)
    assert (B @ u).max() == pytest.approx(1.0)
    assert (c / u).sum() >= r.value * (1 - 1e-9)


def test_native_matches_clarabel():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.01, 100.0, 40)
    B = rng.uniform(0.0, 1.0, (30, 40)) ** 2
    native = solve_weighting(c, B)
    clarabel = solve_weighting(c, B, load_profile("clarabel"))
    assert clarabel.backend == "cvxpy:CLARABEL"
    assert native.value == pytest.approx(clarabel.value, rel=1e-6)
    np.testing.assert_allclose(native.u, clarabel.u, rtol=1e-3, atol=1e-6)


def test_all_range_256_reference_value():
    # notes Sec. 8: Program 5.1.1 on the eigen-queries of all ranges, n = 256: 2.93271e5
    sigma, Q = _eigen_queries(256)
    r = solve_weighting(sigma, (Q * Q).T)
    assert r.value == pytest.approx(2.93271e5, rel=2e-6)
    assert r.gap <= 1e-6
    # the uniform dual point gives exactly the SVD bound (notes Sec. 4.3)
    svdb = np.sqrt(sigma).sum() ** 2 / 256
    assert dual_value(sigma, (Q * Q).T, np.full(256, 1 / 256)) == pytest.approx(svdb, rel=1e-12)
    assert r.dual_value >= svdb


def test_scs_agrees_on_eigen_queries():
    sigma, Q = _eigen_queries(64)
    native = solve_weighting(sigma, (Q * Q).T)
    scs = solve_weighting(sigma, (Q * Q).T, load_profile("scs"))
    assert scs.value == pytest.approx(native.value, rel=1e-5)


def test_time_limit_returns_feasible_weights():
    sigma, Q = _eigen_queries(128)
    r = solve_weighting(sigma, (Q * Q).T, SolverProfile(name="tight", time_limit=0.0))
    assert r.status == "time_limit"
    assert ((Q * Q).T @ r.u).max() == pytest.approx(1.0)
    assert r.dual_value <= r.value


@pytest.mark.parametrize(
    "c, B, what",
    [
        (np.array([1.0, 0.0]), np.eye(2), "positive"),
        (np.array([1.0, 1.0]), -np.eye(2), "non-negative"),
        (np.array([1.0, 1.0]), np.array([[1.0, 0.0]]), "all zeros"),
        (np.array([1.0]), np.eye(2), "needs costs"),
    ],
)
def test_bad_input(c, B, what):
    with pytest.raises(InputError, match=what):
        solve_weighting(c, B)


def _record_solve_kwargs(monkeypatch):
    """Record the keyword arguments of every cvxpy.Problem.solve call (the call still runs)."""
    import cvxpy as cp

    calls, real = [], cp.Problem.solve

    def solve(self, *args, **kwargs):
        calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "solve", solve)
    return calls


@pytest.mark.parametrize(
    "solver, budget_keys",
    [("scs", {"max_iters": 1, "time_limit_secs": 30.0}), ("clarabel", {"max_iter": 1, "time_limit": 30.0})],
)
def test_cvxpy_path_passes_the_profile_budget_and_reports_the_stop(monkeypatch, caplog, solver, budget_keys):
    # before: solve(**profile.options) only, so SCS ran past a profile's time_limit / max_iters and said 'optimal'
    sigma, Q = _eigen_queries(32)
    base = load_profile(solver)
    profile = replace(base, max_iters=1, time_limit=30.0, options={k: v for k, v in base.options.items() if k != "max_iters"})
    calls = _record_solve_kwargs(monkeypatch)
    log = logging.getLogger("strategy_opt")  # seen by caplog even after a CLI test stopped its propagation
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    monkeypatch.setattr(log, "propagate", False)
    with caplog.at_level("WARNING", logger="strategy_opt"):
        r = solve_weighting(sigma, (Q * Q).T, profile)
    assert len(calls) == 1 and budget_keys.items() <= calls[0].items()
    assert r.status != "optimal" and r.iterations <= 1  # SCS: optimal_inaccurate; Clarabel: user_limit
    assert ((Q * Q).T @ r.u).max() == pytest.approx(1.0) and r.dual_value <= r.value  # still feasible weights and a valid bound
    assert f"status {r.status}" in caplog.text


def test_cvxpy_path_stops_at_the_time_limit():
    sigma, Q = _eigen_queries(64)
    base = load_profile("scs")
    r = solve_weighting(sigma, (Q * Q).T, replace(base, time_limit=1e-6, options={"eps_abs": 1e-12, "eps_rel": 1e-12}))
    assert r.status == "optimal_inaccurate"  # SCS: "solved (inaccurate - reached time_limit_secs)"; 650 iterations to optimal without it
