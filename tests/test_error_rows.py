"""ErrorProfile of strategies with few rows (factored from the SVD of A) against the n x n route and closed forms."""

import itertools

import numpy as np
import pytest

import strategy_opt.error as error_module
from strategy_opt.api import solve
from strategy_opt.bases import fourier_matrix
from strategy_opt.error import ErrorProfile
from strategy_opt.marginals import marginal_gram
from strategy_opt.workload import from_matrix, marginals, prefix, union


def _both_routes(A, monkeypatch):
    rows = ErrorProfile(A)
    assert rows._rows_only
    with monkeypatch.context() as m:
        m.setattr(error_module, "ROWS_ONLY_SHARE", 0.0)
        square = ErrorProfile(A)
    assert not square._rows_only
    return rows, square


@pytest.mark.parametrize("case", ["full-row-rank", "rank-deficient", "tiny-direction"])
def test_rows_only_profile_answers_as_the_square_route(case, monkeypatch):
    rng = np.random.default_rng(4)
    n = 30
    A = rng.standard_normal((9, n))
    if case == "rank-deficient":
        A[8] = A[0] + 2 * A[1]
    if case == "tiny-direction":  # a singular value far below the cutoff: dropped by both routes
        u, s, vt = np.linalg.svd(A, full_matrices=False)
        s[-1] = 1e-9 * s[0]
        A = (u * s) @ vt
    rows, square = _both_routes(A, monkeypatch)
    np.testing.assert_allclose(rows.pinv(), square.pinv(), atol=1e-10 * np.abs(square.pinv()).max())
    inside = from_matrix(rng.standard_normal((5, 9)) @ A)  # queries in A's row space
    outside = prefix(n)
    for W in (inside, outside):
        G = W.gram()
        assert rows.trace_with(G) == pytest.approx(square.trace_with(G), rel=1e-9)
        assert rows.unsupported_fraction(G) == pytest.approx(square.unsupported_fraction(G), rel=1e-9, abs=1e-13)
        i, share = rows.unsupported_query(W)
        j, share_sq = square.unsupported_query(W)
        assert share == pytest.approx(share_sq, rel=1e-9, abs=1e-13)
    assert rows.unsupported_fraction(inside.gram()) < 1e-13
    assert rows.null_space.shape == square.null_space.shape
    np.testing.assert_allclose(rows.null_space @ rows.null_space.T, square.null_space @ square.null_space.T, atol=1e-9)
    b = A.T @ rng.standard_normal(9)
    np.testing.assert_allclose(rows.solve_normal(b), square.solve_normal(b), rtol=1e-8, atol=1e-10 * np.abs(b).max())
    removed = rows.without_null_directions(A)
    if case == "tiny-direction":
        reference = square.without_null_directions(A)
        np.testing.assert_allclose(removed, reference, atol=1e-12 * np.abs(A).max())
        assert np.linalg.matrix_rank(removed, tol=1e-6 * np.abs(A).max()) == 8
    elif case == "rank-deficient":  # the zero singular value is dropped: A changes by rounding only
        np.testing.assert_allclose(removed, A, atol=1e-12 * np.abs(A).max())
    else:
        assert removed is None  # nothing to drop: A is kept as it is


def test_fourier_on_marginals_equals_its_closed_form():
    # orthogonal characters: (A^T A)^+ = sum_i a_i a_i^T / ||a_i||^4, so E_2 = max_j ||a_j||_2^2 * sum_i ||W a_i||^2 / ||a_i||^4
    shape = (2,) * 9
    W = marginals(shape, 2)
    A = fourier_matrix(shape, list(itertools.combinations(range(9), 2)))
    assert A.shape[0] <= A.shape[1] / 2  # the rows-only route
    WA = np.asarray(W.matrix() @ A.T)
    row_sq = np.einsum("ij,ij->i", A, A)
    closed = np.max(np.einsum("ij,ij->j", A, A)) * float(np.sum(np.einsum("ij,ij->j", WA, WA) / row_sq**2))
    s = solve(W, privacy="approx", method="fourier")
    assert s.meta["unit_total_squared_error"] == pytest.approx(closed, rel=1e-12)
    assert ErrorProfile(A)._rows_only


def test_marginal_union_gram_matches_the_sum_of_kronecker_grams():
    rng = np.random.default_rng(1)
    for shape, k in [((2, 3, 4), 2), ((3, 1, 2, 2), 3), ((5,), 1), ((2, 2, 2, 2), 0)]:
        W = marginals(shape, k)
        w = rng.uniform(0.5, 2.0, len(W.parts))
        expected = sum(wk**2 * (p.matrix().T @ p.matrix()).toarray() for wk, p in zip(w, W.parts))
        np.testing.assert_allclose(marginal_gram(union(*W.parts, weights=w)), expected, rtol=1e-14)
        np.testing.assert_array_equal(W.gram(), (W.matrix().T @ W.matrix()).toarray())
    assert marginal_gram(union(prefix(4), prefix(4), weights=[1.0, 1.0])) is None  # not identities and totals


def test_row_space_norms_equal_quadratic_forms():
    rng = np.random.default_rng(2)
    W = union(marginals((2, 3, 2), 1), marginals((2, 3, 2), 2), weights=[1.0, 3.0])
    V = np.linalg.qr(rng.standard_normal((12, 4)))[0]
    np.testing.assert_allclose(W.row_space_norms(V), W.query_variances(V @ V.T), rtol=1e-12)
    np.testing.assert_allclose(prefix(7).row_space_norms(V[:7, :2]), prefix(7).query_variances(V[:7, :2] @ V[:7, :2].T), rtol=1e-12)
