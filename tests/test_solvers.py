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


def test_an_uninstalled_solver_is_refused_at_load(tmp_path, capsys, monkeypatch):
    import cvxpy

    f = tmp_path / "p.toml"
    f.write_text('backend = "cvxpy"\nsolver = "NOSUCH"\n')
    installed = ", ".join(cvxpy.installed_solvers())
    msg = f"solver profile {f}: bad value: solver = 'NOSUCH' is not an installed cvxpy solver; installed: {installed}"
    with pytest.raises(InputError) as info:
        load_profile(f)
    assert str(info.value) == msg
    monkeypatch.setattr(solvers, "_probe", lambda *a: pytest.fail("a solve was attempted"))
    assert cli("solve", "--workload", "all-range:16", "--method", "minerror-l2", "--solver", f) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"strategy-opt: error: {msg}"]
    f.write_text('backend = "cvxpy"\nsolver = "scs"\n')  # cvxpy takes solver names in any case
    assert load_profile(f).solver == "scs"


@pytest.mark.parametrize("solver", ["OSQP", "HIGHS", "SCIPY"])
def test_a_solver_without_second_order_cones_is_refused_at_load(tmp_path, capsys, solver):
    # a QP or LP solver failed inside solve with exit 1; every strategy program is at least an SOCP
    import cvxpy

    if solver not in cvxpy.installed_solvers():
        pytest.skip(f"{solver} is not installed")
    f = tmp_path / "p.toml"
    f.write_text(f'backend = "cvxpy"\nsolver = "{solver}"\n')
    with pytest.raises(InputError, match=rf"solver = '{solver}' cannot solve the strategy programs \(second-order cone programs: {solver} has no SOC cone\); installed solvers that have one: .*CLARABEL"):
        load_profile(f)
    out = tmp_path / "s.npz"
    for method in ("eigen-design", "minerror-l2"):
        assert cli("solve", "--workload", "all-range:8", "--method", method, "--solver", f, "--out", out) == 2
        assert "has no SOC cone" in capsys.readouterr().err
    assert not out.exists()
    # a profile made through the API is checked when the problem is made
    with pytest.raises(InputError, match=f"solver profile 'mine': bad value: solver = '{solver}' cannot solve"):
        solve("all-range:4", method="eigen-design", solver=solvers.SolverProfile("mine", backend="cvxpy", solver=solver))


@pytest.mark.parametrize("method", ["minerror-l2", "minerror-l1"])
def test_the_sdp_programs_refuse_a_solver_without_psd_cones(monkeypatch, method):
    # ECOS-like: second-order cones only (ECOS itself is not installed here, so its cones are simulated)
    real = solvers.solver_cones
    monkeypatch.setattr(solvers, "solver_cones", lambda s: real(s) - {"PSD"} if s.upper() == "SCS" else real(s))
    privacy = "pure" if method == "minerror-l1" else "approx"
    with pytest.raises(InputError, match=rf"solver = 'SCS' cannot solve {method} \(semidefinite programs: SCS has no PSD cone\)"):
        solve("all-range:4", method=method, privacy=privacy, solver=load_profile("scs"))


@pytest.mark.parametrize("backend", ["", 'backend = "native"\n'])
def test_a_solver_with_the_native_backend_is_refused(tmp_path, capsys, backend):
    f = tmp_path / "p.toml"
    f.write_text(f'{backend}solver = "SCS"\n')
    assert cli("solve", "--workload", "all-range:4", "--method", "minerror-l2", "--solver", f) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"strategy-opt: error: solver profile {f}: solver = 'SCS' names a cvxpy solver but the backend is 'native'")
    assert err[0].endswith('; add backend = "cvxpy" or remove solver')


@pytest.mark.parametrize(
    "line, what",
    [
        ("max_iters = 2.5", "must be an integer >= 1"),
        ("max_iters = 0", "must be an integer >= 1"),
        ("max_iters = true", "must be an integer >= 1"),
        ('max_iters = "100"', "must be an integer >= 1"),
        ("max_iters = inf", "must be an integer >= 1"),
        ('verbose = "yes"', "must be true or false"),
        ("verbose = 1", "must be true or false"),
        ('tol = "1e-8"', "must be a finite number > 0"),
        ("tol = nan", "must be a finite number > 0"),
        ("tol = false", "must be a finite number > 0"),
        ("time_limit = -1", "must be a finite number > 0 (seconds)"),
        ("time_limit = inf", "must be a finite number > 0 (seconds)"),
        ("solver = 7", "must be a string naming a cvxpy solver"),
        ("description = 3", "must be a string"),
        ('backend = "gpu"', "must be 'cvxpy' or 'native'"),
        ("options = 5", "[options] must be a table of solver keyword arguments"),
    ],
)
def test_top_level_values_of_the_wrong_type_are_refused(tmp_path, capsys, line, what):
    import tomllib

    f = tmp_path / "p.toml"
    key = line.split(" = ")[0]
    prefix = "" if key in ("backend", "solver") else 'backend = "cvxpy"\n'
    f.write_text(f"{prefix}{line}\n")
    value = tomllib.loads(line)[key]
    msg = f"solver profile {f}: bad value: {key} = {value!r} ({what})"
    with pytest.raises(InputError) as info:
        load_profile(f)
    assert str(info.value) == msg
    assert cli("solve", "--workload", "all-range:4", "--method", "minerror-l2", "--solver", f) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"strategy-opt: error: {msg}"]


def test_integral_floats_and_integer_numbers_are_accepted(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('backend = "cvxpy"\nsolver = "SCS"\nmax_iters = 7\ntime_limit = 60\ntol = 1e-6\nverbose = true\n')
    p = load_profile(f)
    assert (p.max_iters, p.time_limit, p.tol, p.verbose) == (7, 60.0, 1e-6, True)
    assert isinstance(p.time_limit, float)


@pytest.mark.parametrize("name", ["scs", "clarabel", "native"])
def test_bundled_profiles_load(name, capsys):
    p = load_profile(name)
    assert p.name == name and p.source.endswith(f"{name}.toml")
    assert p.backend == ("native" if name == "native" else "cvxpy")
    assert cli("list", "solvers") == 0
    assert name in capsys.readouterr().out


def test_options_must_be_a_table(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('backend = "cvxpy"\nsolver = "SCS"\noptions = [["eps_abs", 1e-9]]\n')
    with pytest.raises(InputError, match=r"\[options\] must be a table"):
        load_profile(f)


def test_api_refuses_a_bad_profile_object():
    with pytest.raises(InputError, match=r"\[options\] bogus = 1 is not accepted by CLARABEL"):
        solve("all-range:4", method="minerror-l2", solver=replace(load_profile("clarabel"), options={"bogus": 1}))


@pytest.mark.parametrize(
    "solver, expected",
    [
        ("SCS", {"max_iters": 7, "time_limit_secs": 2.5}),
        ("scs", {"max_iters": 7, "time_limit_secs": 2.5}),
        ("CLARABEL", {"max_iter": 7, "time_limit": 2.5}),
        ("ECOS", {}),
        (None, {}),
    ],
)
def test_cvxpy_solve_kwargs_maps_the_budget_to_the_solver_names(solver, expected):
    p = solvers.SolverProfile("p", backend="cvxpy", solver=solver, max_iters=7, time_limit=2.5, options={"eps_abs": 1e-9})
    assert solvers.cvxpy_solve_kwargs(p) == {"eps_abs": 1e-9, **expected}
    # a setting given in [options] wins over the top-level key
    own = replace(p, options={"max_iters": 99, "max_iter": 98})
    assert {k: v for k, v in solvers.cvxpy_solve_kwargs(own).items() if k.startswith("max_iter")} == {"max_iters": 99, "max_iter": 98}


@pytest.mark.parametrize("method", ["minerror-l2", "eigen-design"])
def test_programs_pass_the_profile_budget_to_cvxpy(monkeypatch, method):
    # one mapping (solvers.cvxpy_solve_kwargs) for every cvxpy program: eigen-design ignored time_limit/max_iters before
    import cvxpy as cp

    calls, real = [], cp.Problem.solve

    def record(self, *args, **kwargs):
        if sum(v.size for v in self.variables()) > 1:  # not the one-variable probe of check_solver_options
            calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "solve", record)
    profile = replace(load_profile("scs"), max_iters=1234, time_limit=77.0, options={"eps_abs": 1e-7, "eps_rel": 1e-7})
    solve("prefix:6", privacy="approx", method=method, solver=profile)
    assert calls and all(c["max_iters"] == 1234 and 0 < c["time_limit_secs"] <= 77.0 and c["eps_abs"] == 1e-7 for c in calls)


def test_the_default_profile_does_not_depend_on_the_working_directory(tmp_path, monkeypatch):
    """A ./solvers/native.toml is used when --solver native names it, never for a solve that names no profile."""
    from pathlib import Path

    (tmp_path / "solvers").mkdir()
    (tmp_path / "solvers" / "native.toml").write_text('backend = "native"\nmax_iters = 1\n')
    monkeypatch.chdir(tmp_path)
    default = solve("all-range:16", privacy="approx", method="minerror-l2")
    named = solve("all-range:16", privacy="approx", method="minerror-l2", solver="native")
    bundled = Path(solvers.__file__).resolve().parent.parent / "solvers" / "native.toml"
    assert default.meta["solver_profile"] == {"name": "native", "file": str(bundled)}
    assert named.meta["solver_profile"]["file"] == str((tmp_path / "solvers" / "native.toml").resolve())
    assert default.meta["solver_status"] == "optimal" and named.meta["solver_status"] != "optimal"
    assert default.meta["unit_total_squared_error"] < named.meta["unit_total_squared_error"]


def test_profile_file_forms(tmp_path, monkeypatch):
    """A byte-order mark is read past; a cvxpy profile must name its solver; the recorded source is absolute."""
    (tmp_path / "bom.toml").write_bytes(b'\xef\xbb\xbfbackend = "cvxpy"\nsolver = "SCS"\n')
    monkeypatch.chdir(tmp_path)
    prof = load_profile("bom.toml")
    assert prof.solver == "SCS" and prof.source == str((tmp_path / "bom.toml").resolve())
    (tmp_path / "bare.toml").write_text('backend = "cvxpy"\n')
    with pytest.raises(InputError, match='names no solver; add solver = "SCS"'):
        load_profile("bare.toml")


# --------------------------------------------------------------------------- Ctrl-C during SCS
def test_scs_interface_raises_keyboardinterrupt_on_its_sigint_status():
    """SCS reports Ctrl-C as status_val -5; cvxpy would turn that into a SolverError."""
    scs = solvers.cvxpy_solver("SCS")
    assert solvers.cvxpy_solver("scs") is scs and solvers.cvxpy_solver("CLARABEL") == "CLARABEL" and solvers.cvxpy_solver(None) is None
    with pytest.raises(KeyboardInterrupt):
        scs.invert({"info": {"status_val": -5}}, {})


def test_ctrl_c_while_scs_iterates_is_a_keyboardinterrupt():
    """A SIGINT delivered while SCS iterates (its own handler catches it) reaches Python as KeyboardInterrupt."""
    import os
    import signal
    import threading

    import cvxpy as cp
    import numpy as np

    n = 30
    rng = np.random.default_rng(0)
    M = rng.standard_normal((n, n))
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.trace(M @ M.T @ X) + cp.sum_squares(X)), [cp.diag(X) >= 1])
    # outside SCS the signals are ignored, so the KeyboardInterrupt can only come from SCS's status
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    done = threading.Event()

    def keep_interrupting():
        while not done.wait(0.3):
            os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=keep_interrupting, daemon=True)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            # eps 1e-16 is out of SCS's reach: without the signal it would iterate for the 60 s time limit
            prob.solve(solver=solvers.cvxpy_solver("SCS"), eps_abs=1e-16, eps_rel=1e-16, max_iters=10**9, time_limit_secs=60)
    finally:
        done.set()
        interrupter.join()
        signal.signal(signal.SIGINT, previous)
    assert caught.traceback[-1].name == "invert"


# --------------------------------------------------------------------------- a verbose solver's output
@pytest.mark.parametrize("solver", ["SCS", "CLARABEL"])
def test_a_verbose_profile_prints_on_stderr_and_leaves_stdout_to_the_result(tmp_path, solver):
    """A profile with verbose = true printed cvxpy's banner and the solver's iterations on stdout, ahead of --json's result."""
    import json
    import subprocess
    import sys

    profile = tmp_path / "loud.toml"
    profile.write_text(f'backend = "cvxpy"\nsolver = "{solver}"\nverbose = true\n')
    res = subprocess.run(
        [sys.executable, "-m", "strategy_opt.cli", "solve", "--workload", "prefix:8", "--method", "minerror-l2", "--solver", str(profile),
         "--out", str(tmp_path / "s.npz"), "--json"],
        capture_output=True, text=True,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["solver"] == "loud"  # stdout holds the result alone
    assert "CVXPY" in res.stderr and solver.lower() in res.stderr.lower()  # the solver's own lines went to stderr


def test_solver_output_to_stderr_moves_file_descriptor_output():
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "from strategy_opt.solvers import solver_output_to_stderr\n"
        "print('before', flush=True)\n"
        "with solver_output_to_stderr():\n"
        "    os.write(1, b'from C\\n'); print('from Python')\n"
        "print('after')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == "before\nafter\n" and res.stderr == "from C\nfrom Python\n", (res.stdout, res.stderr)


def test_a_regular_install_ships_every_bundled_profile_and_problem():
    """``pip install .`` (not editable) had no problems/ or solvers/ (`--solver clarabel`: 'available: none'):
    pyproject's data-files must cover every bundled file, at the path `bundled_dir` looks in."""
    import glob
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    data_files = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    for name in ("problems", "solvers"):
        shipped = {Path(f).name for pattern in data_files[f"share/strategy_opt/{name}"] for f in glob.glob(str(root / pattern))}
        assert shipped == {p.name for p in (root / name).glob("*.toml")} != set()


def test_an_installed_copy_reads_the_profiles_from_the_data_directory(tmp_path, monkeypatch):
    """Without the source checkout beside the package, the bundled files are looked for under the scheme's data directory."""
    import sysconfig
    from pathlib import Path

    from strategy_opt import bundled

    monkeypatch.setattr(bundled, "_SOURCE_ROOT", tmp_path)  # no problems/ or solvers/ there
    monkeypatch.setattr(bundled, "_installed_dir", lambda name: None)  # (this test's install is editable)
    assert bundled.bundled_dir("solvers") == Path(sysconfig.get_path("data")) / "share" / "strategy_opt" / "solvers"
    (tmp_path / "solvers").mkdir()  # a `solvers` package in site-packages (audit R4) is not a checkout ...
    assert bundled.bundled_dir("solvers") != tmp_path / "solvers"
    (tmp_path / "pyproject.toml").write_text("")  # ... a directory beside pyproject.toml is
    assert bundled.bundled_dir("solvers") == tmp_path / "solvers"


def test_the_installed_files_are_found_in_any_install_scheme(tmp_path, monkeypatch):
    """A `pip install --user .` put the files under the user base, not sysconfig's data path (audit R4): they are
    looked up in the distribution's record of installed files."""
    from importlib import metadata
    from pathlib import PurePosixPath

    from strategy_opt import bundled

    share = tmp_path / "userbase" / "share" / "strategy_opt" / "problems"
    share.mkdir(parents=True)
    (share / "quickstart.toml").write_text("")

    class Recorded(PurePosixPath):
        def locate(self):
            return tmp_path / "userbase" / "lib" / "python" / "site-packages" / self

    record = [Recorded("strategy_opt/bundled.py"), Recorded("../../../share/strategy_opt/problems/quickstart.toml")]
    monkeypatch.setattr(metadata, "files", lambda name: record if name == "strategy-opt" else None)
    monkeypatch.setattr(bundled, "_SOURCE_ROOT", tmp_path)  # not a checkout
    assert bundled.bundled_dir("problems") == share.resolve()
    assert bundled._installed_dir("solvers") is None
