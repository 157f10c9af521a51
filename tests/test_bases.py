"""Classic strategy matrices against the dissertation's worked examples."""

import numpy as np
import pytest

from strategy_opt.bases import fourier_matrix, hierarchical_matrix, wavelet_matrix
from strategy_opt.error import sensitivity
from strategy_opt.workload import marginals


def test_h4_and_y4_match_figure_2_3():
    H4 = [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    Y4 = [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
    np.testing.assert_array_equal(hierarchical_matrix(4, 2).toarray(), H4)
    np.testing.assert_array_equal(wavelet_matrix(4).toarray(), Y4)
    # Example 2.4 sensitivities
    assert sensitivity(hierarchical_matrix(4, 2), 1) == 3 and sensitivity(wavelet_matrix(4), 1) == 3
    assert sensitivity(wavelet_matrix(4), 2) == pytest.approx(np.sqrt(3))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_hierarchy_wavelet_identity(n):
    """Li 2013, Sec. 6.4: H^T H = Y^T Y + J - I for n a power of two."""
    H = hierarchical_matrix(n, 2).toarray()
    Y = wavelet_matrix(n).toarray()
    np.testing.assert_array_equal(H.T @ H, Y.T @ Y + np.ones((n, n)) - np.eye(n))


def test_wavelet_recursion():
    """Y_2n = [kron(Y_n, [1, 1]); kron(I_n, [1, -1])] (notes sec. 6.3), up to row order."""
    Y8 = wavelet_matrix(8).toarray()
    Y4 = wavelet_matrix(4).toarray()
    rec = np.vstack([np.kron(Y4, [1, 1]), np.kron(np.eye(4), [1, -1])])
    assert sorted(map(tuple, Y8)) == sorted(map(tuple, rec))


@pytest.mark.parametrize("n", [1, 3, 5, 7, 12, 100])
def test_any_n_is_full_rank(n):
    for A in (hierarchical_matrix(n, 2), hierarchical_matrix(n, 3), wavelet_matrix(n)):
        assert np.linalg.matrix_rank(A.toarray()) == n
    assert wavelet_matrix(n).shape == (n, n)


def test_hierarchy_branching_levels():
    H = hierarchical_matrix(27, 3).toarray()
    assert H.shape == (1 + 3 + 9 + 27, 27)
    assert np.all(H.sum(axis=0) == 4)


def test_fourier_binary_is_walsh_hadamard_and_supports_marginals():
    F = fourier_matrix((2, 2, 2), [(0, 1), (1, 2)])
    # characters with S inside {0,1} or {1,2}: {}, {0}, {1}, {2}, {0,1}, {1,2}
    assert F.shape == (6, 8)
    assert set(np.unique(F)) <= {-1.0, 1.0}
    np.testing.assert_allclose(F @ F.T, 8 * np.eye(6))
    W = marginals((2, 3, 4), 2).matrix().toarray()
    F = fourier_matrix((2, 3, 4), [(0, 1), (0, 2), (1, 2)])
    # W is in the row space of F: W F^+ F = W
    np.testing.assert_allclose(W @ np.linalg.pinv(F) @ F, W, atol=1e-9)
