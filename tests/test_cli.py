"""The command line: contract of CLI.md, exit codes, one-line errors, no partial output."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strategy_opt.cli import main
from strategy_opt.io import read_strategy


def cli(*args):
    return main([str(a) for a in args])


def test_solve_error_export_run_round_trip(tmp_path, capsys):
    s = tmp_path / "h.npz"
    assert cli("solve", "--workload", "all-range:64", "--privacy", "pure", "--method", "hierarchical", "--out", s) == 0
    capsys.readouterr()
    assert cli("error", s, "--workload", "all-range:64", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    meta = json.loads(str(np.load(s)["meta"]))
    assert report["unit_total_squared_error"] == pytest.approx(meta["unit_total_squared_error"], rel=1e-12)
    for fmt in ("mtx", "csv"):
        assert cli("export", s, "--out", tmp_path / f"h.{fmt}") == 0
    x = np.arange(64.0)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "a.csv"
    assert cli("run", tmp_path / "h.mtx", "--data", tmp_path / "x.npy", "--workload", "all-range:64", "--epsilon", "1e7", "--seed", 1, "--out", out) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "query,answer,lower,upper" and len(lines) == 64 * 65 // 2 + 1
    ans = np.array([float(line.split(",")[1]) for line in lines[1:]])
    from strategy_opt.workload import all_range

    np.testing.assert_allclose(ans, all_range(64).matvec(x), rtol=1e-3, atol=1e-3)


def test_seed_reproducible(tmp_path):
    cli("solve", "--workload", "prefix:16", "--method", "wavelet", "--privacy", "pure", "--out", tmp_path / "s.npz")
    np.save(tmp_path / "x.npy", np.ones(16))
    for name in ("a", "b"):
        cli("run", tmp_path / "s.npz", "--data", tmp_path / "x.npy", "--workload", "prefix:16", "--epsilon", 1, "--seed", 7, "--out", tmp_path / f"{name}.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


def test_raw_records(tmp_path):
    (tmp_path / "r.csv").write_text("age\n1\n2\n2\n5\n")
    cli("solve", "--workload", "identity:6", "--method", "identity", "--out", tmp_path / "s.npz")
    assert cli("run", tmp_path / "s.npz", "--data", tmp_path / "r.csv", "--column", "age", "--bins", "0:6", "--workload", "identity:6", "--epsilon", 1e8, "--seed", 0, "--out", tmp_path / "a.npy") == 0
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), [0, 1, 2, 0, 0, 1], atol=1e-3)


def test_raw_records_with_negative_lo_and_decimal_widths(tmp_path):
    # --bins -5:5 is a value (not an option named -5:5); decimal edges are LO + i*WIDTH as typed,
    # so 0.3 with width 0.1 lies in bin 3 (0.1 * 3 = 0.30000000000000004 would put it in bin 2)
    (tmp_path / "r.csv").write_text("t,v\n-5,0.3\n4.9,0.6\n5,0.7\n-5.1,0.1\n")
    cli("solve", "--workload", "identity:10", "--method", "identity", "--out", tmp_path / "s.npz")
    common = ("--workload", "identity:10", "--epsilon", 1e9, "--seed", 0)
    assert cli("-q", "run", tmp_path / "s.npz", "--data", tmp_path / "r.csv", "--column", "t", "--bins", "-5:5", *common, "--out", tmp_path / "t.npy") == 0
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), np.eye(10)[0] + np.eye(10)[9], atol=1e-3)  # 5 and -5.1 are outside [-5, 5)
    assert cli("-q", "run", tmp_path / "s.npz", "--data", tmp_path / "r.csv", "--column", "v", "--bins", "0:1:0.1", *common, "--out", tmp_path / "v.npy") == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), np.eye(10)[[1, 3, 6, 7]].sum(axis=0), atol=1e-3)


def test_recorded_file_workload_is_valid_from_any_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "f").mkdir()
    np.save(tmp_path / "f" / "w.npy", np.tril(np.ones((6, 6))))
    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "--workload", "file:f/w.npy", "--method", "identity", "--out", "s.npz") == 0
    assert json.loads(str(np.load(tmp_path / "s.npz")["meta"]))["workload"] == f"file:{tmp_path / 'f' / 'w.npy'}"
    monkeypatch.chdir(tmp_path / "f")
    capsys.readouterr()
    assert cli("-q", "error", tmp_path / "s.npz", "--workload", "file:w.npy") == 0, capsys.readouterr().err


def _bad(tmp_path, capsys, *args, out=None):
    capsys.readouterr()
    code = cli(*args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("strategy-opt: error:"), err
    if out is not None:
        assert not out.exists()
    return err


@pytest.fixture
def strategy_and_data(tmp_path):
    cli("solve", "--workload", "prefix:8", "--method", "identity", "--privacy", "pure", "--out", tmp_path / "s.npz")
    np.save(tmp_path / "x.npy", np.ones(8))
    return tmp_path / "s.npz", tmp_path / "x.npy"


def test_bad_inputs_exit_2_one_line_no_output(tmp_path, capsys, strategy_and_data):
    s, x = strategy_and_data
    out = tmp_path / "out.csv"
    run = ("run", s, "--workload", "prefix:8", "--out", out)
    assert "epsilon" in _bad(tmp_path, capsys, *run, "--data", x, "--epsilon", -1, out=out)
    assert "delta" in _bad(tmp_path, capsys, *run, "--data", x, "--epsilon", 1, "--delta", 1.5, "--privacy", "approx", out=out)
    assert "delta" in _bad(tmp_path, capsys, *run, "--data", x, "--epsilon", 1, "--delta", 0, "--privacy", "approx", out=out)
    np.save(tmp_path / "short.npy", np.ones(5))
    assert "5 cells" in _bad(tmp_path, capsys, *run, "--data", tmp_path / "short.npy", "--epsilon", 1, out=out)
    np.save(tmp_path / "obj.npy", np.array([1, None], dtype=object), allow_pickle=True)
    _bad(tmp_path, capsys, *run, "--data", tmp_path / "obj.npy", "--epsilon", 1, out=out)
    sout = tmp_path / "w.npz"
    assert "SPEC" in _bad(tmp_path, capsys, "solve", "--workload", "all-range:x", "--out", sout, out=sout)
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan]]))
    assert "NaN" in _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'nan.npy'}", "--method", "identity", "--out", sout, out=sout)
    np.save(tmp_path / "objw.npy", np.array([[1, None]], dtype=object), allow_pickle=True)
    _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'objw.npy'}", "--method", "identity", "--out", sout, out=sout)
    assert "unknown method" in _bad(tmp_path, capsys, "solve", "--workload", "prefix:8", "--method", "nope", "--out", sout, out=sout)
    assert "unknown solver" in _bad(tmp_path, capsys, "solve", "--workload", "prefix:8", "--method", "identity", "--solver", "nope", "--out", sout, out=sout)
    _bad(tmp_path, capsys, "solve", "--no-such-flag")
    assert "computed for workload" in _bad(tmp_path, capsys, "error", s, "--workload", "all-range:8")


def test_list(capsys):
    for what in ("methods", "objectives", "solvers", "problems"):
        assert cli("list", what) == 0
    out = capsys.readouterr().out
    for name in ("hierarchical", "wavelet", "total", "scs", "clarabel", "quickstart"):
        assert name in out
    assert cli("list") == 0  # no argument: all four listings under headings
    everything = capsys.readouterr().out
    assert [line for line in everything.splitlines() if line.endswith(":")] == ["methods:", "objectives:", "solvers:", "problems:"]
    assert all(line in everything for line in out.splitlines())


def test_list_methods_names_every_registered_option(capsys):
    from strategy_opt.registry import methods

    assert cli("list", "methods") == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    for name, info in methods().items():
        listed = lines[name].split("options (--option KEY=VALUE): ")[1].split("  [")[0]
        if info.options is None:
            assert listed == "given to its candidates"
        else:
            assert listed == (", ".join(sorted(info.options)) or "none"), name


def test_problem_file_with_override(tmp_path, capsys):
    p = tmp_path / "p.toml"
    p.write_text('workload = "all-range:32"\nprivacy = "approx"\nmethod = "identity"\n')
    assert cli("solve", p, "--method", "wavelet", "--out", tmp_path / "s.npz", "--json") == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["method"] == "wavelet" and meta["workload"] == "all-range:32"
    p.write_text("workload = [unclosed")
    _bad(tmp_path, capsys, "solve", p)


def test_a_spec_given_where_the_problem_file_goes_is_pointed_to_workload(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("solve", "prefix:100") == 2
    assert "it is a workload SPEC: give it as --workload prefix:100" in capsys.readouterr().err
    assert cli("solve", "nothere:3") == 2  # not a SPEC: the bundled problems are listed
    err = capsys.readouterr().err
    assert "problem file not found: nothere:3" in err and "bundled problems: " in err and "--workload" not in err


def test_problem_file_flag_options_beside_method(tmp_path, capsys, monkeypatch):
    """branching/basis are solve flags, so a problem file may give them beside method (CLI.md: flags override the file)."""
    p = tmp_path / "p.toml"
    p.write_text('workload = "prefix:16"\nprivacy = "pure"\nmethod = "hierarchical"\nbranching = 4\n')

    def solved(*args):
        assert cli("-q", "solve", p, "--json", *args) == 0
        return json.loads(capsys.readouterr().out)

    assert solved()["shape"] == [16 + 4 + 1, 16]  # H_4 on 16 cells: the root, 4 blocks, 16 cells
    assert solved("--branching", 2)["shape"] == [31, 16]
    p.write_text('workload = "prefix:16"\nmethod = "hierarchical"\nbranching = 4\n[options]\nbranching = 2\n')
    _bad(tmp_path, capsys, "solve", p)
    # a bundled problem named with its suffix, from another directory
    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "quickstart.toml", "--method", "identity", "--json") == 0
    assert json.loads(capsys.readouterr().out)["workload"] == "all-range:256"


def test_flags_that_replace_the_files_method_or_objective_drop_its_options(tmp_path, capsys):
    """The file's options were written for its own method, objective and workload: an override must not fail on them."""
    p = tmp_path / "b.toml"
    p.write_text('workload = "prefix:16"\nprivacy = "pure"\nmethod = "hierarchical"\nbranching = 4\n')
    assert cli("solve", p, "--method", "wavelet", "--json") == 0
    out = capsys.readouterr()
    meta = json.loads(out.out)
    assert meta["method"] == "wavelet" and meta["shape"] == [16, 16]
    assert "option(s) branching not used, written for what --method 'wavelet' (the file says 'hierarchical') replaced" in out.err
    np.save(tmp_path / "w.npy", np.arange(1.0, 17.0))
    p.write_text('workload = "prefix:16"\nmethod = "minerror-l2"\nobjective = "weighted"\n[options]\nweights = "w.npy"\n')
    assert cli("-q", "solve", p, "--json") == 0  # the file as written: its weights are used
    assert json.loads(capsys.readouterr().out)["objective"] == "weighted"
    assert cli("solve", p, "--objective", "total", "--json") == 0
    out = capsys.readouterr()
    assert "option(s) weights not used" in out.err and json.loads(out.out)["objective"] == "total"
    assert cli("solve", p, "--workload", "prefix:8") == 2  # weighted still: the file's 16 weights are named
    assert "option weights has 16 entries but the workload has 8 queries" in capsys.readouterr().err
    # options the replacing method takes too are given to it, and the note says so (audit: a file's basis was
    # silently given to eigen-design); a flag for the same option replaces it
    p.write_text('workload = "prefix:9"\nprivacy = "pure"\nmethod = "l1-weighting"\nbasis = "fourier"\n')
    assert cli("solve", p, "--privacy", "approx", "--method", "eigen-design", "--json") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["eigen_design"]["variant"] == "basis:fourier"
    assert "option(s) basis='fourier', written for method 'l1-weighting', given to --method 'eigen-design'" in out.err
    assert cli("solve", p, "--privacy", "approx", "--method", "eigen-design", "--basis", "eigen", "--json") == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["eigen_design"]["variant"] != "basis:fourier" and "given to --method" not in out.err
    # the same method given again replaces nothing: its options stay
    p.write_text('workload = "prefix:16"\nprivacy = "pure"\nmethod = "hierarchical"\nbranching = 4\n')
    assert cli("-q", "solve", p, "--method", "hierarchical", "--json") == 0
    assert json.loads(capsys.readouterr().out)["shape"] == [21, 16]


def test_console_script_help_and_exit_code():
    r = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "solve", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--workload" in r.stdout
    r = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "solve", "--workload", "prefix:-1"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_a_flag_and_an_option_for_the_same_setting_may_not_disagree(tmp_path, capsys):
    # --branching 2 --option branching=4 used to run with 4 silently (in either order)
    def solved(*args):
        assert cli("-q", "solve", "--workload", "prefix:16", "--method", "hierarchical", "--json", *args) == 0
        return json.loads(capsys.readouterr().out)["branching"]

    assert solved("--branching", 4) == solved("--option", "branching=4") == solved("--branching", 4, "--option", "branching=4") == 4
    assert solved("--branching", 2) == 2
    for args in (("--branching", 2, "--option", "branching=4"), ("--option", "branching=4", "--branching", 2)):
        assert cli("-q", "solve", "--workload", "prefix:16", "--method", "hierarchical", *args, "--out", tmp_path / "c.npz") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["strategy-opt: error: --branching 2 and --option branching=4 conflict; give the branching once"], err
    assert cli("-q", "solve", "--workload", "prefix:16", "--method", "l1-weighting", "--basis", "wavelet", "--option", "basis=eigen") == 2
    assert "--basis wavelet and --option basis=eigen conflict" in capsys.readouterr().err
    assert not (tmp_path / "c.npz").exists()


def test_an_option_given_twice_may_not_disagree(tmp_path, capsys):
    # --option branching=4 --option branching=2 used to run with 2 silently
    base = ("-q", "solve", "--workload", "prefix:16", "--method", "hierarchical")
    assert cli(*base, "--option", "branching=4", "--option", "branching=2", "--out", tmp_path / "c.npz") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["strategy-opt: error: --option branching=4 and --option branching=2 conflict; give branching once"], err
    assert not (tmp_path / "c.npz").exists()
    assert cli(*base, "--option", "branching=2", "--option", "branching=true", "--out", tmp_path / "c.npz") == 2  # True == 1 in Python
    assert "--option branching=2 and --option branching=True conflict" in capsys.readouterr().err
    assert cli(*base, "--option", "branching=4", "--option", "branching=4", "--json") == 0  # the same value twice is one setting
    assert json.loads(capsys.readouterr().out)["branching"] == 4


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("solve", "--workload", "prefix:8", "--method", "identity", "--option", "objective=total"), "--objective"),
        (("solve", "--workload", "prefix:8", "--option", "method=identity"), "--method"),
        (("solve", "--workload", "prefix:8", "--option", "privacy=pure"), "--privacy"),
        (("solve", "--workload", "prefix:8", "--method", "hierarchical", "--option", "solver=scs"), "--solver"),
        (("release", "--method", "dawa", "--option", "sampler=simulate"), "--sampler"),
        (("release", "--method", "dawa", "--option", "rng=3"), "--seed"),
        (("release", "--method", "identity", "--option", "workload=prefix:8"), "--workload"),
    ],
)
def test_an_option_that_a_flag_sets_is_refused_in_one_line(tmp_path, capsys, args, flag):
    # these reached solve()/the release function twice: a TypeError traceback ("got multiple values")
    np.save(tmp_path / "x.npy", np.ones(8))
    if args[0] == "release":
        args = (*args, "--data", tmp_path / "x.npy", "--workload", "prefix:8", "--epsilon", 1, "--out", tmp_path / "a.npy")
    assert cli("-q", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("strategy-opt: error: --option ") and err[0].endswith(f"is not a method option: give it with {flag}"), err


def test_a_problem_file_option_that_a_key_sets_is_refused(tmp_path, capsys):
    (tmp_path / "p.toml").write_text('workload = "prefix:8"\n[options]\nmethod = "identity"\n')
    assert cli("-q", "solve", tmp_path / "p.toml") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[options] method=... is not a method option: give it with the key method outside [options]" in err[0], err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("error", "s.npz", "--workload", "prefix:13", "--privacy", "foo"), "in 'strategy-opt error': argument --privacy: invalid choice: 'foo' (choose from 'pure', 'approx')"),
        (("run", "s.npz", "--data", "x.npy", "--workload", "prefix:8", "--epsilon", "1", "--seed", "-1", "--out", "a.npy"), "in 'strategy-opt run': argument --seed: must be a non-negative integer, got -1"),
        (("release", "--method", "dawa", "--data", "x.npy", "--workload", "prefix:8", "--epsilon", "1", "--seed", "x", "--out", "a.npy"), "in 'strategy-opt release': argument --seed: must be a non-negative integer, got x"),
        (("online", "--data", "x.npy", "--queries", "identity:8", "--budget", "1", "--half-width", "5", "--seed", "-3", "--out", "a.csv"), "in 'strategy-opt online': argument --seed: must be a non-negative integer, got -3"),
        (("online", "--data", "x.npy", "--queries", "identity:8", "--budget", "abc", "--half-width", "5", "--out", "a.csv"), "in 'strategy-opt online': argument --budget: must be a number, got 'abc'"),
        (("solve", "--workload", "prefix:8", "--method", "identity", "--out", "a.npz", "--bogus"), "in 'strategy-opt solve': unrecognized arguments: --bogus"),
        (("list", "methods", "extra"), "in 'strategy-opt list': unrecognized arguments: extra"),
    ],
)
def test_usage_errors_read_cleanly(capsys, args, expected):
    # were "error: error: argument ..." and "invalid _nonneg_int value: '-1'" (a function's name)
    assert cli(*args) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"strategy-opt: error: {expected}"]


def test_list_marks_a_broken_profile_and_lists_the_others(tmp_path, capsys, monkeypatch):
    (tmp_path / "solvers").mkdir()
    (tmp_path / "solvers" / "neg.toml").write_text("tol = -1\n")
    monkeypatch.chdir(tmp_path)
    assert cli("list", "solvers") == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == sorted(names) and {"clarabel", "native", "neg", "scs"} <= set(names)
    broken = next(line for line in lines if line.startswith("neg"))
    assert "unreadable: bad value: tol = -1 (must be a finite number > 0)" in broken
    assert cli("list") == 0 and "unreadable" in capsys.readouterr().out


def test_a_leading_tilde_is_the_home_directory_in_problem_files_and_quoted_paths(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    (home / "p").mkdir(parents=True)
    np.save(home / "p" / "W.npy", np.tril(np.ones((4, 4))))
    np.save(home / "x.npy", np.arange(4.0))
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "prob.toml").write_text('workload = "file:~/p/W.npy"\nprivacy = "pure"\nmethod = "identity"\n')
    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "prob.toml", "--out", "s.npz", "--json") == 0
    assert json.loads(capsys.readouterr().out)["workload"] == f"file:{home / 'p' / 'W.npy'}"
    assert cli("-q", "run", "s.npz", "--data", "~/x.npy", "--workload", "file:~/p/W.npy", "--epsilon", "1e6", "--seed", "0", "--out", "a.npy") == 0
    assert np.allclose(np.load(tmp_path / "a.npy"), [0, 1, 3, 6], atol=1e-3)


def test_the_same_workload_file_by_a_relative_path_is_the_recorded_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("W.npy", np.tril(np.ones((4, 4))))
    assert cli("-q", "solve", "--workload", "file:W.npy", "--privacy", "pure", "--method", "identity", "--out", "s.npz") == 0
    capsys.readouterr()
    assert cli("error", "s.npz", "--workload", "file:W.npy") == 0
    assert "equivalent workloads" not in capsys.readouterr().err


def test_a_workload_file_is_known_by_its_content_not_its_path(tmp_path, capsys, monkeypatch):
    """meta.workload_files holds the files' SHA-256: a file changed since the solve is refused, a copy elsewhere accepted."""
    import hashlib

    monkeypatch.chdir(tmp_path)
    prefix = np.tril(np.ones((8, 8)))
    np.save("Q.npy", prefix)
    assert cli("-q", "solve", "--workload", "file:Q.npy", "--privacy", "approx", "--method", "minerror-l2", "--out", "q.npz", "--json") == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["workload_files"] == {str(tmp_path / "Q.npy"): hashlib.sha256((tmp_path / "Q.npy").read_bytes()).hexdigest()}
    Path("copy").mkdir()
    Path("copy/Q2.npy").write_bytes(Path("Q.npy").read_bytes())
    assert cli("error", "q.npz", "--workload", "file:copy/Q2.npy") == 0  # the same bytes under another path
    assert "equivalent workloads" not in capsys.readouterr().err
    np.save("Q3.npy", prefix[::-1])  # the same queries in another order: the same Gram matrix
    assert cli("error", "q.npz", "--workload", "file:Q3.npy") == 0
    assert "equivalent workloads" in capsys.readouterr().err
    np.save("Q.npy", np.eye(8)[[0]])  # other queries written over the recorded file
    for args in (["error", "q.npz", "--workload", "file:Q.npy"],
                 ["run", "q.npz", "--data", "copy/Q2.npy", "--workload", "file:Q.npy", "--epsilon", "1", "--out", "a.npy"]):
        assert cli(*args) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"strategy-opt: error: workload file {tmp_path / 'Q.npy'} has changed since the strategy was computed for it (its SHA-256 is not the recorded one); pass --force to use it anyway"
    assert not Path("a.npy").exists()
    assert cli("error", "q.npz", "--workload", "file:Q3.npy") == 2  # the recorded workload cannot be read any more to compare Grams
    capsys.readouterr()
    assert cli("-q", "error", "q.npz", "--workload", "file:Q.npy", "--force", "--json") == 0  # the new query e_0: E_2 = ||A||_2^2 [(A^T A)^-1]_00
    A = read_strategy("q.npz").dense()
    expected = np.max(np.sum(A**2, axis=0)) * np.linalg.inv(A.T @ A)[0, 0]
    assert math.isclose(json.loads(capsys.readouterr().out)["unit_total_squared_error"], expected, rel_tol=1e-9)


def test_a_strategy_for_a_workload_built_in_python_says_why_it_cannot_be_compared(tmp_path, capsys, monkeypatch):
    import strategy_opt as so
    from strategy_opt.io import write_strategy

    monkeypatch.chdir(tmp_path)
    s = so.solve(np.tril(np.ones((5, 5))))
    del s.meta["workload_sha256"]  # as a file written before the matrix's content hash was recorded
    write_strategy(s, "m.npz")  # recorded as 'matrix'
    assert cli("error", "m.npz", "--workload", "prefix:5") == 2
    assert capsys.readouterr().err.strip() == (
        "strategy-opt: error: strategy was computed for a workload built in Python (recorded as 'matrix', not a SPEC), which cannot be "
        "compared with 'prefix:5'; pass --force to use it anyway (or solve from a SPEC or a file: workload)"
    )
    assert cli("-q", "error", "m.npz", "--workload", "prefix:5", "--force") == 0


def test_a_kronecker_strategy_accepts_its_workload_as_a_flat_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("-q", "solve", "--workload", "prefix:8*identity:2", "--privacy", "approx", "--method", "identity", "--out", "k.npz") == 0
    np.save("flat.npy", np.kron(np.tril(np.ones((8, 8))), np.eye(2)))  # the same queries over the same cells, domain [16]
    capsys.readouterr()
    assert cli("-q", "error", "k.npz", "--workload", "file:flat.npy", "--json") == 0
    assert json.loads(capsys.readouterr().out)["unit_total_squared_error"] == 72.0  # trace(W^T W) of the identity
    np.save("other.npy", np.kron(np.eye(2), np.tril(np.ones((8, 8)))))  # the factors swapped: another workload
    assert cli("error", "k.npz", "--workload", "file:other.npy") == 2


def test_a_sidecar_that_cannot_be_written_leaves_no_output(tmp_path, capsys, monkeypatch):
    """A .csv strategy and its .json, answers and their .json: both written or neither."""
    monkeypatch.chdir(tmp_path)
    Path("s.json").mkdir()
    assert cli("solve", "--workload", "prefix:8", "--method", "identity", "--out", "s.csv") == 2
    assert capsys.readouterr().err.strip() == "strategy-opt: error: cannot write s.json: Is a directory"
    assert cli("-q", "solve", "--workload", "prefix:8", "--method", "identity", "--out", "h.npz") == 0
    np.save("x.npy", np.arange(8.0))
    Path("a.npy.json").mkdir()
    assert cli("run", "h.npz", "--data", "x.npy", "--workload", "prefix:8", "--epsilon", "1", "--out", "a.npy") == 2
    assert capsys.readouterr().err.strip().endswith("cannot write a.npy.json: Is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy.json", "h.npz", "s.json", "x.npy"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["solve", "--workload", "identity:+4"], "malformed workload SPEC 'identity:+4': N must be a positive integer, got nothing ('+', '*' and parentheses are SPEC operators, not signs)"),
        (["solve", "--workload", "identity:-1"], "malformed workload SPEC 'identity:-1': N must be a positive integer, got '-1'"),
        (["solve", "--workload", "prefix:6", "--privacy", "approx", "--method", "minerror-l2", "--objective", "weighted", "--option", "weights=1,2,nan,4,5,-6"],
         "option weights must be finite and positive, got nan for query 2 (0-based; 2 such entries) (a query of weight 0 must still be answered by the strategy: give it a small weight)"),
        (["online", "--data", "x.npy", "--queries", "prefix:32", "--budget", "1", "--half-width", "5", "--out", "o.csv"],
         "x.npy: histogram has 16 cells but the --queries stream has 32"),
        (["release", "--method", "dawa", "--data", "x.npy", "--workload", "prefix:16", "--epsilon", "1e-300", "--seed", "1", "--out", "e.npy"],
         "--epsilon 1e-300 is too small for dawa, which spends it in parts: epsilon = 7.5e-301 gives noise of scale 1.33333e+300 for sensitivity 1, "
         "whose variance is beyond floating point (the answers would carry no information); use a larger epsilon"),
    ],
)
def test_messages_name_what_the_user_gave(tmp_path, capsys, monkeypatch, args, expected):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.arange(16.0))
    assert cli("-q", *args) == 2
    assert capsys.readouterr().err.strip() == f"strategy-opt: error: {expected}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_auto_says_which_candidates_an_option_applies_to(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("solve", "--workload", "prefix:16", "--privacy", "pure", "--method", "auto", "--branching", "4", "--json") == 0
    out = capsys.readouterr()
    assert "auto: option branching=4 applies to hierarchical only" in out.err
    assert json.loads(out.out)["auto_candidates"]["hierarchical"] == pytest.approx(
        json.loads(subprocess.run([sys.executable, "-m", "strategy_opt.cli", "-q", "solve", "--workload", "prefix:16", "--privacy", "pure",
                                   "--method", "hierarchical", "--branching", "4", "--json"], capture_output=True, text=True, check=True).stdout)["unit_total_squared_error"],
        rel=1e-12,
    )


def test_a_problem_file_with_delta_under_pure_privacy_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.toml").write_text('workload = "prefix:8"\nprivacy = "pure"\ndelta = 1e-6\n')
    assert cli("solve", "p.toml", "--out", "s.npz") == 2
    assert capsys.readouterr().err.strip() == "strategy-opt: error: problem file p.toml: delta = 1e-06 applies only to privacy 'approx', but the file says privacy = 'pure'"
    assert not Path("s.npz").exists()
    # a file for approx overridden by --privacy pure: its run command leaves the delta out (run refuses it under pure)
    Path("q.toml").write_text('workload = "prefix:8"\nprivacy = "approx"\nmethod = "identity"\ndelta = 1e-6\nepsilon = 1.0\ndata = "gone.npy"\n')
    assert cli("solve", "q.toml", "--privacy", "pure", "--out", "s.npz") == 0
    hint = next(line for line in capsys.readouterr().err.splitlines() if "are for answering" in line)
    assert "--delta" not in hint and "(its data file gone.npy does not exist)" in hint


def test_solve_prints_the_run_command_for_a_problem_files_data(tmp_path, capsys, monkeypatch):
    """data/epsilon/delta in a problem file are for answering: solve says how, and that command runs."""
    import shlex

    (tmp_path / "probs").mkdir()
    np.save(tmp_path / "probs" / "x.npy", np.arange(8.0))
    (tmp_path / "probs" / "p.toml").write_text('workload = "prefix:8"\nprivacy = "approx"\nmethod = "identity"\ndata = "x.npy"\nepsilon = 1234567.891\ndelta = 1.23456789e-9\n')
    monkeypatch.chdir(tmp_path)
    assert cli("solve", "probs/p.toml", "--out", "s.npz") == 0
    hint = next(line for line in capsys.readouterr().err.splitlines() if "are for answering" in line)
    command = shlex.split(hint.split("; run: ")[1])
    assert command[:2] == ["strategy-opt", "run"] and Path(command[command.index("--data") + 1]).resolve() == tmp_path / "probs" / "x.npy"
    # every digit of the file's budget (6 significant digits would spend more than it allows)
    assert command[command.index("--epsilon") + 1] == "1234567.891" and command[command.index("--delta") + 1] == "1.23456789e-09"
    assert cli(*command[1:-2], "--seed", "0", "--out", "a.npy") == 0
    assert np.allclose(np.load(tmp_path / "a.npy"), np.cumsum(np.arange(8.0)), atol=1e-2)


@pytest.mark.parametrize(
    "args, message",
    [
        (["solve", "--workload", "prefix:8", "--solver", ""], "solver profile name is empty"),
        (["solve", "--workload", "file:empty.csv"], "empty.csv: workload matrix is empty (the file holds no numbers)"),
        (["solve", "--workload", "prefix:8", "--solver", "DIR/"], "is a directory, not a .toml file"),
        (["solve", "--workload", "prefix:8", "--solver", "gone/mine.TOML"], "solver profile file not found: gone/mine.TOML"),
        (["solve", "--workload", "file:DIR"], "DIR is a directory, not a workload file"),
        (["error", "DIR/s.npz", "--workload", "prefix:8"], "is a directory, not a strategy file"),
        (["solve", "--workload", "prefix:8", "--method", "minerror-l2", "--objective", "weighted", "--option", "weights=W2.npy"], "a vector of one weight per query is needed, got an array of shape (2, 4)"),
    ],
)
def test_messages_name_directories_empty_names_and_shapes(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DIR").mkdir()
    (tmp_path / "DIR" / "s.npz").mkdir()
    np.save(tmp_path / "W2.npy", np.ones((2, 4)))
    (tmp_path / "empty.csv").write_text("\n\n")
    assert cli(*args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_profile_name_is_looked_up_even_beside_a_directory_of_that_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scs").mkdir()
    assert cli("-q", "solve", "--workload", "prefix:8", "--method", "minerror-l2", "--solver", "scs", "--json") == 0
    assert json.loads(capsys.readouterr().out)["solver_profile"]["name"] == "scs"


def test_identity_on_flat_domains_beyond_the_dense_limit(tmp_path, capsys):
    """solve, error, run and release with the identity on a 2-D file workload of 160 x 160 = 25600 cells
    (above the 20000-cell dense limit; it was refused as needing 6 dense 25600 x 25600 matrices):
    E_1 = ||W||_F^2, answers and Laplace intervals (half-width 2.118 * sqrt(2) / eps * ||w_i||) by hand."""
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    side, m = 160, 40
    rows, cols = [], []
    for i in range(m):
        r0, c0 = rng.integers(0, side, 2)
        r1, c1 = min(side, r0 + rng.integers(1, 30)), min(side, c0 + rng.integers(1, 30))
        rr, cc = np.meshgrid(np.arange(r0, r1), np.arange(c0, c1), indexing="ij")
        rows += [i] * rr.size
        cols += list((rr * side + cc).ravel())
    W = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(m, side * side))
    sp.save_npz(tmp_path / "w.npz", W)
    x = rng.poisson(4.0, (side, side)).astype(float)
    np.save(tmp_path / "x.npy", x)
    spec = f"file:{tmp_path / 'w.npz'}"
    norms = np.asarray(W.sum(axis=1)).ravel()  # 0/1 rows: ||w_i||^2 = row sum
    assert cli("-q", "solve", "--workload", spec, "--privacy", "pure", "--method", "identity", "--out", tmp_path / "i.npz") == 0
    capsys.readouterr()
    assert cli("error", tmp_path / "i.npz", "--workload", spec, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit_total_squared_error"] == norms.sum()
    assert report["unit_max_query_variance"] == norms.max()
    eps = 1e4
    for args in (("run", tmp_path / "i.npz"), ("release", "--method", "identity")):
        out = tmp_path / f"{args[0]}.csv"
        assert cli("-q", *args, "--workload", spec, "--data", tmp_path / "x.npy", "--epsilon", eps, "--seed", 1, "--out", out) == 0
        got = np.genfromtxt(out, delimiter=",", names=True)
        np.testing.assert_allclose(got["answer"], W @ x.ravel(), atol=1.0)  # noise sd sqrt(2 * 841) / 1e4 < 0.01
        half = 0.5 * (got["upper"] - got["lower"])
        # (upper - lower) / 2 of answers ~1e3 keeps ~1e-11 of a half-width ~5e-3
        np.testing.assert_allclose(half, math.log(20.0) / math.sqrt(2.0) * math.sqrt(2.0) / eps * np.sqrt(norms), rtol=1e-9)


def test_identity_release_on_a_large_kronecker_workload_has_intervals(tmp_path):
    """prefix:160*prefix:160 (25600 cells; its matrix would hold 1.7e8 non-zeros): Laplace intervals of the
    identity are 2.118 * sqrt(2) / eps * sqrt((i + 1)(j + 1)) wide for query (i, j), per factor, by hand."""
    x = np.random.default_rng(2).poisson(3.0, (160, 160)).astype(float)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "r.csv"
    assert cli("-q", "release", "--method", "identity", "--workload", "prefix:160*prefix:160", "--data", tmp_path / "x.npy", "--epsilon", 2, "--seed", 3, "--out", out) == 0
    got = np.genfromtxt(out, delimiter=",", names=True)
    i, j = np.divmod(np.arange(160 * 160), 160)
    half = 0.5 * (got["upper"] - got["lower"])
    np.testing.assert_allclose(half, math.log(20.0) / 2.0 * np.sqrt((i + 1.0) * (j + 1.0)), rtol=1e-9)
    np.testing.assert_allclose(got["answer"], x.cumsum(0).cumsum(1).ravel(), atol=40 * math.sqrt(2 * 160 * 160) / 2)


def test_histogram_lines_and_shapes(tmp_path, capsys, strategy_and_data):
    """Line k of a CSV histogram is cell k: a blank or comment line inside is refused (it would shift every later
    count); trailing blank and comment lines are fine. An .npy that is neither a vector nor the domain's shape is refused."""
    s, _ = strategy_and_data
    out = tmp_path / "a.npy"
    (tmp_path / "gap.csv").write_text("1\n2\n\n3\n4\n5\n6\n7\n8\n")
    assert "line 3 is blank" in _bad(tmp_path, capsys, "run", s, "--data", tmp_path / "gap.csv", "--workload", "prefix:8", "--epsilon", 1, "--seed", 0, "--out", out, out=out)
    (tmp_path / "note.csv").write_text("1\n# a note\n2\n3\n4\n5\n6\n7\n8\n")
    assert "line 2 is a comment" in _bad(tmp_path, capsys, "run", s, "--data", tmp_path / "note.csv", "--workload", "prefix:8", "--epsilon", 1, "--seed", 0, "--out", out, out=out)
    (tmp_path / "tail.csv").write_text("".join(f"{k}\n" for k in range(1, 9)) + "\n# end\n\n")
    assert cli("run", s, "--data", tmp_path / "tail.csv", "--workload", "prefix:8", "--epsilon", 1e9, "--seed", 0, "--out", out) == 0
    np.testing.assert_allclose(np.load(out), np.cumsum(np.arange(1.0, 9.0)), atol=1e-6)
    np.save(tmp_path / "square.npy", np.ones((2, 4)))
    refused = tmp_path / "refused.npy"
    assert "does not match the domain (8,)" in _bad(tmp_path, capsys, "run", s, "--data", tmp_path / "square.npy", "--workload", "prefix:8", "--epsilon", 1, "--out", refused, out=refused)
    np.save(tmp_path / "column.npy", np.arange(1.0, 9.0).reshape(8, 1))
    assert cli("run", s, "--data", tmp_path / "column.npy", "--workload", "prefix:8", "--epsilon", 1e9, "--seed", 0, "--out", out) == 0
    np.testing.assert_allclose(np.load(out), np.cumsum(np.arange(1.0, 9.0)), atol=1e-6)


def test_dawa_takes_the_grid_of_records_as_of_an_npy(tmp_path, capsys):
    """A flat workload file over a 2-D domain: DAWA releases the same answers from records binned by two --column/--bins
    pairs as from the 2-D histogram they make (both on the 8 x 4 grid, Hilbert order)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(2)
    x = rng.poisson(3, (8, 4)).astype(float)
    np.save(tmp_path / "x.npy", x)
    rows = [f"{i},{j}\n" for i in range(8) for j in range(4) for _ in range(int(x[i, j]))]
    (tmp_path / "rec.csv").write_text("a,b\n" + "".join(rows))
    sp.save_npz(tmp_path / "w.npz", sp.csr_matrix(rng.integers(0, 2, (6, 32)).astype(float)))
    common = ("--workload", f"file:{tmp_path / 'w.npz'}", "--epsilon", 1, "--seed", 4)
    assert cli("release", "--method", "dawa", "--data", tmp_path / "x.npy", *common, "--out", tmp_path / "a.npy") == 0
    assert cli("release", "--method", "dawa", "--data", tmp_path / "rec.csv", "--column", "a", "--bins", "0:8", "--column", "b", "--bins", "0:4",
               *common, "--out", tmp_path / "b.npy") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))
    assert json.loads((tmp_path / "b.npy.json").read_text())["domain"] == [8, 4]


def test_records_must_bin_the_attributes_in_the_workloads_order(tmp_path, capsys):
    """Two --column/--bins pairs make a grid with one axis per column in the order given; a product workload states
    its own order. An outside audit found a 12 x 16 record grid flattened into a 16 x 12 domain (exit 0, answers off
    by 18x the noise); it is refused as a 12 x 16 .npy is, and the right order answers as the histogram does."""
    rng = np.random.default_rng(5)
    x = rng.poisson(2, (4, 3)).astype(float)
    np.save(tmp_path / "x.npy", x)
    rows = [f"{3 * j},{i}\n" for i in range(4) for j in range(3) for _ in range(int(x[i, j]))]
    (tmp_path / "rec.csv").write_text("income,age\n" + "".join(rows))
    spec = "prefix:4*all-range:3"
    s = tmp_path / "s.npz"
    assert cli("-q", "solve", "--workload", spec, "--privacy", "pure", "--method", "hierarchical", "--out", s) == 0
    common = ("--workload", spec, "--epsilon", 1, "--seed", 3)
    wrong = ("--data", tmp_path / "rec.csv", "--column", "income", "--bins", "0:9:3", "--column", "age", "--bins", "0:4")
    right = ("--data", tmp_path / "rec.csv", "--column", "age", "--bins", "0:4", "--column", "income", "--bins", "0:9:3")
    err = _bad(tmp_path, capsys, "run", s, *wrong, *common, "--out", tmp_path / "w.npy", out=tmp_path / "w.npy")
    assert "a 3x4 grid (income (3 bins), age (4 bins)) but the workload's domain is 4x3" in err
    assert "in the order of the workload's attributes" in err
    _bad(tmp_path, capsys, "release", "--method", "dawa", *wrong, *common, "--out", tmp_path / "d.npy", out=tmp_path / "d.npy")
    assert cli("-q", "run", s, *right, *common, "--out", tmp_path / "r.npy") == 0
    assert cli("-q", "run", s, "--data", tmp_path / "x.npy", *common, "--out", tmp_path / "h.npy") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "r.npy"), np.load(tmp_path / "h.npy"))
    # one column holding the row-major cell index is a flat histogram, accepted as a flat .npy is (a regression audit)
    cells = [f"{3 * i + j}\n" for i in range(4) for j in range(3) for _ in range(int(x[i, j]))]
    (tmp_path / "cells.csv").write_text("cell\n" + "".join(cells))
    assert cli("-q", "run", s, "--data", tmp_path / "cells.csv", "--column", "cell", "--bins", "0:12", *common, "--out", tmp_path / "c.npy") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), np.load(tmp_path / "h.npy"))


def test_records_name_the_column_that_is_not_numeric(tmp_path, capsys):
    (tmp_path / "rec.csv").write_text("city,income,age\n5,5,1\n\nRome,7,nan\n,3,2\n")
    s = tmp_path / "s.npz"
    cli("-q", "solve", "--workload", "identity:4*identity:4", "--method", "identity", "--out", s)
    common = ("--workload", "identity:4*identity:4", "--epsilon", 1, "--seed", 0, "--out", tmp_path / "a.npy")
    err = _bad(tmp_path, capsys, "run", s, "--data", tmp_path / "rec.csv", "--column", "city", "--bins", "0:4", "--column", "income", "--bins", "0:8:2", *common)
    assert err.endswith("rec.csv: line 4, column 'city': 'Rome' is not a number (a missing value is refused too)")  # the blank line counts
    err = _bad(tmp_path, capsys, "run", s, "--data", tmp_path / "rec.csv", "--column", "income", "--bins", "0:8:2", "--column", "age", "--bins", "0:4", *common)
    assert err.endswith("NaN or infinite values in column(s) ['age']")


def test_problem_file_with_a_byte_order_mark(tmp_path, capsys):
    p = tmp_path / "bom.toml"
    p.write_bytes(b'\xef\xbb\xbfworkload = "prefix:4"\nmethod = "identity"\n')
    assert cli("solve", p, "--out", tmp_path / "s.npz") == 0
    assert read_strategy(tmp_path / "s.npz").meta["workload"] == "prefix:4"


def test_every_save_npz_layout_loads_and_broken_ones_are_named(tmp_path, capsys):
    """CLI.md: a workload or strategy .npz may use any layout of scipy.sparse.save_npz (bsr and dia were refused)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    M = np.where(rng.random((6, 8)) < 0.5, rng.integers(1, 4, (6, 8)), 0).astype(float)
    M[np.arange(6), np.arange(6)] = 1.0  # every cell in some query
    M[:, 6:] += 1.0
    out = tmp_path / "s.npz"
    expected = None
    for name, X in {"bsr": sp.bsr_matrix(M, blocksize=(2, 4)), "dia": sp.dia_matrix(M), "csc": sp.csc_matrix(M)}.items():
        sp.save_npz(tmp_path / f"{name}.npz", X)
        assert cli("-q", "solve", "--workload", f"file:{tmp_path / name}.npz", "--method", "identity", "--out", tmp_path / f"s_{name}.npz") == 0
        E = read_strategy(tmp_path / f"s_{name}.npz").meta["unit_total_squared_error"]
        assert E == pytest.approx(float(np.sum(M**2)), rel=1e-12)  # the identity: ||W||_F^2
        expected = E if expected is None else expected
        assert E == expected
    sp.save_npz(tmp_path / "strategy.npz", sp.dia_matrix(np.eye(8) * 2.0))
    capsys.readouterr()
    assert cli("-q", "error", tmp_path / "strategy.npz", "--workload", f"file:{tmp_path / 'bsr.npz'}", "--privacy", "pure") == 0
    np.savez(tmp_path / "bad.npz", format=np.array("bsr"), shape=np.array([6, 8]), data=np.ones((1, 4, 4)), indices=np.array([0]), indptr=np.array([0, 1]))
    assert "tile the shape" in _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'bad.npz'}", "--out", out, out=None)
    np.savez(tmp_path / "bad.npz", format=np.array("dia"), shape=np.array([4, 4]), data=np.ones((2, 4)), offsets=np.array([1, 1]))
    assert "distinct integers" in _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'bad.npz'}", "--out", tmp_path / "t.npz", out=tmp_path / "t.npz")
    for offset in (2**32 + 1, 2**62, -(2**32) + 2, 100):  # SciPy reads 2**32 + 1 as offset 1 (a different matrix, audit R6)
        np.savez(tmp_path / "bad.npz", format=np.array("dia"), shape=np.array([8, 8]), data=np.ones((1, 8)), offsets=np.array([offset]))
        assert "offset lies outside" in _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'bad.npz'}", "--out", tmp_path / "t.npz", out=tmp_path / "t.npz")
    np.savez(tmp_path / "bad.npz", format=np.array("lil"), shape=np.array([4, 4]), data=np.ones(2))
    assert "unsupported sparse format 'lil'" in _bad(tmp_path, capsys, "solve", "--workload", f"file:{tmp_path / 'bad.npz'}", "--out", tmp_path / "t.npz", out=tmp_path / "t.npz")


def test_auto_checks_the_branching_before_its_candidates_run(capsys):
    """A bad branching under auto is refused at once (it was checked after auto-pure's whole race): no candidate logs a line."""
    assert cli("solve", "--workload", "prefix:64", "--privacy", "pure", "--method", "auto", "--option", "branching=1") == 2
    assert capsys.readouterr().err.strip().splitlines() == ["strategy-opt: error: branching must be an integer >= 2, got 1"]


def test_commands_run_on_one_blas_thread_unless_told_otherwise(monkeypatch):
    """STRATEGY_OPT_BLAS_THREADS: 1 by default (small products run 5-100x slower on two threads of a loaded
    2-core machine), 'all' keeps the process's setting, anything else is refused by name."""
    from threadpoolctl import threadpool_info

    from strategy_opt import threads
    from strategy_opt.exceptions import InputError

    def blas():
        return {c["num_threads"] for c in threadpool_info() if c["user_api"] == "blas"}

    with threads.command_threads():
        assert blas() == {1}
    monkeypatch.setattr(threads, "COMMAND_THREADS", "all")
    before = blas()
    with threads.command_threads():
        assert blas() == before
    for bad in ("0", "two"):
        monkeypatch.setattr(threads, "COMMAND_THREADS", bad)
        with pytest.raises(InputError, match="STRATEGY_OPT_BLAS_THREADS must be a positive integer or 'all'"):
            threads.command_threads()


def test_a_bad_factorization_thread_setting_is_one_line():
    """An outside audit: STRATEGY_OPT_FACTORIZATION_THREADS=two crashed every command at import with a traceback."""
    import os
    import subprocess
    import sys

    for bad in ("two", "0", ""):
        res = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "list", "methods"], capture_output=True, text=True,
                             env={**os.environ, "STRATEGY_OPT_FACTORIZATION_THREADS": bad})
        assert res.returncode == 2 and res.stderr.strip().splitlines() == [
            f"strategy-opt: error: STRATEGY_OPT_FACTORIZATION_THREADS must be a positive integer, got {bad!r}"
        ], (bad, res.stderr)
    res = subprocess.run([sys.executable, "-m", "strategy_opt.cli", "list", "methods"], capture_output=True, text=True,
                         env={**os.environ, "STRATEGY_OPT_FACTORIZATION_THREADS": "2"})
    assert res.returncode == 0


def test_error_text_output_shows_values_past_float64_as_powers_of_ten(tmp_path, capsys):
    # all-predicate:1100's E_2 and SVD bound overflow float64: the text output printed "None"
    assert cli("-q", "solve", "--workload", "all-predicate:1100", "--method", "identity", "--out", tmp_path / "i.npz") == 0
    capsys.readouterr()
    assert cli("-q", "error", tmp_path / "i.npz", "--workload", "all-predicate:1100") == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    # identity: E_2 = trace(W^T W) = 1100 * 2^1099 (each cell lies in half of the 2^1100 predicates)
    exact = math.log10(1100) + 1099 * math.log10(2)
    assert lines["unit_total_squared_error"] == f"10^{exact:.6f}"
    assert float(lines["unit_total_squared_error_log10"]) == pytest.approx(exact, abs=1e-9)
    assert lines["svd_bound"].startswith("10^")
    assert lines["unit_max_query_variance"].startswith("not computed")
    assert "None" not in lines.values()


def test_the_summary_line_states_the_objectives_own_gap(tmp_path, capsys):
    # for weighted/relative/max the line's lower_bound and ratio are the total error's (E_2 against the SVD
    # bound, ratio 1.06 here), which read like an optimality gap; the objective's own gap is now beside its value
    np.save(tmp_path / "w.npy", np.random.default_rng(3).random((10, 13)))
    assert cli("solve", "--workload", f"file:{tmp_path / 'w.npy'}", "--objective", "relative", "--method", "minerror-l2", "--solver", "clarabel", "--out", tmp_path / "r.npz") == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    meta = json.loads(str(np.load(tmp_path / "r.npz")["meta"]))
    assert float(fields["objective_gap"]) == pytest.approx(meta["objective_relative_gap"], abs=1e-3)
    assert float(fields["objective_gap"]) < 1e-4 < float(fields["ratio"]) - 1  # the objective is solved; the total's ratio is not a gap


def test_error_reads_back_what_solve_wrote_when_the_queries_are_too_many_to_enumerate(tmp_path, capsys):
    """`error` refused the identity on all-range:65536 that `solve` had just written ("needs about 103 GB ... for
    2,147,516,416 workload queries"; audit A6): the total is exact without enumerating the queries, so it reports
    E_1 = n(n+1)(n+2)/6 (each cell in (j+1)(n-j) ranges) and says the largest variance was not computed."""
    n = 65536
    assert cli("-q", "solve", "--workload", f"all-range:{n}", "--privacy", "pure", "--method", "identity", "--out", tmp_path / "i.npz") == 0
    capsys.readouterr()
    assert cli("error", tmp_path / "i.npz", "--workload", f"all-range:{n}", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit_total_squared_error"] == n * (n + 1) * (n + 2) // 6
    assert report["unit_max_query_variance"] is None


def _declared_options():
    from strategy_opt.registry import methods

    return [(name, info.privacy[0], option) for name, info in sorted(methods().items()) if info.options for option in sorted(info.options)]


@pytest.mark.parametrize("method, privacy, option", _declared_options(), ids=lambda v: str(v))
def test_an_invalid_option_value_is_one_line_before_any_work(tmp_path, capsys, method, privacy, option):
    """Every declared option of every method refuses a value of the wrong kind with one line and no file, before
    progress output (svd-approx printed its eigendecomposition line before refusing time_budget=-1)."""
    out = tmp_path / "s.npz"
    workload = "marginals:2x2x2:1" if method == "marginals" else "prefix:8"
    err = _bad(tmp_path, capsys, "solve", "--workload", workload, "--privacy", privacy, "--method", method, "--option", f"{option}=[1, 2]", "--out", out, out=out)
    assert option in err


def test_svd_approx_refuses_too_few_rows_in_one_line(tmp_path, capsys):
    """rows below the workload's rank is known only after the eigendecomposition: still one line (audit R6)."""
    out = tmp_path / "s.npz"
    assert "rank of the workload (16)" in _bad(tmp_path, capsys, "solve", "--workload", "prefix:16", "--privacy", "pure", "--method", "svd-approx", "--option", "rows=1", "--out", out, out=out)
    assert "rows=100000000000" in _bad(tmp_path, capsys, "solve", "--workload", "prefix:16", "--privacy", "pure", "--method", "svd-approx", "--option", "rows=100000000000", "--out", out, out=out)
