"""SPEC parsing: every form of CLI.md, and clear errors for malformed SPECs."""

import json
from pathlib import Path

import numpy as np
import pytest

from strategy_opt.exceptions import InputError
from strategy_opt.spec import parse_spec


@pytest.mark.parametrize(
    "spec, shape",
    [
        ("identity:5", (5, 5)),
        ("total:7", (1, 7)),
        ("prefix:4", (4, 4)),
        ("all-range:4", (10, 4)),
        ("random-range:100:20", (20, 100)),
        ("random-range:100:20:9", (20, 100)),
        ("marginals:2x3x4:1", (9, 24)),
        ("prefix:4*all-range:3", (24, 12)),
        ("identity:6+total:6", (7, 6)),
        ("(identity:2+total:2)*prefix:3", (9, 6)),
    ],
)
def test_shapes(spec, shape):
    assert parse_spec(spec).shape == shape


def test_union_binds_looser_than_kronecker():
    W = parse_spec("identity:2*identity:3+total:6")
    assert W.m == 7
    np.testing.assert_allclose(W.gram(), np.eye(6) + np.ones((6, 6)))


def test_file_spec(tmp_path):
    W = np.array([[1.0, 0, 1], [0, 2, 0]])
    f = tmp_path / "w.npy"
    np.save(f, W)
    parsed = parse_spec(f"file:{f}")
    np.testing.assert_allclose(parsed.matrix().toarray(), W)
    both = parse_spec(f"file:{f}+total:3")
    assert both.m == 3


@pytest.mark.parametrize(
    "spec",
    ["", "foo:3", "all-range:", "all-range:-3", "all-range:0", "all-range:3.5", "random-range:10", "marginals:2x2", "prefix:3+", "(prefix:3", "prefix:3)", "identity:3+identity:4", "file:/nonexistent.npy"],
)
def test_malformed(spec):
    with pytest.raises(InputError):
        parse_spec(spec)


# --------------------------------------------------------------------------- problem files (strategy_opt.problem)


def _cli(*args):
    from strategy_opt.cli import main

    return main([str(a) for a in args])


@pytest.fixture
def problem_dir(tmp_path, monkeypatch):
    """A problem file in tmp/probs naming a workload, a solver profile and weights beside it; cwd = tmp."""
    d = tmp_path / "probs"
    d.mkdir()
    W = np.array([[1.0, 2, 0, 1], [0, 1, 1, 0], [1, 0, 0, 3]])
    np.save(d / "w.npy", W)
    np.save(d / "wts.npy", np.array([1.0, 2.0, 0.5]))
    (d / "prof.toml").write_text('backend = "native"\ntol = 1e-9\n')
    (d / "p.toml").write_text(
        'workload = "file:w.npy"\nprivacy = "approx"\nmethod = "minerror-l2"\nobjective = "weighted"\n'
        'solver = "prof.toml"\n[options]\nweights = "wts.npy"\n'
    )
    # decoys in the current directory: same names, other contents
    np.save(tmp_path / "w.npy", np.eye(4))
    np.save(tmp_path / "wts.npy", np.ones(4))
    monkeypatch.chdir(tmp_path)
    return d, W


def test_problem_file_paths_resolve_against_its_directory(problem_dir, capsys, monkeypatch):
    from strategy_opt.error import per_query_variances
    from strategy_opt.io import read_strategy

    d, W = problem_dir
    assert _cli("-q", "solve", "probs/p.toml", "--out", "s.npz") == 0
    capsys.readouterr()
    s = read_strategy("s.npz")
    # recorded with an absolute path, so that error/run find the same file from any directory
    assert s.meta["workload"] == f"file:{Path.cwd() / 'probs' / 'w.npy'}" and s.meta["solver"] == "prof"
    assert s.meta["weights_file"] == str(Path.cwd() / 'probs' / 'wts.npy') and s.meta["weights"] == [1.0, 2.0, 0.5]  # absolute too
    # independent: the weighted objective of the written strategy on the TOML's W and weights
    A = s.matrix
    v = np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W) * (A**2).sum(axis=0).max()
    np.testing.assert_allclose(per_query_variances(A, parse_spec("file:probs/w.npy"), 2), v, rtol=1e-9)
    assert s.meta["objective_value"] == pytest.approx(v @ [1.0, 2.0, 0.5], rel=1e-9)
    # the same from inside the problem's directory, and from elsewhere by absolute path
    for cwd, arg in ((d, "p.toml"), (d.parent.parent, d / "p.toml")):
        monkeypatch.chdir(cwd)
        assert _cli("-q", "solve", arg, "--json") == 0
        meta = json.loads(capsys.readouterr().out)
        assert meta["objective_value"] == pytest.approx(s.meta["objective_value"], rel=1e-9)


def test_command_line_flags_stay_relative_to_the_current_directory(problem_dir, capsys):
    assert _cli("-q", "solve", "probs/p.toml", "--workload", "file:w.npy", "--objective", "weighted", "--option", "weights=wts.npy", "--json") == 0
    meta = json.loads(capsys.readouterr().out)
    assert meta["workload"] == f"file:{Path.cwd() / 'w.npy'}" and meta["weights"] == [1.0, 1.0, 1.0, 1.0]  # the cwd's identity and unit weights


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("file:w.npy", "file:probs/w.npy"),
        ("file:w.npy*prefix:2", "file:probs/w.npy*prefix:2"),
        ("(file:a.npy + identity:3)", "(file:probs/a.npy + identity:3)"),
        ("file:'a+b.npy'*total:2", "file:'probs/a+b.npy'*total:2"),
        ('file:"it\'s.npy"', "file:probs/it's.npy"),
        ("file:/abs/w.npy", "file:/abs/w.npy"),
        ("all-range:8", "all-range:8"),
        ("file:'unclosed", "file:'unclosed"),
    ],
)
def test_spec_file_atoms_are_rebased(spec, expected):
    from strategy_opt.problem import _rebase_spec

    assert _rebase_spec(spec, Path("probs")) == expected
    assert _rebase_spec(spec, Path(".")) == spec


def test_problem_file_errors_have_one_prefix(tmp_path, capsys):
    p = tmp_path / "p.toml"
    p.write_text('workload = "all-range:8"\nsovler = "scs"\n')
    assert _cli("solve", p) == 2
    assert capsys.readouterr().err.strip() == (
        f"strategy-opt: error: problem file {p}: unknown keys ['sovler']; allowed: "
        "['basis', 'branching', 'data', 'delta', 'description', 'epsilon', 'method', 'objective', 'options', 'privacy', 'solver', 'workload']"
    )
    assert _cli("solve", "--problem", p) == 2  # there is no --problem flag: the problem file is the positional argument
    assert capsys.readouterr().err.strip() == "strategy-opt: error: in 'strategy-opt solve': unrecognized arguments: --problem"
    assert _cli("solve", p, "--privacy", "bogus") == 2
    assert capsys.readouterr().err.strip() == "strategy-opt: error: in 'strategy-opt solve': argument --privacy: invalid choice: 'bogus' (choose from 'pure', 'approx')"


# --------------------------------------------------------------------------- domains of unions (CLI.md: "over the same domain")


@pytest.mark.parametrize(
    "flat, product, domain",
    [
        ("identity:12", "prefix:4*prefix:3", (4, 3)),
        ("all-range:12", "marginals:4x3:1", (4, 3)),
        ("total:24", "(identity:12+prefix:4*prefix:3)*prefix:2", (4, 3, 2)),
    ],
)
def test_union_of_a_flat_term_and_a_product_takes_the_product_domain_in_either_order(flat, product, domain):
    a, b = parse_spec(f"{flat}+{product}"), parse_spec(f"{product}+{flat}")
    assert a.domain == b.domain == domain
    np.testing.assert_allclose(a.gram(), b.gram())


def test_union_of_a_flat_file_and_a_product(tmp_path):
    f = tmp_path / "w.npy"
    np.save(f, np.arange(24.0).reshape(2, 12))
    assert parse_spec(f"file:{f}+prefix:4*prefix:3").domain == parse_spec(f"prefix:4*prefix:3+file:{f}").domain == (4, 3)
    assert parse_spec(f"file:{f}+identity:12").domain == (12,)


def test_union_of_products_over_different_domains_is_refused(tmp_path, capsys):
    spec = "prefix:4*prefix:3+prefix:2*prefix:6"
    with pytest.raises(InputError, match=r"union terms have different domains \[4, 3\] and \[2, 6\]"):
        parse_spec(spec)
    with pytest.raises(InputError, match=r"different domains \[4, 3\] and \[2, 6\]"):
        parse_spec("(identity:12+prefix:4*prefix:3)+prefix:2*prefix:6")  # the nested union took [4, 3]
    assert _cli("-q", "solve", "--workload", spec, "--method", "hierarchical", "--out", tmp_path / "a.npz") == 2
    err = capsys.readouterr().err.strip()
    assert err == f"strategy-opt: error: workload SPEC {spec!r}: union terms have different domains [4, 3] and [2, 6]"
    assert not (tmp_path / "a.npz").exists()
    from strategy_opt.workload import union

    with pytest.raises(InputError, match=r"different domains \[2, 6\] and \[4, 3\]"):  # the API refuses it too
        union(parse_spec("prefix:2*prefix:6"), parse_spec("prefix:4*prefix:3"))


def test_union_of_kronecker_terms_keeps_kronecker_strategies(tmp_path, capsys):
    from strategy_opt.io import read_strategy

    for i, spec in enumerate(["identity:12+prefix:4*prefix:3", "prefix:4*prefix:3+identity:12", "prefix:4*prefix:3+all-range:4*identity:3"]):
        out = tmp_path / f"s{i}.npz"
        assert _cli("-q", "solve", "--workload", spec, "--method", "hierarchical", "--out", out) == 0
        meta = read_strategy(out).meta
        assert meta["domain"] == [4, 3] and [s[1] for s in meta["kronecker_factor_shapes"]] == [4, 3]
        assert _cli("-q", "error", out, "--workload", spec) == 0
    capsys.readouterr()
