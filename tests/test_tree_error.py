"""The O(n^2) tree route to the unit error of H_b (strategy_opt.tree_error) against dense algebra."""

import numpy as np
import pytest

from strategy_opt.api import solve
from strategy_opt.bases import hierarchical_matrix, hierarchy_intervals
from strategy_opt.tree_error import hierarchy_unit_error
from strategy_opt.workload import all_range, from_matrix, prefix, random_range


def _dense_e(n, b, G, p):
    """E_p written out: 0/1 interval rows, deficient columns completed under L1, pinv of A^T A."""
    A = hierarchical_matrix(n, b).toarray()
    sums = A.sum(axis=0)
    if p == 1:
        deficit = sums.max() - sums
        cols = np.flatnonzero(deficit > 0)
        extra = np.zeros((cols.size, n))
        extra[np.arange(cols.size), cols] = deficit[cols]
        A = np.vstack([A, extra])
        sens = np.abs(A).sum(axis=0).max()
    else:
        sens = np.sqrt((A**2).sum(axis=0).max())
    return sens**2 * np.trace(G @ np.linalg.pinv(A.T @ A))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("n, b", [(1, 2), (2, 2), (7, 2), (16, 2), (27, 3), (30, 4), (50, 7), (64, 16), (13, 13), (12, 40)])
def test_matches_dense_algebra(n, b, p):
    rng = np.random.default_rng(n * 100 + b)
    W = rng.normal(size=(2 * n + 1, n)) * rng.uniform(0.1, 10.0, size=(2 * n + 1, 1))  # signed rows of mixed scale
    G = W.T @ W
    assert hierarchy_unit_error(n, b, G, p) == pytest.approx(_dense_e(n, b, G, p), rel=1e-10)


def test_intervals_are_the_matrix_rows_and_nested():
    for n, b in [(10, 3), (33, 2), (100, 16)]:
        intervals = hierarchy_intervals(n, b)
        A = hierarchical_matrix(n, b).toarray()
        rows = np.zeros((len(intervals), n))
        for i, (lo, hi) in enumerate(intervals):
            rows[i, lo:hi] = 1.0
        np.testing.assert_array_equal(rows, A)
        for i, (lo, hi) in enumerate(intervals):  # every node lies inside an earlier node, or is the root
            assert i == 0 or any(plo <= lo and hi <= phi and (plo, phi) != (lo, hi) for plo, phi in intervals[:i])


@pytest.mark.parametrize("W", [all_range(100), prefix(81), random_range(90, 40, 3)], ids=["all-range", "prefix", "random-range"])
@pytest.mark.parametrize("privacy", ["pure", "approx"])
def test_hierarchical_search_reports_the_compiled_errors(W, privacy):
    s = solve(W, privacy=privacy, method="hierarchical")
    tried = {int(k): v for k, v in s.meta["branching_errors"].items()}
    b = s.meta["branching"]
    assert b == min(tried, key=tried.get)
    assert tried[b] == pytest.approx(s.meta["unit_total_squared_error"], rel=1e-10)
    for other in (2, 5):  # the branchings not chosen, compiled on their own
        assert tried[other] == pytest.approx(solve(W, privacy=privacy, method="hierarchical", branching=other).meta["unit_total_squared_error"], rel=1e-10)


def test_weighted_file_workload():
    rng = np.random.default_rng(5)
    M = (rng.random((40, 33)) < 0.3) * rng.uniform(0.5, 3.0, size=(40, 1))
    M[:, 0] = 1.0  # every cell queried
    M[0, :] = 1.0
    W = from_matrix(M)
    assert hierarchy_unit_error(33, 3, W.gram(), 1) == pytest.approx(_dense_e(33, 3, M.T @ M, 1), rel=1e-10)
