"""Program 5.1.1 (optimal query weighting): native interior point vs closed forms, cvxpy and the notes."""

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
