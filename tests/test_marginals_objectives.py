"""The marginals template under the max, relative and weighted objectives.

Oracles: per-query variances of the written strategy by numpy's pinv; for (epsilon, delta)
the template's max program solved as a convex program over the marginals' Gram matrices by
cvxpy (a second solver and formulation); for epsilon-DP an SLSQP epigraph search over the
marginal weights with numpy's pinv; SVD bounds of the reweighted workload from numpy's
eigenvalues.
"""

import itertools

import cvxpy as cp
import numpy as np
import pytest
import scipy.optimize as so

from oracles import query_variances
from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.exceptions import InputError
from strategy_opt.io import read_strategy
from strategy_opt.marginals import marginal_spectrum, marginal_variance_terms
from strategy_opt.spec import parse_spec


def _marginal(domain, S) -> np.ndarray:
    """The marginal on attribute set S, built from its definition."""
    out = np.ones((1, 1))
    for i, d in enumerate(domain):
        out = np.kron(out, np.eye(d) if i in S else np.ones((1, d)))
    return out


def _subsets(k):
    return [S for r in range(k + 1) for S in itertools.combinations(range(k), r)]


def test_variance_terms_sum_to_the_spectrum_and_match_numpy():
    """``m @ V = mult * g``, and ``V @ (1/x)`` are the per-query variances of a random stack (numpy's pinv)."""
    W = parse_spec("marginals:2x3x2:1+marginals:2x3x2:2")
    V, m = marginal_variance_terms(W)
    mult, g, out = marginal_spectrum(W)
    np.testing.assert_allclose(m @ V, mult * g, rtol=1e-12)
    rng = np.random.default_rng(3)
    domain = (2, 3, 2)
    theta = {S: rng.random() + 0.1 for S in _subsets(3)}
    A = np.vstack([t * _marginal(domain, S) for S, t in theta.items()])
    u = query_variances(A, W, 2) / np.sqrt((A * A).sum(0)).max() ** 2
    # eigenvalues x(U) of the stack, from the definition: sum over S ⊇ U of theta_S^2 out(S)
    x = np.zeros(8)
    for U in range(8):
        for S, t in theta.items():
            mask = sum(1 << (2 - i) for i in S)
            if mask & U == U:
                x[U] += t**2 * np.prod([d for i, d in enumerate(domain) if i not in S])
    np.testing.assert_allclose(np.repeat(V @ (1 / x), m), u, rtol=1e-10)


@pytest.mark.parametrize("spec", ["marginals:2x3x2:1+marginals:2x3x2:2", "marginals:3x2x2:1+marginals:3x2x2:0"])
def test_max_under_approx_is_the_convex_optimum(spec):
    """(epsilon, delta): max over queries is convex in the marginals' squared weights; cvxpy's optimum matches."""
    s = solve(spec, privacy="approx", method="marginals", objective="max")
    W = parse_spec(spec)
    u = query_variances(s.matrix, W, 2)
    assert s.meta["objective_value"] == pytest.approx(u.max(), rel=1e-9)
    domain = W.domain
    grams = [_marginal(domain, S).T @ _marginal(domain, S) for S in _subsets(len(domain))]
    w = cp.Variable(len(grams), nonneg=True)
    X = sum(w[i] * G for i, G in enumerate(grams))
    Wm = W.matrix().toarray()
    t = cp.Variable()
    constraints = [cp.sum(w) == 1] + [cp.matrix_frac(row, X) <= t for row in Wm]
    cp.Problem(cp.Minimize(t), constraints).solve(solver=cp.CLARABEL)
    assert s.meta["objective_value"] == pytest.approx(t.value, rel=2e-3)
    assert s.meta["objective_lower_bound"] <= s.meta["objective_value"]
    assert s.meta["objective_lower_bound_kind"] == "simplex-weighted-svd-bound"


def test_max_under_pure_matches_an_epigraph_search():
    """epsilon-DP: SLSQP on ``min t s.t. t >= ||A||_1^2 u_i`` over the marginal weights (numpy's pinv) finds nothing better."""
    spec = "marginals:2x3x2:1+marginals:2x3x2:2"
    W = parse_spec(spec)
    s = solve(spec, privacy="pure", method="marginals", objective="max")
    assert s.meta["objective_value"] == pytest.approx(query_variances(s.matrix, W, 1).max(), rel=1e-9)
    blocks = [_marginal(W.domain, S) for S in _subsets(3)]
    Wm = W.matrix().toarray()

    def variances(theta):
        A = np.vstack([t * B for t, B in zip(theta, blocks)])
        return np.einsum("ij,jk,ik->i", Wm, np.linalg.pinv(A.T @ A), Wm)

    best = np.inf
    rng = np.random.default_rng(0)
    for _ in range(6):
        z0 = np.append(rng.dirichlet(np.ones(len(blocks))) * 0.9 + 0.1 / len(blocks), 0.0)
        z0[-1] = variances(z0[:-1]).max()
        res = so.minimize(lambda z: z[-1], z0, method="SLSQP", bounds=[(1e-6, 1)] * len(blocks) + [(0, None)],
                          constraints=[{"type": "eq", "fun": lambda z: z[:-1].sum() - 1}, {"type": "ineq", "fun": lambda z: z[-1] - variances(z[:-1])}],
                          options={"maxiter": 500, "ftol": 1e-12})
        best = min(best, variances(res.x[:-1] / res.x[:-1].sum()).max())
    assert s.meta["objective_value"] <= best * (1 + 1e-4)
    assert s.meta["objective_lower_bound"] <= s.meta["objective_value"]
    identity = solve(spec, privacy="pure", method="identity")
    assert s.meta["objective_value"] <= query_variances(identity.matrix, W, 1).max() * (1 + 1e-9)


@pytest.mark.parametrize("privacy", ["pure", "approx"])
def test_relative_and_weighted_values_and_bounds(privacy):
    """Relative and weighted objectives: the values recomputed by numpy, and bounds that are the reweighted SVD bounds (numpy eigenvalues)."""
    spec = "marginals:3x2x2:1+marginals:3x2x2:2"
    W = parse_spec(spec)
    Wm = W.matrix().toarray()
    p = 1 if privacy == "pure" else 2
    rel = solve(spec, privacy=privacy, method="marginals", objective="relative")
    c = 1 / (Wm**2).sum(1)
    assert rel.meta["objective_value"] == pytest.approx(float(c @ query_variances(rel.matrix, W, p)), rel=1e-9)
    _, m = marginal_variance_terms(W)
    weights = np.repeat(np.arange(1.0, m.size + 1), m)
    wtd = solve(spec, privacy=privacy, method="marginals", objective="weighted", weights=weights)
    assert wtd.meta["objective_value"] == pytest.approx(float(weights @ query_variances(wtd.matrix, W, p)), rel=1e-9)
    for s, cw in ((rel, c), (wtd, weights)):
        ev = np.clip(np.linalg.eigvalsh((Wm * cw[:, None]).T @ Wm), 0, None)
        assert s.meta["objective_lower_bound"] == pytest.approx(np.sqrt(ev).sum() ** 2 / W.n, rel=1e-7)  # numpy rounds the zero eigenvalues to ~1e-15
        assert s.meta["objective_lower_bound_kind"] == "reweighted-svd-bound"
    # the template's weighted optimum is no worse than the relative one's strategy under the weighted objective
    assert wtd.meta["objective_value"] <= float(weights @ query_variances(rel.matrix, W, p)) * (1 + 1e-6)


def test_weights_must_be_equal_within_each_marginal(tmp_path, capsys):
    """Weights that differ inside a marginal cannot be honoured by the template: refused, naming the queries."""
    W = parse_spec("marginals:2x3:1")
    weights = np.ones(W.m)
    weights[1] = 2.0
    with pytest.raises(InputError, match=r"queries 0\.\.1 \(marginal 0\) have weights from 1 to 2"):
        solve("marginals:2x3:1", privacy="approx", method="marginals", objective="weighted", weights=weights)
    rc = main(["solve", "--workload", "marginals:2x3:1", "--method", "marginals", "--objective", "weighted", "--option", "weights=1,2,1,1,1", "--out", str(tmp_path / "s.npz")])
    assert rc == 2
    assert "equal within each marginal" in capsys.readouterr().err


def test_auto_max_on_a_large_marginal_workload_uses_the_template(tmp_path):
    """Past the dense limit, auto --objective max under epsilon-DP runs the template (closed form below).

    Eight 1-way marginals of 4 x ... x 4 (65536 cells), each measured at weight 1/8 (L1
    sensitivity 1): eigenvalues ``x(empty) = 8 (1/64) 4^7`` and ``x({i}) = 4^7 / 64``, so a
    query's variance is ``(1/4) 4^7 / x(empty) + (3/4) 4^7 / x({i}) = 2 + 48 = 50``; the
    identity's is 4^7 = 16384. The baselines past the dense limit are evaluated per factor.
    """
    out = tmp_path / "m.npz"
    assert main(["solve", "--workload", "marginals:4x4x4x4x4x4x4x4:1", "--privacy", "pure", "--method", "auto", "--objective", "max", "--out", str(out)]) == 0
    s = read_strategy(out)
    assert s.meta["auto_choice"] == "marginals"
    assert s.meta["objective_value"] == pytest.approx(50.0, rel=1e-9)
    assert s.meta["auto_candidates"]["identity"] == pytest.approx(16384.0, rel=1e-12)
    assert "wavelet" in s.meta["auto_candidates"]  # evaluated per factor, not refused
    assert 0 < s.meta["objective_lower_bound"] <= s.meta["objective_value"]


@pytest.mark.parametrize("objective, option", [("max", []), ("weighted", ["--option", "weights=" + ",".join(["1"] * 6 + ["5"] * 21)])])
def test_auto_under_pure_evaluates_the_constructions_under_any_objective(tmp_path, objective, option):
    """epsilon-DP (prefix:6+all-range:6): auto evaluates the baselines and auto-pure's strategy for the total under the
    objective and keeps the best; the value is the objective at the file's matrix (numpy's pinv). A weighted objective
    also gets auto-pure on the reweighted workload, whose (eps, delta) bound bounds the objective; max gets p-identity's
    min-max search, whose (eps, delta) min-max bound is at least the mean variance's."""
    from oracles import dense

    out = tmp_path / "s.npz"
    spec = "prefix:6+all-range:6"
    assert main(["-q", "solve", "--workload", spec, "--privacy", "pure", "--objective", objective, *option, "--out", str(out)]) == 0
    s = read_strategy(out)
    reweighted = {"auto-pure/reweighted"} if objective == "weighted" else {"p-identity"}
    assert set(s.meta["auto_candidates"]) == {"identity", "hierarchical", "wavelet", "auto-pure"} | reweighted
    assert s.meta["auto_candidates"][s.meta["auto_choice"]] == min(s.meta["auto_candidates"].values())
    u = query_variances(dense(s.matrix), parse_spec(spec), 1)
    c = np.ones(u.size) if objective == "max" else np.array([1.0] * 6 + [5.0] * 21)
    value = u.max() if objective == "max" else float(c @ u)
    assert s.meta["objective_value"] == pytest.approx(value, rel=1e-9)
    assert s.meta["objective_value"] == pytest.approx(min(s.meta["auto_candidates"].values()), rel=1e-12)
    # the bound from the certified total: the mean variance (max) or the least weight times the total (weighted)
    scale = 1 / u.size if objective == "max" else c.min()
    if objective == "max":
        assert s.meta["objective_lower_bound_kind"] == "l2-min-max-dual"
        assert s.meta["objective_lower_bound"] >= scale * s.meta["lower_bound"]
    else:  # min trace(W^T C W X^-1) >= min_i c_i min trace(W^T W X^-1): the reweighted bound is the tighter one
        assert s.meta["objective_lower_bound_kind"] == "reweighted-workload-l2-optimum"
        assert s.meta["objective_lower_bound"] >= scale * s.meta["lower_bound"] * (1 - 1e-9)
    assert s.meta["objective_lower_bound"] <= value


def test_max_under_pure_leaves_the_stationary_points_at_zero():
    """Under L1 a zero marginal weight is stationary; the extra starts find the total plus the table: max variance 7.2
    on marginals:4x4 of orders 0-2 (A = [1/3 total; 2/3 I], by numpy), where the workload's own marginals give 10.24."""
    spec = "marginals:4x4:0+marginals:4x4:1+marginals:4x4:2"
    W = parse_spec(spec)
    s = solve(spec, privacy="pure", method="marginals", objective="max")
    good = np.vstack([np.ones((1, 16)) / 3, 2 / 3 * np.eye(16)])
    assert query_variances(good, W, 1).max() == pytest.approx(7.2, rel=1e-12)
    assert s.meta["objective_value"] <= 7.2 * (1 + 1e-3)
    assert s.meta["objective_value"] == pytest.approx(query_variances(s.matrix, W, 1).max(), rel=1e-9)


@pytest.mark.parametrize("privacy", ["pure", "approx"])
def test_auto_skips_the_template_when_weights_differ_within_a_marginal(tmp_path, privacy):
    """The template's limit is not the user's mistake: auto returns its other candidates' best (exit 0)."""
    spec = "marginals:3x4x2:1+marginals:3x4x2:2"
    weights = np.r_[np.full(3, 2.0), np.full(4, 0.5), np.full(2, 1.0), np.full(12, 3.0), np.full(6, 0.1), np.full(7, 1.5), 1.6]
    np.save(tmp_path / "w.npy", weights)
    out = tmp_path / "a.npz"
    assert main(["-q", "solve", "--workload", spec, "--privacy", privacy, "--method", "auto", "--objective", "weighted", "--option", f"weights={tmp_path / 'w.npy'}", "--out", str(out)]) == 0
    s = read_strategy(out)
    assert "equal within each marginal" in s.meta["auto_skipped"]["marginals"]
    assert s.meta["objective_value"] == pytest.approx(float(weights @ query_variances(s.matrix, parse_spec(spec), 1 if privacy == "pure" else 2)), rel=1e-9)
