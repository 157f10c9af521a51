"""Solver profiles (strategy_opt.solvers): reading, and the check of a cvxpy profile's [options]."""

from dataclasses import replace

import pytest

from strategy_opt import solvers
from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.exceptions import InputError
from strategy_opt.solvers import check_solver_options, load_profile


def cli(*args):
    return main([str(a) for a in args])


def _profile(tmp_path, solver, options):
    f = tmp_path / "p.toml"
    f.write_text(f'backend = "cvxpy"\nsolver = "{solver}"\n[options]\n{options}\n')
    return f


@pytest.mark.parametrize(
    "solver, key, value, reason",
    [
        ("SCS", "bogus_opt", 3, "'bogus_opt' is an invalid keyword argument"),
        ("SCS", "eps_abs", "tiny", "must be real number, not str"),
        ("SCS", "max_iters", 2.5, "cannot be interpreted as an integer"),
        ("CLARABEL", "max_iter", "lots", "Incorrect type for setting 'max_iter'"),
        ("CLARABEL", "nosuch", 1, "unrecognized solver setting 'nosuch'"),
        ("CLARABEL", "max_iter", -1, "out of range"),
    ],
)
@pytest.mark.parametrize("method", ["minerror-l2", "eigen-design"])
def test_bad_cvxpy_option_is_an_input_error_naming_the_key(tmp_path, capsys, solver, key, value, reason, method):
    toml_value = f'"{value}"' if isinstance(value, str) else value
    profile = _profile(tmp_path, solver, f"eps_rel = 1e-6\n{key} = {toml_value}" if solver == "SCS" else f"{key} = {toml_value}")
    out = tmp_path / "s.npz"
    code = cli("solve", "--workload", "all-range:4", "--method", method, "--solver", profile, "--out", out)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1
    prefix = f"strategy-opt: error: solver profile {profile}: [options] {key} = {value!r} is not accepted by {solver} ("
    assert err[0].startswith(prefix) and err[0].endswith("); fix or remove it"), err
    assert reason in err[0]
    assert not out.exists()


def test_other_programs_are_covered_too(tmp_path, capsys):
    # the check runs when the Problem is made, so programs outside minerror-l2/eigen-design get it as well
    profile = _profile(tmp_path, "CLARABEL", "nosuch = 1")
    assert cli("solve", "--workload", "prefix:4", "--privacy", "pure", "--method", "l1-weighting", "--solver", profile) == 2
    assert "[options] nosuch = 1" in capsys.readouterr().err


def test_good_options_pass_and_solve(tmp_path, capsys):
    profile = _profile(tmp_path, "SCS", "eps_abs = 1e-9\neps_rel = 1e-9\nmax_iters = 100000")
    assert cli("-q", "solve", "--workload", "all-range:4", "--method", "minerror-l2", "--solver", profile) == 0
    check_solver_options(load_profile("scs"))
    check_solver_options(load_profile("clarabel"))
    check_solver_options(load_profile("native"))  # native profiles are not probed


@pytest.mark.parametrize("key", ["verbose", "solver"])
def test_options_the_profile_sets_itself_are_refused(key):
    profile = replace(load_profile("scs"), options={key: True}, source="x.toml")
    with pytest.raises(InputError, match=rf"^solver profile x.toml: \[options\] may not set '{key}'; use the top-level key {key} = \.\.\.$"):
        check_solver_options(profile)


def test_an_option_refused_only_by_the_real_solve_is_still_an_input_error(monkeypatch, capsys, tmp_path):
    # the probe cannot see everything; minerror-l2 maps the solver's TypeError naming the option too
    monkeypatch.setattr(solvers, "_probe", lambda solver, options: None)
    profile = _profile(tmp_path, "SCS", "bogus_opt = 3")
    assert cli("-q", "solve", "--workload", "all-range:4", "--method", "minerror-l2", "--solver", profile) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"strategy-opt: error: solver profile {profile}: [options] bogus_opt = 3 is not accepted by SCS ('bogus_opt' is an invalid keyword argument for this function); fix or remove it"]


def test_an_uninstalled_solver_is_left_to_the_program(tmp_path, capsys):
    f = tmp_path / "ecos.toml"
    f.write_text('backend = "cvxpy"\nsolver = "NO_SUCH_SOLVER"\n[options]\nfoo = 1\n')
    check_solver_options(load_profile(f))  # nothing to probe
    assert cli("solve", "--workload", "all-range:4", "--method", "minerror-l2", "--solver", f) == 1
    assert "not installed" in capsys.readouterr().err


def test_options_must_be_a_table(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('backend = "cvxpy"\nsolver = "SCS"\noptions = [["eps_abs", 1e-9]]\n')
    with pytest.raises(InputError, match=r"\[options\] must be a table"):
        load_profile(f)


def test_api_refuses_a_bad_profile_object():
    with pytest.raises(InputError, match=r"\[options\] bogus = 1 is not accepted by CLARABEL"):
        solve("all-range:4", method="minerror-l2", solver=replace(load_profile("clarabel"), options={"bogus": 1}))
