"""GreedyH (strategy_opt.programs.greedy_h): tree, greedy weights, Sherman-Morrison, routes."""

import numpy as np
import pytest

import strategy_opt.programs.greedy_h as gh
from strategy_opt.api import solve
from strategy_opt.error import unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.programs.greedy_h import (
    LAMBDA_MAX,
    MappedWorkload,
    best_lambda,
    build_hierarchy,
    domain_order,
    greedy_hierarchy,
)
from strategy_opt.workload import all_range, from_matrix, identity, kronecker, prefix, random_range, total, union


def cells(W):
    return MappedWorkload(W, domain_order(W.domain), np.arange(W.n + 1))


def test_tree_structure():
    h = build_hierarchy(5, 2)
    assert list(zip(h.lo[5:].tolist(), h.hi[5:].tolist())) == [(0, 2), (2, 4), (0, 4), (0, 5)]
    assert h.depth.tolist() == [3, 3, 3, 3, 1, 2, 2, 1, 0]
    h = build_hierarchy(7, 3)
    assert list(zip(h.lo[7:].tolist(), h.hi[7:].tolist())) == [(0, 3), (3, 6), (0, 7)]
    h = build_hierarchy(1, 2)
    assert h.rounds == [] and h.lo.tolist() == [0]
    with pytest.raises(InputError):
        build_hierarchy(4, 1)


@pytest.mark.parametrize(
    "W",
    [identity(16), prefix(16), all_range(16), total(9), random_range(37, 50, 1), all_range(64),
     union(prefix(20), total(20), weights=[1.0, 3.0]), kronecker(prefix(6), all_range(5))],
    ids=lambda W: W.spec,
)
def test_greedy_error_equals_independent_error_formula(W):
    """The carried trace equals tr(W^T W (A^T A)^-1) computed by strategy_opt.error; sensitivity is 1."""
    t = greedy_hierarchy(cells(W), 2)
    A = np.zeros((t.asked.size, W.n))
    A[:, domain_order(W.domain)] = t.strategy().toarray()
    np.testing.assert_allclose(np.abs(A).sum(axis=0), 1.0, rtol=1e-12)  # every path sums to 1
    assert t.unit_error == pytest.approx(unit_error(A, W, 1), rel=1e-9)


def test_identity_workload_gives_laplace_mechanism():
    """Li 2013, Sec. 6.5.4: on the identity workload GreedyH keeps lambda = 0 (Laplace on the buckets)."""
    t = greedy_hierarchy(cells(identity(64)), 2)
    assert np.all(t.lam == 0) and t.asked.tolist() == list(range(64))


@pytest.mark.parametrize("n, ratio", [(13, 1.0), (64, 1.11), (256, 1.77)])
def test_all_range_ratios_from_the_notes(n, ratio):
    """identity error / greedy error on all ranges: 1.00 (k=13), 1.11 (k=64), 1.77 (k=256) (dawa.md, Sec. 3.4)."""
    W = all_range(n)
    t = greedy_hierarchy(cells(W), 2)
    assert np.trace(W.gram()) / t.unit_error == pytest.approx(ratio, abs=0.005)


def test_best_lambda_matches_grid_search():
    rng = np.random.default_rng(0)
    e = rng.exponential(10, 300)
    d = rng.uniform(0.5, 40, 300)
    A = e * d * rng.uniform(0, 1, 300) ** 3  # 0 <= A <= e d (Cauchy-Schwarz)
    lam = best_lambda(e, A, d)
    grid = np.linspace(0, LAMBDA_MAX, 20001)

    def f(lm, e, A, d):
        beta = lm**2 / ((1 - lm) ** 2 + lm**2 * d)
        return (e - A * beta) / (1 - lm) ** 2

    for i in range(300):
        assert f(lam[i], e[i], A[i], d[i]) <= f(grid, e[i], A[i], d[i]).min() * (1 + 1e-9)


def test_root_choice_minimises_true_error():
    """At the root (decay mu = 1) the greedy lambda minimises the exact error of the 2-leaf strategy."""
    W = union(total(2), identity(2), weights=[10.0, 1.0])
    t = greedy_hierarchy(cells(W), 2)
    G = W.gram()

    def err(lm):
        A = np.array([[lm, lm], [1 - lm, 0], [0, 1 - lm]])
        return np.trace(G @ np.linalg.inv(A.T @ A))

    grid = np.linspace(0, LAMBDA_MAX, 5001)
    assert t.lam[2] > 0
    assert t.unit_error == pytest.approx(min(err(g) for g in grid), rel=1e-6)


@pytest.mark.parametrize("k, branching", [(1, 2), (2, 2), (37, 2), (64, 4), (50, 3)])
def test_least_squares_is_ols(k, branching):
    W = all_range(k)
    t = greedy_hierarchy(cells(W), branching)
    A = t.strategy().toarray()
    y = np.random.default_rng(k).normal(size=A.shape[0])
    np.testing.assert_allclose(t.least_squares(y), np.linalg.lstsq(A, y, rcond=None)[0], atol=1e-10)


def test_workload_mapping_prop_6_2():
    """q(expand(B, s)) = q_hat(s): the mapped workload's Gram equals P^T W^T W P."""
    W = random_range(30, 40, 2)
    edges = np.array([0, 1, 4, 10, 11, 30])
    mw = MappedWorkload(W, np.arange(30), edges)
    P = mw._P.toarray()
    Wm = W.matrix().toarray()
    s = np.random.default_rng(0).normal(size=5)
    from strategy_opt.partition import expand

    np.testing.assert_allclose(Wm @ expand(s, edges), Wm @ P @ s)
    w = np.random.default_rng(1).normal(size=5)
    lo, hi = np.array([0, 2]), np.array([2, 5])
    want = [np.sum((Wm @ P[:, a:b] @ w[a:b]) ** 2) for a, b in zip(lo, hi)]
    np.testing.assert_allclose(mw.norms_sq(lo, hi, w), want)


def _random_buckets(W, seed: int):
    """Cell order, random bucket edges (at most 40 cuts), random bucket weights and four bucket ranges."""
    rng = np.random.default_rng(seed)
    n = W.n
    edges = np.unique(np.r_[0, rng.choice(np.arange(1, n), min(40, n - 1), replace=False), n])
    k = edges.size - 1
    return domain_order(W.domain), edges, rng.random(k), np.array([0, 3, 10, 11]), np.array([3, 10, 11, k])


@pytest.mark.parametrize(
    "W",
    [kronecker(prefix(12), all_range(10)), kronecker(random_range(12, 5, 1), prefix(10)), union(prefix(11), identity(11))],
    ids=lambda W: W.spec,
)
def test_routes_agree(W, monkeypatch):
    """gram, matrix and structured (pairwise and column-block) routes give the same norms."""
    order, edges, w, lo, hi = _random_buckets(W, seed=0)
    Wm, P = W.matrix().toarray(), MappedWorkload(W, order, edges)._P.toarray()
    want = [np.sum((Wm @ P[:, a:b] @ w[a:b]) ** 2) for a, b in zip(lo, hi)]
    got = {}
    for route in gh.ROUTES:
        mw = MappedWorkload(W, order, edges, route=route)
        assert mw.route == route
        got[route] = mw.norms_sq(lo, hi, w)
        np.testing.assert_allclose(got[route], want, rtol=1e-10)
    # both halves of the structured route
    np.testing.assert_allclose(mw._pairwise_norms_sq(lo, hi, w), want, rtol=1e-10)
    monkeypatch.setattr(gh, "_BLOCK_ENTRIES", 7)
    np.testing.assert_allclose(mw._pairwise_norms_sq(lo, hi, w), want, rtol=1e-10)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_explicit_workload_routes(dense):
    """An explicit matrix is routed by its non-zeros like the interval workload it holds; gram and matrix routes agree."""
    rng = np.random.default_rng(2)
    R = random_range(300, 120, 4)  # about a third of the entries: nnz <= n^2/4 -> matrix
    for spec_workload, route in ((R, "matrix"), (prefix(300), "gram")):  # prefix: n(n+1)/2 non-zeros -> gram
        M = spec_workload.matrix()
        W = from_matrix(M.toarray() if dense else M)
        assert gh._matrix_nnz(W) == M.nnz == gh._matrix_nnz(spec_workload)
        assert MappedWorkload._choose_route(W) == route == MappedWorkload._choose_route(spec_workload)
        edges = np.unique(np.r_[0, rng.choice(np.arange(1, 300), 40, replace=False), 300])
        k = edges.size - 1
        w = rng.random(k)
        lo, hi = np.array([0, 3, 10, 11]), np.array([3, 10, 11, k])
        Wm, P = M.toarray(), MappedWorkload(W, np.arange(300), edges)._P.toarray()
        want = [np.sum((Wm @ P[:, a:b] @ w[a:b]) ** 2) for a, b in zip(lo, hi)]
        for r in ("gram", "matrix"):
            np.testing.assert_allclose(MappedWorkload(W, np.arange(300), edges, route=r).norms_sq(lo, hi, w), want, rtol=1e-10)
        with pytest.raises(InputError, match="structured route"):
            MappedWorkload(W, np.arange(300), edges, route="structured")
        # the whole greedy allocation is the same as on the structured workload
        a = greedy_hierarchy(MappedWorkload(W, np.arange(300), edges), 2)
        b = greedy_hierarchy(MappedWorkload(spec_workload, np.arange(300), edges), 2)
        np.testing.assert_allclose(a.weight, b.weight, rtol=1e-9, atol=1e-12)
        assert a.unit_error == pytest.approx(b.unit_error, rel=1e-10)


def test_solve_method_greedy_h():
    s = solve("all-range:128", privacy="pure", method="greedy-h")
    assert s.meta["method"] == "greedy-h" and s.meta["sensitivity"] == pytest.approx(1.0)
    assert s.meta["unit_total_squared_error"] == pytest.approx(s.meta["greedy_unit_error"], rel=1e-9)
    ident = solve("all-range:128", privacy="pure", method="identity")
    assert s.meta["unit_total_squared_error"] < ident.meta["unit_total_squared_error"]
    s4 = solve("prefix:64", privacy="pure", method="greedy-h", branching=4)
    assert s4.meta["branching"] == 4
    with pytest.raises(InputError):
        solve("prefix:16", privacy="approx", method="greedy-h")
    with pytest.raises(InputError):
        solve("prefix:16", privacy="pure", method="greedy-h", branching=0)


def test_solve_greedy_h_on_a_2d_grid_uses_hilbert_order():
    s = solve("prefix:6*all-range:5", privacy="pure", method="greedy-h")
    assert s.shape[1] == 30 and s.meta["sensitivity"] == pytest.approx(1.0)
    assert s.meta["unit_total_squared_error"] == pytest.approx(s.meta["greedy_unit_error"], rel=1e-9)


# ---------------------------------------------------------------------------- size and memory
def test_refuses_more_than_20000_cells_at_once():
    """The audit's input: 65536 cells ran 150 s to 6.3 GB; now refused before any work."""
    with pytest.raises(InputError, match=r"greedy-h works on at most 20,000 cells .* has 65,536 cells: use dawa"):
        solve("all-range:256*all-range:256", privacy="pure", method="greedy-h")


def test_cli_exit_2_with_one_line(capsys):
    from strategy_opt.cli import main

    assert main(["-q", "solve", "--workload", "all-range:256*all-range:256", "--privacy", "pure", "--method", "greedy-h"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "at most 20,000 cells" in err


def test_refuses_beyond_the_memory_estimate(monkeypatch):
    """Below the cell limit the peak (the dense analysis of the strategy) is compared with the memory first."""
    W = all_range(512)
    nbytes, why = gh.greedy_h_bytes(W)
    assert nbytes == pytest.approx(6 * 8 * 512**2) and "6 dense 512x512" in why
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1M")
    with pytest.raises(InputError, match=r"greedy-h on workload 'all-range:512' \(512 cells\) needs about 12.6 MB .* only 1 MB"):
        gh.greedy_h_matrix(W)
    with pytest.raises(InputError, match="needs about"):  # a workload object skips the SPEC's own estimate
        solve(W, privacy="pure", method="greedy-h")
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "20M")
    assert gh.greedy_h_matrix(W)[0].shape[1] == 512


def test_structured_route_on_16384_cells_gives_a_valid_strategy():
    """2-D all ranges on 128 x 128: mapping and greedy allocation (formerly 7 GB, killed) on the structured route."""
    W = kronecker(all_range(128), all_range(128))
    mw = cells(W)
    assert mw.route == "structured"
    t = greedy_hierarchy(mw, 2)
    assert np.isfinite(t.unit_error) and t.unit_error > 0
    np.testing.assert_allclose(np.asarray(abs(t.strategy()).sum(axis=0)).ravel(), 1.0, rtol=1e-12)  # every path sums to 1


@pytest.mark.parametrize(
    "W",
    [kronecker(prefix(12), all_range(10)), kronecker(random_range(12, 5, 1), prefix(10)), union(prefix(11), identity(11), weights=[1.0, 2.0])],
    ids=lambda W: W.spec,
)
@pytest.mark.parametrize("way", ["pairs", "factor-grams", "prefix-sums"])
def test_structured_route_ways_agree_with_the_gram_route(W, way, monkeypatch):
    """Each way of the structured route (cell pairs, factor Grams on dense runs, prefix sums) gives the Gram route's norms."""
    order, edges, w, lo, hi = _random_buckets(W, seed=3)
    want = MappedWorkload(W, order, edges, route="gram").norms_sq(lo, hi, w)
    costs = {"pairs": (0.0, 1.0, 1.0), "factor-grams": (1.0, 0.0, 1.0), "prefix-sums": (1.0, 1.0, 0.0)}[way]
    for name, value in zip(("_COST_PAIR", "_COST_APPLY", "_COST_INTERVAL"), costs):
        monkeypatch.setattr(gh, name, value)
    # several blocks, runs split across blocks (prefix sums: a column's intermediate results fit one block)
    monkeypatch.setattr(gh, "_BLOCK_ENTRIES", 1000 if way == "prefix-sums" else 50)
    mw = MappedWorkload(W, order, edges, route="structured")
    if way == "prefix-sums":
        assert all(gh._interval_entries(p) <= 1000 for _, p in mw._parts)
    np.testing.assert_allclose(mw.norms_sq(lo, hi, w), want, rtol=1e-10)


def test_progress_lines(caplog, monkeypatch):
    import logging

    monkeypatch.setattr(gh, "_LOG_SECONDS", -1.0)
    log = logging.getLogger("strategy_opt")  # a CLI call in an earlier test may have stopped its propagation
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    monkeypatch.setattr(log, "propagate", False)
    with caplog.at_level(logging.INFO, logger="strategy_opt"):
        greedy_hierarchy(cells(kronecker(prefix(8), all_range(8))), 2)
    assert any("greedy-h: level 1 of 6" in r.getMessage() for r in caplog.records)
