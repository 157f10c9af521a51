"""Column completion for epsilon-DP strategies (Li 2013, Sec. 3.4.3, Thm 3.11)."""

import numpy as np
import pytest
import scipy.sparse as sp

from strategy_opt.augment import complete_columns_l1
from strategy_opt.bases import hierarchical_matrix, wavelet_matrix
from strategy_opt.compiler import compile_strategy
from strategy_opt.error import KroneckerMatrix, unit_error
from strategy_opt.problem import Problem
from strategy_opt.workload import all_range, from_matrix, kronecker, prefix, random_range
from oracles import e1_from_gram


def test_rows_complete_every_column_to_the_sensitivity():
    A = np.array([[1.0, -2.0, 0.0, 0.5], [0.0, 1.0, 0.0, 0.5]])
    B, added = complete_columns_l1(A)
    assert added == 3
    np.testing.assert_allclose(np.abs(B).sum(axis=0), 3.0)
    np.testing.assert_array_equal(B[:2], A)
    np.testing.assert_allclose(B[2:], [[2.0, 0, 0, 0], [0, 0, 3.0, 0], [0, 0, 0, 2.0]])


def test_complete_strategy_is_returned_unchanged():
    A = hierarchical_matrix(16, 2)
    B, added = complete_columns_l1(A)
    assert added == 0 and B.shape == A.shape


@pytest.mark.parametrize("seed", range(6))
def test_error_never_increases_dense(seed):
    """Thm 3.11 on random strategies and workloads, checked with an independent pinv."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    A = rng.standard_normal((int(rng.integers(n, 2 * n)), n)) * (rng.random((1, n)) + 0.1)
    W = rng.integers(-1, 2, size=(int(rng.integers(2, 20)), n)).astype(float)
    G = W.T @ W
    B, added = complete_columns_l1(A)
    assert added == n - 1 or added == n  # ties aside, all but the max column are deficient
    assert np.abs(B).sum(axis=0).max() == pytest.approx(np.abs(A).sum(axis=0).max())
    assert e1_from_gram(B, G) <= e1_from_gram(A, G) * (1 + 1e-9)
    assert unit_error(B, from_matrix(W), 1) == pytest.approx(e1_from_gram(B, G), rel=1e-8)


def test_error_never_increases_sparse_unbalanced_tree():
    """The unbalanced Haar tree and H_3 on 100 cells have deficient columns; completion helps."""
    for A in (wavelet_matrix(100), hierarchical_matrix(100, 3)):
        W = all_range(100)
        B, added = complete_columns_l1(A)
        assert sp.issparse(B) and added > 0
        assert unit_error(B, W, 1) < unit_error(A, W, 1)
        assert unit_error(B, W, 1) == pytest.approx(e1_from_gram(B.toarray(), W.gram()), rel=1e-8)


def test_kronecker_completed_per_factor():
    A = KroneckerMatrix([wavelet_matrix(6), hierarchical_matrix(5, 2)])
    W = kronecker(all_range(6), prefix(5))
    B, added = complete_columns_l1(A)
    assert isinstance(B, KroneckerMatrix)
    assert added == B.shape[0] - A.shape[0] > 0
    dense_before, dense_after = A.tocsr().toarray(), B.tocsr().toarray()
    G = W.gram()
    assert np.abs(dense_after).sum(axis=0).max() == pytest.approx(np.abs(dense_before).sum(axis=0).max())
    assert e1_from_gram(dense_after, G) <= e1_from_gram(dense_before, G) * (1 + 1e-9)
    assert unit_error(B, W, 1) == pytest.approx(e1_from_gram(dense_after, G), rel=1e-8)


def test_compiler_completes_pure_strategies_only():
    W = random_range(12, 30, seed=3)
    A = wavelet_matrix(12)
    pure = compile_strategy(A, Problem(W, "pure"), "wavelet")
    approx = compile_strategy(A, Problem(W, "approx"), "wavelet")
    assert pure.meta["completion_rows"] > 0 and pure.shape[0] == A.shape[0] + pure.meta["completion_rows"]
    assert "completion_rows" not in approx.meta and approx.shape == A.shape
    assert pure.meta["unit_total_squared_error"] == pytest.approx(e1_from_gram(pure.dense(), W.gram()), rel=1e-8)
    assert pure.meta["unit_total_squared_error"] <= e1_from_gram(A.toarray(), W.gram())


def test_a_kronecker_strategy_keeps_the_better_of_per_factor_and_product_completion():
    """H_10 x H_10 on prefix:12*all-range:9 (uneven trees): completing each factor gave E_1 45071,
    one row per deficient product column gives 31512; the compiler keeps the smaller, and the
    branching search sees it (it chose b = 12 at 36960)."""
    import scipy.sparse as sp

    from strategy_opt.api import solve
    from strategy_opt.bases import hierarchical_matrix
    from strategy_opt.spec import parse_spec

    W = parse_spec("prefix:12*all-range:9")
    G = W.gram()

    def e1(A):
        A = np.asarray(A.todense() if sp.issparse(A) else A)
        return np.abs(A).sum(axis=0).max() ** 2 * np.trace(G @ np.linalg.pinv(A.T @ A))

    def complete(A):  # the completion rule, written out
        sums = np.abs(A).sum(axis=0)
        deficit = sums.max() - sums
        cols = np.flatnonzero(deficit > 1e-9 * sums.max())
        extra = np.zeros((cols.size, A.shape[1]))
        extra[np.arange(cols.size), cols] = deficit[cols]
        return np.vstack([A, extra])

    H12, H9 = hierarchical_matrix(12, 10).toarray(), hierarchical_matrix(9, 10).toarray()
    per_factor = e1(np.kron(complete(H12), complete(H9)))
    product = e1(complete(np.kron(H12, H9)))
    assert product < 0.75 * per_factor
    s = solve(W, privacy="pure", method="hierarchical", branching=10)
    assert s.meta["unit_total_squared_error"] == pytest.approx(product, rel=1e-9)
    assert e1(s.dense()) == pytest.approx(product, rel=1e-9)
    best = solve(W, privacy="pure", method="hierarchical")
    assert best.meta["branching"] == 10 and best.meta["unit_total_squared_error"] == pytest.approx(product, rel=1e-9)
