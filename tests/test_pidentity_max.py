"""p-identity under objective ``max`` (epsilon-DP): the smoothed loss, the search, its bound, and auto's use of them."""

import math
import time

import cvxpy as cp
import numpy as np
import pytest

from strategy_opt import solve
from strategy_opt.cli import main
from strategy_opt.error import KroneckerMatrix
from strategy_opt.programs.pidentity import pidentity_matrix
from strategy_opt.programs.pidentity_max import minimax_theta, pure_max_lower_bound, smoothed_max_loss, theta_variances
from strategy_opt.spec import parse_spec
from strategy_opt.workload import from_matrix, prefix


def _largest_pure_variance(A: np.ndarray, W: np.ndarray) -> float:
    """``||A||_1^2 max_i w_i (A^T A)^+ w_i^T`` by numpy alone."""
    sens = np.abs(A).sum(axis=0).max()
    P = np.linalg.pinv(A.T @ A)
    return float(sens**2 * np.einsum("ij,jk,ik->i", W, P, W).max())


def _gamma2_squared(W: np.ndarray) -> float:
    """The (epsilon, delta) min-max optimum ``gamma_2(W)^2`` by an independent cvxpy/Clarabel SDP."""
    m, n = W.shape
    Z = cp.Variable((m + n, m + n), PSD=True)
    t = cp.Variable()
    prob = cp.Problem(cp.Minimize(t), [Z[:m, m:] == W, cp.diag(Z[m:, m:]) <= 1, cp.diag(Z[:m, :m]) <= t])
    prob.solve(solver=cp.CLARABEL)
    return float(prob.value)


def _random_workload(seed: int, m: int = 9, n: int = 7) -> np.ndarray:
    W = (np.random.default_rng(seed).random((m, n)) < 0.45).astype(float)
    W[0] = 1.0  # no empty row, every cell queried
    return W


def test_theta_variances_equal_numpy_through_the_p_identity_matrix():
    rng = np.random.default_rng(0)
    for W in (prefix(12), from_matrix(_random_workload(1, 11, 12))):
        T = rng.random((3, 12))
        A = pidentity_matrix(T)
        dense = W.matrix().toarray()
        expected = np.einsum("ij,jk,ik->i", dense, np.linalg.inv(A.T @ A), dense) * np.abs(A).sum(axis=0).max() ** 2
        np.testing.assert_allclose(theta_variances(T, W), expected, rtol=1e-10)


def test_smoothed_max_gradient_matches_central_differences_and_brackets_the_max():
    W = from_matrix(_random_workload(2, 10, 6))
    rng = np.random.default_rng(3)
    x = rng.random(2 * 6)
    tau = 0.2
    F, g, u = smoothed_max_loss(x, W, 2, tau)
    assert u.max() <= F <= u.max() + tau * math.log(W.m) + 1e-12
    h = 1e-6
    fd = np.array([(smoothed_max_loss(x + h * e, W, 2, tau)[0] - smoothed_max_loss(x - h * e, W, 2, tau)[0]) / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_minimax_theta_keeps_the_best_iterate_and_stops_at_its_deadline():
    T0 = np.full((1, 6), 0.5)
    start = theta_variances(T0, prefix(6)).max()
    T, value, stages = minimax_theta(prefix(6), T0, deadline=time.perf_counter() + 30, max_iters=400)
    assert value == pytest.approx(theta_variances(T, prefix(6)).max(), rel=1e-12) and value < start
    assert [s["temperature"] for s in stages] == [0.03, 0.01, 0.003, 0.001]
    _, late, none = minimax_theta(prefix(6), T0, deadline=time.perf_counter() - 1, max_iters=400)
    assert none == [] and late == pytest.approx(start)


@pytest.mark.parametrize("seed", [4, 5])
def test_pure_max_bound_is_below_an_independent_sdp_and_close_to_it(seed):
    W = _random_workload(seed)
    bound, kind = pure_max_lower_bound(from_matrix(W), 10.0)
    gamma2 = _gamma2_squared(W)
    assert kind == "l2-min-max-dual"
    assert bound <= gamma2 * (1 + 1e-6) and bound >= gamma2 * (1 - 2e-4)


def test_p_identity_max_recomputes_from_its_matrix_and_beats_the_strategy_for_the_total():
    W = prefix(32)
    s = solve(W, privacy="pure", method="p-identity", objective="max")
    A, dense = np.asarray(s.matrix), W.matrix().toarray()
    value = _largest_pure_variance(A, dense)
    assert s.meta["objective_value"] == pytest.approx(value, rel=1e-9)
    total = solve(W, privacy="pure", method="p-identity")  # the optimum for the total, which auto returned for max before
    assert value < 0.85 * _largest_pure_variance(np.asarray(total.matrix), dense)
    gamma2 = _gamma2_squared(dense)
    assert s.meta["objective_lower_bound_kind"] == "l2-min-max-dual"
    assert gamma2 * (1 - 2e-4) <= s.meta["objective_lower_bound"] <= min(gamma2 * (1 + 1e-6), value)


def test_auto_pure_max_runs_p_identity_on_a_flat_workload(tmp_path):
    out = tmp_path / "s.npz"
    assert main(["solve", "-q", "--workload", "all-range:24", "--privacy", "pure", "--method", "auto", "--objective", "max", "--out", str(out)]) == 0
    with np.load(out, allow_pickle=True) as f:
        A = f["A"]
    import json

    meta = json.loads(str(np.load(out, allow_pickle=True)["meta"]))
    dense = parse_spec("all-range:24").matrix().toarray()
    value = _largest_pure_variance(A, dense)
    assert meta["auto_choice"] == "p-identity" and meta["objective_value"] == pytest.approx(value, rel=1e-9)
    assert value < min(v for k, v in meta["auto_candidates"].items() if k != "p-identity")
    assert meta["objective_lower_bound"] <= value


def test_auto_pure_max_composes_a_product_per_attribute_with_a_multiplicative_bound():
    # 272 cells: past the flat p-identity's product limit, so the per-attribute product decides
    W = parse_spec("prefix:17*prefix:16")
    s = solve(W, privacy="pure", method="auto", objective="max")
    assert s.meta["auto_choice"] == "per-attribute" and isinstance(s.matrix, KroneckerMatrix)
    A1, A2 = (np.asarray(f) for f in s.matrix.factors)
    factor_values = [_largest_pure_variance(A1, prefix(17).matrix().toarray()), _largest_pure_variance(A2, prefix(16).matrix().toarray())]
    assert s.meta["objective_value"] == pytest.approx(factor_values[0] * factor_values[1], rel=1e-9)
    assert s.meta["objective_value"] == pytest.approx(_largest_pure_variance(np.kron(A1, A2), W.matrix().toarray()), rel=1e-8)
    assert s.meta["objective_value"] < 0.7 * min(v for k, v in s.meta["auto_candidates"].items() if k != "per-attribute")
    # the bound: the product of the factors' bounds on gamma_2^2, which is multiplicative; checked against the SDPs
    gamma2 = _gamma2_squared(prefix(17).matrix().toarray()) * _gamma2_squared(prefix(16).matrix().toarray())
    assert gamma2 * (1 - 5e-4) <= s.meta["objective_lower_bound"] <= gamma2 * (1 + 1e-6)


def test_p_identity_max_leaves_the_identity_through_a_row_of_ones_on_all_predicates():
    # the identity is a local optimum of the largest variance there (the full sum, 6); a ones row starts below it
    W = parse_spec("all-predicate:6")
    s = solve(W, privacy="pure", method="p-identity", objective="max")
    value = _largest_pure_variance(np.asarray(s.matrix), W.matrix().toarray())
    assert s.meta["max_start"] == "ones-row" and s.meta["objective_value"] == pytest.approx(value, rel=1e-9)
    assert value < 5.6  # the identity: 6


def test_p_identity_max_solves_a_large_product_per_factor():
    # 288 cells, three factors (one the identity): per factor, the values and bounds multiply
    W = parse_spec("all-range:8*identity:3*prefix:12")
    s = solve(W, privacy="pure", method="p-identity", objective="max")
    assert isinstance(s.matrix, KroneckerMatrix) and s.meta["objective_lower_bound_kind"] == "product-of-factor-bounds"
    flat = np.kron(np.kron(*(np.asarray(f) for f in s.matrix.factors[:2])), np.asarray(s.matrix.factors[2]))
    value = _largest_pure_variance(flat, W.matrix().toarray())
    assert s.meta["objective_value"] == pytest.approx(value, rel=1e-9)
    gamma2 = _gamma2_squared(parse_spec("all-range:8").matrix().toarray()) * _gamma2_squared(prefix(12).matrix().toarray())  # identity: 1
    assert gamma2 * (1 - 5e-4) <= s.meta["objective_lower_bound"] <= gamma2 * (1 + 1e-6)
    assert [f["workload"] for f in s.meta["max_factors"]] == ["all-range:8", "identity:3", "prefix:12"]


def test_p_identity_max_on_rows_of_very_different_scales_goes_through_the_support_repair(tmp_path):
    # audit R3: the Gram matrix merges cells 0 and 1 (they differ in query 0 only, 1e-12 of the Gram's scale), and
    # the search's expanded strategy cannot answer query 0; the compiler's repair now runs before the value is taken
    W = 10.0 ** np.linspace(-3, 3, 7)[:, None] * np.tril(np.ones((7, 7)))
    s = solve(from_matrix(W), privacy="pure", method="p-identity", objective="max")
    A = s.matrix.toarray() if hasattr(s.matrix, "toarray") else np.asarray(s.matrix)
    assert np.allclose(W @ np.linalg.pinv(A) @ A, W, rtol=0, atol=1e-9 * np.abs(W).max())
    value = _largest_pure_variance(A, W)
    assert s.meta["objective_value"] == pytest.approx(value, rel=1e-9)
    assert s.meta["objective_lower_bound"] <= value and s.meta["objective_lower_bound"] <= _gamma2_squared(W) * (1 + 1e-6)
