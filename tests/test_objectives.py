"""Objectives as a plug-in point: built-ins, the Python API and the entry-point group, end to end."""

import importlib
import textwrap

import numpy as np
import pytest

import strategy_opt.objectives as objectives_module
from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import per_query_variances
from strategy_opt.exceptions import InputError
from strategy_opt.objectives import Objective, get_objective, objectives, register_objective


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


def test_broken_entry_point_warns_and_the_rest_works(tmp_path, monkeypatch, clean_registry):
    _write_plugin(tmp_path, PLUGIN, "broken = sq_plugin:broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.warns(UserWarning, match="broken"):
        table = objectives()
    assert "broken" not in table and "total" in table


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
