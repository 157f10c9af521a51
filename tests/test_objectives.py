"""Objectives as a plug-in point: built-ins, the Python API and the entry-point group, end to end."""

import importlib
import textwrap

import cvxpy as cp
import numpy as np
import pytest

import strategy_opt.objectives as objectives_module
from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import per_query_variances
from strategy_opt.workload import from_matrix
from strategy_opt.exceptions import InputError
from strategy_opt.objectives import Objective, get_objective, objectives, register_objective
from strategy_opt.spec import parse_spec


@pytest.fixture
def clean_registry(monkeypatch):
    """A private copy of the registry, with entry points loaded afresh."""
    objectives()  # make sure built-ins are there before copying
    monkeypatch.setattr(objectives_module, "_OBJECTIVES", dict(objectives_module._OBJECTIVES))
    monkeypatch.setattr(objectives_module, "_loaded_entry_points", False)


def weighted_pnorm(p: float, name: str) -> Objective:
    """(sum_i w_i u_i^p)^(1/p): convex and non-decreasing on u >= 0 for p >= 1."""
    import cvxpy as cp

    def value(u, w=None):
        w = np.ones(len(u)) if w is None else np.asarray(w)
        return float((w @ np.asarray(u) ** p) ** (1 / p))

    def cvx(u, w=None):
        w = np.ones(u.shape[0]) if w is None else np.asarray(w)
        return cp.pnorm(cp.multiply(w ** (1 / p), u), p)

    return Objective(name, f"weighted {p}-norm of the per-query variances", value, cvx)


def test_builtins():
    table = objectives()
    assert {"total", "max", "weighted"} <= set(table)
    u = np.array([1.0, 3.0, 2.0])
    assert get_objective("total").value(u) == 6.0
    assert get_objective("max").value(u) == 3.0
    assert get_objective("weighted").value(u, [1.0, 0.0, 2.0]) == 5.0
    # the keyword the Objective contract documents: value(u, weights=None), cvx(u, weights=None)
    assert get_objective("weighted").value(u, weights=[1.0, 0.0, 2.0]) == 5.0
    assert get_objective("relative").value(u, weights=[1.0, 4.0, 2.0]) == 1.0 * 1 + 4.0 * 3 + 2.0 * 2  # weights are the 1/||w_i||^2
    assert get_objective("weighted").cvx(cp.Constant(u), weights=[1.0, 0.0, 2.0]).value == 5.0


def test_unknown_and_malformed_objectives_are_refused(clean_registry):
    with pytest.raises(InputError, match="unknown objective 'nope'"):
        get_objective("nope")
    with pytest.raises(InputError, match="expects an Objective"):
        register_objective(lambda u: 0.0)


def test_api_registered_pnorm_objective_end_to_end(clean_registry):
    W_spec = "all-range:8"
    register_objective(weighted_pnorm(3.0, "pnorm3"))
    assert "pnorm3" in objectives()
    s = solve(W_spec, method="minerror-l2", solver="clarabel", objective="pnorm3")
    from strategy_opt.spec import parse_spec

    W = parse_spec(W_spec)
    v = per_query_variances(s.matrix, W, 2)
    assert s.meta["objective"] == "pnorm3"
    assert s.meta["objective_value"] == pytest.approx(np.sum(v**3) ** (1 / 3), rel=1e-12)
    assert s.meta["objective_value"] == pytest.approx(s.meta["solver_objective_value"], rel=1e-6)
    # The 3-norm optimum beats the total and max optima in its own objective.
    for other in ("total", "max"):
        o = solve(W_spec, method="minerror-l2", solver="clarabel", objective=other)
        vo = per_query_variances(o.matrix, W, 2)
        assert s.meta["objective_value"] <= np.sum(vo**3) ** (1 / 3) * (1 + 1e-6)
    # A second backend agrees.
    t = solve(W_spec, method="minerror-l2", solver="scs", objective="pnorm3")
    assert t.meta["objective_value"] == pytest.approx(s.meta["objective_value"], rel=1e-4)


def test_user_objective_gets_the_weights_option(clean_registry):
    register_objective(weighted_pnorm(2.0, "wpnorm2"))
    W = "prefix:4"
    w = [4.0, 1.0, 1.0, 1.0]
    s = solve(W, method="minerror-l2", solver="clarabel", objective="wpnorm2", weights=w)
    from strategy_opt.spec import parse_spec

    v = per_query_variances(s.matrix, parse_spec(W), 2)
    assert s.meta["objective_value"] == pytest.approx(np.sqrt(np.dot(w, v**2)), rel=1e-12)


def _write_plugin(tmp_path, body: str, entry: str):
    (tmp_path / "sq_plugin.py").write_text(textwrap.dedent(body))
    info = tmp_path / "sq_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sq-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[strategy_opt.objectives]\n{entry}\n")


PLUGIN = """
    import numpy as np
    from strategy_opt.objectives import Objective


    def make():
        import cvxpy as cp

        return Objective(
            "sum-of-squares",
            "sum of squared per-query variances (plug-in)",
            lambda u, w=None: float(np.sum(np.asarray(u) ** 2)),
            lambda u, w=None: cp.sum_squares(u),
        )


    def broken():
        raise RuntimeError("plug-in failure")
"""


def test_entry_point_objective_is_listed_and_used(tmp_path, monkeypatch, clean_registry, capsys):
    _write_plugin(tmp_path, PLUGIN, "sum-of-squares = sq_plugin:make")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert main(["list", "objectives"]) == 0
    assert "sum-of-squares" in capsys.readouterr().out
    s = solve("all-range:8", method="minerror-l2", solver="clarabel", objective="sum-of-squares")
    from strategy_opt.workload import all_range

    v = per_query_variances(s.matrix, all_range(8), 2)
    assert s.meta["objective_value"] == pytest.approx(np.sum(v**2), rel=1e-12)
    total = per_query_variances(solve("all-range:8", method="minerror-l2").matrix, all_range(8), 2)
    assert np.sum(v**2) <= np.sum(total**2) * (1 + 1e-6)


def test_a_registration_overrides_a_plug_in_of_the_same_name(tmp_path, monkeypatch, clean_registry):
    """Plug-ins load before a registration, whenever the registry is first read: the user's objective is the one used."""
    _write_plugin(tmp_path, PLUGIN, "renamed = sq_plugin:make")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    import cvxpy as cp

    mine = register_objective(Objective("sum-of-squares", "mine: the largest variance", lambda u, w=None: float(np.max(u)), lambda u, w=None: cp.max(u)))
    assert get_objective("sum-of-squares") is mine
    assert "renamed" not in objectives()  # registered under the Objective's own name


def test_broken_entry_point_warns_and_the_rest_works(tmp_path, monkeypatch, clean_registry, package_log):
    # one log line (the CLI's style, silenced by -q); it was a Python UserWarning with a source line, on every command
    _write_plugin(tmp_path, PLUGIN, "broken = sq_plugin:broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with package_log.at_level("WARNING", logger="strategy_opt"):
        table = objectives()
    assert "broken" not in table and "total" in table
    assert [r.getMessage() for r in package_log.records] == ["objective entry point 'broken' not loaded: plug-in failure"]


DUPLICATES = PLUGIN + """

    def also():
        return Objective("sum-of-squares", "a second plug-in of the same name", lambda u, w=None: 0.0, None)


    def numbered():
        return Objective(123, "a name that is not a string", lambda u, w=None: 0.0, None)
"""


def test_plug_ins_with_a_taken_or_a_bad_name_are_not_loaded(tmp_path, monkeypatch, clean_registry, package_log, capsys):
    # the second of two plug-ins named alike silently won; a name 123 broke 'list objectives' with a TypeError
    import sys

    _write_plugin(tmp_path, DUPLICATES, "a = sq_plugin:make\nb = sq_plugin:also\nc = sq_plugin:numbered")
    monkeypatch.delitem(sys.modules, "sq_plugin", raising=False)  # an earlier test imported the other body
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with package_log.at_level("WARNING", logger="strategy_opt"):
        table = objectives()
    assert table["sum-of-squares"].description == "sum of squared per-query variances (plug-in)"  # the first stays
    messages = sorted(r.getMessage() for r in package_log.records)
    assert messages == [
        "objective entry point 'b' not loaded: its objective's name 'sum-of-squares' is taken by entry point 'a'",
        "objective entry point 'c' not loaded: an objective's name must be a non-empty string without surrounding spaces, got 123",
    ]
    assert main(["list", "objectives"]) == 0 and "sum-of-squares" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"objective must be a name \(a string\), got \['total'\]"):
        solve("prefix:4", objective=["total"])


def test_cli_solve_with_objective_max(tmp_path):
    out = tmp_path / "s.npz"
    code = main(["solve", "--privacy", "approx", "--method", "minerror-l2", "--solver", "scs", "--objective", "max", "--workload", "prefix:6", "--out", str(out)])
    assert code == 0
    from strategy_opt.io import read_strategy
    from strategy_opt.workload import prefix

    s = read_strategy(out)
    assert s.meta["objective"] == "max"
    assert s.meta["objective_value"] == pytest.approx(per_query_variances(s.matrix, prefix(6), 2).max(), rel=1e-9)


# --------------------------------------------------------------------------- monotonicity probe


@pytest.mark.parametrize("name", ["total", "max", "weighted"])
def test_builtins_pass_the_monotonicity_probe(name):
    from strategy_opt.objectives import check_monotone

    check_monotone(get_objective(name), 7, np.linspace(1, 2, 7) if name == "weighted" else None)
    check_monotone(get_objective(name), 500, np.linspace(1, 2, 500) if name == "weighted" else None)  # sampled queries


def test_user_pnorm_passes_and_decreasing_objectives_are_refused():
    from strategy_opt.objectives import check_monotone

    check_monotone(weighted_pnorm(3.0, "p3"), 5, np.ones(5))
    # decreasing in query 3 only, and only at large variances (caught at the probe's second scale)
    bump = Objective("bump", "", lambda u, w=None: float(np.sum(u) - (2.0 * u[3] if u[3] > 100 else 0.0)), None)
    with pytest.raises(InputError) as info:
        check_monotone(bump, 5)
    msg = str(info.value)
    assert msg.startswith("objective 'bump' decreases when the variance of query 3 grows (value ")
    assert msg.endswith("after raising it); objectives must be non-decreasing in every per-query variance")
    # independent check of the values in the message: recompute them from the same probe
    rng = np.random.default_rng(0)
    rng.uniform(0.5, 1.5, 5)  # the first probe (scale 1) passes
    u0 = 1000.0 * rng.uniform(0.5, 1.5, 5)
    f0 = bump.value(u0)
    u1 = u0.copy()
    u1[3] *= 1.5
    assert f"(value {f0:.6g} at a probe, {bump.value(u1):.6g} after raising it)" in msg


def test_an_objective_failing_on_the_probe_is_refused():
    from strategy_opt.objectives import check_monotone

    def value(u, w=None):
        raise ZeroDivisionError("nope")

    with pytest.raises(InputError, match=r"^objective 'bad': its value failed on a probe vector of 4 variances \(nope\)$"):
        check_monotone(Objective("bad", "", value, None), 4)
    with pytest.raises(InputError, match="NaN"):
        check_monotone(Objective("nan", "", lambda u, w=None: float("nan"), None), 4)


def test_the_probe_refuses_minus_infinity_and_sees_a_drop_from_infinity():
    from strategy_opt.objectives import check_monotone

    with pytest.raises(InputError, match=r"^objective 'neginf': its value is -inf on a probe vector of 4 positive variances$"):
        check_monotone(Objective("neginf", "", lambda u, w=None: -float("inf"), None), 4)
    # +inf is an extended value (a convex constraint), but inf then finite after a variance grows is a decrease
    drop = Objective("drop", "", lambda u, w=None: float("inf") if u[1] < 4 else float(np.sum(u)), None)
    with pytest.raises(InputError, match="^objective 'drop' decreases when the variance of query 1 grows"):
        check_monotone(drop, 4)
    check_monotone(Objective("always-inf", "", lambda u, w=None: float("inf"), None), 4)  # never decreases


# --------------------------------------------------------------------------- the cvx form


def test_check_cvx_form_accepts_the_builtins_and_a_user_pnorm():
    import cvxpy as cp

    from strategy_opt.objectives import check_cvx_form

    u = cp.Variable(5)
    for name in ("total", "max"):
        assert check_cvx_form(get_objective(name), u).is_convex()
    assert check_cvx_form(get_objective("weighted"), u, np.linspace(1, 2, 5)).is_scalar()
    assert check_cvx_form(weighted_pnorm(3.0, "p3"), u).is_convex()


def _cvx_forms():
    import cvxpy as cp

    other = cp.Variable(5)
    unset = cp.Parameter(nonneg=True, name="scale")

    def raises(u, w=None):
        raise KeyError("weights")

    return [
        ("none", lambda u, w=None: None, r"its cvx form returned NoneType \(None\), not a cvxpy expression; it must return a scalar"),
        ("number", lambda u, w=None: 0.0, r"its cvx form returned float \(0\.0\), not a cvxpy expression"),
        ("array", lambda u, w=None: np.zeros(5), r"its cvx form returned ndarray \(array\(\[0\., 0\., 0\., 0\., 0\.\]\)\), not a cvxpy expression"),
        ("constant", lambda u, w=None: cp.Constant(3.0), r"its cvx form does not depend on the variance variable u \(it is a constant\)"),
        ("elsewhere", lambda u, w=None: cp.sum(other), r"its cvx form does not depend on the variance variable u"),
        ("vector", lambda u, w=None: 2 * u, r"its cvx form has shape \(5,\), not a scalar"),
        ("concave", lambda u, w=None: cp.sum(cp.sqrt(u)), r"is not DCP-convex in cvxpy"),
        ("param", lambda u, w=None: unset * cp.sum(u), r"cvxpy parameter\(s\) without a value \(scale\)"),
        ("raises", raises, r"its cvx form failed on a cvxpy variable of 5 variances \('weights'\)"),
    ]


@pytest.mark.parametrize("name, cvx, message", _cvx_forms(), ids=[c[0] for c in _cvx_forms()])
def test_check_cvx_form_refuses_forms_a_solver_cannot_minimise(name, cvx, message):
    import cvxpy as cp

    from strategy_opt.objectives import check_cvx_form

    with pytest.raises(InputError, match=f"^objective {name!r}: " if name != "concave" else "^objective 'concave' ") as info:
        check_cvx_form(Objective(name, "", lambda u, w=None: float(np.sum(u)), cvx), cp.Variable(5))
    assert len(str(info.value).splitlines()) == 1
    assert info.match(message)


def test_a_constant_cvx_form_is_refused_before_solving(clean_registry, monkeypatch):
    import cvxpy as cp

    import strategy_opt.programs.minerror_l2 as module

    register_objective(Objective("const", "", lambda u, w=None: float(np.sum(u)), lambda u, w=None: cp.Constant(0.0)))
    monkeypatch.setattr(module, "_solve_cvxpy", lambda *a, **k: pytest.fail("solved a constant objective"))
    with pytest.raises(InputError, match="^objective 'const': its cvx form does not depend on the variance variable u"):
        solve("prefix:4", method="minerror-l2", solver="scs", objective="const")


# --------------------------------------------------------------------------- auto: why no candidate ran


def _no_baselines(monkeypatch, reason=InputError):
    """Make identity, wavelet and hierarchical refuse, so only the optimisers are left."""
    from dataclasses import replace

    import strategy_opt.registry as registry

    table = registry._METHODS
    for name in ("identity", "wavelet", "hierarchical"):
        monkeypatch.setitem(table, name, replace(table[name], func=_failing(reason(f"{name} refuses"))))


def test_auto_says_why_no_optimiser_ran_and_falls_back_to_the_baselines(monkeypatch, capsys):
    # the only optimiser for 'max' refuses (SCS named: its Schur form is too large): the baselines and the certified
    # total optimum answer, evaluated under max, with the reason kept
    s = solve("all-range:64", privacy="approx", method="auto", objective="max", solver="scs")
    m = s.meta
    assert m["auto_choice"] in ("identity", "wavelet", "hierarchical", "minerror-l2/total") and m["objective"] == "max"
    assert set(m["auto_candidates"]) >= {"identity", "wavelet", "hierarchical", "minerror-l2/total"}
    assert m["objective_value"] == min(v for v in m["auto_candidates"].values() if v is not None)
    assert m["auto_skipped"]["minerror-l2"].startswith("objective 'max' needs one (64+1)x(64+1) Schur complement per query")
    assert m["objective_value"] == pytest.approx(per_query_variances(s.matrix, parse_spec("all-range:64"), 2).max(), rel=1e-10)
    # with no baseline either: one line naming each reason, a user error (before: SolverError, exit 1)
    import strategy_opt.programs.auto as auto_module

    monkeypatch.setattr(auto_module, "TOTAL_OPTIMUM_MAX_N", 0)
    _no_baselines(monkeypatch)
    with pytest.raises(InputError) as info:
        solve("all-range:64", privacy="approx", method="auto", objective="max", solver="scs")
    msg = str(info.value)
    assert msg.startswith("auto: no candidate method can take this problem: minerror-l2: objective 'max' needs one (64+1)x(64+1) Schur complement per query")
    assert "8,788,000 entries (limit 2,000,000)" in msg and "\n" not in msg
    assert main(["-q", "solve", "--workload", "all-range:64", "--privacy", "approx", "--method", "auto", "--objective", "max", "--solver", "scs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("strategy-opt: error: auto: no candidate method can take this problem: minerror-l2: ") and "Schur complement" in err[0]


def test_auto_solves_max_past_the_generic_sdp_limit_with_the_native_solver():
    """all-range:64 under max: the Schur form is refused (2,080 cones), the baselines answered (wavelet/hierarchical);
    the native min-max solver now runs, certified, and beats them."""
    W = parse_spec("all-range:64")
    s = solve("all-range:64", privacy="approx", method="auto", objective="max")
    m = s.meta
    assert m["auto_choice"] == "minerror-l2" and m["solver"] == "native" and m["objective"] == "max"
    assert m["objective_value"] == pytest.approx(per_query_variances(s.matrix, W, 2).max(), rel=1e-10)
    assert m["objective_lower_bound_kind"] == "simplex-weighted-dual" and m["objective_relative_gap"] <= 1e-5
    baselines = [solve("all-range:64", privacy="approx", method=k) for k in ("identity", "wavelet", "hierarchical")]
    assert m["objective_value"] < min(per_query_variances(b.matrix, W, 2).max() for b in baselines)


def test_auto_names_a_candidate_skipped_for_its_solver(monkeypatch, clean_registry):
    # a user objective with the native profile on > 64 cells: auto does not hand it to a generic SDP solver
    # (prefixes: not a marginal workload, which the marginals template would take)
    import cvxpy as cp

    register_objective(Objective("sqsum", "sum of squared variances", lambda u, weights=None: float(np.sum(np.square(u))), lambda u, weights=None: cp.sum_squares(u)))
    s = solve("prefix:65", privacy="approx", method="auto", objective="sqsum", solver="native")
    assert s.meta["auto_skipped"]["minerror-l2"].startswith("objective 'sqsum' needs a generic SDP solver, which auto runs up to 64 cells (this workload has 65)")
    assert s.meta["auto_choice"] == "minerror-l2/total"  # the certified total optimum, evaluated under sqsum, beats the baselines
    import strategy_opt.programs.auto as auto_module

    monkeypatch.setattr(auto_module, "TOTAL_OPTIMUM_MAX_N", 0)
    _no_baselines(monkeypatch)
    with pytest.raises(
        InputError, match=r"^auto: no candidate method can take this problem: minerror-l2: objective 'sqsum' needs a generic SDP solver, which auto runs up to 64 cells \(this workload has 65\)"
    ):
        solve("prefix:65", privacy="approx", method="auto", objective="sqsum", solver="native")


def _failing(exc):
    def func(problem):
        raise exc

    return func


def test_auto_is_a_solver_error_when_a_candidate_failed_numerically(monkeypatch, capsys):
    from dataclasses import replace

    import strategy_opt.registry as registry
    from strategy_opt.exceptions import SolverError

    table = registry._METHODS
    monkeypatch.setitem(table, "minerror-l2", replace(table["minerror-l2"], func=_failing(SolverError("diverged\n after 3 iterations"))))
    assert solve("prefix:8", privacy="approx", method="auto", objective="max").meta["auto_skipped"] == {"minerror-l2": "diverged after 3 iterations (SolverError)"}
    _no_baselines(monkeypatch, SolverError)
    with pytest.raises(SolverError, match=r"^auto: no candidate method could solve this problem: minerror-l2: diverged after 3 iterations \(SolverError\); try a specific method \(--method\)$"):
        solve("prefix:8", privacy="approx", method="auto", objective="max")
    assert main(["-q", "solve", "--workload", "prefix:8", "--privacy", "approx", "--method", "auto", "--objective", "max"]) == 1
    assert "minerror-l2: diverged after 3 iterations" in capsys.readouterr().err
    # mixed reasons (total objective: every approx candidate): one numerical failure makes it a SolverError, each reason listed
    for name in ("identity", "wavelet", "hierarchical", "eigen-design"):
        monkeypatch.setitem(table, name, replace(table[name], func=_failing(InputError(f"{name} refuses" + " x" * 200))))
    with pytest.raises(SolverError) as info:
        solve("prefix:8", privacy="approx", method="auto")
    msg = str(info.value)
    for name in ("identity", "wavelet", "hierarchical", "eigen-design"):
        assert f"{name}: {name} refuses x x" in msg
    assert "minerror-l2: diverged after 3 iterations (SolverError)" in msg and "..." in msg and "\n" not in msg
    # every candidate refusing the problem: an InputError
    monkeypatch.setitem(table, "minerror-l2", replace(table["minerror-l2"], func=_failing(InputError("too large"))))
    with pytest.raises(InputError, match="^auto: no candidate method can take this problem: identity: identity refuses"):
        solve("prefix:8", privacy="approx", method="auto")


# --------------------------------------------------------------------------- auto under epsilon-DP: the baselines always run

BIG_2D = "all-range:256*all-range:256"  # 65536 cells: above the 20000-cell dense Gram limit of auto-pure / p-identity


def test_auto_pure_on_a_domain_too_large_for_dense_analysis_uses_kronecker_candidates(tmp_path, capsys):
    # before: "auto: no candidate method can take this problem: auto-pure: the Gram matrix needs a dense
    # 65536x65536 matrix" although identity, hierarchical and wavelet solve it in seconds (Kronecker per
    # attribute); then auto-pure aborted on its identity candidate (dense analysis) and auto kept the
    # baselines. auto-pure now evaluates the identity per factor, skips GreedyH (dense analysis) and keeps
    # p-identity's Kronecker strategy.
    from strategy_opt.error import KroneckerMatrix
    from strategy_opt.workload import all_range

    s = solve(BIG_2D, privacy="pure", method="auto")
    cands = s.meta["auto_candidates"]
    assert set(cands) == {"auto-pure", "identity", "hierarchical", "wavelet"}
    assert s.meta["auto_choice"] == min(cands, key=cands.get) == "auto-pure"
    assert set(s.meta["auto_pure_skipped"]) == {"greedy-h"}  # its strategy needs dense n x n analysis: skipped
    assert s.meta["auto_pure_candidates"]["identity"] == pytest.approx(cands["identity"], rel=1e-12)  # per factor: trace(W^T W)
    assert cands["auto-pure"] < 0.3 * cands["hierarchical"] < cands["identity"] < cands["wavelet"]  # measured: 1.14e12, 4.49e12, 8.00e12, 1.32e13
    # E_1 of a Kronecker strategy from its factors: ||A1 (x) A2||_1 = ||A1||_1 ||A2||_1, traces multiply
    assert isinstance(s.matrix, KroneckerMatrix)
    G = all_range(256).gram()
    E = 1.0
    for f in s.matrix.factors:
        f = f.toarray() if hasattr(f, "toarray") else np.asarray(f)
        E *= np.abs(f).sum(axis=0).max() ** 2 * np.trace(G @ np.linalg.pinv(f.T @ f))
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-8)
    out = tmp_path / "s.npz"
    assert main(["-q", "solve", "--workload", BIG_2D, "--privacy", "pure", "--method", "auto", "--out", str(out)]) == 0
    assert out.exists() and "error" not in capsys.readouterr().err


def test_auto_approx_on_a_large_2d_domain_still_uses_the_baselines():
    s = solve(BIG_2D, privacy="approx", method="auto")
    cands = s.meta["auto_candidates"]
    assert {"identity", "hierarchical", "wavelet"} <= set(cands) and s.meta["auto_choice"] == min(cands, key=cands.get)


def test_auto_pure_falls_back_to_the_baselines_when_auto_pure_fails(monkeypatch):
    from dataclasses import replace

    import strategy_opt.registry as registry
    from strategy_opt.exceptions import SolverError

    table = registry._METHODS
    monkeypatch.setitem(table, "auto-pure", replace(table["auto-pure"], func=_failing(SolverError("diverged"))))
    s = solve("prefix:32", privacy="pure", method="auto")
    cands = s.meta["auto_candidates"]
    assert set(cands) == {"identity", "hierarchical", "wavelet"} and s.meta["auto_choice"] == min(cands, key=cands.get)
    # every candidate failing: each reason on the one line (cafd79f)
    for name in ("identity", "hierarchical", "wavelet"):
        monkeypatch.setitem(table, name, replace(table[name], func=_failing(InputError(f"{name} refuses"))))
    with pytest.raises(SolverError, match=r"^auto: no candidate method could solve this problem: auto-pure: diverged \(SolverError\) \| identity: identity refuses \| hierarchical"):
        solve("prefix:32", privacy="pure", method="auto")


def test_auto_pure_keeps_auto_pure_and_lists_the_baselines():
    # auto-pure compares the same baselines (H_b over more branchings): it wins, with its certified l2-optimum bound;
    # hierarchical is built with auto-pure's best branching instead of a second search
    s = solve("all-range:32", privacy="pure", method="auto")
    cands = s.meta["auto_candidates"]
    assert set(cands) == {"auto-pure", "identity", "hierarchical", "wavelet"}
    assert s.meta["auto_choice"] == "auto-pure" and s.meta["lower_bound_kind"] == "l2-optimum"
    assert all(cands["auto-pure"] <= cands[k] for k in cands)
    b = s.meta["hierarchical_branching"]
    H = solve("all-range:32", privacy="pure", method="hierarchical", branching=b).meta["unit_total_squared_error"]
    assert cands["hierarchical"] == pytest.approx(H, rel=1e-12)


def test_a_lapack_failure_in_the_max_bound_leaves_the_floor_bound(monkeypatch):
    """The simplex-weighted bound of objective max is optional: if LAPACK gives up, the per-query floor stands."""
    import strategy_opt.programs.minerror_l2 as m

    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge in Linear Least Squares")

    monkeypatch.setattr(m, "solve_total_l2", fail)
    s = solve("prefix:5", privacy="approx", method="minerror-l2", objective="max", solver="clarabel")
    meta = s.meta
    assert meta["objective_lower_bound_details"]["status"].startswith("failed: SVD did not converge")
    assert meta["objective_lower_bound_kind"] == "per-query-floor"
    assert meta["objective_lower_bound"] <= meta["objective_value"]


def test_auto_never_returns_worse_than_a_baseline_under_a_non_total_objective():
    """Rows from 1e3 to 1e-2: the SDP's strategy (inaccurate solve) is worse than fixed constructions;
    auto evaluates identity / wavelet / H_b under the objective and returns the best, its value checked by numpy."""
    from strategy_opt.workload import from_matrix

    W = np.array([[1e3, 1e3, 0, 0, 0, 0], [0, 0, 1e-2, 1e-2, 1e-2, 1e-2], [1, 0, 1, 0, 1, 0], [0, 1, 0, -1, 0, 2], [5, 5, 5, 5, 5, 5], [0, 0, 0, 0, 0, 30]])
    s = solve(from_matrix(W), privacy="approx", method="auto", objective="max")
    m = s.meta
    assert {"identity", "wavelet", "hierarchical"} <= set(m["auto_candidates"])
    assert m["objective"] == "max"
    assert m["objective_value"] == pytest.approx(min(m["auto_candidates"].values()), rel=1e-12)
    A = s.matrix.toarray() if hasattr(s.matrix, "toarray") else np.asarray(s.matrix)
    sens2 = (A**2).sum(axis=0).max()
    mine = sens2 * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W).max()
    assert m["objective_value"] == pytest.approx(mine, rel=1e-8)
    assert m["objective_value"] <= 2e6 * (1 + 1e-12)  # the identity's max variance: 1e6 + 1e6
    assert m["objective_lower_bound"] <= m["objective_value"]


def test_an_inaccurate_solve_of_a_builtin_objective_is_called_inaccurate(monkeypatch):
    """A solver that claims half the value its X gives (as Clarabel did on rows from 1e3 to 1e-2 before
    the max objective's active set): for 'max' that is an inaccurate solve, not two different functions."""
    import strategy_opt.programs.minerror_l2 as ml2

    real = ml2._max_active_set

    def claims_half(W, problem):
        Xv, status, iters, value, mult, facts = real(W, problem)
        return Xv, status, iters, 0.5 * value, mult, facts

    monkeypatch.setattr(ml2, "_max_active_set", claims_half)
    m = solve("prefix:6", privacy="approx", method="minerror-l2", objective="max", solver="clarabel").meta
    mm = m["objective_mismatch"]
    assert mm["objective_value"] == pytest.approx(2 * mm["solver_objective_value"], rel=1e-5)
    assert "the solve is inaccurate" in mm["message"] and "not the same function" not in mm["message"]


def test_auto_answers_with_a_baseline_when_every_optimiser_refuses():
    """all-range:48 has 1176 queries: one 49x49 Schur complement each is over SCHUR_MAX_ENTRIES, so
    minerror-l2 on SCS refuses the max objective; the baselines and the certified total optimum still answer under
    it (was: exit 2 'no candidate method can take this problem')."""
    n = 48
    W = np.array([[1.0 if i <= k <= j else 0.0 for k in range(n)] for i in range(n) for j in range(i, n)])
    s = solve("all-range:48", privacy="approx", method="auto", objective="max", solver="scs")
    m = s.meta
    assert "minerror-l2" not in m["auto_candidates"] and m["auto_choice"] in ("identity", "wavelet", "hierarchical", "minerror-l2/total")
    assert "Schur complement" in m["auto_skipped"]["minerror-l2"]
    A = s.matrix.toarray() if hasattr(s.matrix, "toarray") else np.asarray(s.matrix)
    mine = (A**2).sum(axis=0).max() * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W).max()
    assert m["objective"] == "max" and m["objective_value"] == pytest.approx(mine, rel=1e-8)
    assert m["objective_value"] == pytest.approx(min(m["auto_candidates"].values()), rel=1e-12)


@pytest.mark.parametrize("name", ["total", "max", "weighted", "relative"])
def test_builtin_objective_names_cannot_be_replaced(name):
    """A replacement 'total' was accepted and silently ignored by minerror-l2's native solver (it kept the built-in result)."""
    import cvxpy as cp

    builtin = get_objective(name)
    with pytest.raises(InputError, match="built in"):
        register_objective(Objective(name, "sum of squares", lambda u, w=None: float(np.sum(np.square(u))), lambda u, w=None: cp.sum_squares(u)))
    assert get_objective(name) is builtin


def test_auto_approx_on_a_kronecker_workload_takes_the_product_of_per_attribute_optima():
    """E_2 factors over a Kronecker product: the product strategy's error is the product of the factors' optima.

    On 160 x 160 cells (beyond the dense limit: no flat optimiser runs) it wins; on 16 x 8 the exact
    program on the flat domain does better, and auto keeps that."""
    from strategy_opt.api import solve as solve_

    s = solve_("all-range:160*prefix:160", privacy="approx", method="auto")
    one = solve_("all-range:160", privacy="approx", method="minerror-l2").meta["unit_total_squared_error"]
    two = solve_("prefix:160", privacy="approx", method="minerror-l2").meta["unit_total_squared_error"]
    assert s.meta["auto_choice"] == "per-attribute" and s.meta["per_attribute_choices"] == ["minerror-l2", "minerror-l2"]
    assert s.meta["unit_total_squared_error"] == pytest.approx(one * two, rel=1e-6)
    assert s.meta["unit_total_squared_error"] < 0.6 * min(v for k, v in s.meta["auto_candidates"].items() if k != "per-attribute")
    small = solve_("prefix:16*all-range:8", privacy="approx", method="auto")
    assert small.meta["auto_choice"] == "minerror-l2" and "per-attribute" in small.meta["auto_candidates"]


def test_auto_approx_optimises_a_large_product_workload_per_attribute_only():
    """An outside audit: on prefix:128*all-range:100 (12800 cells) auto ran the flat Eigen-Design first (> 10 min,
    10 GB); on prefix:64*all-range:50 (3200 cells) it took 40 s for 2.53e6 against the per-attribute 1.74e6. Past
    `FLAT_ON_PRODUCT_MAX_N` cells the flat optimisers are skipped with a reason, and the product of the factors'
    optima (its error the product of theirs) is returned."""
    from strategy_opt.api import solve as solve_
    from strategy_opt.programs.auto import FLAT_ON_PRODUCT_MAX_N

    assert FLAT_ON_PRODUCT_MAX_N < 3200
    s = solve_("prefix:64*all-range:50", privacy="approx", method="auto")
    assert s.meta["auto_choice"] == "per-attribute"
    assert "eigen-design" not in s.meta["auto_candidates"] and "optimised per attribute" in s.meta["auto_skipped"]["eigen-design"]
    factors = [solve_(f, privacy="approx", method="auto").meta["unit_total_squared_error"] for f in ("prefix:64", "all-range:50")]
    assert s.meta["unit_total_squared_error"] == pytest.approx(factors[0] * factors[1], rel=1e-9)


def test_user_objective_on_rows_of_very_different_scales(clean_registry):
    """Rows from 1e-3 to 1e3: a user's max matches the built-in max (its active-set program); it was reported infeasible."""
    import cvxpy as cp

    M = np.tril(np.ones((5, 5))) * np.array([1e-3, 1e-1, 1, 10, 1e3])[:, None]
    register_objective(Objective("my-max", "", lambda u, w=None: float(np.max(u)), lambda u, w=None: cp.max(u)))
    mine = solve(M, method="minerror-l2", objective="my-max", solver="clarabel")
    builtin = solve(M, method="minerror-l2", objective="max", solver="clarabel")
    assert mine.meta["objective_value"] == pytest.approx(builtin.meta["objective_value"], rel=1e-4)
    assert "objective_mismatch" not in mine.meta


def test_a_decreasing_cvx_form_is_named_as_the_cause(clean_registry):
    """A value that passes the monotonicity probe with a cvx form that decreases: the unbounded program is the user's objective."""
    import cvxpy as cp

    register_objective(Objective("neg", "", lambda u, w=None: float(np.sum(u)), lambda u, w=None: -cp.sum(u)))
    with pytest.raises(InputError, match="objective 'neg': its cvx form is unbounded below .* decreases as variances grow"):
        solve("prefix:5", method="minerror-l2", objective="neg", solver="clarabel")


def test_auto_pure_minimises_a_linear_objective_on_the_reweighted_workload():
    """epsilon-DP, objective weighted: sum_i c_i u_i is the total error of diag(sqrt(c)) W, so auto runs auto-pure
    there (prefix:6 with weights 1..5, 100: 655 for auto-pure's total-optimal strategy -> about 365). The value is
    recomputed by numpy from the matrix; the bound is the (eps, delta) optimum of the scaled workload, solved here
    independently by cvxpy (min trace(G_c X^-1), diag(X) <= 1), and is below every candidate."""
    import cvxpy as cp

    c = np.array([1.0, 2, 3, 4, 5, 100])
    s = solve("prefix:6", privacy="pure", method="auto", objective="weighted", weights=c.tolist())
    m = s.meta
    assert m["auto_choice"] == "auto-pure/reweighted"
    assert m["objective_value"] < 0.6 * m["auto_candidates"]["auto-pure"]
    A = s.dense()
    W = np.tril(np.ones((6, 6)))
    mine = np.abs(A).sum(axis=0).max() ** 2 * c @ np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W)
    assert m["objective_value"] == pytest.approx(mine, rel=1e-9)
    Gc = W.T @ np.diag(c) @ W
    X, U = cp.Variable((6, 6), PSD=True), cp.Variable((6, 6), symmetric=True)
    L = np.linalg.cholesky(Gc)
    cp.Problem(cp.Minimize(cp.trace(U)), [cp.bmat([[X, L], [L.T, U]]) >> 0, cp.diag(X) <= 1]).solve(solver="CLARABEL")
    assert m["objective_lower_bound_kind"] == "reweighted-workload-l2-optimum"
    assert m["objective_lower_bound"] == pytest.approx(U.value.trace(), rel=1e-4)
    assert all(m["objective_lower_bound"] <= v for v in m["auto_candidates"].values())


def test_auto_pure_relative_objective_improves_on_the_total_optimal_strategy():
    """objective relative on prefix:16: the reweighted candidate wins and the file's value recomputes."""
    s = solve("prefix:16", privacy="pure", method="auto", objective="relative")
    m = s.meta
    assert m["auto_choice"] == "auto-pure/reweighted" and m["auto_pure_reweighted"] == "relative"
    # the certified bound on the total error that auto-pure computed for the total (a regression audit: prefix:512
    # fell back to the weaker SVD bound, 3705 against 3842)
    assert m["lower_bound_kind"] == "l2-optimum" and m["lower_bound"] <= m["unit_total_squared_error"]
    assert m["objective_value"] < 0.95 * m["auto_candidates"]["auto-pure"]
    W = np.tril(np.ones((16, 16)))
    u = per_query_variances(s.matrix, parse_spec("prefix:16"), 1)
    assert m["objective_value"] == pytest.approx(float(u @ (1 / (W * W).sum(axis=1))), rel=1e-12)


def test_auto_pure_options_reach_the_reweighted_run(monkeypatch):
    """A regression audit: under epsilon-DP with a relative objective auto refused --option time_budget ("unknown
    option"), so auto-pure's options never reached the reweighted run; they do now, and a bad value is refused."""
    from strategy_opt.exceptions import OptionError

    s = solve("prefix:16", privacy="pure", method="auto", objective="relative", time_budget=0.5, seed=3)
    assert s.meta["objective"] == "relative" and "auto-pure/reweighted" in s.meta["auto_candidates"]
    import strategy_opt.programs.auto as auto_module

    ran = []  # refused before any construction is built (a regression audit: after about 5 s of candidates)
    monkeypatch.setattr(auto_module, "_baselines_under_objective", lambda *a: ran.append(a) or iter(()))
    for bad, name in (({"time_budget": -1}, "time_budget"), ({"random_starts": 1.5}, "random_starts")):
        with pytest.raises(OptionError, match=name):
            solve("prefix:32", privacy="pure", method="auto", objective="relative", **bad)
    assert ran == []


def test_auto_ranks_objective_values_at_or_below_zero_by_value(clean_registry):
    # sum(u) - 1e6: every value was <= 0, ranked by log10 as -inf, so the first candidate (the identity) won
    import cvxpy as cp

    register_objective(Objective("shifted-total", "sum of variances minus 1e6", lambda u, w=None: float(np.sum(u)) - 1e6, lambda u, w=None: cp.sum(u) - 1e6))
    s = solve("all-range:32", privacy="pure", method="auto", objective="shifted-total")
    values = s.meta["auto_candidates"]
    assert s.meta["objective_value"] == min(v for v in values.values() if v is not None) < values["identity"]
    W = parse_spec("all-range:32")
    assert s.meta["objective_value"] == pytest.approx(np.sum(per_query_variances(s.matrix, W, 1)) - 1e6, rel=1e-12)


@pytest.mark.parametrize("value, message", [
    (lambda u, w=None: -float(np.sum(u)), "decreases"),
    (lambda u, w=None: "big", "its value failed on a probe"),
    (lambda u, w=None: float("nan"), "its value is NaN"),
])
@pytest.mark.parametrize("privacy", ["approx", "pure"])
def test_auto_probes_a_user_objective_before_any_candidate_runs(clean_registry, value, message, privacy):
    # auto wrote the identity (the error-maximising baseline) for a decreasing objective, and a traceback for "big"
    register_objective(Objective("user-made", "a broken objective", value, None))
    with pytest.raises(InputError, match=f"objective 'user-made'.*{message}"):
        solve("prefix:8", privacy=privacy, method="auto", objective="user-made")


def test_a_method_for_any_objective_reports_the_objective_not_the_total(clean_registry):
    # a method registered with objectives=None: the compiler wrote the total error as the 3-norm's or max's value
    from strategy_opt.bases import hierarchical_matrix
    from strategy_opt.compiler import compile_strategy
    from strategy_opt.registry import _METHODS, register_method

    @register_method("test-any-objective", privacy=("approx",), objectives=None)
    def tree(problem):
        return compile_strategy(hierarchical_matrix(problem.workload.n, 2), problem, "test-any-objective")

    register_objective(weighted_pnorm(3.0, "p3"))
    try:
        W = parse_spec("all-range:16")
        A = hierarchical_matrix(16, 2).toarray()
        Wm = W.matrix().toarray()
        v = np.max(np.sum(A**2, axis=0)) * np.einsum("ij,jk,ik->i", Wm, np.linalg.pinv(A.T @ A), Wm)  # numpy, by hand
        for objective, expected in (("max", v.max()), ("p3", np.sum(v**3) ** (1 / 3)), ("total", v.sum())):
            s = solve(W, method="test-any-objective", objective=objective)
            assert s.meta["objective_value"] == pytest.approx(expected, rel=1e-9), objective
        assert s.meta["unit_total_squared_error"] == pytest.approx(v.sum(), rel=1e-9)
    finally:
        _METHODS.pop("test-any-objective")


def _flat_min_max_sdp(W: np.ndarray) -> float:
    """min_X max_i w_i X^{-1} w_i^T over PSD X with unit diagonal (cvxpy, Clarabel): the (eps, delta) min-max optimum."""
    n = W.shape[1]
    X, t = cp.Variable((n, n), PSD=True), cp.Variable()
    lmis = [cp.bmat([[X, w.reshape(-1, 1)], [w.reshape(1, -1), cp.reshape(t, (1, 1), order="C")]]) >> 0 for w in W]
    cp.Problem(cp.Minimize(t), [cp.diag(X) <= 1, *lmis]).solve(solver="CLARABEL")
    return float(t.value)


def test_per_attribute_max_is_the_product_of_the_factors_min_max_optima():
    """Objective max on a Kronecker workload: the product strategy's largest variance is the product of the factors',
    and since gamma_2 is multiplicative it is the flat optimum, which an independent SDP on the 12 flat cells confirms;
    the stated bound is below it."""
    from strategy_opt.problem import Problem
    from strategy_opt.programs.auto import per_attribute_optimum

    s = per_attribute_optimum(Problem(parse_spec("prefix:4*all-range:3"), privacy="approx", objective="max"))
    P, R = parse_spec("prefix:4").matrix(), parse_spec("all-range:3").matrix()
    P, R = (x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=float) for x in (P, R))
    W = np.kron(P, R)
    A = np.kron(*(f.toarray() if hasattr(f, "toarray") else np.asarray(f) for f in s.matrix.factors))
    mine = (A**2).sum(axis=0).max() * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W).max()
    m = s.meta
    assert m["objective"] == "max" and m["objective_value"] == pytest.approx(mine, rel=1e-9)
    assert m["objective_value"] == pytest.approx(_flat_min_max_sdp(W), rel=2e-4)
    assert m["objective_lower_bound"] <= m["objective_value"] and m["objective_relative_gap"] < 1e-4
    assert m["objective_lower_bound_kind"].startswith("product-of-factor-bounds")


def test_auto_max_on_a_large_product_workload_takes_the_per_attribute_optimum():
    """An outside audit: past `FLAT_ON_PRODUCT_MAX_N` cells auto --objective max returned a construction
    (prefix:64*prefix:64: hierarchical, 83.2) while the product of the factors' min-max strategies gives 19.87."""
    from strategy_opt.programs.auto import FLAT_ON_PRODUCT_MAX_N

    assert 48 * 48 > FLAT_ON_PRODUCT_MAX_N
    s = solve("prefix:48*prefix:48", privacy="approx", method="auto", objective="max")
    m = s.meta
    factor = solve("prefix:48", privacy="approx", method="minerror-l2", objective="max").meta
    assert m["auto_choice"] == "per-attribute" and m["per_attribute_choices"] == ["minerror-l2", "minerror-l2"]
    assert m["objective_value"] == pytest.approx(factor["objective_value"] ** 2, rel=1e-6)
    assert m["objective_value"] < 0.5 * min(v for k, v in m["auto_candidates"].items() if k != "per-attribute")
    assert m["objective_value"] == pytest.approx(float(per_query_variances(s.matrix, parse_spec("prefix:48*prefix:48"), 2).max()), rel=1e-9)
    assert 0 < m["objective_lower_bound"] <= m["objective_value"]


def test_auto_pure_max_states_the_per_query_floor_when_it_is_the_larger_bound():
    """An outside audit: under eps-DP auto stated total-bound / m for the largest variance (31.98 on a rank-3
    workload of 20 cells), while each query's variance is at least max_j w_ij^2 under any strategy of unit
    sensitivity (100 there), under eps-DP too since ||A||_1 >= ||A||_2."""
    rng = np.random.default_rng(3)
    W = rng.integers(-4, 5, size=(12, 3)) @ rng.integers(-1, 2, size=(3, 20)).astype(float)
    floor = float((np.abs(W).max(axis=1) ** 2).max())
    m = solve(W, privacy="pure", method="auto", objective="max").meta
    assert m["objective_lower_bound_kind"] == "per-query-floor" and m["objective_lower_bound"] == pytest.approx(floor, rel=1e-12)
    assert m["objective_lower_bound"] <= m["objective_value"]


def test_a_factors_fallback_warning_is_information_naming_the_factor(package_log):
    """A regression audit: on all-predicate:3*prefix:3 (max) a factor's auto warned 'returning the best closed-form
    baseline' while the product strategy was returned; a factor's warnings are now information naming the factor."""
    import logging

    package_log.set_level(logging.INFO, logger="strategy_opt")
    s = solve("all-predicate:3*prefix:3", privacy="approx", method="auto", objective="max")
    assert s.meta["auto_choice"] == "per-attribute"
    fallback = [r for r in package_log.records if "returning the best construction evaluated under it" in r.getMessage()]
    assert fallback and all(r.levelno == logging.INFO and r.getMessage().startswith("factor all-predicate:3: ") for r in fallback)
    assert not [r for r in package_log.records if r.levelno >= logging.WARNING]


def test_a_user_objective_runs_on_clarabel_by_default_and_reaches_an_independent_sdp(clean_registry):
    """Audit E1: with no solver named a user objective ran on SCS (124 s, 'optimal_inaccurate', 1.69x the optimum, worse
    than the total optimum in its own objective). Now Clarabel, on unit rows and on the rows as given, the better kept."""
    import cvxpy as cp

    rng = np.random.default_rng(3)
    M = rng.normal(size=(20, 12)) * np.logspace(-2, 2, 20)[:, None]
    register_objective(weighted_pnorm(3.0, "pnorm3"))
    s = solve(M, method="minerror-l2", objective="pnorm3")
    assert s.meta["solver_profile"]["name"] == "clarabel"
    W = from_matrix(M)
    mine = float(np.sum(per_query_variances(s.matrix, W, 2) ** 3) ** (1 / 3))
    assert s.meta["objective_value"] == pytest.approx(mine, rel=1e-9)
    # the program written independently on the rows as given: t_i >= w_i X^{-1} w_i^T, minimise ||t||_3
    X, t = cp.Variable((12, 12), PSD=True), cp.Variable(20)
    lmis = [cp.bmat([[X, r[:, None]], [r[None, :], cp.reshape(t[i], (1, 1), order="C")]]) >> 0 for i, r in enumerate(M)]
    ref = cp.Problem(cp.Minimize(cp.pnorm(t, 3)), [cp.diag(X) <= 1, *lmis]).solve(solver="CLARABEL")
    assert ref * (1 - 1e-6) <= mine <= ref * (1 + 1e-5)
    total = solve(M, method="minerror-l2")  # the total optimum is feasible: never better in the 3-norm
    assert mine <= float(np.sum(per_query_variances(total.matrix, W, 2) ** 3) ** (1 / 3))


def test_every_method_probes_a_user_objective_before_it_runs(clean_registry):
    """Audit E1: a registered method taking any objective (objectives=None) accepted a decreasing one (value -26.67, exit 0)."""
    from strategy_opt.compiler import compile_strategy
    from strategy_opt.registry import _METHODS, register_method

    register_objective(Objective("decreasing", "", lambda u, w=None: -float(np.sum(u)), None))
    ran = []

    def ident(problem):
        ran.append(problem.objective)
        return compile_strategy(np.eye(problem.workload.n), problem, "test-any-objective")

    try:
        register_method("test-any-objective", privacy=("approx", "pure"), objectives=None)(ident)
        for privacy in ("approx", "pure"):
            with pytest.raises(InputError, match=r"^objective 'decreasing' decreases "):
                solve("prefix:6", privacy=privacy, method="test-any-objective", objective="decreasing")
        assert ran == []  # refused before the method ran
    finally:
        _METHODS.pop("test-any-objective", None)


def test_pure_auto_states_the_per_query_floor_for_a_user_objective(clean_registry):
    """Audit E1: under epsilon-DP auto gave a user objective no lower bound, though each query's least variance
    max_j w_ij^2 bounds every non-decreasing objective (prefix:8: every floor is 1, so the 3-norm's bound is 8^(1/3) = 2)."""
    register_objective(weighted_pnorm(3.0, "pnorm3"))
    m = solve("prefix:8", privacy="pure", method="auto", objective="pnorm3").meta
    assert m["objective_lower_bound_kind"] == "per-query-floor"
    assert m["objective_lower_bound"] == pytest.approx(2.0, rel=1e-12) and m["objective_lower_bound"] <= m["objective_value"]
