"""Dual bound and KKT weights of Program 3.4.2 (strategy_opt.certificates)."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from strategy_opt.bases import hierarchical_matrix, wavelet_matrix
from strategy_opt.certificates import (
    INACCURATE_RTOL,
    bound_below_error,
    dual_bound,
    gram_factor,
    kkt_weights,
    nuclear_norm_weighted,
    reconcile_bound,
    relative_gap,
)
from strategy_opt.error import svd_bound, unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.native_l2 import solve_total_l2
from strategy_opt.workload import all_range, from_matrix, identity, prefix


@pytest.mark.parametrize("W", [all_range(16), prefix(16), identity(5), from_matrix(np.arange(20.0).reshape(5, 4) % 7)])
def test_uniform_weights_give_the_svd_bound(W):
    n = W.n
    assert dual_bound(W.gram(), np.full(n, 1.0 / n)) == pytest.approx(svd_bound(W), rel=1e-12)


def test_uniform_weights_on_a_rank_deficient_workload():
    # The SVD bound from the singular values of W itself (3 non-zero of 4).
    W = np.arange(12.0).reshape(3, 4) % 5
    expected = np.linalg.svd(W, compute_uv=False).sum() ** 2 / 4
    assert dual_bound(W.T @ W, np.full(4, 0.25)) == pytest.approx(expected, rel=1e-13)


def test_dual_bound_is_the_weighted_nuclear_norm_of_w():
    # Independent: singular values of the explicit matrix W diag(u)^{1/2}.
    rng = np.random.default_rng(3)
    W = rng.normal(size=(7, 10))
    u = rng.random(10)
    u /= u.sum()
    direct = np.linalg.svd(W * np.sqrt(u), compute_uv=False).sum() ** 2
    assert dual_bound(W.T @ W, u) == pytest.approx(direct, rel=1e-12)
    # Unnormalised weights are put on the simplex first.
    assert dual_bound(W.T @ W, 5 * u) == pytest.approx(direct, rel=1e-12)


def test_diagonal_gram_closed_form():
    # G diagonal: d(u) = (sum_j sqrt(u_j G_jj))^2, maximised at u ∝ G_jj^(1/2)... checked at a random u.
    g = np.array([1.0, 4.0, 9.0, 16.0])
    u = np.array([0.1, 0.2, 0.3, 0.4])
    assert dual_bound(np.diag(g), u) == pytest.approx(np.sqrt(u * g).sum() ** 2, rel=1e-14)


def test_rank_deficient_factor_drops_only_zero_directions():
    rng = np.random.default_rng(0)
    W = rng.random((3, 9))
    G = W.T @ W
    L = gram_factor(G)
    assert L.shape == (9, 3)
    np.testing.assert_allclose(L @ L.T, G, atol=1e-12 * np.abs(G).max())
    u = rng.random(9)
    u /= u.sum()
    assert nuclear_norm_weighted(L, u) == pytest.approx(np.linalg.svd(W * np.sqrt(u), compute_uv=False).sum(), rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 9), m=st.integers(1, 12))
def test_dual_bound_never_exceeds_any_strategy_error(seed, n, m):
    rng = np.random.default_rng(seed)
    M = rng.integers(-1, 2, size=(m, n)).astype(float) + np.eye(m, n)
    assume(np.any(M))
    W = from_matrix(M)
    u = rng.random(n) + 1e-3
    A = rng.normal(size=(n + 2, n))
    lower = dual_bound(W.gram(), u)
    assert lower <= unit_error(A, W, 2) * (1 + 1e-10)
    assert lower <= unit_error(np.eye(n), W, 2) * (1 + 1e-10)


@pytest.mark.parametrize("A", [hierarchical_matrix(16, 2).toarray(), wavelet_matrix(16).toarray(), np.eye(16)])
def test_kkt_weights_of_any_strategy_give_a_valid_bound(A):
    W = all_range(16)
    G = W.gram()
    X = A.T @ A
    u = kkt_weights(G, X)
    assert u.sum() == pytest.approx(1.0) and np.all(u >= 0)
    assert dual_bound(G, u) <= unit_error(A, W, 2) * (1 + 1e-12)


def test_kkt_weights_make_the_bound_tight_at_the_optimum():
    W = all_range(32)
    G = W.gram()
    res = solve_total_l2(G, tol=1e-10)
    X = res.A.T @ res.A
    # Stationarity: X^{-1} G X^{-1} is diagonal at the optimum (X D X = G).
    Xi = np.linalg.inv(X)
    M = Xi @ G @ Xi
    off = M - np.diag(np.diag(M))
    assert np.abs(off).max() < 1e-4 * np.abs(np.diag(M)).max()
    assert dual_bound(G, kkt_weights(G, X)) == pytest.approx(res.primal, rel=1e-9)
    assert dual_bound(G, kkt_weights(G, X)) <= res.primal * (1 + 1e-12)


def test_kkt_weights_of_a_singular_gram_use_the_pseudo_inverse():
    # Total query: X = J (A = [1 1 1]) is optimal and singular; weights are uniform, bound = 1.
    G = np.ones((3, 3))
    u = kkt_weights(G, np.ones((3, 3)))
    np.testing.assert_allclose(u, np.full(3, 1 / 3))
    assert dual_bound(G, u) == pytest.approx(1.0)


@pytest.mark.parametrize("u", [np.ones(3), -np.ones(4), np.zeros(4), np.array([1.0, np.nan, 1.0, 1.0])])
def test_bad_weights_are_refused(u):
    with pytest.raises(InputError):
        dual_bound(np.eye(4), u)


def test_zero_gram_is_refused():
    with pytest.raises(InputError):
        gram_factor(np.zeros((3, 3)))


def test_relative_gap():
    assert relative_gap(1.1, 1.0) == pytest.approx(0.1)
    assert relative_gap(1.0, 0.0) == float("inf")


@pytest.mark.parametrize("A", [hierarchical_matrix(16, 2).toarray(), wavelet_matrix(16).toarray(), np.eye(16)])
def test_kkt_weights_from_a_factor_match_the_explicit_inverse(A):
    W = all_range(16)
    G = W.gram()
    X = A.T @ A
    Xi = np.linalg.inv(X)
    expected = np.diag(Xi @ G @ Xi) / np.trace(Xi @ G @ Xi)  # independent: the textbook formula
    np.testing.assert_allclose(kkt_weights(None, X, factor=gram_factor(G)), expected, rtol=1e-9)


def _meta(E, lb, kind="dual-certificate", svd=None):
    return {
        "unit_total_squared_error": E,
        "unit_total_squared_error_log10": math.log10(E),
        "lower_bound": lb,
        "lower_bound_log10": math.log10(lb),
        "lower_bound_kind": kind,
        "svd_bound": svd,
        "relative_gap": E / lb - 1,
        "ratio_to_lower_bound": E / lb,
    }


def test_a_bound_above_the_error_within_tolerance_is_clamped():
    # the audit's case: Clarabel (optimal_inaccurate) on a rank-deficient file workload
    E, lb = 147.2012677937746, 147.2012700971277
    meta = reconcile_bound(_meta(E, lb, svd=123.78496319178234), INACCURATE_RTOL)
    assert meta["lower_bound"] == E and meta["lower_bound_log10"] == math.log10(E)
    assert meta["relative_gap"] == 0.0 and meta["ratio_to_lower_bound"] == 1.0
    assert meta["lower_bound_kind"] == "dual-certificate"
    note = meta["lower_bound_adjustment"]
    assert note["action"] == "clamped" and note["original"] == lb and note["tolerance"] == INACCURATE_RTOL
    assert note["excess_relative"] == pytest.approx(lb / E - 1, rel=1e-6)


def test_a_bound_far_above_the_error_is_dropped_for_the_svd_bound():
    meta = reconcile_bound(_meta(100.0, 101.0, svd=80.0), 1e-8)
    assert meta["lower_bound"] == 80.0 and meta["lower_bound_kind"] == "svd-bound"
    assert meta["relative_gap"] == pytest.approx(0.25) and meta["ratio_to_lower_bound"] == pytest.approx(1.25)
    note = meta["lower_bound_adjustment"]
    assert note["action"] == "dropped" and note["original"] == 101.0 and note["kind"] == "dual-certificate"
    assert "cannot be trusted" in note["reason"]
    # no SVD bound below the error either: no bound, and a reason
    meta = reconcile_bound(_meta(100.0, 101.0, svd=None), 1e-8)
    assert meta["lower_bound"] is None and meta["lower_bound_kind"] is None and meta["relative_gap"] is None
    assert meta["lower_bound_unavailable"]


def test_a_bound_below_the_error_is_untouched():
    before = _meta(100.0, 99.0, svd=80.0)
    assert reconcile_bound(dict(before), 1e-8) == before


def test_objective_bounds_are_reconciled_too():
    meta = {"objective_value": 10.0, "objective_lower_bound": 10.0 + 1e-9, "objective_relative_gap": -1e-10}
    reconcile_bound(meta, 1e-8)
    assert meta["objective_lower_bound"] == 10.0 and meta["objective_relative_gap"] == 0.0
    assert meta["objective_lower_bound_adjustment"]["action"] == "clamped"
    meta = {"objective_value": 10.0, "objective_lower_bound": 11.0}
    reconcile_bound(meta, 1e-8)
    assert meta["objective_lower_bound"] is None and meta["objective_relative_gap"] is None
    assert "cannot be trusted" in meta["objective_lower_bound_unavailable"]


@pytest.mark.parametrize("lower, error, rtol, expected", [(9.0, 10.0, 0.0, 9.0), (10.0 + 1e-8, 10.0, 1e-8, 10.0), (10.0 + 1e-6, 10.0, 1e-8, None)])
def test_bound_below_error(lower, error, rtol, expected):
    assert bound_below_error(lower, error, rtol)[0] == expected
