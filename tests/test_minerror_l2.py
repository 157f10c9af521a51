"""minerror-l2 (Program 3.4.2): cvxpy backends, the native solver, objectives, certificates, CLI."""

import hashlib
import json
import re
from dataclasses import replace

import numpy as np
import pytest

from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import per_query_variances, sensitivity, supports, unit_error
from strategy_opt.exceptions import InputError, OptionError
from strategy_opt.io import read_strategy
from strategy_opt.registry import get_method
from strategy_opt.solvers import load_profile
from strategy_opt.spec import parse_spec
from strategy_opt.workload import all_range, from_matrix, prefix, random_range

REF_8, REF_32 = 80.464265, 2143.53671


def test_registered_for_approx_only():
    info = get_method("minerror-l2")
    assert info.privacy == ("approx",)
    assert "3.4.2" in info.source
    with pytest.raises(InputError, match="approx"):
        solve("all-range:8", privacy="pure", method="minerror-l2")


@pytest.mark.parametrize("solver", ["native", "scs", "clarabel"])
def test_reference_all_range_8(solver):
    s = solve("all-range:8", method="minerror-l2", solver=solver)
    m = s.meta
    assert m["unit_total_squared_error"] == pytest.approx(REF_8, rel=1e-6)
    assert m["lower_bound_kind"] == "dual-certificate"
    assert m["lower_bound"] <= REF_8 * (1 + 1e-7)
    assert 0 <= m["relative_gap"] < 1e-6
    assert m["solver"] == solver and m["solver_status"] == "optimal" and m["iterations"] > 0


@pytest.mark.parametrize("solver", ["native", "scs", pytest.param("clarabel", marks=pytest.mark.slow)])
def test_reference_all_range_32(solver):
    m = solve("all-range:32", method="minerror-l2", solver=solver).meta
    assert m["unit_total_squared_error"] == pytest.approx(REF_32, rel=1e-6)
    assert m["relative_gap"] < 1e-6


def test_backends_agree_on_a_file_given_workload(tmp_path):
    rng = np.random.default_rng(11)
    W = rng.integers(0, 3, size=(9, 12)).astype(float)
    W[:, 4] = 0  # a cell no query touches
    path = tmp_path / "w.npy"
    np.save(path, W)
    values = {}
    for solver in ("native", "scs", "clarabel"):
        s = solve(f"file:{path}", method="minerror-l2", solver=solver)
        values[solver] = s.meta["unit_total_squared_error"]
        assert supports(s.matrix, from_matrix(W))
        assert s.meta["relative_gap"] < 1e-4
    assert values["scs"] == pytest.approx(values["native"], rel=1e-4)
    assert values["clarabel"] == pytest.approx(values["native"], rel=1e-6)


def test_strategy_error_recomputes_to_meta():
    W = prefix(24)
    s = solve(W, method="minerror-l2")
    assert unit_error(s.matrix, W, 2) == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-12)
    assert sensitivity(s.matrix, 2) == pytest.approx(1.0)
    assert supports(s.matrix, W)
    # The optimum beats (or ties) the SVD bound's strategy and every baseline.
    for method in ("identity", "wavelet", "hierarchical"):
        assert s.meta["unit_total_squared_error"] <= solve(W, method=method).meta["unit_total_squared_error"]


def test_max_objective_lowers_the_largest_variance():
    W = all_range(8)
    total = solve(W, method="minerror-l2")
    worst_total = per_query_variances(total.matrix, W, 2).max()
    results = {}
    for solver in ("scs", "clarabel"):
        s = solve(W, method="minerror-l2", solver=solver, objective="max")
        v = per_query_variances(s.matrix, W, 2)
        assert s.meta["objective"] == "max"
        assert s.meta["objective_value"] == pytest.approx(v.max(), rel=1e-12)
        assert s.meta["objective_value"] == pytest.approx(s.meta["solver_objective_value"], rel=1e-6)
        assert v.max() <= worst_total * (1 + 1e-6)
        # Its total error is no better than the total optimum.
        assert s.meta["unit_total_squared_error"] >= total.meta["unit_total_squared_error"] * (1 - 1e-7)
        results[solver] = v.max()
    assert results["scs"] == pytest.approx(results["clarabel"], rel=1e-4)
    assert results["clarabel"] < 0.8 * worst_total  # 2.677 vs 3.435 on all-range:8


def _minmax_sdp(M: np.ndarray) -> float:
    """min max_i m_i X^{-1} m_i^T over diag X <= 1, written directly on the raw rows (Clarabel)."""
    import cvxpy as cp

    n = M.shape[1]
    X, t = cp.Variable((n, n), PSD=True), cp.Variable()
    cons = [cp.diag(X) <= 1] + [cp.bmat([[X, r[:, None]], [r[None, :], cp.reshape(t, (1, 1), order="C")]]) >> 0 for r in M]
    prob = cp.Problem(cp.Minimize(t), cons)
    prob.solve(solver="CLARABEL")
    return float(prob.value)


@pytest.mark.parametrize("solver", ["scs", "clarabel"])
def test_max_objective_on_rows_of_very_different_scale_reaches_the_single_query_floor(solver):
    """Rows from 1e3 to 1e-2: the full SDP's X used to disagree with its own value (3.49e6 written vs 1e6
    claimed, 'optimal'). No strategy gives the first row a variance below max_j w_1j^2 = 1e6 (the
    single-query optimum), and 1e6 is attainable; the active set starts from that row alone."""
    M = np.array([[1e3, 1e3, 0, 0, 0, 0], [0, 0, 1e-2, 1e-2, 1e-2, 1e-2], [1, 0, 1, 0, 1, 0], [0, 1, 0, -1, 0, 2], [5, 5, 5, 5, 5, 5], [0, 0, 0, 0, 0, 30]])
    s = solve(from_matrix(M), method="minerror-l2", solver=solver, objective="max")
    m = s.meta
    A = np.asarray(s.matrix)
    mine = np.einsum("ij,jk,ik->i", M, np.linalg.pinv(A.T @ A), M).max() * (A**2).sum(axis=0).max()
    assert mine == pytest.approx(1e6, rel=1e-4) and m["objective_value"] == pytest.approx(mine, rel=1e-8)
    assert "objective_mismatch" not in m and supports(A, from_matrix(M))
    assert m["objective_lower_bound"] <= m["objective_value"] and m["objective_lower_bound"] == pytest.approx(1e6, rel=1e-4)
    assert m["max_active_set"]["rounds"][0]["queries"] == 1 and m["max_active_set"]["verified"]


def test_max_active_set_adds_the_queries_that_bind(monkeypatch):
    """Started from the all-ones row alone (fraction 0.9 on prefix:8), the first optimum leaves the shorter
    prefixes unsupported; they join and the final value is the full min-max SDP's."""
    import strategy_opt.programs.minerror_l2 as ml2

    monkeypatch.setattr(ml2, "MAX_ACTIVE_FRACTION", 0.9)
    M = np.tril(np.ones((8, 8)))
    s = solve(prefix(8), method="minerror-l2", solver="clarabel", objective="max")
    facts = s.meta["max_active_set"]
    assert facts["rounds"][0]["queries"] == 1 and facts["rounds"][0]["above"] > 0 and len(facts["rounds"]) >= 2
    assert facts["verified"] and facts["rounds"][-1]["above"] == 0
    ref = _minmax_sdp(M)
    assert s.meta["objective_value"] == pytest.approx(ref, rel=1e-5)
    assert per_query_variances(s.matrix, prefix(8), 2).max() == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize("solver", ["scs", "clarabel"])
def test_max_objective_keeps_the_better_of_the_sdp_and_the_weighted_total_strategy(solver):
    """The native solver's strategy for the total weighted by the SDP's multipliers is the saddle point's X
    when the multipliers are optimal: the lower of the two largest variances is kept, and it is the min-max
    SDP's optimum (reference written on the raw rows)."""
    W = from_matrix(np.array([[1.0 if i <= k <= j else 0.0 for k in range(7)] for i, j in [(0, 6), (1, 3), (2, 2), (4, 6), (0, 1), (3, 5), (5, 5), (2, 6)]]))
    s = solve(W, method="minerror-l2", solver=solver, objective="max")
    c = s.meta["max_candidates"]
    values = {k: v for k, v in c.items() if k != "chosen"}
    assert c["chosen"] == min(values, key=values.get) and set(values) == {"sdp", "weighted-total"}
    mine = per_query_variances(s.matrix, W, 2).max()
    assert s.meta["objective_value"] == pytest.approx(mine, rel=1e-12) and mine == pytest.approx(min(values.values()), rel=1e-12)
    assert mine == pytest.approx(_minmax_sdp(W.matrix().toarray()), rel=1e-5)
    assert s.meta["objective_lower_bound"] <= mine


@pytest.mark.parametrize("form", ["schur", "factorization"])
def test_both_forms_of_the_max_program_reach_the_min_max_optimum(monkeypatch, form):
    """The Schur form (one cone per query) and the factorization-norm form ([[P, R], [R^T, X]] ⪰ 0, one cone)
    bound the same variances: forced either way, the value is the reference min-max SDP's."""
    import strategy_opt.programs.minerror_l2 as ml2

    monkeypatch.setattr(ml2, "_max_form", lambda k, n: form)
    W = from_matrix(np.array([[1.0 if i <= k <= j else 0.0 for k in range(6)] for i, j in [(0, 5), (1, 3), (2, 2), (4, 5), (0, 1), (3, 4), (5, 5)]]) * np.array([[3.0], [1], [1], [0.5], [2], [1], [1]]))
    s = solve(W, method="minerror-l2", solver="clarabel", objective="max")
    assert {r["form"] for r in s.meta["max_active_set"]["rounds"]} == {form}
    assert per_query_variances(s.matrix, W, 2).max() == pytest.approx(_minmax_sdp(W.matrix().toarray()), rel=1e-5)


def test_the_max_program_takes_the_form_with_the_smaller_cones():
    import strategy_opt.programs.minerror_l2 as ml2

    # 40 queries on 32 cells: one 72-cone (2628^2 block entries) against 40 33-cones (40 * 561^2)
    assert ml2._max_form(40, 32) == "factorization"
    # all ranges on 16 cells: 136 17-cones (136 * 153^2) against one 152-cone (11628^2)
    assert ml2._max_form(136, 16) == "schur"


def test_auto_max_on_a_row_scaled_by_1e_minus_7_uses_the_optimum():
    """tril(ones(8)) with row 3 scaled by 1e-7: minerror-l2's strategy used to leave that row unsupported
    (refused, so auto fell back to a baseline); it now supports it and beats every baseline."""
    W = np.tril(np.ones((8, 8)))
    W[3] *= 1e-7
    s = solve(from_matrix(W), privacy="approx", method="auto", objective="max")
    m = s.meta
    assert m["auto_choice"] == "minerror-l2"
    assert m["objective_value"] < min(v for k, v in m["auto_candidates"].items() if k != "minerror-l2")
    assert m["objective_value"] == pytest.approx(per_query_variances(s.matrix, from_matrix(W), 2).max(), rel=1e-8)
    assert m["objective_value"] == pytest.approx(_minmax_sdp(np.delete(W, 3, axis=0)), rel=1e-4)


def test_weighted_objective_from_a_list_and_a_file(tmp_path):
    W = all_range(8)
    w = np.linspace(1.0, 4.0, W.m)
    np.save(tmp_path / "w.npy", w)
    native = solve(W, method="minerror-l2", objective="weighted", weights=list(w))
    clarabel = solve(W, method="minerror-l2", solver="clarabel", objective="weighted", weights=str(tmp_path / "w.npy"))
    for s in (native, clarabel):
        v = per_query_variances(s.matrix, W, 2)
        assert s.meta["objective_value"] == pytest.approx(w @ v, rel=1e-12)
        assert s.meta["objective_lower_bound"] <= s.meta["objective_value"]
        assert s.meta["objective_relative_gap"] < 1e-6
        # The total-error certificate stays the (valid) SVD bound for a weighted problem.
        assert s.meta["lower_bound_kind"] == "svd-bound"
    assert native.meta["objective_value"] == pytest.approx(clarabel.meta["objective_value"], rel=1e-6)
    # Brute-force check of optimality along random feasible directions: no perturbation helps.
    X = native.matrix.T @ native.matrix
    rng = np.random.default_rng(0)
    M = W.matrix().toarray()
    base = w @ np.einsum("ij,jk,ik->i", M, np.linalg.inv(X), M)
    for _ in range(20):
        D = rng.normal(size=X.shape)
        Y = X + 1e-3 * (D + D.T)
        Y /= np.diag(Y).max()
        if np.linalg.eigvalsh(Y).min() > 0:
            assert w @ np.einsum("ij,jk,ik->i", M, np.linalg.inv(Y), M) >= base * (1 - 1e-9)


def test_unit_weights_equal_the_total_objective():
    W = prefix(16)
    a = solve(W, method="minerror-l2", objective="weighted", weights=[1.0] * W.m)
    b = solve(W, method="minerror-l2")
    assert a.meta["objective_value"] == pytest.approx(b.meta["unit_total_squared_error"], rel=1e-8)


@pytest.mark.parametrize(
    "weights, match",
    [
        ([1.0, 2.0], "has 2 entries"),
        ([-1.0] * 36, "positive"),
        ([0.0] + [1.0] * 35, "positive"),  # a query of weight 0 would not be supported
        ("nope.npy", "no such .npy file"),
        (["a"] * 36, "numbers"),
        ("1,x,2", "expected one positive number per query"),
    ],
)
def test_bad_weights_are_refused(weights, match):
    with pytest.raises(InputError, match=match):
        solve("all-range:8", method="minerror-l2", objective="weighted", weights=weights)


@pytest.mark.parametrize("method", ["minerror-l2", "eigen-design", "auto"])
def test_weights_belong_to_the_weighted_objective(method):
    # ignored or silently re-defining the objective before: now refused, and 'weighted' needs them
    w = [1.0 + (i % 3) for i in range(36)]
    for objective in ("total", "relative"):
        with pytest.raises(OptionError, match="applies to objective 'weighted'"):
            solve("all-range:8", method=method, objective=objective, weights=w)
    with pytest.raises(OptionError, match="needs option weights"):
        solve("all-range:8", method=method, objective="weighted")


def test_weights_as_a_separated_string_equal_the_list():
    w = [1.0 + (i % 5) / 2 for i in range(36)]
    a = solve("all-range:8", method="minerror-l2", objective="weighted", weights=",".join(map(str, w)))
    b = solve("all-range:8", method="minerror-l2", objective="weighted", weights="; ".join(map(str, w)))
    c = solve("all-range:8", method="minerror-l2", objective="weighted", weights=w)
    assert a.meta["objective_value"] == pytest.approx(c.meta["objective_value"], rel=1e-12)
    assert b.meta["objective_value"] == pytest.approx(c.meta["objective_value"], rel=1e-12)


def test_native_refuses_user_objectives(monkeypatch):
    import cvxpy as cp

    from strategy_opt import objectives as objectives_module
    from strategy_opt.objectives import Objective, register_objective

    objectives_module.objectives()  # the built-ins, before the copy
    monkeypatch.setattr(objectives_module, "_OBJECTIVES", dict(objectives_module._OBJECTIVES))
    register_objective(Objective("sqsum-native", "sum of squared variances", lambda u, weights=None: float(np.sum(np.square(u))), lambda u, weights=None: cp.sum_squares(u)))
    with pytest.raises(InputError, match="cvxpy solver profile.*the native solver handles total, weighted, relative and max"):
        solve("all-range:8", method="minerror-l2", solver="native", objective="sqsum-native")


def test_schur_form_refuses_large_workloads():
    with pytest.raises(InputError, match="Schur complement per query"):
        solve("all-range:64", method="minerror-l2", solver="scs", objective="max")


def test_cvxpy_profile_without_solver_is_refused():
    profile = replace(load_profile("scs"), solver=None)
    with pytest.raises(InputError, match="names no solver"):
        solve("all-range:8", method="minerror-l2", solver=profile)


def test_budget_exhaustion_is_reported():
    profile = replace(load_profile("native"), max_iters=1, tol=1e-12)
    s = solve("prefix:32", method="minerror-l2", solver=profile)
    assert s.meta["solver_status"] == "budget" and s.meta["iterations"] == 1
    assert s.meta["lower_bound"] <= s.meta["unit_total_squared_error"]


def test_cli_solve_and_error(tmp_path, capsys):
    out = tmp_path / "s.npz"
    code = main(["solve", "--privacy", "approx", "--method", "minerror-l2", "--solver", "native", "--workload", "all-range:32", "--out", str(out)])
    assert code == 0
    s = read_strategy(out)
    assert s.meta["unit_total_squared_error"] == pytest.approx(REF_32, rel=1e-6)
    assert unit_error(s.matrix, all_range(32), 2) == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-12)
    assert s.meta["lower_bound"] == pytest.approx(REF_32, rel=1e-6)


# --------------------------------------------------------------------------- audit fixes


def cli(*args):
    return main([str(a) for a in args])


def _sha256(w) -> str:
    return hashlib.sha256(np.asarray(w, dtype="<f8").tobytes()).hexdigest()


def test_weights_are_recorded_in_meta(tmp_path, capsys):
    W = all_range(4)
    w = [1.0, 2.0, 0.5, 3.0, 1.0, 1.0, 4.0, 0.25, 2.0, 1.5]
    out = tmp_path / "s.npz"
    assert cli("-q", "solve", "--workload", "all-range:4", "--method", "minerror-l2", "--objective", "weighted", "--option", f"weights={w}", "--out", out) == 0
    meta = read_strategy(out).meta
    assert meta["weights"] == w and meta["weights_count"] == W.m
    assert meta["weights_sha256"] == _sha256(w)
    assert "weights_file" not in meta
    np.save(tmp_path / "w.npy", np.array(w))
    s = solve(W, method="minerror-l2", objective="weighted", weights=str(tmp_path / "w.npy"))
    assert s.meta["weights"] == w and s.meta["weights_file"] == str(tmp_path / "w.npy") and s.meta["weights_sha256"] == _sha256(w)


def test_many_weights_are_recorded_by_digest_and_file(tmp_path):
    W = from_matrix(np.tril(np.ones((8, 8)))[np.arange(1200) % 8] * (1 + np.arange(1200) % 3)[:, None])
    w = np.random.default_rng(1).uniform(0.5, 2.0, W.m)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "W.npy", W.matrix().toarray())
    out = tmp_path / "s.npz"
    assert cli("-q", "solve", "--workload", f"file:{tmp_path / 'W.npy'}", "--method", "minerror-l2", "--objective", "weighted", "--option", f"weights={tmp_path / 'w.npy'}", "--out", out) == 0
    meta = read_strategy(out).meta
    assert meta["weights"] is None and "1200 weights" in meta["weights_omitted"]
    assert meta["weights_count"] == 1200 and meta["weights_file"] == str(tmp_path / "w.npy")
    assert meta["weights_sha256"] == _sha256(np.load(tmp_path / "w.npy"))


def test_max_objective_reports_a_valid_tight_bound():
    W = all_range(8)
    s = solve(W, method="minerror-l2", solver="clarabel", objective="max")
    m = s.meta
    assert m["objective_lower_bound_kind"] == "simplex-weighted-dual"
    assert m["objective_lower_bound"] <= m["objective_value"]
    assert 0 <= m["objective_relative_gap"] < 1e-6
    # valid: below the largest variance of any strategy (weak duality), e.g. the total optimum, identity, wavelet
    for other in (solve(W, method="minerror-l2"), solve(W, method="identity"), solve(W, method="wavelet")):
        assert m["objective_lower_bound"] <= per_query_variances(other.matrix, W, 2).max()
    # and at least the uniform-weight bound: the total optimum over m queries
    assert m["objective_lower_bound"] >= REF_8 / W.m * (1 - 1e-6)


@pytest.fixture
def user_objectives(monkeypatch):
    import strategy_opt.objectives as objectives_module

    objectives_module.objectives()
    monkeypatch.setattr(objectives_module, "_OBJECTIVES", dict(objectives_module._OBJECTIVES))
    import cvxpy as cp

    from strategy_opt.objectives import Objective, register_objective

    register_objective(Objective("sqsum", "sum of squared variances", lambda u, w=None: float(np.sum(np.asarray(u) ** 2)), lambda u, w=None: cp.sum_squares(u)))
    register_objective(Objective("invsum", "sum of 1/u (decreasing)", lambda u, w=None: float(np.sum(1 / np.asarray(u))), lambda u, w=None: cp.sum(cp.inv_pos(u))))
    register_objective(Objective("tilted", "total minus 2 u_0 (decreasing in u_0)", lambda u, w=None: float(np.sum(u) - 2 * u[0]), lambda u, w=None: cp.sum(u) - 2 * u[0]))


def test_user_objective_reports_the_per_query_floor(user_objectives):
    W = from_matrix([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0], [3.0, 0.0, -1.0], [1.0, 1.0, 1.0]])
    s = solve(W, method="minerror-l2", solver="clarabel", objective="sqsum")
    m = s.meta
    floor = np.abs(W.matrix().toarray()).max(axis=1) ** 2  # the single-query optima, by hand: 4, 1, 9, 1
    np.testing.assert_allclose(floor, [4.0, 1.0, 9.0, 1.0])
    assert m["objective_lower_bound_kind"] == "per-query-floor"
    assert m["objective_lower_bound"] == pytest.approx(float(np.sum(floor**2)))
    assert m["objective_lower_bound"] <= m["objective_value"]
    assert m["objective_value"] == pytest.approx(float(np.sum(per_query_variances(s.matrix, W, 2) ** 2)), rel=1e-9)
    # each floor is attained by the one-query strategy w_i / max|w_i| (unit L2 sensitivity)
    for i, row in enumerate(W.matrix().toarray()):
        A = row[None, :] / np.abs(row).max()
        assert (row @ np.linalg.pinv(A.T @ A) @ row) * sensitivity(A, 2) ** 2 == pytest.approx(floor[i])


def test_an_objective_without_a_bound_says_why(user_objectives, monkeypatch):
    import strategy_opt.programs.minerror_l2 as module

    monkeypatch.setattr(module, "floor_bound", lambda *a: (_ for _ in ()).throw(ValueError("boom")))
    m = solve("prefix:3", method="minerror-l2", solver="clarabel", objective="sqsum").meta
    assert m["objective_lower_bound"] is None and m["objective_lower_bound_kind"] is None and m["objective_relative_gap"] is None
    assert m["objective_lower_bound_unavailable"] == "objective 'sqsum' failed on the per-query floor (boom)"


@pytest.mark.parametrize(
    "name, message",
    [
        ("invsum", "objective 'invsum' decreases when every variance doubles (value "),
        ("tilted", "objective 'tilted' decreases when the variance of query 0 grows (value "),
    ],
)
def test_non_monotone_user_objective_is_refused(user_objectives, tmp_path, capsys, name, message):
    out = tmp_path / "s.npz"
    code = cli("solve", "--workload", "prefix:3", "--method", "minerror-l2", "--solver", "clarabel", "--objective", name, "--out", out)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"strategy-opt: error: {message}") and err[0].endswith("objectives must be non-decreasing in every per-query variance")
    assert not out.exists()


@pytest.mark.parametrize("excess, action", [(5e-9, "clamped"), (1e-3, "dropped")])
def test_a_lower_bound_is_never_above_the_error(monkeypatch, tmp_path, capsys, excess, action):
    # constructed: the native solver's bound pushed above its primal (tol 1e-8 in the native profile)
    import strategy_opt.programs.minerror_l2 as module

    real = module.solve_total_l2

    def inflated(*args, **kwargs):
        res = real(*args, **kwargs)
        res.dual = res.primal * (1 + excess)
        return res

    monkeypatch.setattr(module, "solve_total_l2", inflated)
    assert cli("-q", "solve", "--workload", "all-range:8", "--method", "minerror-l2", "--solver", "native", "--json") == 0
    m = json.loads(capsys.readouterr().out)
    note = m["lower_bound_adjustment"]
    assert note["action"] == action and note["kind"] == "dual-certificate" and note["tolerance"] == 1e-8
    assert note["excess_relative"] == pytest.approx(m["native_primal"] / m["unit_total_squared_error"] * (1 + excess) - 1, rel=1e-3, abs=1e-12)
    assert m["lower_bound"] <= m["unit_total_squared_error"]
    if action == "clamped":
        assert m["lower_bound"] == m["unit_total_squared_error"] and m["relative_gap"] == 0.0 and m["lower_bound_kind"] == "dual-certificate"
    else:
        assert m["lower_bound_kind"] == "svd-bound" and m["lower_bound"] == m["svd_bound"]
        assert m["relative_gap"] == pytest.approx(m["unit_total_squared_error"] / m["svd_bound"] - 1)


# The audit's rank-deficient file workload (a zero column): Clarabel stopped at optimal_inaccurate with
# its certificate 1.56e-8 above the error it reported.
WDEF = np.array(
    [
        [1, 2, -2, 2, 0, 0, 1, -1, -2, 0],
        [2, -2, -1, -1, 0, 0, -2, -2, -1, 0],
        [-2, -2, -2, 2, -2, 1, 1, -1, -2, 0],
        [-1, 0, -1, 2, -2, 2, 1, 2, -1, 0],
        [-2, -1, 1, 0, 1, 1, 1, -2, 1, 0],
        [2, 0, 2, -1, -1, 2, -2, -2, 2, 0],
        [-1, 1, -2, 2, -1, -1, 0, 2, -2, 0],
        [3, 0, -3, 1, 0, 0, -1, -3, -3, 0],
        [-2, 0, -2, 4, -4, 4, 2, 4, -2, 0],
    ],
    dtype=float,
)


@pytest.mark.parametrize("solver", ["clarabel", "scs", "native"])
def test_rank_deficient_file_workload_bound_below_error(tmp_path, capsys, solver):
    np.save(tmp_path / "w.npy", WDEF)
    assert cli("-q", "solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--method", "minerror-l2", "--solver", solver, "--json") == 0
    m = json.loads(capsys.readouterr().out)
    assert m["lower_bound"] <= m["unit_total_squared_error"] and m["relative_gap"] >= 0
    assert m["unit_total_squared_error"] == pytest.approx(147.2012701251, rel=1e-6)  # the native optimum, certified to 1e-13
    if m["lower_bound"] == m["unit_total_squared_error"] and m["lower_bound_kind"] == "dual-certificate" and "lower_bound_adjustment" in m:
        assert m["lower_bound_adjustment"]["action"] == "clamped"


# --------------------------------------------------------------------------- user objectives: cvx form against value


@pytest.fixture
def broken_objectives(monkeypatch):
    """User objectives whose cvx form does nothing, or is not the function their value computes."""
    import cvxpy as cp

    import strategy_opt.objectives as objectives_module
    from strategy_opt.objectives import Objective, register_objective

    objectives_module.objectives()
    monkeypatch.setattr(objectives_module, "_OBJECTIVES", dict(objectives_module._OBJECTIVES))
    total = lambda u, w=None: float(np.sum(u))  # noqa: E731
    register_objective(Objective("nonecvx", "cvx form returns None", total, lambda u, w=None: None))
    register_objective(Objective("zerocvx", "cvx form returns 0", total, lambda u, w=None: 0))
    register_objective(Objective("constcvx", "cvx form is a cvxpy constant", total, lambda u, w=None: cp.Constant(1.0)))
    register_objective(Objective("vectorcvx", "cvx form is u itself", total, lambda u, w=None: u))
    register_objective(Objective("maxsum", "value max, cvx form sum", lambda u, w=None: float(np.max(u)), lambda u, w=None: cp.sum(u)))
    # infinite at every variance vector (passes the monotonicity probe: never decreases)
    register_objective(Objective("infvalue", "value inf", lambda u, w=None: float("inf"), lambda u, w=None: cp.sum(u)))

    def fails_at_optimum(u, w=None):
        if np.all((np.asarray(u) > 1.8) & (np.asarray(u) < 2.8)):  # prefix:8's optimum (1.86 to 2.67), not the probe or the floor (all 1)
            raise ArithmeticError("overflow in the user's code")
        return float(np.sum(u))

    register_objective(Objective("failsatopt", "value raises at the optimum", fails_at_optimum, lambda u, w=None: cp.sum(u)))


@pytest.mark.parametrize(
    "name, message",
    [
        ("nonecvx", "objective 'nonecvx': its cvx form returned NoneType (None), not a cvxpy expression; "),
        ("zerocvx", "objective 'zerocvx': its cvx form returned int (0), not a cvxpy expression; "),
        ("constcvx", "objective 'constcvx': its cvx form does not depend on the variance variable u (it is a constant)"),
        ("vectorcvx", "objective 'vectorcvx': its cvx form has shape (8,), not a scalar; "),
    ],
)
def test_a_cvx_form_that_does_nothing_is_refused(broken_objectives, tmp_path, capsys, name, message):
    # before: nonecvx was solved as 'optimal' with solver_objective_value NaN (E 23.81, the optimum 17.87)
    with pytest.raises(InputError) as info:
        solve("prefix:8", method="minerror-l2", solver="clarabel", objective=name)
    assert str(info.value).startswith(message)
    out = tmp_path / "s.npz"
    assert cli("solve", "--workload", "prefix:8", "--method", "minerror-l2", "--solver", "clarabel", "--objective", name, "--out", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"strategy-opt: error: {message}")
    assert not out.exists()


def test_a_cvx_form_disagreeing_with_the_value_is_reported(broken_objectives, caplog):
    import logging

    logger = logging.getLogger("strategy_opt")
    logger.addHandler(caplog.handler)  # the CLI may have stopped propagation to the root logger ...
    propagate, logger.propagate = logger.propagate, False  # ... or not (test run alone): one record either way
    try:
        with caplog.at_level(logging.WARNING, logger="strategy_opt"):
            s = solve("prefix:8", method="minerror-l2", solver="clarabel", objective="maxsum")
    finally:
        logger.removeHandler(caplog.handler)
        logger.propagate = propagate
    m = s.meta
    u = per_query_variances(s.matrix, prefix(8), 2)
    # the strategy minimises the cvx form: the total optimum of prefix:8 (17.866, the native solver's value)
    total = solve("prefix:8", method="minerror-l2").meta["unit_total_squared_error"]
    assert m["solver_objective_value"] == pytest.approx(total, rel=1e-6)
    assert m["objective_value"] == pytest.approx(u.max(), rel=1e-12)
    mm = m["objective_mismatch"]
    assert mm["solver_objective_value"] == m["solver_objective_value"] and mm["objective_value"] == m["objective_value"]
    assert mm["relative_difference"] == pytest.approx(1 - u.max() / total, rel=1e-6)
    assert mm["tolerance"] == pytest.approx(1e-3 + 1e-8)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "'maxsum'" in warned[0]
    assert f"{m['solver_objective_value']:.6g}" in warned[0] and f"{m['objective_value']:.6g}" in warned[0]


@pytest.mark.parametrize("solver", ["clarabel", "scs"])
def test_consistent_objectives_report_no_mismatch(user_objectives, solver):
    for name in ("max", "sqsum"):
        m = solve("all-range:6", method="minerror-l2", solver=solver, objective=name).meta
        assert "objective_mismatch" not in m
        assert m["objective_value"] == pytest.approx(m["solver_objective_value"], rel=1e-3)


@pytest.mark.parametrize(
    "name, message",
    [
        ("infvalue", r"^objective 'infvalue': its value is inf at the optimum's per-query variances \(its cvx form gives 17\.86\d* there\); "),
        ("failsatopt", r"^objective 'failsatopt': its value failed at the optimum's 8 per-query variances \(overflow in the user's code\)$"),
    ],
)
def test_a_value_that_is_not_finite_at_the_optimum_is_refused(broken_objectives, tmp_path, capsys, name, message):
    # before: infvalue was accepted with objective_value None; failsatopt crashed with a traceback
    with pytest.raises(InputError, match=message):
        solve("prefix:8", method="minerror-l2", solver="clarabel", objective=name)
    assert cli("solve", "--workload", "prefix:8", "--method", "minerror-l2", "--solver", "clarabel", "--objective", name, "--out", tmp_path / "s.npz") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"strategy-opt: error: objective '{name}': its value ")
    assert not (tmp_path / "s.npz").exists()


def test_a_weights_file_that_is_not_a_plain_npy_is_refused_by_name(tmp_path):
    """Pickles and .npz archives named .npy: one message naming the file (was NumPy's allow_pickle hint / 'got NpzFile')."""
    import pickle

    (tmp_path / "pk.npy").write_bytes(pickle.dumps([1.0] * 8))
    np.savez(tmp_path / "gz.npz", a=np.ones(8))
    (tmp_path / "gz.npz").rename(tmp_path / "gz.npy")
    for name in ("pk.npy", "gz.npy"):
        with pytest.raises(InputError, match=f"option weights=.*{name}: cannot read .*not a valid .npy file"):
            solve("prefix:8", method="minerror-l2", objective="weighted", weights=str(tmp_path / name))
    np.save(tmp_path / "w.npy", np.ones(8))
    assert solve("prefix:8", method="minerror-l2", objective="weighted", weights=str(tmp_path / "w.npy")).meta["objective"] == "weighted"


def test_auto_gives_small_min_max_programs_to_clarabel_and_the_others_to_the_native_solver():
    """Clarabel's memory follows the scaling blocks (8.4 GB on all ranges over 32 cells): auto takes it up to
    CLARABEL_MAX_BLOCK_ENTRIES; beyond, the native min-max solver (SCS took minutes there, and refused past
    2*10^6 Schur entries), with auto's time share. solve without a solver does the same."""
    import strategy_opt.programs.auto as auto
    from strategy_opt.problem import Problem
    from strategy_opt.programs.minerror_l2 import max_program_block_entries

    def profile(W, objective="max"):
        problem = Problem(W, "approx", objective, load_profile("native"), {})
        return auto._candidate_problem(problem, "minerror-l2").solver

    assert max_program_block_entries(40, 32) == (72 * 73 / 2) ** 2  # one 72-cone
    assert max_program_block_entries(136, 16) == 136 * (17 * 18 / 2) ** 2  # 136 Schur cones
    assert profile(all_range(16)).name == "clarabel" and profile(from_matrix(random_range(32, 40, seed=1).matrix())).name == "clarabel"
    for W in (all_range(32), all_range(65)):  # 528 cones of 33: 1.7e8 entries
        chosen = profile(W)
        assert chosen.name == "native" and chosen.time_limit == min(load_profile("native").time_limit, auto.NATIVE_MAX_SECONDS)
    s = solve(prefix(5), method="minerror-l2", objective="max")  # no solver named: not the native default
    assert s.meta["solver"] == "clarabel" and s.meta["objective_value"] == pytest.approx(_minmax_sdp(np.tril(np.ones((5, 5)))), rel=1e-5)
    s = solve(all_range(32), method="minerror-l2", objective="max")
    assert s.meta["solver"] == "native" and s.meta["solver_status"] == "optimal"


def test_max_on_all_predicate_beyond_float64_is_refused_in_one_line(tmp_path, capsys):
    """2^1100 queries: the block-size estimate overflowed a float (OverflowError traceback) when no solver was named."""
    out = tmp_path / "s.npz"
    assert main(["-q", "solve", "--workload", "all-predicate:1100", "--method", "minerror-l2", "--objective", "max", "--solver", "scs", "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "m=~10^331 queries give ~10^337 entries" in err[0], err
    # no solver named: the native min-max solver, refused up front by its per-query memory
    assert main(["-q", "solve", "--workload", "all-predicate:1100", "--method", "minerror-l2", "--objective", "max", "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the min-max solver's weights and variances for the ~10^331 queries needs about" in err[0], err


def test_auto_reports_the_best_bound_any_candidate_certified():
    """A diagonal workload over eight orders of magnitude: the identity is optimal (for a diagonal Gram G and
    diag(X) <= 1, trace(G X^-1) >= sum_j G_jj / X_jj >= trace(G)), and auto returns it; the bound the identity's
    compiler gives (the SVD bound) is weak here, the certificate another candidate computed is tight: auto reports it."""
    w = np.geomspace(1, 1e-8, 8)
    s = solve(np.diag(w), privacy="approx", method="auto")
    optimum = float((w**2).sum())
    assert s.meta["unit_total_squared_error"] == pytest.approx(optimum, rel=1e-9)
    assert s.meta["lower_bound"] == pytest.approx(optimum, rel=1e-8) and s.meta["lower_bound"] <= s.meta["unit_total_squared_error"]
    assert s.meta["ratio_to_lower_bound"] == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("design_start", [True, False], ids=["design-start", "fallback"])
def test_a_stalled_native_solve_falls_back_to_the_sdp(design_start, monkeypatch):
    """Random positive 2 x 60 rows: the native dual ascent stalled at gap 0.43, 3% above the optimum. The native
    solver now restarts from the design SDP's weights and certifies the optimum itself; without that restart
    (forced), the Clarabel fallback does. Both reach the optimum of our own SDP (Schur complement form, SCS
    at eps 1e-9)."""
    import cvxpy as cp

    import strategy_opt.native_l2 as native
    from strategy_opt.workload import from_matrix

    if not design_start:
        monkeypatch.setattr(native, "DESIGN_SDP_MAX_RANK", 0)
    Wm = np.random.default_rng(11).random((2, 60))
    s = solve(from_matrix(Wm), method="minerror-l2")
    A = s.dense()
    E = np.sqrt((A * A).sum(0)).max() ** 2 * np.trace(Wm.T @ Wm @ np.linalg.pinv(A.T @ A))
    X = cp.Variable((60, 60), PSD=True)
    t = cp.Variable(2)
    cons = [cp.diag(X) <= 1] + [cp.bmat([[X, Wm[i][:, None]], [Wm[i][None, :], cp.reshape(t[i], (1, 1), order="C")]]) >> 0 for i in range(2)]
    cp.Problem(cp.Minimize(cp.sum(t)), cons).solve(solver=cp.SCS, eps=1e-9, max_iters=200000)  # optimal: 2.28797
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-9)
    assert E <= t.value.sum() * (1 + 1e-5)
    if design_start:
        assert s.meta["solver_status"] == "optimal" and "native_fallback" not in s.meta
    else:
        assert s.meta["native_fallback"]["chosen"] == "clarabel"
    assert s.meta["lower_bound"] >= E * (1 - 1e-5)


def test_a_tiny_weight_gets_the_support_repair_not_a_refusal():
    """Weight 1e-10 on one query: the reweighted optimum leaves its direction out; the compiler's identity share supports it
    (it was refused as 'does not support'). The value is within 1% of the optimum 5.30278 (our own Schur SDP, Clarabel)."""
    import cvxpy as cp

    from oracles import query_variances

    c = np.array([1.0, 1e-10, 3.0])
    s = solve("prefix:3", method="minerror-l2", objective="weighted", weights=c)
    W = parse_spec("prefix:3")
    assert s.meta["objective_value"] == pytest.approx(float(c @ query_variances(s.dense(), W, 2)), rel=1e-9)
    Wm = W.matrix().toarray()
    X, t = cp.Variable((3, 3), PSD=True), cp.Variable(3)
    cons = [cp.diag(X) <= 1] + [cp.bmat([[X, Wm[i][:, None]], [Wm[i][None, :], cp.reshape(t[i], (1, 1), order="C")]]) >> 0 for i in range(3)]
    cp.Problem(cp.Minimize(c @ t), cons).solve(solver=cp.CLARABEL)
    assert s.meta["objective_value"] <= float(c @ t.value) * 1.01
    assert "support_repair" in s.meta


@pytest.mark.parametrize("weights, match", [("1,1e308,3", "span 1 to 1e\\+308"), ("[1, 2", "unbalanced brackets"), ("1,,2,3", "empty or non-numeric"), ("1, 2, 3]]", "unbalanced brackets")])
def test_weights_that_overflow_or_are_malformed_are_refused(capsys, weights, match):
    from strategy_opt.cli import main

    assert main(["-q", "solve", "--workload", "prefix:3", "--privacy", "approx", "--method", "minerror-l2", "--objective", "weighted", "--option", f"weights={weights}", "--out", "unused.npz"]) == 2
    assert re.search(match, capsys.readouterr().err)


@pytest.mark.parametrize("weights", ["1_0,1,1", "[[1,2,3]]"])
def test_weights_that_python_would_read_are_still_refused(capsys, weights):
    """1_0 is ten to Python's float, and nested lists flatten: both are malformed weight lists here."""
    assert main(["-q", "solve", "--workload", "prefix:3", "--privacy", "approx", "--method", "minerror-l2", "--objective", "weighted", "--option", f"weights={weights}", "--out", "unused.npz"]) == 2
    assert "option weights" in capsys.readouterr().err


@pytest.mark.parametrize(
    "k, n, form",
    [
        # measured with Clarabel, one BLAS thread (seconds: factorization / Schur)
        (30, 20, "factorization"),  # random-range:20:30:4, 1.2 / 18.6 (the block-entry rule chose Schur)
        (40, 32, "factorization"),  # random-range:32:40:1, 8 / minutes
        (78, 12, "schur"),  # all-range:12, 21 / 1.2
        (20, 20, "factorization"),  # prefix:20, 0.5 / 9.9
        (128, 8, "schur"),  # random ranges, 78 (time limit, 5 iterations) / 0.6
    ],
)
def test_the_max_program_form_is_the_one_clarabel_solved_faster(k, n, form):
    from strategy_opt.programs.minerror_l2 import _max_form

    assert _max_form(k, n) == form
    assert _max_form(2**1100, 1100) == "schur"  # all-predicate sizes: costs compared in logs


def test_a_solve_cut_by_its_budget_is_a_solver_failure_not_an_input_error(tmp_path, capsys):
    """An outside audit: SCS stopped after 30 iterations on a rank-3 workload left a strategy that does not support
    it; that was exit 2 with "add rows (e.g. the identity)". The cause is the budget: exit 1, naming it."""
    from strategy_opt.cli import main
    from strategy_opt.exceptions import SolverError
    from test_signed_search import _rank3

    W = _rank3()
    np.save(tmp_path / "w.npy", W)
    profile = tmp_path / "short.toml"
    profile.write_text('backend = "cvxpy"\nsolver = "SCS"\nmax_iters = 30\n\n[options]\nmax_iters = 30\n')
    with pytest.raises(SolverError, match=r"stopped with status 'optimal_inaccurate' before its strategy supported the workload .*\(max_iters"):
        solve(from_matrix(W), method="minerror-l2", solver=str(profile))
    capsys.readouterr()
    assert main(["-q", "solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--method", "minerror-l2", "--solver", str(profile), "--out", str(tmp_path / "s.npz")]) == 1
    assert "give it more iterations or time" in capsys.readouterr().err and not (tmp_path / "s.npz").exists()
    assert solve(from_matrix(W), method="minerror-l2").meta["solver_status"] == "optimal"  # the native solver: no cut
