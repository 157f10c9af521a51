"""Stacks of weighted marginals (strategy_opt.marginals) and HDMM's marginals template (method ``marginals``).

Oracles: the stacked matrix itself (numpy's pinv and column norms), finite differences.
"""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from oracles import direct_error
from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.io import read_strategy, write_strategy
from strategy_opt.marginals import MarginalsMatrix, marginal_spectrum, marginals_trace
from strategy_opt.spec import parse_spec
from strategy_opt.workload import kronecker, total, identity, union


def _random_theta(k: int, rng) -> np.ndarray:
    theta = rng.random(2**k) * (rng.random(2**k) < 0.6)
    theta[-1] = max(theta[-1], 0.05)  # the full table: supports every marginal workload
    return theta


@pytest.mark.parametrize("domain", [(2, 3), (3, 2, 2), (2, 2, 3, 2)])
def test_stack_matches_its_matrix(domain):
    """Rows, sensitivities and E_p per eigenspace equal those of the explicit stacked matrix (numpy's pinv)."""
    rng = np.random.default_rng(len(domain))
    k = len(domain)
    for trial in range(4):
        theta = _random_theta(k, rng)
        A = MarginalsMatrix(domain, theta)
        dense = A.tocsr().toarray()
        assert dense.shape == A.shape
        assert A.sensitivity(1) == pytest.approx(np.abs(dense).sum(axis=0).max(), rel=1e-12)
        assert A.sensitivity(2) == pytest.approx(np.sqrt((dense**2).sum(axis=0)).max(), rel=1e-12)
        for order in range(k + 1):
            W = parse_spec(f"marginals:{'x'.join(map(str, domain))}:{order}")
            for p in (1, 2):
                assert unit_error(A, W, p) == pytest.approx(direct_error(dense, W, p), rel=1e-9)


def test_weighted_unions_and_the_spectrum():
    """A weighted union of marginals: its Gram's eigenvalues are g(U) with multiplicity mult(U)."""
    W = union(kronecker(identity(3), total(2), identity(2)), kronecker(total(3), identity(2), total(2)), weights=[2.0, 0.5])
    mult, g, _ = marginal_spectrum(W)
    expected = np.sort(np.repeat(g, mult.astype(int)))
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(W.gram())), expected, atol=1e-9)
    A = MarginalsMatrix((3, 2, 2), _random_theta(3, np.random.default_rng(5)))
    assert unit_error(A, W, 1) == pytest.approx(direct_error(A.tocsr(), W, 1), rel=1e-9)


def test_unsupported_interactions_are_refused():
    """Measuring only the 1-way marginals cannot answer a 2-way marginal; the dense check agrees."""
    A = MarginalsMatrix((3, 4), [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(InputError, match=r"interactions of attributes \[0, 1\] are never measured"):
        marginals_trace(A, parse_spec("marginals:3x4:2"))
    with pytest.raises(InputError, match="does not support"):
        unit_error(A.tocsr(), parse_spec("marginals:3x4:2"), 1)
    assert marginals_trace(A, parse_spec("prefix:3*prefix:4")) is None  # not a marginal workload: no formula


def test_bad_weights_are_refused():
    for theta, match in (([1.0, 2.0], "2 weights for 2 attributes"), ([0.0, 0.0, 0.0, 0.0], "not all zero"), ([0.0, -1.0, 1.0, 1.0], ">= 0")):
        with pytest.raises(InputError, match=match):
            MarginalsMatrix((2, 3), theta)


@pytest.mark.parametrize("kind", ["total", "weighted", "max"])
@pytest.mark.parametrize("p", [1, 2])
def test_template_gradient_and_value(p, kind):
    """The template's loss has the gradient of central differences, and its value is the objective at the strategy it
    builds (numpy's pinv): E_p, a weighted total, or the largest per-query variance (its first smooth maximum's gradient)."""
    from oracles import query_variances
    from strategy_opt.programs import marginals_template as mt

    W = parse_spec("marginals:2x3x2:2+marginals:2x3x2:1")
    per_part = np.arange(1.0, 7.0)  # the union's 6 marginals: 3 two-way, then 3 one-way
    objective = {"total": None, "weighted": mt.TemplateObjective("linear", per_part), "max": mt.TemplateObjective("max")}[kind]
    A, value, weights, _ = mt.marginals_strategy(W, p, max_iters=300, ftol=1e-12, objective=objective)
    u = query_variances(A, W, p)
    expected = {"total": u.sum(), "weighted": np.repeat(per_part, [6, 4, 6, 2, 3, 2]) @ u, "max": u.max()}[kind]
    assert value == pytest.approx(expected, rel=1e-8)
    assert abs(sum(weights.values()) - 1.0) < 1e-9
    # the gradient, through a second build of the loss at a random point
    captured = {}
    original = mt.so.minimize

    def spy(fun, x0, **kw):
        captured.setdefault("fun", fun)
        return original(fun, x0, **kw)

    mt.so.minimize = spy
    try:
        mt.marginals_strategy(W, p, max_iters=1, ftol=1e-12, objective=objective)
    finally:
        mt.so.minimize = original
    x = np.random.default_rng(1).random(8) + 0.1
    f, g = captured["fun"](x)
    h = 1e-6
    fd = [(captured["fun"](x + h * e)[0] - captured["fun"](x - h * e)[0]) / (2 * h) for e in np.eye(8)]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7 * abs(f))


def test_the_stack_is_kept_structured_at_every_size(tmp_path, capsys):
    """The template returns a MarginalsMatrix below the dense limit too (4096 cells took 40 s on the dense route,
    16384 cells 10 GB; audit A6): its E_p (per eigenspace) equals the dense computation and the same rows compiled
    as a flat sparse matrix; the file reads back as stacked marginals; error and run on the file agree with the flat route."""
    from strategy_opt.compiler import compile_strategy
    from strategy_opt.problem import Problem

    spec = "marginals:3x2x4:2"
    s = solve(spec, privacy="approx", method="marginals")
    assert isinstance(s.matrix, MarginalsMatrix)
    dense = compile_strategy(s.matrix.tocsr(), Problem(parse_spec(spec), privacy="approx"), "flat-stack")
    W = parse_spec(spec)
    assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(s.matrix.tocsr(), W, 2), rel=1e-9)
    assert s.meta["unit_total_squared_error"] == pytest.approx(dense.meta["unit_total_squared_error"], rel=1e-9)
    f = write_strategy(s, tmp_path / "m.npz")
    back = read_strategy(f)
    assert isinstance(back.matrix, MarginalsMatrix)
    np.testing.assert_array_equal(back.matrix.tocsr().toarray(), s.matrix.tocsr().toarray())
    assert main(["error", str(f), "--workload", spec, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit_total_squared_error"] == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-12)
    x = np.arange(24.0)
    np.save(tmp_path / "x.npy", x)
    for name, strategy in (("flat", dense), ("stack", s)):
        write_strategy(strategy, tmp_path / f"{name}.npz")
        assert main(["-q", "run", str(tmp_path / f"{name}.npz"), "--data", str(tmp_path / "x.npy"), "--workload", spec,
                     "--epsilon", "1e6", "--delta", "1e-6", "--seed", "3", "--out", str(tmp_path / f"{name}.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "stack.npy"), np.load(tmp_path / "flat.npy"), rtol=1e-9, atol=1e-9)  # same rows, same noise
    np.testing.assert_allclose(np.load(tmp_path / "stack.npy"), W.matvec(x), atol=0.05)


def test_a_tampered_stack_is_read_as_a_plain_matrix(tmp_path):
    """``from_meta`` checks the weights against the stored rows: a stack that does not match stays a sparse matrix."""
    A = MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0])
    meta = {"domain": [2, 3], "marginal_weights": A.weights_by_subset()}
    assert isinstance(MarginalsMatrix.from_meta(A.tocsr(), meta), MarginalsMatrix)
    other = A.tocsr().tolil()
    other[0, 0] = 0.7
    assert MarginalsMatrix.from_meta(sp.csr_matrix(other), meta) is None
    assert MarginalsMatrix.from_meta(A.tocsr(), {"domain": [2, 3], "marginal_weights": {"01": 0.5, "1x": 0.5}}) is None


def test_auto_uses_the_template_on_large_marginal_workloads():
    """65536 cells (8 attributes of 4): the 1-way marginals under (eps, delta)-DP within 1.12 of the SVD bound, and
    under eps-DP the workload itself at equal weights, E_1 = 8^2 rank(W^T W) = 64 (1 + 8 * 3) = 1600."""
    approx = solve("marginals:4x4x4x4x4x4x4x4:1", privacy="approx", method="auto")
    assert approx.meta["auto_choice"] == "marginals"
    assert approx.meta["unit_total_squared_error"] <= 1.12 * approx.meta["svd_bound"]
    pure = solve("marginals:4x4x4x4x4x4x4x4:1", privacy="pure", method="auto")
    assert pure.meta["unit_total_squared_error"] == pytest.approx(1600.0, rel=1e-9)


def test_the_method_refuses_other_workloads():
    with pytest.raises(InputError, match="is not a marginal workload"):
        solve("prefix:8", privacy="pure", method="marginals")


def test_a_flat_identity_or_total_in_a_union_is_the_full_table_or_the_empty_marginal():
    """identity:12 in a union over 3 x 4 cells is the full table (it was read as the marginal on attribute 0, which gave
    an error below the SVD bound for a strategy that does not support the workload)."""
    W = parse_spec("identity:12+identity:3*total:4")
    one_way = MarginalsMatrix((3, 4), [0.0, 1.0, 1.0, 0.0])
    with pytest.raises(InputError, match="never measured"):
        unit_error(one_way, W, 2)
    for p, privacy in ((1, "pure"), (2, "approx")):
        s = solve(W, privacy=privacy, method="marginals")
        assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(s.matrix.tocsr(), W, p), rel=1e-9)
        assert s.meta["unit_total_squared_error"] <= 24.0 * (1 + 1e-9)  # the identity's: trace(W^T W) = 12 + 12
    T = parse_spec("total:12+identity:3*total:4")
    A = MarginalsMatrix((3, 4), [1.0, 0.0, 1.0, 0.0])
    assert unit_error(A, T, 1) == pytest.approx(direct_error(A.tocsr(), T, 1), rel=1e-9)


def test_unions_of_marginal_specs_are_one_marginal_workload():
    """A union of unions is flattened (weights multiplied, rows in order): the template and the per-factor analyses
    see every term, and the answers and the Gram are those of the stacked rows."""
    W = parse_spec("marginals:2x3x4:1+marginals:2x3x4:2")
    assert [p.spec for p in W.parts] == ["identity:2*total:3*total:4", "total:2*identity:3*total:4", "total:2*total:3*identity:4",
                                         "identity:2*identity:3*total:4", "identity:2*total:3*identity:4", "total:2*identity:3*identity:4"]
    M = sp.vstack([parse_spec("marginals:2x3x4:1").matrix(), parse_spec("marginals:2x3x4:2").matrix()]).toarray()
    np.testing.assert_allclose(W.gram(), M.T @ M)
    x = np.arange(24.0)
    np.testing.assert_allclose(W.matvec(x), M @ x)
    s = solve(W, privacy="approx", method="marginals")
    assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(s.matrix.tocsr(), W, 2), rel=1e-9)
    nested = union([union([identity(6), total(6)], weights=[2.0, 3.0]), identity(6)], weights=[0.5, 1.0])
    np.testing.assert_allclose(nested.weights, [1.0, 1.5, 1.0])


def test_one_attribute_stacks_and_structural_fingerprints(tmp_path, monkeypatch):
    """A stack on one attribute reads back as one; its fingerprint comes from its weights (a stack of 1e8 entries
    is never expanded to identify it)."""
    from strategy_opt.fingerprints import matrix_fingerprint

    A = MarginalsMatrix((5,), [1.0, 30.0])
    back = MarginalsMatrix.from_meta(A.tocsr(), {"domain": [5], "marginal_weights": A.weights_by_subset()})
    assert isinstance(back, MarginalsMatrix) and back.weights_by_subset() == {"0": 1.0, "1": 30.0}
    monkeypatch.setattr(MarginalsMatrix, "tocsr", lambda self: (_ for _ in ()).throw(AssertionError("expanded")))
    assert matrix_fingerprint(A).startswith("marginals:")
    assert matrix_fingerprint(A) != matrix_fingerprint(MarginalsMatrix((5,), [1.0, 31.0]))


def test_run_past_the_dense_limit_checks_a_stack_per_eigenspace(monkeypatch):
    """Past the dense limit run checks a stack of marginals on a marginal workload exactly (per eigenspace), answers
    as the dense route does, and refuses the 2-way marginals from the 1-way ones."""
    from strategy_opt import executor
    from strategy_opt.executor import run
    from strategy_opt.privacy import PureDP

    A = MarginalsMatrix((3, 4), [0.0, 0.5, 0.5, 0.0])
    x = np.arange(12.0)
    one_way, two_way = parse_spec("marginals:3x4:1"), parse_spec("marginals:3x4:2")
    dense = run(A, x, one_way, PureDP(1.0), rng=5)
    monkeypatch.setattr(executor, "MAX_DENSE_N", 5)
    far = run(A, x, one_way, PureDP(1.0), rng=5)
    np.testing.assert_allclose(far.answers, dense.answers, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(far.upper - far.answers, dense.upper - dense.answers, rtol=1e-9)  # the intervals too
    with pytest.raises(InputError, match="interactions of attributes \\[0, 1\\] are never measured"):
        run(A, x, two_way, PureDP(1.0), rng=5)


@pytest.mark.parametrize("spec", ["marginals:2x3x4:1", "marginals:3x2x2:2", "identity:12+identity:3*total:4", "marginals:2x3:0+marginals:2x3:2"])
def test_query_variances_match_the_matrix(spec):
    """Per-query variances per marginal equal w_i pinv(A^T A) w_i^T of the stacked matrix (numpy), query by query."""
    from strategy_opt.error import per_query_variances
    from strategy_opt.marginals import marginals_query_variances

    W = parse_spec(spec)
    rng = np.random.default_rng(7)
    for _ in range(3):
        A = MarginalsMatrix(W.domain, _random_theta(len(W.domain), rng))
        D = A.tocsr().toarray()
        Wm = W.matrix().toarray()
        expected = np.einsum("ij,jk,ik->i", Wm, np.linalg.pinv(D.T @ D), Wm)
        np.testing.assert_allclose(marginals_query_variances(A, W), expected, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(per_query_variances(A, W, 1).sum(), direct_error(D, W, 1), rtol=1e-9)


@pytest.mark.parametrize("spec", ["marginals:3x4x5:2", "marginals:2x3:1+identity:6", "prefix:6*all-range:5+total:6*identity:5", "marginals:2x2x3:3"])
def test_grouped_spectrum_and_squared_norm_match_the_dense_gram(spec):
    # per eigen-class and per part: marginals over 1e9 cells built vectors of 1e9 entries (killed at 22 GB)
    W = parse_spec(spec)
    M = W.matrix().toarray()
    G = M.T @ M
    values, counts = W.gram_spectrum()
    assert counts.sum() == W.n and counts.min() >= 1
    np.testing.assert_allclose(np.sort(np.repeat(values, counts)), np.linalg.eigvalsh(G), atol=1e-9 * np.abs(G).max())
    np.testing.assert_allclose(np.sort(np.repeat(values, counts)), W.gram_eigvals(), rtol=1e-12, atol=1e-12)
    assert W.frobenius_sq() == pytest.approx(np.sum(M**2), rel=1e-12)
    for part in getattr(W, "parts", [W]):
        assert part.frobenius_sq() == pytest.approx(np.sum(part.matrix().toarray() ** 2), rel=1e-12)


def test_huge_marginal_workloads_are_analysed_without_vectors_over_their_cells():
    # marginals:1000x1000x1000:2 with the identity: 16.7 GB peak before (the SVD bound sorted 1e9 eigenvalues,
    # the ratio to the identity summed 1e9 squared norms); here 8e6 cells, where one vector over them is 64 MB
    import tracemalloc

    W = parse_spec("marginals:200x200x200:2")
    tracemalloc.start()
    try:
        s = solve(W, privacy="pure", method="identity")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32e6, peak
    # closed forms: identity E_1 = trace(W^T W) = 3 marginals x 8e6 cells; SVD bound (sum_U mult_U sqrt(g_U))^2 / n
    assert s.meta["unit_total_squared_error"] == 3 * 200**3 and s.meta["ratio_to_identity"] == 1.0
    mult, g, _ = marginal_spectrum(W)
    assert s.meta["svd_bound"] == pytest.approx(float(mult @ np.sqrt(g)) ** 2 / W.n, rel=1e-12)


def test_a_marginals_strategy_too_large_to_build_is_refused_with_its_estimate(monkeypatch):
    A = MarginalsMatrix((50, 60, 70), np.array([0, 1, 1, 0, 1, 0, 0, 0], dtype=float))
    assert A.nnz == 3 * 50 * 60 * 70
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(int(32 * A.nnz) - 1))
    with pytest.raises(InputError, match=r"the 180 x 210,000 marginals strategy as a matrix \(630,000 non-zeros.*needs about"):
        A.tocsr()
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(int(32 * A.nnz)))
    assert A.tocsr().nnz == A.nnz


@pytest.mark.parametrize("weight", [1e-4, 3e-6])
def test_marginal_and_dense_analyses_agree_on_support(weight):
    # the 2-way marginal at weight 3e-6 leaves eigenvalues 1.5e-12 of the largest: the dense analysis
    # (rank cutoff EIG_RTOL = 1e-10) refused it while the marginal route (cutoff 1e-12) accepted it
    from strategy_opt.error import ErrorProfile, supports

    W = parse_spec("marginals:2x3:2")
    A = MarginalsMatrix((2, 3), [1.0, 0.0, 0.0, weight])
    dense = A.tocsr().toarray()
    if supports(dense, W):
        assert marginals_trace(A, W) == pytest.approx(ErrorProfile(dense).trace_with(W.gram()), rel=1e-6)
    else:
        with pytest.raises(InputError, match="does not support"):
            marginals_trace(A, W)
    assert supports(dense, W) == (weight == 1e-4)
