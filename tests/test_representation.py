"""Representation independence of Eigen-Design (Li 2013, Props. 5.1 and 5.2), as property tests.

* Prop. 5.1: semantically equivalent workloads (cells permuted, a cell split into identical
  copies or identical cells merged, zero columns added or removed) get the same error,
  because Eigen-Design runs on the minimized workload (Def. 2.6).
* Prop. 5.2: error-equivalent workloads ``W2 = U W1`` (U orthogonal; same Gram matrix) get
  the same strategy and error.

Random real workloads have distinct Gram eigenvalues almost surely, so the eigen-queries
(and hence the design) are determined up to signs; integer workloads are used where the
transformation keeps the minimized Gram matrix bit-identical.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategy_opt.api import solve
from strategy_opt.cells import cell_classes, class_representatives
from strategy_opt.error import unit_error
from strategy_opt.programs.eigen_design import Minimization, minimize_workload
from strategy_opt.workload import all_range, from_matrix, kronecker, total

from oracles import query_variances

RTOL = 1e-6  # Program 5.1.1 is solved to a relative gap of 1e-8

seeds = st.integers(0, 2**32 - 1)
profile = settings(max_examples=20, deadline=None)


def _error(W) -> float:
    return solve(from_matrix(W), method="eigen-design").meta["unit_total_squared_error"]


def _gaussian(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(3, 9), rng.integers(2, 7)
    return rng, rng.standard_normal((m, n))


def _integer_with_duplicates(seed):
    """A 0/1/2 workload, then some of its columns duplicated and zero columns inserted."""
    rng = np.random.default_rng(seed)
    m, n = rng.integers(3, 8), rng.integers(2, 6)
    W = rng.integers(0, 3, (m, n)).astype(float)
    W[:, np.all(W == 0, axis=0)] = 1.0
    copies = rng.integers(1, 4, n)  # each cell split into 1-3 identical cells
    cols = np.repeat(np.arange(n), copies)
    Wsplit = W[:, cols]
    zeros = rng.integers(0, 3)
    Wsplit = np.hstack([Wsplit, np.zeros((m, zeros))])
    return rng, W, Wsplit[:, rng.permutation(Wsplit.shape[1])]


@given(seeds)
@profile
def test_permuting_cells(seed):
    rng, W = _gaussian(seed)
    assert _error(W[:, rng.permutation(W.shape[1])]) == pytest.approx(_error(W), rel=RTOL)


@given(seeds)
@profile
def test_splitting_merging_and_zero_cells(seed):
    _, W, Wsplit = _integer_with_duplicates(seed)
    assert _error(Wsplit) == pytest.approx(_error(W), rel=RTOL)


@given(seeds)
@profile
def test_orthogonal_transform_of_the_queries(seed):
    rng, W = _gaussian(seed)
    m = W.shape[0]
    U, _ = np.linalg.qr(rng.standard_normal((m + 2, m + 2)))
    W2 = U @ np.vstack([W, np.zeros((2, W.shape[1]))])  # W2^T W2 = W^T W, two more queries
    assert _error(W2) == pytest.approx(_error(W), rel=RTOL)


@given(seeds)
@profile
def test_minimize_workload(seed):
    _, W, Wsplit = _integer_with_duplicates(seed)
    Wm, M = minimize_workload(from_matrix(Wsplit))
    Wm_dense = Wm.matrix().toarray()
    np.testing.assert_array_equal(Wm_dense @ M.toarray(), Wsplit)
    # minimal: as many cells as distinct non-zero columns (np.unique as an independent oracle)
    nonzero = Wsplit[:, np.any(Wsplit != 0, axis=0)]
    assert Wm_dense.shape[1] == np.unique(nonzero, axis=1).shape[1] == np.unique(W, axis=1).shape[1]
    assert np.unique(Wm_dense, axis=1).shape[1] == Wm_dense.shape[1]
    assert np.all(np.any(Wm_dense != 0, axis=0))


@given(seeds)
@profile
def test_strategy_maps_back_to_the_original_cells(seed):
    # A' for W' becomes A = A' M on the original cells with the same error (Minimization docstring)
    rng, _, Wsplit = _integer_with_duplicates(seed)
    W = from_matrix(Wsplit)
    Wm, M = minimize_workload(W)
    A_min = rng.standard_normal((Wm.n + 2, Wm.n))
    A = A_min @ M.toarray()
    mini = Minimization(cell_classes(W.gram()))
    np.testing.assert_allclose(mini.expand(A_min), A)
    assert unit_error(A, W, 2) == pytest.approx(unit_error(A_min, Wm, 2), rel=1e-9)


def test_running_example_of_figure_2_2():
    # Li 2013 Fig. 2.2 merges columns 5 and 6 (one cell union, W' 5 x 7); fully minimized,
    # the pairs (1, 3), (2, 4), (5, 6), (7, 8) are identical and 4 cells remain
    W = np.array(
        [[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, -1, -1]],
        dtype=float,
    )
    Wm, M = minimize_workload(from_matrix(W))
    assert Wm.n == 4
    np.testing.assert_array_equal(cell_classes(W.T @ W), [0, 1, 0, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(Wm.matrix().toarray() @ M.toarray(), W)
    x = np.array([2, 0, 0, 1, 0, 1, 2, 0.0])
    np.testing.assert_array_equal(W @ x, [6, 3, 1, 2, -1])
    np.testing.assert_array_equal(Wm.matrix().toarray() @ (M @ x), W @ x)
    s = solve(from_matrix(W), method="eigen-design")
    assert s.meta["eigen_design"]["minimized_cells"] == 4
    assert s.meta["unit_total_squared_error"] == pytest.approx(_error(Wm.matrix().toarray()), rel=RTOL)


def test_kronecker_minimized_per_factor():
    W = kronecker(total(3), all_range(4))
    Wm, M = minimize_workload(W)
    assert Wm.n == 4 and M.shape == (4, 12)
    np.testing.assert_array_equal(Wm.matrix().toarray() @ M.toarray(), W.matrix().toarray())
    assert minimize_workload(all_range(5))[0] is not None and minimize_workload(all_range(5))[1].shape == (5, 5)


@pytest.mark.parametrize("scale", [1e5, 1e6])
def test_cells_of_small_queries_beside_a_large_one_stay_apart(scale):
    # each pair of columns is compared at its own scale: beside a query `scale` times larger,
    # cells 1-3 (distinct, non-zero columns) used to be merged or dropped as zero, and
    # eigen-design then answered the small queries with up to 100x the identity's variance
    W = np.eye(4)
    W[0, 0] = scale
    W = np.vstack([W, [0.0, 1.0, 1.0, 0.0]])
    np.testing.assert_array_equal(cell_classes(W.T @ W), [0, 1, 2, 3])
    s = solve(W, privacy="approx", method="eigen-design")
    small = query_variances(s.dense(), from_matrix(W), 2)[1:]
    assert small.sum() <= 5.0 * (1 + 1e-9)  # the identity's variances are 1, 1, 1, 2
    assert s.meta.get("support_repair") is None


def test_zero_and_equal_columns_at_any_scale():
    W = np.array([[1e-5, 1e-5, 0.0, 3.0], [0.0, 0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(cell_classes(W.T @ W), [0, 0, -1, 1])
    np.testing.assert_array_equal(class_representatives(cell_classes(W.T @ W)), [0, 3])
