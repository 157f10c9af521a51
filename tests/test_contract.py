"""Contract checks found by a black-box audit of the CLI: objectives and options a method
does not know are refused, auto honours the objective, conic-solver memory is estimated
before the solver allocates, problem files are validated, bounds never exceed the error."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import per_query_variances
from strategy_opt.exceptions import InputError
from strategy_opt.registry import methods
from strategy_opt.resources import psd_solver_bytes
from strategy_opt.workload import all_range, from_matrix


def cli(*args):
    return main([str(a) for a in args])


def _privacy(info):
    return "approx" if "approx" in info.privacy else "pure"


@pytest.mark.parametrize("name", sorted(k for k, v in methods().items() if v.objectives is not None and "max" not in v.objectives))
def test_a_method_refuses_an_objective_it_does_not_minimise(name, capsys, tmp_path):
    info = methods()[name]
    with pytest.raises(InputError, match=f"method {name!r} minimises"):
        solve("prefix:8", privacy=_privacy(info), method=name, objective="max")
    assert cli("-q", "solve", "--workload", "prefix:8", "--privacy", _privacy(info), "--method", name, "--objective", "max", "--out", tmp_path / "s.npz") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'max'" in err[0]
    assert not (tmp_path / "s.npz").exists()


@pytest.mark.parametrize("name", sorted(k for k, v in methods().items() if v.options is not None) + ["auto"])
def test_a_method_refuses_an_unknown_option(name, capsys):
    info = methods()[name]
    with pytest.raises(InputError, match="unknown option.*'brnaching'"):
        solve("prefix:8", privacy=_privacy(info), method=name, brnaching=4)
    assert cli("-q", "solve", "--workload", "prefix:8", "--privacy", _privacy(info), "--method", name, "--option", "brnaching=4") == 2
    assert "brnaching" in capsys.readouterr().err


def test_auto_minimises_the_max_objective_and_reports_its_value():
    W = all_range(7)
    s = solve(W, privacy="approx", method="auto", objective="max")
    u = per_query_variances(s.matrix, W, 2)  # unit per-query variances, recomputed
    assert s.meta["objective"] == "max"
    assert s.meta["objective_value"] == pytest.approx(u.max(), rel=1e-9)
    for name in ("identity", "wavelet", "hierarchical"):  # the baselines' max variance, computed here
        B = solve(W, privacy="approx", method=name).matrix
        assert u.max() <= per_query_variances(B, W, 2).max() * (1 + 1e-9)
    assert s.meta["auto_choice"] == "minerror-l2"


def test_auto_gives_each_candidate_only_its_own_options():
    s = solve("all-range:16", privacy="approx", method="auto", branching=4, group_size=2)
    assert s.meta["auto_candidates"]["eigen-design"] > 0  # eigen-design ran although it has no 'branching'
    assert "hierarchical" in s.meta["auto_candidates"]


def test_clarabel_memory_is_estimated_before_it_allocates(monkeypatch, capsys):
    # measured peaks above the interpreter's (one BLAS thread): minerror-l2 (total) on all-range:32, :48 and :64
    # 0.24, 1.2 and 3.75 GB; all-range:128 was killed by the kernel at 16 GB (the estimate let it start)
    from strategy_opt.programs import minerror_l2

    class Estimated(Exception):
        pass

    def capture(nbytes, what, hint=""):
        raise Estimated(nbytes)

    with monkeypatch.context() as m:
        m.setattr(minerror_l2, "require_memory", capture)
        for n, measured in ((32, 0.24e9), (48, 1.2e9), (64, 3.75e9), (128, 16e9)):
            with pytest.raises(Estimated) as est:
                solve(f"all-range:{n}", privacy="approx", method="minerror-l2", solver="clarabel")
            assert measured <= est.value.args[0] <= (1.3 * measured if n < 128 else np.inf)
    assert psd_solver_bytes("SCS", [512]) == 0.0
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1G")
    assert cli("-q", "solve", "--workload", "prefix:128", "--privacy", "approx", "--method", "minerror-l2", "--solver", "clarabel") == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "--solver native" in err


@pytest.mark.parametrize("line, bad", [('epsilon = "one"', "epsilon"), ("epsilon = -1", "epsilon"), ("delta = 2", "delta"), ("delta = true", "delta")])
def test_problem_file_values_are_checked(tmp_path, capsys, line, bad):
    f = tmp_path / "p.toml"
    f.write_text(f'workload = "prefix:16"\nprivacy = "pure"\n{line}\n')
    assert cli("-q", "solve", f) == 2
    assert f"'{bad}'" in capsys.readouterr().err


def test_a_bundled_problem_path_works_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "problems/quickstart.toml", "--method", "identity", "--json") == 0
    assert '"workload": "all-range:256"' in capsys.readouterr().out
    assert cli("-q", "solve", "problems/no_such_problem.toml") == 2
    # without -q it says which file it read: a user who meant a problems/ folder of their own is told
    assert cli("solve", "problems/quickstart.toml", "--method", "identity", "--json") == 0
    assert "problems/quickstart.toml is not a file here; reading the bundled problem 'quickstart'" in capsys.readouterr().err


def test_a_problem_file_can_come_through_a_pipe(tmp_path):
    # `cat p.toml | strategy-opt solve /dev/stdin` worked until a fix for directories refused every non-regular file
    text = 'workload = "prefix:16"\nprivacy = "pure"\nmethod = "hierarchical"\n'
    r = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "-q", "solve", "/dev/stdin", "--out", str(tmp_path / "x.npz")],
                       input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "x.npz").exists()


def test_a_directory_does_not_hide_a_bundled_problem_of_its_name(tmp_path, monkeypatch, capsys):
    # `mkdir quickstart; strategy-opt solve quickstart` read the directory: "[Errno 21] Is a directory"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").mkdir()
    (tmp_path / "mine").mkdir()
    assert cli("-q", "solve", "quickstart", "--method", "identity", "--json") == 0
    assert '"workload": "all-range:256"' in capsys.readouterr().out
    assert cli("-q", "solve", "mine") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "problem file mine is a directory (bundled problems: " in err[0], err


@pytest.mark.parametrize("spec", ["identity:3", "total:5", "marginals:3x2:1"])
def test_the_lower_bound_never_exceeds_the_error(spec):
    for privacy in ("pure", "approx"):
        m = solve(spec, privacy=privacy, method="auto").meta
        assert m["lower_bound"] <= m["unit_total_squared_error"]
        assert m["ratio_to_lower_bound"] >= 1.0


def test_error_accepts_the_recorded_workload_given_as_a_matrix_file(tmp_path, capsys):
    np.save(tmp_path / "P8.npy", np.tril(np.ones((8, 8))))
    assert cli("-q", "solve", "--workload", "prefix:8", "--privacy", "pure", "--method", "hierarchical", "--out", tmp_path / "s.npz") == 0
    assert cli("-q", "error", tmp_path / "s.npz", "--workload", f"file:{tmp_path / 'P8.npy'}", "--json") == 0
    capsys.readouterr()
    assert cli("-q", "error", tmp_path / "s.npz", "--workload", "all-range:8") == 2  # another workload: refused
    assert "--force" in capsys.readouterr().err
    assert cli("-q", "error", tmp_path / "s.npz", "--workload", "all-range:8", "--force") == 0


def test_a_matrix_solved_in_python_is_recognised_when_given_as_a_file(tmp_path, capsys):
    """An outside audit: a strategy solved from a numpy matrix records the label 'matrix', and `error` with the same
    matrix saved as a file needed --force. The matrix's content hash (meta.workload_sha256) recognises it; another
    matrix of the same shape is still refused."""
    from strategy_opt.io import write_strategy

    rng = np.random.default_rng(0)
    W = rng.integers(0, 2, (12, 8)).astype(float)
    s = solve(W, privacy="pure", method="hierarchical")
    assert s.meta["workload"] == "matrix" and len(s.meta["workload_sha256"]) == 64
    write_strategy(s, tmp_path / "s.npz")
    np.save(tmp_path / "same.npy", W)
    other = W.copy()
    other[0, 0] = 1 - other[0, 0]
    np.save(tmp_path / "other.npy", other)
    capsys.readouterr()
    assert cli("error", tmp_path / "s.npz", "--workload", f"file:{tmp_path / 'same.npy'}", "--json") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["unit_total_squared_error"] == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-12)
    assert "is the matrix the strategy was computed for" in out.err
    assert cli("-q", "error", tmp_path / "s.npz", "--workload", f"file:{tmp_path / 'other.npy'}") == 2
    assert "computed for another matrix" in capsys.readouterr().err
    P = solve(np.tril(np.ones((5, 5))), privacy="pure", method="identity")  # the same matrix as a SPEC: recognised too
    write_strategy(P, tmp_path / "p.npz")
    assert cli("-q", "error", tmp_path / "p.npz", "--workload", "prefix:5") == 0


def test_run_names_the_pure_strategy_when_delta_is_given(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(8.0))
    assert cli("-q", "solve", "--workload", "prefix:8", "--privacy", "pure", "--method", "identity", "--out", tmp_path / "s.npz") == 0
    args = ["run", tmp_path / "s.npz", "--data", tmp_path / "x.npy", "--workload", "prefix:8", "--epsilon", 1, "--seed", 0]
    assert cli("-q", *args, "--delta", 1e-6, "--out", tmp_path / "a.npy") == 2
    assert "epsilon-DP (pure) strategy" in capsys.readouterr().err
    assert cli("-q", *args, "--delta", 1e-6, "--privacy", "approx", "--out", tmp_path / "a.npy") == 0


def test_written_files_get_the_usual_permissions(tmp_path):
    import os

    umask = os.umask(0)
    os.umask(umask)
    for ext in (".npz", ".mtx", ".csv"):
        assert cli("-q", "solve", "--workload", "prefix:8", "--method", "identity", "--out", tmp_path / f"s{ext}") == 0
    for f in tmp_path.iterdir():  # mkstemp's private 0600 is not what a user expects of an output file
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask, f.name


@pytest.mark.parametrize("command", [("-q", "list", "methods"), ("--help",), ("solve", "--help"), ("--version",)])
@pytest.mark.parametrize("buffered", [True, False])
def test_a_closed_stdout_stops_quietly(buffered, command):
    # the reader went away, as with '| head': closed before the child starts, so that every
    # write fails whatever the timing. Unbuffered (PYTHONUNBUFFERED), the first print fails
    # inside main(); buffered, the output waits in stdout's buffer until main() flushes it
    # (it was exit 120, CPython's code when the flush at interpreter shutdown fails: seen
    # under load, when the reader closed the pipe after main() had returned)
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run([sys.executable, "-m", "strategy_opt.cli", *command], stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    assert p.returncode == 141
    assert p.stderr == b""


def test_a_closed_or_full_stdout_gives_no_traceback(tmp_path):
    """stdout closed at start (>&-: Python has no sys.stdout) ends quietly; a device that refuses the
    write (/dev/full) gives one line and exit 1 (both were AttributeError/OSError tracebacks)."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "strategy_opt.cli", "-q", "list", "methods"]
    closed = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60, preexec_fn=lambda: os.close(1))
    assert closed.returncode == 0 and closed.stderr == b""
    if os.path.exists("/dev/full"):
        with open("/dev/full", "wb") as full:
            p = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, timeout=60)
        lines = p.stderr.decode().strip().splitlines()
        assert p.returncode == 1 and lines == ["strategy-opt: error: cannot write to standard output: No space left on device (files the command wrote are complete and kept)"]
        out = tmp_path / "s.npz"  # solve writes its file, then its summary line to the full device: the file stays, whole
        with open("/dev/full", "wb") as full:
            p = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "-q", "solve", "--workload", "prefix:6", "--method", "identity", "--out", str(out)], stdout=full, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 1 and "files the command wrote are complete and kept" in p.stderr.decode()
        from strategy_opt.io import read_strategy

        assert read_strategy(out).meta["unit_total_squared_error"] == 21.0  # trace of prefix:6's Gram


@pytest.mark.parametrize("privacy", ["pure", "approx"])
def test_recorded_error_does_not_depend_on_the_rank_cutoff(privacy):
    # a strategy direction with singular value 1e-8 (as factorised SDPs leave them) that W
    # touches at 1e-9: a cutoff that keeps it adds (1e-9 / 1e-8)^2 = 0.01 to E. The compiler
    # removes such directions, so every pseudo-inverse cutoff reproduces meta's E.
    from strategy_opt.compiler import compile_strategy
    from strategy_opt.problem import Problem
    from strategy_opt.workload import from_matrix

    rng = np.random.default_rng(4)
    R = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    A = np.linalg.qr(rng.standard_normal((6, 4)))[0] @ np.diag([1.0, 0.8, 0.5, 1e-8]) @ R.T
    W = rng.standard_normal((5, 3)) @ R[:, :3].T + 1e-9 * np.outer(rng.standard_normal(5), R[:, 3])
    s = compile_strategy(A, Problem(from_matrix(W), privacy), "identity")
    B = s.dense()
    p = 1 if privacy == "pure" else 2
    sens = np.linalg.norm(B, ord=p, axis=0).max()
    for rcond in (1e-15, 1e-12, 1e-8, 1e-6):
        E = sens**2 * np.linalg.norm(W @ np.linalg.pinv(B, rcond=rcond)) ** 2
        assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-9), rcond


@pytest.mark.parametrize(("privacy", "option"), [("pure", {"time_budget": "abc"}), ("pure", {"random_starts": -1}), ("approx", {"group_size": 0}), ("approx", {"branching": 1})])
def test_auto_passes_on_a_bad_option_value(tmp_path, capsys, privacy, option):
    # a candidate that refuses an option value is not skipped: the user hears why, with exit status 2
    from strategy_opt.exceptions import OptionError

    with pytest.raises(OptionError):
        solve("prefix:13", privacy=privacy, method="auto", **option)
    (key, value), = option.items()
    out = tmp_path / "s.npz"
    assert cli("solve", "--workload", "prefix:13", "--privacy", privacy, "--option", f"{key}={value}", "--out", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("strategy-opt: error:") and key in err[-1] and not out.exists()
    if privacy == "pure":  # auto-pure's options are checked before auto says where they go: the error is all it prints
        assert len(err) == 1, err


def test_max_query_variance_of_a_rescaled_workload():
    # all-predicate keeps its Gram as 2^(N-2)(I + J) with a log scale; its rows are still the
    # 2^N true 0/1 queries, so the largest variance is reported (it was null) and checked by brute force
    import itertools

    from strategy_opt.api import error_report

    s = solve("all-predicate:8", method="eigen-design")
    A = s.dense()
    rows = np.array(list(itertools.product([0.0, 1.0], repeat=8)))
    expected = np.linalg.norm(A, axis=0).max() ** 2 * np.einsum("ij,jk,ik->i", rows, np.linalg.pinv(A.T @ A), rows).max()
    assert error_report(s, "all-predicate:8")["unit_max_query_variance"] == pytest.approx(expected, rel=1e-9)


def test_bundled_problem_data_paths_resolve_to_the_shared_data(dpbench_1d):
    """A problem file's ``data`` is relative to the file: the bundled DPBench problems name ../shared's histogram."""
    from strategy_opt.problem import list_problems, read_problem_file

    for name, path in list_problems().items():
        data = read_problem_file(path).get("data")
        if data is not None:
            assert Path(data).resolve() == (dpbench_1d / "NETTRACE.n4096.npy").resolve(), name


def _scaled_ranges():
    """Ranges on 32 cells, one row scaled by 1e-5 and one by 1e5 (the second audit's file workload)."""
    rng = np.random.default_rng(0)
    rng.integers(0, 2, (40, 32)), rng.normal(size=(50, 3)), rng.normal(size=(3, 32))  # the audit's generator state
    R = np.zeros((20, 32))
    for i in range(20):
        a, b = sorted(rng.integers(0, 32, 2))
        R[i, a : b + 1] = 1
    R[0] *= 1e-5
    R[1] *= 1e5
    return R


def test_a_strategy_that_misses_directions_small_queries_need_gets_the_identity_mixed_in(tmp_path, capsys):
    # W^T W loses the small queries next to the 1e5 row; eigen-design then leaves cells unmeasured. It used
    # to be refused (exit 2); the compiler now mixes in a share of the identity at the same sensitivity,
    # and the file is one that error accepts, with the error it states
    from strategy_opt.io import read_strategy

    W = _scaled_ranges()
    np.save(tmp_path / "w.npy", W)
    out = tmp_path / "ed.npz"
    assert main(["-q", "solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--privacy", "approx", "--method", "eigen-design", "--out", str(out)]) == 0
    s = read_strategy(out)
    repair = s.meta["support_repair"]
    assert repair["rows_added"] == 32 and 0 < repair["identity_share"] <= 1e-2 and "does not support" in repair["reason"]
    A = s.dense()
    assert np.allclose(W @ np.linalg.pinv(A) @ A, W, rtol=1e-9, atol=1e-9 * np.abs(W).max())
    E = (A**2).sum(axis=0).max() * np.trace(W.T @ W @ np.linalg.pinv(A.T @ A))
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-6)
    assert s.meta["lower_bound"] <= E
    assert main(["-q", "error", str(out), "--workload", f"file:{tmp_path / 'w.npy'}"]) == 0


def test_l1_weighting_on_badly_scaled_rows_skips_its_local_search(tmp_path):
    # the smallest design weight falls below the local search's floor at every start scale (was: ValueError)
    from strategy_opt.io import read_strategy

    W = _scaled_ranges()
    np.save(tmp_path / "w.npy", W)
    out = tmp_path / "l1.npz"
    assert main(["-q", "solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--privacy", "pure", "--method", "l1-weighting", "--out", str(out)]) == 0
    s = read_strategy(out)
    assert "skipped" in s.meta["completion_line_search"]["local_search"]
    A = s.dense()
    assert np.allclose(W @ np.linalg.pinv(A) @ A, W, rtol=1e-9, atol=1e-9 * np.abs(W).max())


# the outside audit's workload: prefix:6 with row 1 scaled by 1e-3 and row 3 by 1e2 (row norms 1e5 apart)
W_SCALED_PREFIX = np.tril(np.ones((6, 6))) * np.array([1, 1e-3, 1, 1e2, 1, 1])[:, None]


def _matrix_frac_optimum(W: np.ndarray) -> float:
    """min trace(W X^{-1} W^T) over diag X <= 1: the (eps, delta) optimum written on the raw rows (Clarabel)."""
    import cvxpy as cp

    n = W.shape[1]
    X = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(W.T, X)), [cp.diag(X) <= 1])
    prob.solve(solver="CLARABEL")
    return float(prob.value)


@pytest.mark.parametrize("method", ["minerror-l2", "eigen-design", "auto"])
def test_queries_1e5_apart_get_the_optimum_not_a_refusal(method):
    """minerror-l2 and eigen-design used to exit 2 here (the 1e-3 row's direction was below the Gram's
    rank cutoff), and auto fell back to hierarchical at 2.18x the optimum (10189.727)."""
    s = solve(from_matrix(W_SCALED_PREFIX), privacy="approx", method=method)
    A = s.dense()
    assert np.allclose(W_SCALED_PREFIX @ np.linalg.pinv(A) @ A, W_SCALED_PREFIX, atol=1e-9)
    E = (A**2).sum(axis=0).max() * np.trace(W_SCALED_PREFIX @ np.linalg.pinv(A.T @ A) @ W_SCALED_PREFIX.T)
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-8)
    assert E <= _matrix_frac_optimum(W_SCALED_PREFIX) * (1.001 if method == "eigen-design" else 1.0001)
    assert s.meta["lower_bound"] <= E


def test_auto_pure_keeps_its_other_candidates_when_one_fails(monkeypatch):
    """A candidate that raises (svd-approx refused this workload) used to abort auto-pure, and auto then
    returned the identity, 3.4x worse than minerror-l1's 11674.46."""
    import strategy_opt.programs.svd_approx as svd

    def refuse(problem):
        raise InputError("svd-approx: refused for this test")

    monkeypatch.setattr(svd, "svd_approx", refuse)
    s = solve(from_matrix(W_SCALED_PREFIX), privacy="pure", method="auto-pure")
    assert s.meta["auto_pure_skipped"] == {"svd-approx": "svd-approx: refused for this test"}
    assert "svd-approx" not in s.meta["auto_pure_candidates"]
    A = s.dense()
    E = np.abs(A).sum(axis=0).max() ** 2 * np.trace(W_SCALED_PREFIX @ np.linalg.pinv(A.T @ A) @ W_SCALED_PREFIX.T)
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-8)
    assert E <= solve(from_matrix(W_SCALED_PREFIX), privacy="pure", method="minerror-l1").meta["unit_total_squared_error"] * (1 + 1e-6)
    assert E < 0.35 * np.trace(W_SCALED_PREFIX.T @ W_SCALED_PREFIX)  # the identity's E_1


def test_auto_pure_runs_minerror_l1_on_tiny_domains():
    """On a signed rank-2 workload over 6 cells auto used to return the identity (64.51); auto-pure now runs
    minerror-l1 (and the signed search) up to AUTO_MINERROR_L1_MAX_N cells and keeps the best. Which of the
    two wins is a matter of local optima (minerror-l1 gives 48.88 here from the L2 route's factor in reversed
    cell order, 56.71 without that start; the signed search 51.92)."""
    rng = np.random.default_rng(1)
    rng.normal(size=(10, 2))
    W = rng.normal(size=(10, 2)) @ rng.normal(size=(2, 6))
    s = solve(from_matrix(W), privacy="pure", method="auto")
    found = s.meta["auto_pure_candidates"]
    assert "minerror-l1" in found and found["minerror-l1"] < found["identity"]
    assert s.meta["auto_pure_choice"] == min(found, key=found.get)
    A = s.dense()
    E = np.abs(A).sum(axis=0).max() ** 2 * np.trace(W @ np.linalg.pinv(A.T @ A) @ W.T)
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-8)
    assert E < 0.85 * np.trace(W.T @ W)  # the identity's E_1


def test_auto_pure_scores_compiled_candidates_in_the_units_of_the_others():
    """On a workload with a rescaled Gram matrix (a factor all-predicate:3, log_scale ln 2) minerror-l1's
    meta E_1 is in true units and the other candidates' in rescaled ones: auto-pure picked the identity
    (94.5586) over minerror-l1 (94.0541)."""
    from strategy_opt.spec import parse_spec
    from strategy_opt.workload import kronecker

    rng = np.random.default_rng(5)
    F = [rng.standard_normal((3, 2)) for _ in range(3)][2]  # the audit's factor
    W = parse_spec("all-predicate:3")
    bits = (np.arange(8)[:, None] >> np.arange(3)) & 1
    full = np.kron(F, bits.astype(float))  # the workload's rows, built here

    s = solve(kronecker(from_matrix(F), W), privacy="pure", method="auto-pure")
    A = s.dense()
    E = np.abs(A).sum(axis=0).max() ** 2 * np.trace(full @ np.linalg.pinv(A.T @ A) @ full.T)
    assert E == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-8)
    alone = solve(kronecker(from_matrix(F), W), privacy="pure", method="minerror-l1").meta["unit_total_squared_error"]
    assert E <= alone * (1 + 1e-9)
    assert E < np.trace(full.T @ full) - 0.5  # the identity's E_1, 94.5586 (minerror-l1: 94.0541)


def test_a_method_whose_matrix_leaves_out_cells_is_refused_not_repaired(monkeypatch):
    """An outside audit: a registered method returning the identity's first half on prefix:8 was given 1% of the
    identity (E_2 1026, 28x the identity's) instead of the documented refusal. The repair is for directions only tiny
    queries need (their share of the squared norm ~1e-11); this one misses 0.278 of it."""
    from strategy_opt import registry
    from strategy_opt.compiler import compile_strategy

    monkeypatch.setattr(registry, "_METHODS", dict(registry.methods()))  # registered for this test only

    @registry.register_method("half-cells", source="test", summary="the first half of the cells")
    def half(problem):
        return compile_strategy(np.eye(problem.workload.n)[: problem.workload.n // 2], problem, "half-cells")

    Wm = np.tril(np.ones((8, 8)))
    P = np.diag([1.0] * 4 + [0.0] * 4)
    assert np.sum((Wm - Wm @ P) ** 2) / np.sum(Wm**2) == pytest.approx(0.2778, abs=1e-4)  # the share outside, by hand
    with pytest.raises(InputError, match=r"the half-cells strategy does not support the workload \(W A\+ A != W: 0\.278 of"):
        solve("prefix:8", privacy="approx", method="half-cells")


def test_the_repair_share_is_weighted_by_the_objectives_query_weights():
    """A strategy missing cell 7, which only the last prefix reads: repaired when that query's weight is 1e-12
    (its weighted share ~1e-13), refused at weight 1 (share 1/36 of the squared norm)."""
    from strategy_opt.compiler import supported_strategy
    from strategy_opt.error import ErrorProfile
    from strategy_opt.spec import parse_spec

    W = parse_spec("prefix:8")
    A = np.eye(8)[:7]
    tiny = np.array([1.0] * 7 + [1e-12])
    A_mixed, _, repair = supported_strategy(A, W, 2, ErrorProfile(A), weights=lambda: tiny)
    assert repair is not None and A_mixed.shape == (15, 8)
    assert np.allclose(W.matrix().toarray() @ np.linalg.pinv(A_mixed) @ A_mixed, W.matrix().toarray())
    with pytest.raises(InputError, match=r"weighted by the objective's query weights: 0\.0278"):
        supported_strategy(A, W, 2, ErrorProfile(A), weights=lambda: np.ones(8))
    with pytest.raises(InputError, match="does not support the workload"):
        supported_strategy(A, W, 2, ErrorProfile(A))


def test_a_repair_inside_a_chosen_candidate_is_recorded():
    """minerror-l1's compiler mixed in the identity; auto-pure chose it, and its meta used to lose support_repair."""
    P = np.tril(np.ones((8, 8)))
    P[::2] *= 1e-5
    s = solve(from_matrix(P), privacy="pure", method="auto")
    assert s.meta["auto_pure_choice"] == "minerror-l1"
    assert s.meta["support_repair"]["identity_share"] > 0 and s.meta["support_repair"]["rows_added"] == 8
    A = s.dense()
    assert np.allclose(P @ np.linalg.pinv(A) @ A, P, atol=1e-12)


PREFIX_OVER_DECADES = np.tril(np.ones((16, 16))) * np.logspace(-2, 2, 16)[:, None]


@pytest.mark.parametrize(("privacy", "method"), [("pure", "identity"), ("pure", "auto"), ("approx", "minerror-l2"), ("approx", "auto")])
def test_prefix_rows_over_four_decades_are_solved(tmp_path, privacy, method, capsys):
    """Rows 1e-2 .. 1e2: every command that needed the (eps, delta) optimum (the pure methods for their
    bound) ended in a LinAlgError traceback, exit 1; the optimum is now certified (a Clarabel SDP agrees)."""
    import cvxpy as cp

    np.save(tmp_path / "w.npy", PREFIX_OVER_DECADES)
    out = tmp_path / "s.npz"
    assert main(["-q", "solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--privacy", privacy, "--method", method, "--out", str(out)]) == 0
    meta = __import__("json").loads(str(np.load(out)["meta"]))
    X = cp.Variable((16, 16), PSD=True)
    optimum = cp.Problem(cp.Minimize(cp.matrix_frac(PREFIX_OVER_DECADES.T, X)), [cp.diag(X) <= 1]).solve(solver="CLARABEL")
    if privacy == "approx":
        assert meta["unit_total_squared_error"] == pytest.approx(optimum, rel=1e-5)
    assert meta["lower_bound_kind"] in ("dual-certificate", "l2-optimum")
    assert meta["lower_bound"] == pytest.approx(optimum, rel=1e-5)
    assert meta["lower_bound"] <= meta["unit_total_squared_error"]


def test_a_linear_algebra_failure_skips_an_auto_candidate_and_is_one_line_from_the_cli(monkeypatch, capsys):
    from dataclasses import replace

    import strategy_opt.registry as registry

    def diverge(problem):
        raise np.linalg.LinAlgError("Eigenvalues did not converge")

    table = registry._METHODS
    monkeypatch.setitem(table, "minerror-l2", replace(table["minerror-l2"], func=diverge))
    s = solve("prefix:8", privacy="approx", method="auto")
    assert s.meta["auto_skipped"] == {"minerror-l2": "Eigenvalues did not converge (LinAlgError)"}
    assert s.meta["unit_total_squared_error"] == min(v for v in s.meta["auto_candidates"].values())
    assert main(["-q", "solve", "--workload", "prefix:8", "--privacy", "approx", "--method", "minerror-l2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Eigenvalues did not converge" in err and "Traceback" not in err

    import strategy_opt.programs.svd_approx as svd

    monkeypatch.setattr(svd, "svd_approx", diverge)
    s = solve("prefix:8", privacy="pure", method="auto-pure")
    assert s.meta["auto_pure_skipped"] == {"svd-approx": "Eigenvalues did not converge"}


SCALE_METHODS = [
    ("pure", "p-identity", {}),
    ("pure", "svd-approx", {}),
    ("pure", "auto-pure", {}),
    ("pure", "minerror-l1", {}),
    ("pure", "l1-weighting", {"basis": "wavelet"}),
    ("pure", "l1-weighting", {"basis": "eigen"}),
    ("pure", "greedy-h", {}),
    ("pure", "workload-division", {}),
    ("approx", "eigen-design", {}),
    ("approx", "minerror-l2", {}),
]


@pytest.mark.parametrize(("privacy", "method", "options"), SCALE_METHODS, ids=[f"{m}-{o.get('basis', '')}" for _, m, o in SCALE_METHODS])
def test_strategies_do_not_depend_on_the_workload_scale(privacy, method, options):
    """E_p(c W) = c^2 E_p(W), so an optimiser should return the same strategy for c W: on prefix rows
    times 1e60, p-identity returned the identity (7.8e121 for 6.73e121), svd-approx ended 22% worse
    (from c = 1e30) and l1-weighting's local search 2% worse (SLSQP's absolute ftol)."""
    M = np.tril(np.ones((10, 10)))
    base = solve(from_matrix(M), privacy=privacy, method=method, **options).meta["unit_total_squared_error"]
    for c in (1e60, 1e120, 1e-100):  # minerror-l1's SDP made Clarabel panic (a Rust PanicException) from 1e90
        scaled = solve(from_matrix(c * M), privacy=privacy, method=method, **options).meta["unit_total_squared_error"]
        assert scaled / c**2 == pytest.approx(base, rel=1e-6)


def test_a_run_of_kronecker_factors_that_leaves_float64_is_refused(tmp_path, capsys):
    """a*a*b with a ~1e-120 and b ~1e149: the product's sum of squares (~1e-180) fits, a*a's (~1e-478) does
    not: identity wrote E_2 = 0, minerror-l2 called the Gram zero, eigen-design raised a traceback."""
    np.save(tmp_path / "a.npy", np.ones((2, 3)) * 1e-120)
    np.save(tmp_path / "b.npy", np.eye(3) * 1e149)
    a, b = f"file:{tmp_path / 'a.npy'}", f"file:{tmp_path / 'b.npy'}"
    for spec in (f"{a}*{a}*{b}", f"{b}*{a}*{a}"):
        for method in ("identity", "minerror-l2", "eigen-design"):
            assert main(["-q", "solve", "--workload", spec, "--privacy", "approx", "--method", method, "--out", str(tmp_path / "s.npz")]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "leaves float64, though the whole product's does not" in err
    s = solve(f"{a}*{b}*{a}", privacy="approx", method="identity")  # every run fits: trace(W^T W) = 6e-240 * 3e298 * 6e-240
    assert s.meta["unit_total_squared_error"] == pytest.approx(6e-240 * 3e298 * 6e-240)


@pytest.mark.parametrize(("scale", "size"), [(1e-100, "small"), (1e100, "large")])
def test_a_kronecker_product_of_explicit_factors_is_checked_as_a_whole(tmp_path, capsys, scale, size):
    """Each 8 x 8 factor's sum of squares (~3.6e+-200) fits float64, their product's (~1e+-397) does
    not: solve wrote E_2 = 0 with bound 0 (underflow) or ended in a traceback (overflow), and error
    reported an error of exactly 0 beside an SVD bound of 10^-397.6."""
    np.save(tmp_path / "f.npy", np.tril(np.ones((8, 8))) * scale)
    spec = f"file:{tmp_path / 'f.npy'}*file:{tmp_path / 'f.npy'}"
    np.save(tmp_path / "x.npy", np.ones(64))
    for privacy in ("approx", "pure"):
        assert main(["-q", "solve", "--workload", spec, "--privacy", privacy, "--method", "hierarchical", "--out", str(tmp_path / "h.npz")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"too {size} for float64" in err and "the product of its factors'" in err
    assert main(["-q", "solve", "--workload", "identity:64", "--method", "identity", "--out", str(tmp_path / "i.npz")]) == 0
    for command in (["error", str(tmp_path / "i.npz"), "--workload", spec, "--force"],
                    ["run", str(tmp_path / "i.npz"), "--workload", spec, "--force", "--data", str(tmp_path / "x.npy"), "--epsilon", "1", "--out", str(tmp_path / "a.csv")]):
        capsys.readouterr()
        assert main(["-q", *command]) == 2
        assert f"too {size} for float64" in capsys.readouterr().err
    # factors whose product fits are accepted, and the error is their product's
    np.save(tmp_path / "g.npy", np.tril(np.ones((8, 8))) / scale)
    s = solve(f"file:{tmp_path / 'f.npy'}*file:{tmp_path / 'g.npy'}", privacy="approx", method="identity")
    assert s.meta["unit_total_squared_error"] == pytest.approx(36.0**2)  # trace(W^T W) = ||P||_F^4, P lower-triangular ones


def test_a_full_disk_names_the_file_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    """A device that fills while a strategy or answers are written (an outside audit, on a 40 kB tmpfs): the error
    said 'cannot write to standard output ... files the command wrote are complete and kept' while no file existed.
    The write's own OSError now names the files, says nothing was written, and exits 2 (simulated here: every
    write to a staged file fails with ENOSPC)."""
    import os

    import strategy_opt.atomic as atomic

    real = atomic._stage

    def full(path):  # the staged file's writes go to /dev/full, as a device that has filled would fail them
        fd, tmp, directory, target = real(path)
        if fd is None:
            os.unlink(tmp)
        else:
            os.close(fd)
        fd = os.open("/dev/full", os.O_WRONLY)
        return fd, f"/proc/self/fd/{fd}", directory, target

    if not Path("/dev/full").exists() or not Path("/proc/self/fd").exists():
        pytest.skip("needs /dev/full and /proc/self/fd")
    monkeypatch.setattr(atomic, "_stage", full)
    monkeypatch.chdir(tmp_path)
    for out in ("s.npz", "s.csv"):
        assert cli("solve", "--workload", "prefix:300", "--method", "identity", "--out", out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"cannot write {out}" in err[0] and "No space left on device (nothing was written)" in err[0], err
        assert "standard output" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_answers_never_replace_a_strategys_metadata_and_are_refused_before_the_release(tmp_path, capsys, monkeypatch):
    """Answers to z.csv write the record z.csv.json, which is the metadata of a strategy z.csv.csv: it was replaced
    (exit 0; the strategy could no longer be read). A strategy .csv given as --out of a release was refused only after
    the release had drawn its noise (4 lines). Both are now refused first, in one line, and nothing is written."""
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.arange(9.0))
    assert cli("-q", "solve", "--workload", "identity:9", "--method", "identity", "--out", "z.csv.csv") == 0
    assert cli("-q", "solve", "--workload", "identity:9", "--method", "identity", "--out", "i.npz") == 0
    capsys.readouterr()
    before = Path("z.csv.json").read_bytes()
    assert cli("run", "i.npz", "--data", "x.npy", "--workload", "identity:9", "--epsilon", "1", "--out", "z.csv", "--seed", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "its record z.csv.json exists and is not an answers record (the metadata of a strategy file)" in err[0]
    assert Path("z.csv.json").read_bytes() == before and not Path("z.csv").exists()
    assert cli("release", "--method", "dawa", "--data", "x.npy", "--workload", "prefix:9", "--epsilon", "1", "--out", "z.csv.csv") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it is a strategy file" in err[0]  # before any stage of dawa ran (it logs each)
    # answers written again over their own record are fine
    for _ in range(2):
        assert cli("-q", "run", "i.npz", "--data", "x.npy", "--workload", "identity:9", "--epsilon", "1", "--out", "a.csv", "--seed", "1") == 0


@pytest.mark.parametrize("flag", ["--out", "--method", "--objective", "--workload", "--basis"])
def test_an_empty_solve_flag_is_refused_not_taken_for_the_default(flag, capsys):
    """'--out "$OUT"' with OUT unset solved and wrote nothing (exit 0); --method= ran auto (an outside audit)."""
    args = ["solve", "--workload", "prefix:9", "--method", "identity"]
    assert cli(*args, f"{flag}=") == 2
    assert capsys.readouterr().err.strip() == f"strategy-opt: error: {flag} is empty; give a value or leave the flag out"


def test_release_takes_the_branching_and_basis_flags(tmp_path, capsys, monkeypatch):
    """CLI.md gives hierarchical's --branching and l1-weighting's --basis; release refused them as unrecognized."""
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.random.default_rng(0).poisson(5, 64).astype(float))
    common = ["--data", "x.npy", "--workload", "prefix:64", "--epsilon", "1", "--seed", "1"]
    assert cli("-q", "release", "--method", "hierarchical", "--branching", "4", *common, "--out", "h.csv") == 0
    assert json.loads(Path("h.csv.json").read_text())["options"] == {"branching": 4}
    assert cli("-q", "release", "--method", "l1-weighting", "--basis", "hierarchical", *common, "--out", "l.csv") == 0
    assert json.loads(Path("l.csv.json").read_text())["options"] == {"basis": "hierarchical"}
    assert cli("release", "--method", "hierarchical", "--branching", "4", "--option", "branching=2", *common, "--out", "c.csv") == 2
    assert "--branching 4 and --option branching=2 conflict" in capsys.readouterr().err


def test_help_into_a_full_device_fails(tmp_path):
    """argparse swallowed the OSError of --help/--version written to /dev/full: exit 0 with nothing written."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    for args in (["--help"], ["--version"], ["solve", "--help"]):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([sys.executable, "-m", "strategy_opt.cli", *args], stdout=full, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 1 and "cannot write to standard output" in p.stderr.decode(), args


def test_the_summary_line_quotes_a_workload_with_blanks(capsys):
    """The summary is space-separated key=value: a SPEC typed with blanks is shell-quoted so the line still splits."""
    import shlex

    assert cli("-q", "solve", "--workload", "prefix:4 * total:2", "--method", "identity") == 0
    fields = dict(f.split("=", 1) for f in shlex.split(capsys.readouterr().out) if "=" in f)
    assert fields["workload"] == "prefix:4 * total:2" and fields["E_2"] == "20"


def test_run_of_the_identity_needs_no_dense_matrix_and_error_reports_without_per_query_variances(tmp_path, capsys, monkeypatch):
    """An outside audit: run with the identity strategy was refused at up to 20000 cells for 6 dense n x n matrices it
    never builds (it ran above that); error on all-range:8192 with the identity ran out of memory under a 3 GB limit
    because the per-query variances were estimated at 48 bytes a query (about 90 measured) instead of falling back to
    the exact total without them. With 150 MB available: run answers prefix:2000 through the identity (6 dense
    2000 x 2000 matrices would be 192 MB), and error on all-range:2000 (2 million queries, 192 MB of variances at 96
    bytes) reports E_2 = n(n+1)(n+2)/6 without the largest variance."""
    import strategy_opt.resources as resources

    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "--workload", "prefix:2000", "--method", "identity", "--out", "i.npz") == 0
    np.save("x.npy", np.arange(2000.0))
    capsys.readouterr()
    monkeypatch.setattr(resources, "available_memory", lambda: 150 * 10**6)
    assert cli("-q", "run", "i.npz", "--data", "x.npy", "--workload", "prefix:2000", "--epsilon", "1e6", "--out", "a.npy", "--seed", "1") == 0
    assert np.allclose(np.load("a.npy"), np.cumsum(np.arange(2000.0)), rtol=1e-6, atol=1e-2)
    assert cli("-q", "error", "i.npz", "--workload", "all-range:2000", "--json", "--force") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit_total_squared_error"] == pytest.approx(2000 * 2001 * 2002 / 6, rel=1e-12)
    assert report["unit_max_query_variance"] is None
