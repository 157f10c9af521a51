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


def test_fourier_refuses_a_dense_product_that_does_not_fit(monkeypatch):
    """all-range:256*all-range:256 with fourier: a 65536 x 65536 dense basis (34 GB) is refused before it is built."""
    from strategy_opt.exceptions import InputError

    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "6G")
    with pytest.raises(InputError, match=r"Fourier strategy on domain \[256, 256\] \(a dense 65536x65536 matrix of 34.4 GB.*needs about 68.7 GB .* only 6 GB"):
        fourier_matrix((256, 256), [(0, 1)])
    # 40 binary attributes: refused before the 2^40 character sets are enumerated
    with pytest.raises(InputError, match="needs about"):
        fourier_matrix((2,) * 40, [tuple(range(40))])
    # the exact row count is checked: 2-way marginals of 12 binary attributes need 1 + 12 + 66 rows
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(2 * 8 * 79 * 4096))
    sets = [(i, j) for i in range(12) for j in range(i + 1, 12)]
    assert fourier_matrix((2,) * 12, sets).shape == (79, 4096)
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(2 * 8 * 79 * 4096 - 1))
    with pytest.raises(InputError, match="79x4096"):
        fourier_matrix((2,) * 12, sets)


def test_cli_fourier_on_a_large_product_exits_2_at_once(capsys, monkeypatch):
    from strategy_opt.cli import main

    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "6G")
    assert main(["-q", "solve", "--workload", "all-range:256*all-range:256", "--privacy", "approx", "--method", "fourier"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "65536x65536" in err and "6 GB is available" in err
