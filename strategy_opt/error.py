"""Error analysis of matrix-mechanism strategies (Li 2013, Sec. 3.2).

Unit total squared error of strategy A (p x n) on workload W (README.md, "Error normalisation")::

    E_p(A; W) = ||A||_p^2 * trace(W^T W (A^T A)^+)

with ``||A||_p`` the largest column p-norm (p = 1 for epsilon-DP, p = 2 for
(epsilon, delta)-DP). The expected total squared error of a release is
``E_p * privacy.noise_variance_factor()``. The formula holds only when A
supports W (``W A^+ A = W``); `ErrorProfile.check_support` refuses the others.

Lower bound: the SVD bound (Li 2013, Thm 4.1) ``(sum_i sqrt(lambda_i(W^T W)))^2 / n``
is a lower bound on E_2 of every strategy, hence also on E_1.

Examples
--------
>>> import numpy as np
>>> from strategy_opt.workload import all_range
>>> from strategy_opt.error import unit_error
>>> W = all_range(8)
>>> bool(unit_error(np.eye(8), W, p=2) == np.trace(W.gram()))
True
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from .defaults import EIG_RTOL, FLAT_MAX_NONZEROS, MAX_DENSE_N, SUPPORT_RTOL, TINY_GRAM
from .exceptions import InputError, SupportError
from .marginals import MarginalsMatrix, marginals_query_variances, marginals_trace
from .privacy import check_privacy
from .resources import require_memory
from .threads import factorization_threads
from .workload import ExplicitWorkload, Kronecker, Union, Workload, _check_dense_n, _factors_on

log = logging.getLogger("strategy_opt")

__all__ = [
    "as_strategy_matrix",
    "check_columns",
    "kronecker_factors",
    "kronecker_query_variances",
    "kron_apply",
    "factored",
    "flat_nonzeros",
    "check_kronecker_support",
    "sensitivity",
    "ErrorProfile",
    "diagonal_inverse",
    "unit_error",
    "scaled_unit_error",
    "expected_total_error",
    "per_query_variances",
    "supports",
    "svd_bound",
    "log_svd_bound",
    "log_svd_bound_or_reason",
]


def _check_workload(workload) -> Workload:
    """``workload`` if it is a `Workload`; else `InputError` saying how to build one."""
    if not isinstance(workload, Workload):
        raise InputError(
            f"workload must be a strategy_opt Workload, got {type(workload).__name__} (build one with "
            "strategy_opt.workload.from_matrix(W) or strategy_opt.spec.parse_spec('prefix:16'); "
            "strategy_opt.error_report also takes matrices and SPEC strings)"
        )
    return workload


def sensitivity(A, p: int) -> float:
    """Largest column p-norm of A (p = 1: L1 sensitivity, p = 2: L2 sensitivity).

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy (a Kronecker product's sensitivity is the product of its factors').
    p : {1, 2}
        The column norm: 1 for epsilon-DP, 2 for (epsilon, delta)-DP.

    Returns
    -------
    float
        0.0 for a matrix without columns.

    Examples
    --------
    >>> import numpy as np
    >>> sensitivity(np.array([[1., 1.], [0., -2.]]), 1)
    3.0
    """
    A = as_strategy_matrix(A)
    if isinstance(A, KroneckerMatrix):
        return float(np.prod([sensitivity(f, p) for f in A.factors]))
    if isinstance(A, MarginalsMatrix):
        return A.sensitivity(p)
    if p not in (1, 2):
        raise InputError(f"sensitivity norm must be 1 or 2, got {p!r}")
    if sp.issparse(A):
        A = sp.csc_matrix(A)
        col = np.asarray(abs(A).sum(axis=0)).ravel() if p == 1 else np.sqrt(np.asarray(A.multiply(A).sum(axis=0)).ravel())
    else:
        A = np.asarray(A, dtype=float)
        col = np.abs(A).sum(axis=0) if p == 1 else np.sqrt((A * A).sum(axis=0))
    return float(col.max()) if col.size else 0.0


class KroneckerMatrix:
    """A strategy given as the Kronecker product of factor matrices.

    Error analysis on Kronecker (or unions of Kronecker) workloads with the
    same factor domains uses the factors and never forms the product.

    Parameters
    ----------
    factors : sequence of ndarray or sparse matrix
    product : sparse matrix, optional
        The product as stored in a file, when the factors were read off it
        (`kronecker_factors`): `tocsr` returns it as stored, bit for bit, while
        the error analysis uses the factors (equal to it within rounding).

    Attributes
    ----------
    factors : list
        The factor matrices, left to right.
    shape : tuple of int
        ``(prod of the factors' rows, prod of their columns)``.
    product : sparse matrix or None
        The stored product, if given.

    Examples
    --------
    >>> A = KroneckerMatrix([np.eye(2), np.ones((1, 3))])  # the totals of the two rows of a 2 x 3 grid
    >>> A.shape
    (2, 6)
    >>> from strategy_opt.workload import identity, kronecker, total
    >>> round(float(unit_error(A, kronecker(identity(2), total(3)), p=2)), 6)  # A is exactly that workload: ||A||_2^2 * rank = 1 * 2
    2.0
    """

    def __init__(self, factors, product=None):
        self.factors = list(factors)
        self.shape = (int(np.prod([f.shape[0] for f in self.factors])), int(np.prod([f.shape[1] for f in self.factors])))
        self.product = product

    def tocsr(self) -> sp.csr_matrix:
        """The product as a sparse CSR matrix.

        Examples
        --------
        >>> KroneckerMatrix([np.eye(2), np.ones((1, 3))]).tocsr().toarray().tolist()
        [[1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]]
        """
        if self.product is not None:
            return sp.csr_matrix(self.product)
        return sp.csr_matrix(reduce(lambda a, b: sp.kron(a, b, format="csr"), [sp.csr_matrix(f) for f in self.factors]))


def flat_nonzeros(A) -> float:
    """Non-zeros of a Kronecker strategy's flat matrix (the product of its factors').

    Examples
    --------
    >>> flat_nonzeros(KroneckerMatrix([np.eye(2), np.ones((1, 3))]))  # 2 * 3
    6.0
    """
    return math.prod(float(f.nnz if sp.issparse(f) else np.count_nonzero(f)) for f in A.factors)


def factored(A) -> bool:
    """Whether A is a Kronecker strategy kept as its factors in files and runs (`defaults.FLAT_MAX_NONZEROS`).

    Examples
    --------
    >>> factored(KroneckerMatrix([np.eye(2), np.ones((1, 3))])), factored(np.eye(2))  # 6 non-zeros: small enough to flatten
    (False, False)
    """
    return isinstance(A, KroneckerMatrix) and flat_nonzeros(A) > FLAT_MAX_NONZEROS


def kron_apply(factors, x: np.ndarray) -> np.ndarray:
    """``(F_1 (x) F_2 (x) ...) x`` without the product: each factor applied along its axis of x (row-major cells).

    Parameters
    ----------
    factors : sequence of ndarray or sparse matrix
        ``F_k`` of shape ``(p_k, n_k)``.
    x : array_like, shape (n_1 * n_2 * ...,)
        A vector over the product domain, cells in row-major order.

    Returns
    -------
    ndarray, shape (p_1 * p_2 * ...,)

    Examples
    --------
    >>> F, G = np.array([[1.0, 2.0]]), np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    >>> x = np.arange(6.0)
    >>> bool(np.allclose(kron_apply([F, G], x), np.kron(F, G) @ x))
    True
    """
    T = np.asarray(x, dtype=float).reshape([f.shape[1] for f in factors])
    for axis, f in enumerate(factors):
        f = f.toarray() if sp.issparse(f) else np.asarray(f, dtype=float)
        T = np.moveaxis(np.tensordot(f, T, axes=([1], [axis])), 0, axis)
    return T.ravel()


#: Strategies kept in a structured form (their analysis never forms the n x n matrices where the
#: workload matches the structure); `tocsr` gives their rows.
STRUCTURED = (KroneckerMatrix, MarginalsMatrix)

#: `kronecker_factors`: largest entry difference from the stored product, relative to its largest entry.
KRON_RTOL = 1e-12


def kronecker_factors(A, shapes) -> KroneckerMatrix | None:
    """The factors of a flat matrix that is their Kronecker product (within rounding), else None.

    A strategy file stores a Kronecker strategy as its (sparse) product with
    the factors' shapes in ``meta['kronecker_factor_shapes']``; reading it
    back as factors keeps its error analysis per factor (256 x 256 cells would
    otherwise need a dense 65536 x 65536 matrix). Each factor is read off one
    block of the product; the product of the factors must have A's non-zero
    pattern and its entries within `KRON_RTOL` of A's largest. The result
    keeps A itself as its ``product`` (what `KroneckerMatrix.tocsr`, hashing
    and writing use; `strategy_opt.executor.run` measures a product workload
    through the factors, whose product equals it within `KRON_RTOL`).

    Parameters
    ----------
    A : ndarray or sparse matrix
        The flat product as stored.
    shapes : list of [int, int]
        The factors' shapes ``[p_k, n_k]``, at least two (anything else gives None).

    Returns
    -------
    KroneckerMatrix or None

    Examples
    --------
    >>> K = kronecker_factors(sp.kron(np.tril(np.ones((3, 3))), 2.0 * np.eye(2)), [[3, 3], [2, 2]])
    >>> [f.shape for f in K.factors]
    [(3, 3), (2, 2)]
    >>> kronecker_factors(np.arange(1.0, 5.0).reshape(2, 2), [[1, 2], [2, 1]]) is None  # [[1, 2], [3, 4]]: not a product
    True
    """
    if not isinstance(shapes, list) or len(shapes) < 2:
        return None
    if any(not isinstance(s, list) or len(s) != 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in s) for s in shapes):
        return None
    stored = A
    A = sp.csr_matrix(A, copy=True)
    A.eliminate_zeros()  # a stored zero is no pivot
    if (math.prod(s[0] for s in shapes), math.prod(s[1] for s in shapes)) != A.shape or A.nnz == 0:
        return None
    factors, rest = [], A
    for p1, n1 in shapes[:-1]:
        p2, n2 = rest.shape[0] // p1, rest.shape[1] // n1
        coo = rest.tocoo()
        if coo.nnz == 0:
            return None
        i1, kr = divmod(int(coo.row[0]), p2)
        j1, kc = divmod(int(coo.col[0]), n2)
        block = sp.csr_matrix(rest[i1 * p2 : (i1 + 1) * p2, j1 * n2 : (j1 + 1) * n2])
        factors.append(sp.csr_matrix(rest[kr::p2, kc::n2] / block[kr, kc]))
        rest = block
    factors.append(rest)
    product = KroneckerMatrix(factors).tocsr()
    product.eliminate_zeros()
    product.sort_indices()
    A.sort_indices()
    if not (np.array_equal(product.indptr, A.indptr) and np.array_equal(product.indices, A.indices)):
        return None
    if np.abs(product.data - A.data).max() > KRON_RTOL * np.abs(A.data).max():
        return None
    return KroneckerMatrix(factors, product=stored)


def _check_values(dtype, data, shape, what: str) -> None:
    """Refuse a non-real dtype, a shape that is not 2-D and non-empty, and NaN or infinite entries."""
    if dtype.kind not in "biuf":
        kind = "complex" if dtype.kind == "c" else f"dtype {dtype}"
        raise InputError(f"{what} must be a real numeric matrix, got {kind} entries")
    if len(shape) != 2:
        raise InputError(f"{what} must be a 2-D matrix, got shape {tuple(shape)}")
    if shape[0] == 0 or shape[1] == 0:
        raise InputError(f"{what} is empty (shape {tuple(shape)})")
    if dtype.kind == "f" and not np.all(np.isfinite(data)):
        raise InputError(f"{what} contains NaN or infinite values")


def _stored(M):
    """A sparse matrix in a format whose ``.data`` is the flat array of stored entries (LIL and DOK become CSR)."""
    return M if M.format in ("csr", "csc", "coo", "bsr", "dia") else M.tocsr()


def as_strategy_matrix(M, what: str = "strategy matrix"):
    """``M`` validated: a real, finite, non-empty 2-D float64 ndarray, scipy.sparse matrix or `KroneckerMatrix`.

    Array-likes (lists, ``np.matrix``) become float ndarrays; integer or boolean
    entries become floats (in every representation: squaring int8 entries
    would overflow in the sensitivity and the Gram matrix). A sparse matrix
    keeps its format and only its stored entries (``.data``) are checked, so
    the cost is O(nnz). A `KroneckerMatrix` keeps its factors, each checked
    and made float64.

    Parameters
    ----------
    M : array_like, sparse matrix, KroneckerMatrix or MarginalsMatrix
        The strategy.
    what : str
        Names the matrix in error messages.

    Returns
    -------
    ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix

    Raises
    ------
    InputError
        For complex, non-numeric, non-finite, empty or non-2-D input.

    Examples
    --------
    >>> as_strategy_matrix(KroneckerMatrix([np.eye(2, dtype=np.int8) * 17])).factors[0].dtype
    dtype('float64')
    """
    if isinstance(M, MarginalsMatrix):  # its weights were checked when it was built
        return M
    if isinstance(M, KroneckerMatrix):
        if not M.factors:
            raise InputError(f"{what} is a Kronecker product of no factors")
        for i, f in enumerate(M.factors):
            if not (sp.issparse(f) or isinstance(f, np.ndarray)):
                raise InputError(f"{what}: Kronecker factor {i} must be an ndarray or scipy.sparse matrix, got {type(f).__name__}")
            _check_values(f.dtype, _stored(f).data if sp.issparse(f) else f, f.shape, f"{what} (Kronecker factor {i})")
        if all(f.dtype == np.float64 for f in M.factors):
            return M
        return KroneckerMatrix([f if f.dtype == np.float64 else f.astype(np.float64) for f in M.factors])
    if sp.issparse(M):
        M = _stored(M)
        _check_values(M.dtype, M.data, M.shape, what)
        return M if M.dtype == np.float64 else M.astype(np.float64)
    if isinstance(M, (str, bytes, Mapping)) or M is None:
        raise InputError(f"{what} must be a 2-D array, scipy.sparse matrix or KroneckerMatrix, got {type(M).__name__}")
    try:
        A = np.asarray(M)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"{what} must be a 2-D numeric matrix: {exc}") from None
    if A.dtype == object and A.ndim == 0:
        raise InputError(f"{what} must be a 2-D array, scipy.sparse matrix or KroneckerMatrix, got {type(M).__name__}")
    _check_values(A.dtype, A, A.shape, what)
    return A if A.dtype == np.float64 else A.astype(np.float64)


def diagonal_inverse(A) -> np.ndarray | None:
    """``1 / diag(A^T A)`` when no row of A has two non-zeros and every column is measured, else None.

    Then ``A^T A`` is diagonal and positive, A has full column rank and
    ``(A^T A)^+ = diag(1 / d)``: seen from A's rows in O(nnz), so the identity
    on a million cells needs no n x n matrix. None too when a squared column
    norm leaves float64's range (`ErrorProfile` says why).

    Examples
    --------
    >>> diagonal_inverse(np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])).tolist()
    [0.2, 1.0]
    >>> diagonal_inverse(np.array([[1.0, 1.0], [0.0, 1.0]])) is None
    True
    """
    return _diagonal_inverse(as_strategy_matrix(A))


def diagonal_gram(A) -> bool:
    """Whether ``A^T A`` is diagonal and positive (`diagonal_inverse` is not None), without forming a Kronecker product.

    Examples
    --------
    >>> diagonal_gram(KroneckerMatrix([np.eye(2), 2.0 * np.eye(3)])), diagonal_gram(np.ones((2, 2)))
    (True, False)
    """
    A = as_strategy_matrix(A)
    if isinstance(A, KroneckerMatrix):
        return _kronecker_diagonal_inverses(A) is not None
    return _diagonal_inverse(A) is not None


def _column_sq_norms(M) -> np.ndarray:
    """``diag(M^T M)``: the squared column norms of a dense or sparse matrix."""
    return np.asarray(M.multiply(M).sum(axis=0)).ravel() if sp.issparse(M) else np.einsum("ij,ij->j", np.asarray(M), np.asarray(M))


def _kronecker_diagonal_inverses(A: KroneckerMatrix) -> list[np.ndarray] | None:
    """``1 / diag(F^T F)`` of each factor F when the product's ``A^T A`` (their Kronecker product) is diagonal and
    passes `_diagonal_inverse`'s checks for a flat A, else None; the product's diagonal is never formed (its
    extremes are the products of the factors')."""
    if any(_most_per_row(f) > 1 for f in A.factors):
        return None  # a row of the product is a product of factor rows: never form a product that cannot be diagonal
    diagonals = []
    with np.errstate(over="ignore", under="ignore"):
        for f in A.factors:
            d = _column_sq_norms(f)
            if d.size == 0 or not (np.all(np.isfinite(d)) and d.min() > 0):
                return None
            diagonals.append(d)
    low = sum(math.log(d.min()) for d in diagonals)
    high = sum(math.log(d.max()) for d in diagonals)
    finite = math.log(np.finfo(float).tiny) < low and high < math.log(np.finfo(float).max)  # every d and 1/d a normal float
    return [1.0 / d for d in diagonals] if finite and high >= math.log(TINY_GRAM) else None


def _diagonal_inverse(A) -> np.ndarray | None:
    """`diagonal_inverse` of an A that `as_strategy_matrix` has checked."""
    if isinstance(A, KroneckerMatrix):
        # the factors' diagonals, not the flat product (10^9 non-zeros for the identity on 1000 x 1000 x 1000 cells)
        inverses = _kronecker_diagonal_inverses(A)
        if inverses is None:
            return None
        require_memory(8.0 * A.shape[1], f"the diagonal of the {A.shape[1]:,}-cell Kronecker strategy's A^T A")
        return reduce(np.kron, inverses)
    if isinstance(A, STRUCTURED):
        A = A.tocsr()
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        if sp.issparse(A):
            A = sp.csr_matrix(A, copy=True)
            A.sum_duplicates()
            A.eliminate_zeros()
            if A.nnz == 0 or np.diff(A.indptr).max() > 1:
                return None
        elif A.size == 0 or np.count_nonzero(A, axis=1).max() > 1:
            return None
        d = _column_sq_norms(A)
        inv = 1.0 / d
    if d.min() > 0 and d.max() >= TINY_GRAM and np.all(np.isfinite(d)) and np.all(np.isfinite(inv)):
        return inv
    return None


def _most_per_row(f) -> int:
    """Most non-zeros in a row of a (dense or sparse) matrix."""
    if sp.issparse(f):
        f = sp.csr_matrix(f, copy=True)
        f.eliminate_zeros()
        return int(np.diff(f.indptr).max(initial=0))
    return int(np.count_nonzero(f, axis=1).max(initial=0))


def _analysable_rows(A):
    """A structured strategy's rows for the dense analysis, refused (`InputError`) past the dense limit before they are formed."""
    if isinstance(A, STRUCTURED):
        if A.shape[1] > MAX_DENSE_N and _diagonal_inverse(A) is None:
            _check_dense_n(A.shape[1], "error analysis of this strategy")
        A = A.tocsr()
    return A


#: A multiply-add of SciPy's sparse-times-sparse product costs about this many of a dense BLAS product's
#: (measured 150 with two threads, on ``A^T A`` of 1600 and 4096 cells; one thread halves the gap).
SPARSE_PRODUCT_OP_COST = 30.0
#: `_gram_of` densifies a sparse A this many entries at a time (32 MB of rows).
GRAM_CHUNK_ENTRIES = 4_000_000


def _gram_of(A) -> np.ndarray:
    """``A^T A`` (dense); an overflow shows as infinite entries, which `ErrorProfile` reports.

    A sparse A with dense-ish rows (a Kronecker product of dense factors,
    multiplied out: 4096 cells, 4.3 million non-zeros) is multiplied as dense
    blocks of rows, since the sparse product costs ``sum_r nnz_r^2`` slow
    operations (54 s there, against 6.6 s dense); otherwise sparse.

    Examples
    --------
    >>> _gram_of(sp.csr_matrix(np.array([[1.0, 1.0], [0.0, 2.0]]))).tolist()
    [[1.0, 1.0], [1.0, 5.0]]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if not sp.issparse(A):
            A = np.asarray(A, dtype=float)
            return A.T @ A
        A = sp.csr_matrix(A)
        p, n = A.shape
        row_nnz = np.diff(A.indptr).astype(float)
        if SPARSE_PRODUCT_OP_COST * float(row_nnz @ row_nnz) <= float(p) * n * n:
            return (A.T @ A).toarray()
        G = np.zeros((n, n))
        step = max(1, GRAM_CHUNK_ENTRIES // max(n, 1))
        for r0 in range(0, p, step):
            B = A[r0 : r0 + step].toarray()
            G += B.T @ B
        return G



#: Why a strategy whose ``A^T A`` overflows float64 is refused.
_TOO_LARGE = "strategy entries are too large for error analysis in float64 (A^T A overflows); rescale the strategy (its error does not depend on scale)"


def _too_small(largest: float) -> str:
    """Why a strategy whose largest squared column norm is below `TINY_GRAM` is refused."""
    return f"strategy entries are too small for error analysis in float64 (largest column norm^2 {largest:.3g}); rescale the strategy (its error does not depend on scale)"


#: `ErrorProfile` factors a strategy of at most this share of n rows from its SVD (`ErrorProfile._factor_rows`),
#: not from the n x n ``A^T A``: below about half, O(p^2 n) beats the eigendecomposition's O(n^3).
ROWS_ONLY_SHARE = 0.5

#: `ErrorProfile` answers a workload of at most this share of n queries (and at most
#: `FEW_QUERIES_MAX_ENTRIES` entries in W) by triangular solves instead of the inverse.
FEW_QUERIES_SHARE = 0.5
FEW_QUERIES_MAX_ENTRIES = 50_000_000

#: A Cholesky factor of ``A^T A`` whose squared diagonal spreads over more than this ratio is
#: recomputed from a QR factorisation of A itself (`ErrorProfile`): forming ``A^T A`` squares A's
#: condition number, so with cond(A) = 1e5 the error came out 7e-8 too low (QR: 1e-12).
QR_REFINE_CONDITION = 1e6
#: ... when A has at most this many entries (its dense copy and the QR work space).
QR_REFINE_MAX_ENTRIES = 20_000_000

#: How the support check draws the numerical row space (part of its refusal).
_CUTOFF = f", directions of singular value below {math.sqrt(EIG_RTOL):.0e} of A's largest counting as missing"

#: What a user can do about a strategy that does not support the workload.
ADD_ROWS = "add rows (e.g. the identity) so that every query is a linear combination of strategy queries"


def _qr_factor(A) -> tuple[np.ndarray, bool]:
    """``(L, True)`` with ``L L^T = A^T A``, L lower triangular with a positive diagonal, from the QR factorisation of A.

    The `scipy.linalg.cho_factor` form, accurate to cond(A) eps where the Cholesky
    factor of the formed ``A^T A`` is accurate to cond(A)^2 eps.
    """
    dense = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
    with factorization_threads():
        R = la.qr(dense, mode="r", check_finite=False)[0][: dense.shape[1]]
    R = np.sign(np.where(np.diag(R) == 0, 1.0, np.diag(R)))[:, None] * R  # R^T R unchanged
    return np.ascontiguousarray(R.T), True


def _mirror_lower(M: np.ndarray, block: int = 512) -> np.ndarray:
    """Copy the lower triangle of square ``M`` onto its upper triangle, in place, by blocks.

    ``np.tril(M) + np.tril(M, -1).T`` makes three n x n temporaries (1.5 s at n = 4096);
    block rows touch each entry once.
    """
    n = M.shape[0]
    for s in range(0, n, block):
        e = min(s + block, n)
        D = M[s:e, s:e]
        D[...] = np.tril(D) + np.tril(D, -1).T
        M[s:e, e:] = M[e:, s:e].T
    return M


class ErrorProfile:
    """Factorisation of ``A^T A`` that answers every error question about A.

    Parameters
    ----------
    A : ndarray or sparse matrix, shape (p, n)
        The strategy.

    Notes
    -----
    ``A^T A`` is factored once: not at all when it is diagonal and positive
    (strategies with disjoint column supports: identity, bucket strategies;
    when every row of A has at most one non-zero this is seen without forming
    ``A^T A``, so on any number of cells),
    by Cholesky when it is positive definite (then A supports every workload),
    otherwise by an eigendecomposition whose numerically zero directions
    (``lambda <= EIG_RTOL * lambda_max``: singular values of A below
    ``sqrt(EIG_RTOL)`` of the largest) span the null space used by the
    support check.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> P = ErrorProfile(np.eye(3))  # the identity strategy: (A^T A)^+ = I
    >>> P.workload_trace(prefix(3))  # trace(W^T W) = 3 + 2 + 1
    6.0
    """

    def __init__(self, A):
        A = as_strategy_matrix(A)
        n = A.shape[1]
        self.n = n
        self._chol = None
        self._ill = False  # factored from A's QR: queries are then answered by triangular solves, never through the inverse
        self._V = self._inv_eig = self._null = self._pinv = None
        self._rows_only = False  # only the row space is stored (`_factor_rows`); the null space is formed on demand
        self._dropped = 0
        self._inv_diag = _diagonal_inverse(A)
        if self._inv_diag is not None:
            return
        _check_dense_n(n, "error analysis of this strategy")
        if A.shape[0] <= ROWS_ONLY_SHARE * n:
            self._factor_rows(A)
            return
        AtA = _gram_of(A)
        if not np.all(np.isfinite(AtA)):
            finite = np.all(np.isfinite(A.data if sp.issparse(A) else np.asarray(A)))
            raise InputError(
                "strategy matrix contains NaN or infinite entries" if not finite
                else _TOO_LARGE
            )
        d = np.diag(AtA)
        if d.max() < TINY_GRAM and (A.count_nonzero() if sp.issparse(A) else np.count_nonzero(A)):
            raise InputError(_too_small(d.max()))
        if d.min() > 0 and np.all(np.isfinite(1.0 / d)) and np.count_nonzero(AtA) == np.count_nonzero(d):
            self._inv_diag = 1.0 / d  # exact: disjoint columns need no rank cutoff (diag(1e5, 1) has full rank)
            return
        try:
            with factorization_threads():
                c = la.cho_factor(AtA, lower=True, check_finite=False)
            d = np.diag(c[0]) ** 2
            if d.min() > EIG_RTOL * max(d.max(), 1e-300):
                self._ill = d.max() > QR_REFINE_CONDITION * d.min() and A.shape[0] * n <= QR_REFINE_MAX_ENTRIES
                self._chol = _qr_factor(A) if self._ill else c
        except la.LinAlgError:
            pass
        if self._chol is None:
            with factorization_threads():
                lam, V = np.linalg.eigh(AtA)
            keep = lam > EIG_RTOL * max(lam.max(), 1e-300)
            self._V = V[:, keep]
            self._inv_eig = 1.0 / lam[keep]
            self._null = V[:, ~keep]

    def _factor_rows(self, A) -> None:
        """The non-zero eigenpairs of ``A^T A`` from the SVD of A itself, for a strategy of few rows (`ROWS_ONLY_SHARE`).

        ``A = U S V^T`` gives ``A^T A = V S^2 V^T``: O(p^2 n) for p rows where the
        eigendecomposition of the n x n ``A^T A`` takes O(n^3) (the Fourier
        strategy of the 2-way marginals on 4096 cells, 79 rows: a minute), and
        only the row space is stored, its complement (the null space) being
        formed when asked for (`null_space`). Directions of singular value below
        ``sqrt(EIG_RTOL)`` of the largest count as null, as in the n x n route.
        """
        dense = A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            d = _column_sq_norms(dense)
        if not np.all(np.isfinite(d)):
            raise InputError(_TOO_LARGE)
        if d.max(initial=0.0) < TINY_GRAM and np.count_nonzero(dense):
            raise InputError(_too_small(d.max()))
        with factorization_threads():
            _, sv, Vt = np.linalg.svd(dense, full_matrices=False)
        with np.errstate(over="ignore"):
            lam = sv * sv
        if not np.all(np.isfinite(lam)):
            raise InputError(_TOO_LARGE)
        keep = lam > EIG_RTOL * max(lam.max(initial=0.0), 1e-300)
        self._V = np.ascontiguousarray(Vt[keep].T)
        self._inv_eig = 1.0 / lam[keep]
        self._rows_only = True
        self._dropped = int(np.count_nonzero(~keep))

    def query_variances(self, workload: Workload) -> np.ndarray:
        """``w_i (A^T A)^+ w_i^T`` for every query (no n x n matrix when ``A^T A`` is diagonal; no inverse for a few queries).

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> P = ErrorProfile(np.array([[1.0, 0.0], [0.0, 2.0]]))  # A^T A = diag(1, 4)
        >>> P.query_variances(prefix(2)).tolist()  # [1, 0] diag(1, 1/4) [1, 0]^T, [1, 1] diag(1, 1/4) [1, 1]^T
        [1.0, 1.25]
        """
        if self._inv_diag is not None:
            return workload.diagonal_query_variances(self._inv_diag)
        few = self._few_query_variances(workload)
        return few if few is not None else workload.query_variances(self.pinv())

    def workload_trace(self, workload: Workload, G: np.ndarray | None = None) -> float:
        """``trace(W^T W (A^T A)^+)``: from ``diag(W^T W)`` alone when ``A^T A`` is diagonal, as the sum of
        `query_variances` for a few queries, else from G (default ``workload.gram()``).

        Parameters
        ----------
        workload : Workload
        G : ndarray, shape (n, n), optional
            The workload's Gram matrix if the caller has it (`check_workload` returns it).

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> P = ErrorProfile(np.array([[1.0, 0.0], [0.0, 2.0]]))  # A^T A = diag(1, 4)
        >>> P.workload_trace(prefix(2))  # 1 + 1.25
        2.25
        """
        if self._inv_diag is not None:
            return float(workload.gram_diagonal() @ self._inv_diag)
        few = self._few_query_variances(workload) if workload.log_scale == 0 else None  # rows are the unscaled queries
        if few is not None:
            return float(few.sum())
        return self.trace_with(workload.gram() if G is None else G)

    def _few_query_variances(self, workload: Workload) -> np.ndarray | None:
        """``||L^{-1} w_i^T||^2`` per query from the Cholesky factor L by one triangular solve, or None.

        Taken while the inverse is not yet formed, for at most `FEW_QUERIES_SHARE` n queries and
        `FEW_QUERIES_MAX_ENTRIES` entries of W: ``n^2 m`` flops against ``2 n^3 / 3`` for the inverse
        (a release with 100 queries on 8192 cells spent 7.7 s in each of two inverses). For an
        ill-conditioned strategy (factored from its QR) always, up to that many entries: sums of
        squares do not cancel, where ``trace(W^T W (A^T A)^{-1})`` through the inverse lost 4e-8
        (a minerror-l2 strategy with cond(A) = 6e4 for a rank-5 workload).
        """
        if self._chol is None or workload.m * self.n > FEW_QUERIES_MAX_ENTRIES:
            return None
        if not self._ill and (self._pinv is not None or workload.m > FEW_QUERIES_SHARE * self.n):
            return None
        try:
            Wt = workload.matrix().T.toarray()
        except InputError:  # too many non-zeros to build
            return None
        with factorization_threads():
            Y = la.solve_triangular(self._chol[0], Wt, lower=True, check_finite=False)
        return np.einsum("ij,ij->j", Y, Y)

    @property
    def null_space(self) -> np.ndarray:
        """Orthonormal basis (n x k) of the numerically null directions of ``A^T A`` (k = 0 when full rank).

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Q = ErrorProfile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))  # cell 2 never measured
        >>> Q.null_space.round(12).tolist()
        [[0.0], [0.0], [1.0]]
        """
        if self.full_rank:
            return np.zeros((self.n, 0))
        if self._null is None:  # the complement of the stored row space
            with factorization_threads():
                Q = la.qr(self._V, mode="full", check_finite=False)[0]
            self._null = Q[:, self._V.shape[1] :]
        return self._null

    def without_null_directions(self, A) -> np.ndarray | None:
        """A (dense, the matrix this profile was built from) with its numerically null directions projected out,
        or None when there are none to remove.

        Examples
        --------
        >>> A = np.array([[1.0, 0.0, 0.0], [0.0, 1e-7, 0.0]])  # a singular value below the cutoff
        >>> ErrorProfile(A).without_null_directions(A).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        >>> ErrorProfile(np.eye(2)).without_null_directions(np.eye(2)) is None
        True
        """
        if self.full_rank:
            return None
        if self._rows_only:  # the row space minus the dropped directions: nothing to do unless some were dropped
            return (A @ self._V) @ self._V.T if self._dropped else None
        N = self._null
        return A - (A @ N) @ N.T if N.shape[1] else None

    @property
    def full_rank(self) -> bool:
        """Whether ``A^T A`` is (numerically) invertible.

        Examples
        --------
        >>> ErrorProfile(np.eye(2)).full_rank, ErrorProfile(np.array([[1.0, 1.0]])).full_rank
        (True, False)
        """
        return self._chol is not None or self._inv_diag is not None

    def pinv(self) -> np.ndarray:
        """The error profile ``(A^T A)^+`` as a dense matrix (computed once, cached).

        Examples
        --------
        >>> ErrorProfile(np.array([[1.0, 0.0], [0.0, 2.0]])).pinv().tolist()
        [[1.0, 0.0], [0.0, 0.25]]
        """
        if self._pinv is None:
            if self._inv_diag is not None:
                self._pinv = np.diag(self._inv_diag)
            elif self._chol is not None:
                with factorization_threads():
                    inv, info = la.lapack.dpotri(self._chol[0], lower=1)
                if info != 0:
                    raise la.LinAlgError(f"dpotri failed (info={info})")
                self._pinv = _mirror_lower(inv)
            else:
                self._pinv = (self._V * self._inv_eig) @ self._V.T
        return self._pinv

    def solve_normal(self, b: np.ndarray) -> np.ndarray:
        """Minimum-norm solution of ``A^T A x = b`` (b in the row space of A; a vector or an n x k block of right-hand sides).

        Examples
        --------
        >>> ErrorProfile(np.array([[1.0, 0.0], [0.0, 2.0]])).solve_normal(np.array([1.0, 4.0])).tolist()  # diag(1, 4) x = b
        [1.0, 1.0]
        """
        if self._inv_diag is not None:
            return self._inv_diag.reshape((-1,) + (1,) * (np.ndim(b) - 1)) * b
        if self._chol is not None:
            return la.cho_solve(self._chol, b, check_finite=False)
        coef = self._V.T @ b
        return self._V @ (self._inv_eig.reshape((-1,) + (1,) * (coef.ndim - 1)) * coef)

    def trace_with(self, G: np.ndarray) -> float:
        """``trace(G (A^T A)^+)`` for a symmetric n x n G.

        Examples
        --------
        >>> ErrorProfile(np.array([[1.0, 0.0], [0.0, 2.0]])).trace_with(np.eye(2))  # 1 + 1/4
        1.25
        """
        if self._inv_diag is not None:
            return float(np.diag(G) @ self._inv_diag)
        if self._chol is not None:
            return float(np.einsum("ij,ij->", G, self.pinv()))
        GV = G @ self._V
        return float(np.einsum("ij,ij->j", self._V, GV) @ self._inv_eig)

    def unsupported_fraction(self, G: np.ndarray) -> float:
        """``||W (I - P_A)||_F^2 / ||W||_F^2``: the share of W outside A's row space.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Q = ErrorProfile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))  # cell 2 never measured
        >>> round(Q.unsupported_fraction(np.eye(3)), 4)  # identity:3: one of three unit queries
        0.3333
        """
        if self.full_rank or (not self._rows_only and self._null.shape[1] == 0):
            return 0.0
        tr = float(np.trace(G))
        if tr <= 0:
            return 0.0
        if self._rows_only:  # trace(G) minus the part inside the row space (rounding ~ eps trace(G), far below SUPPORT_RTOL)
            return max(0.0, tr - float(np.einsum("ij,ij->", self._V, G @ self._V))) / tr
        return float(np.einsum("ij,ij->", self._null, G @ self._null)) / tr

    def unsupported_query(self, workload: Workload) -> tuple[int, float]:
        """The query with the largest share of its norm outside A's row space.

        Returns ``(i, ||w_i (I - P_A)||^2 / ||w_i||^2)``; ``(-1, 0.0)`` when A has
        full column rank. Raises `InputError` when W has too many rows to enumerate.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Q = ErrorProfile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))  # cell 2 never measured
        >>> i, share = Q.unsupported_query(prefix(3))  # prefix [0, 2] has one of its 3 cells unmeasured
        >>> i, round(share, 4)
        (2, 0.3333)
        """
        if self.full_rank or (not self._rows_only and self._null.shape[1] == 0):
            return -1, 0.0
        # rows only: a query's squared norm minus its part inside the row space
        basis = self._V if self._rows_only else self._null
        if isinstance(workload, ExplicitWorkload):  # rows at hand: O(nnz k) for k basis directions
            W = workload.matrix()
            part = np.einsum("ij,ij->i", *(2 * [np.asarray(W @ basis)]))
            norms = np.asarray(W.multiply(W).sum(axis=1)).ravel()
        else:  # structured rows (intervals, products): their quadratic forms
            part = workload.row_space_norms(basis)
            norms = workload.diagonal_query_variances(np.ones(self.n))
        outside = np.maximum(norms - part, 0.0) if self._rows_only else part
        share = np.divide(outside, norms, out=np.zeros_like(outside), where=norms > 0)
        i = int(np.flatnonzero(share >= share.max() - 1e-12)[0])  # the first of ties (shares are computed to rounding)
        return i, float(share[i])

    def support_gap(self, G: np.ndarray, workload: Workload | None = None) -> str | None:
        """How A fails to support the workload with Gram G (None when it supports it).

        The Gram test bounds the share of ``||W||_F^2`` outside A's row space;
        given the `workload` itself, each query is also tested on its own, so a
        query much smaller than the others cannot go unsupported unnoticed
        (skipped when W has too many rows to enumerate).

        Parameters
        ----------
        G : ndarray, shape (n, n)
            The workload's Gram matrix.
        workload : Workload, optional
            The workload, for the per-query test.

        Returns
        -------
        str or None
            The reason, for an error message.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Q = ErrorProfile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))  # cell 2 never measured
        >>> print(Q.support_gap(prefix(3).gram(), prefix(3)))  # cell 2 is in 1 of the 1 + 2 + 3 = 6 prefix entries
        0.167 of ||W||_F^2 lies outside the strategy's numerical row space
        >>> Q.support_gap(np.diag([1.0, 1.0, 0.0])) is None  # identity on cells 0 and 1 only
        True
        """
        frac = self.unsupported_fraction(G)
        if frac > SUPPORT_RTOL:
            return f"{frac:.3g} of ||W||_F^2 lies outside the strategy's numerical row space"
        if workload is None:
            return None
        try:
            i, share = self.unsupported_query(workload)
        except InputError:  # too many queries to enumerate: the Gram test stands
            return None
        if share > SUPPORT_RTOL:
            return f"{share:.3g} of query {i}'s squared norm lies outside the strategy's numerical row space"
        return None

    def check_workload(self, workload: Workload, what: str = "strategy") -> np.ndarray | None:
        """`check_support` against ``workload``, forming its Gram only for a rank-deficient A.

        Returns the Gram matrix it formed (for `workload_trace`), or None: a
        strategy of full column rank supports every workload.

        Parameters
        ----------
        workload : Workload
        what : str
            Names the strategy in the error message.

        Examples
        --------
        >>> from strategy_opt.workload import prefix, total
        >>> ErrorProfile(np.eye(3)).check_workload(prefix(3)) is None  # full rank: nothing to check
        True
        >>> ErrorProfile(np.ones((1, 3))).check_workload(total(3)).tolist()  # the total query is measured itself
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
        """
        if self.full_rank:
            return None
        G = workload.gram()
        self.check_support(G, what=what, workload=workload)
        return G

    def check_support(self, G: np.ndarray, what: str = "strategy", workload: Workload | None = None, hint: str = ADD_ROWS) -> None:
        """Raise `SupportError` unless A supports the workload with Gram G (the test of `support_gap`).

        Parameters
        ----------
        G : ndarray, shape (n, n)
            The workload's Gram matrix.
        what : str
            Names the strategy in the message.
        workload : Workload, optional
            The workload, for the per-query test of `support_gap`.
        hint : str
            Ends the message: what to do about it.

        Examples
        --------
        >>> ErrorProfile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])).check_support(np.eye(3))
        Traceback (most recent call last):
        ...
        strategy_opt.exceptions.SupportError: strategy does not support the workload (W A+ A != W: 0.333 of ||W||_F^2 ...
        """
        gap = self.support_gap(G, workload)
        if gap is not None:
            raise SupportError(f"{what} does not support the workload (W A+ A != W: {gap}{_CUTOFF}); {hint}")


def check_columns(A, workload: Workload) -> None:
    """Refuse a strategy whose number of columns is not the workload's number of cells.

    Parameters
    ----------
    A : matrix-like with a ``shape``
    workload : Workload

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> check_columns(np.eye(3), prefix(4))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: strategy has 3 columns but the workload has 4 cells
    """
    if A.shape[1] != workload.n:
        raise InputError(f"strategy has {A.shape[1]} columns but the workload has {workload.n} cells")


def _kron_parts(A, workload: Workload):
    """Match a Kronecker strategy with a (union of) Kronecker workload(s); None if impossible."""
    if not isinstance(A, KroneckerMatrix):
        return None
    parts = workload.parts if isinstance(workload, Union) else [workload]
    weights = workload.weights if isinstance(workload, Union) else np.ones(1)
    doms = [f.shape[1] for f in A.factors]
    out = []
    for w, part in zip(weights, parts):
        factors = _factors_on(part, tuple(workload.domain))
        if [f.n for f in factors] != doms:
            return None
        out.append((w, factors))
    return out


@dataclass(frozen=True)
class KroneckerSupport:
    """A Kronecker strategy matched with a (union of) Kronecker workload(s), each factor's support checked.

    Attributes
    ----------
    profiles : list of ErrorProfile
        One per strategy factor.
    parts : list of (float, list of Workload)
        The weight and the factor workloads of each Kronecker term of the workload.

    Examples
    --------
    >>> from strategy_opt.workload import kronecker, prefix
    >>> s = check_kronecker_support(KroneckerMatrix([np.eye(2), np.eye(3)]), kronecker(prefix(2), prefix(3)))
    >>> len(s.profiles), [(float(w), [f.spec for f in fs]) for w, fs in s.parts]
    (2, [(1.0, ['prefix:2', 'prefix:3'])])
    """

    profiles: list  # ErrorProfile of each strategy factor
    parts: list  # (weight, factor workloads) of each Kronecker term of the workload (`_kron_parts`)


def check_kronecker_support(A, workload: Workload) -> KroneckerSupport | None:
    """A and the workload as matching Kronecker products, each factor's support checked (`InputError` if missing); None if they are not.

    Factor by factor the check needs only the factors' small Gram matrices, so
    it covers product domains too large for the n x n check (and each factor
    supporting its factor workload makes the product support the product).

    Parameters
    ----------
    A : KroneckerMatrix or other strategy
        Anything but a `KroneckerMatrix` gives None.
    workload : Workload
        A Kronecker product, or a union of them, over A's factor domains.

    Returns
    -------
    KroneckerSupport or None
        The factors' `ErrorProfile` and the workload's terms, for `kronecker_query_variances`.

    Raises
    ------
    SupportError
        (an `InputError`) when a strategy factor does not support its factor workload.

    Examples
    --------
    >>> from strategy_opt.workload import kronecker, prefix
    >>> s = check_kronecker_support(KroneckerMatrix([np.eye(2), np.eye(3)]), kronecker(prefix(2), prefix(3)))
    >>> len(s.profiles), check_kronecker_support(np.eye(6), prefix(6))
    (2, None)
    """
    kparts = _kron_parts(A, workload)
    if kparts is None:
        return None
    profiles = [ErrorProfile(f) for f in A.factors]
    for _, factors in kparts:
        for prof, f in zip(profiles, factors):
            prof.check_support(f.gram(), workload=f)
    return KroneckerSupport(profiles, kparts)


def kronecker_query_variances(A, workload: Workload, support: KroneckerSupport | None = None) -> np.ndarray | None:
    """``w_i (A^T A)^+ w_i^T`` for every query of a (union of) Kronecker workload(s) matching a Kronecker strategy.

    A query of a product workload is a product of factor queries, so its
    variance is the product of the factors' query variances: for each part,
    ``w^2 kron_j (W_j (A_j^T A_j)^+ W_j^T)_ii``, in the workload's row order,
    from the factors' small matrices alone. ``support`` is what
    `check_kronecker_support` returned, if the caller has it. None when A and
    the workload are not such products.

    Parameters
    ----------
    A : KroneckerMatrix
        The strategy (anything else gives None).
    workload : Workload
        A Kronecker product, or a union of them, over A's factor domains.
    support : KroneckerSupport, optional
        What `check_kronecker_support` returned for the same pair.

    Returns
    -------
    ndarray, shape (m,) or None
        Unit variances (no sensitivity factor).

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.workload import kronecker, prefix
    >>> A = KroneckerMatrix([np.eye(2), np.eye(3)])
    >>> kronecker_query_variances(A, kronecker(prefix(2), prefix(3))).tolist()  # (1, 2) x (1, 2, 3)
    [1.0, 2.0, 3.0, 2.0, 4.0, 6.0]
    """
    support = support or check_kronecker_support(A, workload)
    if support is None:
        return None
    parts = []
    for w, factors in support.parts:
        v = np.full(1, float(w) ** 2)
        for prof, f in zip(support.profiles, factors):
            v = np.kron(v, prof.query_variances(f))
        parts.append(v)
    return np.concatenate(parts)


def unit_error(A, workload: Workload, p: int, profile: ErrorProfile | None = None) -> float:
    """Unit total squared error ``E_p(A; W) = ||A||_p^2 trace(W^T W (A^T A)^+)``.

    The true value for every workload, ``inf`` when it exceeds float64 (all-predicate
    workloads past about 1000 cells: use `error_report`'s ``unit_total_squared_error_log10``);
    the arguments are those of `scaled_unit_error`, which it multiplies by ``exp(workload.log_scale)``.

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy.
    workload : Workload
        The workload W.
    p : {1, 2}
        Sensitivity norm: 1 for epsilon-DP, 2 for (epsilon, delta)-DP.
    profile : ErrorProfile, optional
        ``ErrorProfile(A)`` if the caller has it.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.workload import all_predicate
    >>> unit_error(np.eye(4), all_predicate(4), 1)  # 16 predicates, each cell in 8 of them
    32.0
    """
    E = float(scaled_unit_error(A, workload, p, profile))
    if workload.log_scale == 0 or E == 0:
        return E
    if math.log(E) + workload.log_scale >= 709:
        return math.inf
    return E * math.exp(workload.log_scale)


def scaled_unit_error(A, workload: Workload, p: int, profile: ErrorProfile | None = None) -> float:
    """Unit total squared error ``E_p(A; W) = ||A||_p^2 trace(W^T W (A^T A)^+)`` divided by ``exp(workload.log_scale)``.

    Never overflows: the Gram of an all-predicate workload is kept divided by
    ``exp(log_scale)``, and so is this error (the same for every other workload).

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy (a structured one analysed per factor or per eigenspace
        of the marginal algebra when the workload matches its structure).
    workload : Workload
        The workload W (its Gram matrix is used).
    p : {1, 2}
        Sensitivity norm: 1 for epsilon-DP, 2 for (epsilon, delta)-DP.
    profile : ErrorProfile, optional
        ``ErrorProfile(A)`` if the caller has it (saves factoring ``A^T A`` again).

    Returns
    -------
    float
        E_p divided by ``exp(workload.log_scale)``.

    Raises
    ------
    InputError
        If A does not support W or the shapes do not match.

    Examples
    --------
    all-predicate:4 keeps its Gram divided by ``exp(log_scale) = 4``: the identity's 32 (`unit_error`) is 8 here.

    >>> from strategy_opt.workload import all_predicate
    >>> W = all_predicate(4)
    >>> round(math.exp(W.log_scale), 12), scaled_unit_error(np.eye(4), W, 1)
    (4.0, 8.0)
    """
    A, workload = as_strategy_matrix(A), _check_workload(workload)
    check_columns(A, workload)
    kparts = _kron_parts(A, workload)
    if kparts is not None:
        profiles = [ErrorProfile(f) for f in A.factors]
        total = 0.0
        for w, factors in kparts:
            term = w**2
            for prof, f in zip(profiles, factors):
                G = f.gram()
                prof.check_support(G, workload=f)
                term *= prof.trace_with(G)
            total += term
        return sensitivity(A, p) ** 2 * total
    if isinstance(A, MarginalsMatrix):
        trace = marginals_trace(A, workload)  # None for a workload that is not marginals on A's domain
        if trace is not None:
            return sensitivity(A, p) ** 2 * trace
    A = _analysable_rows(A)
    prof = profile if profile is not None else ErrorProfile(A)
    G = prof.check_workload(workload)
    return sensitivity(A, p) ** 2 * prof.workload_trace(workload, G)


def expected_total_error(A, workload: Workload, privacy) -> float:
    """Expected total squared error ``E_p * c`` of answering W through A under ``privacy``.

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy.
    workload : Workload
        The workload W.
    privacy : PureDP or ApproxDP
        The notion and budget; ``c = privacy.noise_variance_factor()`` and ``p = privacy.p``.

    Returns
    -------
    float

    Examples
    --------
    The identity on prefix:4 has ``E = 1 + 2 + 3 + 4 = 10``; Laplace noise at epsilon 1 has ``c = 2``:

    >>> from strategy_opt.privacy import PureDP
    >>> from strategy_opt.workload import prefix
    >>> expected_total_error(np.eye(4), prefix(4), PureDP(1.0))
    20.0
    """
    check_privacy(privacy)
    return unit_error(A, workload, privacy.p) * privacy.noise_variance_factor()


def per_query_variances(A, workload: Workload, p: int, noise_variance_factor: float = 1.0) -> np.ndarray:
    """Variance of each workload answer: ``c ||A||_p^2 w_i (A^T A)^+ w_i^T``.

    With the default ``noise_variance_factor = 1`` these are unit variances
    (they sum to `unit_error`).

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy.
    workload : Workload
        The workload W.
    p : {1, 2}
        Sensitivity norm: 1 for epsilon-DP, 2 for (epsilon, delta)-DP.
    noise_variance_factor : float
        ``c = privacy.noise_variance_factor()`` for the variances of a release.

    Returns
    -------
    ndarray, shape (m,)
        In the workload's row order.

    Examples
    --------
    Through the identity a prefix query's variance is its length:

    >>> from strategy_opt.workload import prefix
    >>> per_query_variances(np.eye(4), prefix(4), 1).tolist()
    [1.0, 2.0, 3.0, 4.0]
    >>> per_query_variances(np.eye(4), prefix(4), 1, noise_variance_factor=2.0).tolist()  # PureDP(1.0)
    [2.0, 4.0, 6.0, 8.0]
    """
    A, workload = as_strategy_matrix(A), _check_workload(workload)
    check_columns(A, workload)
    # structured strategies on matching workloads: per marginal, or per factor, at any size
    variances = marginals_query_variances(A, workload) if isinstance(A, MarginalsMatrix) else kronecker_query_variances(A, workload)
    if variances is not None:
        return noise_variance_factor * sensitivity(A, p) ** 2 * variances
    A = _analysable_rows(A)
    prof = ErrorProfile(A)
    prof.check_workload(workload)
    return noise_variance_factor * sensitivity(A, p) ** 2 * prof.query_variances(workload)


def supports(A, workload: Workload) -> bool:
    """Whether A supports W (``W A^+ A = W`` up to `defaults.SUPPORT_RTOL`).

    The test of `ErrorProfile.check_support`: the share of ``||W||_F^2``
    outside A's row space, and each query's own share, so that one small
    query left unmeasured is noticed.

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or MarginalsMatrix, shape (p, n)
        The strategy.
    workload : Workload
        The workload W.

    Returns
    -------
    bool

    Raises
    ------
    InputError
        If A's columns and W's cells differ in number.

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.workload import from_matrix
    >>> W = from_matrix([[1e4, 0, 0], [0, 0, 1e4], [0, 1, 0]])
    >>> supports(np.array([[1.0, 0, 0], [0, 0, 1]]), W)
    False
    """
    A, workload = as_strategy_matrix(A), _check_workload(workload)
    check_columns(A, workload)
    A = _analysable_rows(A)
    prof = ErrorProfile(A)
    return prof.full_rank or prof.support_gap(workload.gram(), workload) is None


#: Past the dense limit, a workload of at most this many queries gets its spectrum from ``W W^T`` (its rows formed once).
ROW_GRAM_MAX_QUERIES = 4096


def _log_nuclear(workload: Workload) -> float:
    """log of ``trace((W^T W)^{1/2})`` for the rescaled Gram (log_scale excluded)."""
    if isinstance(workload, Kronecker):
        return float(sum(_log_nuclear(f) for f in workload.factors))
    try:
        ev, counts = workload.gram_spectrum()
    except InputError:  # past the dense limit: few queries still give the spectrum from the m x m W W^T
        if workload.m > ROW_GRAM_MAX_QUERIES or workload.log_scale != 0:
            raise
        M = workload.matrix()
        ev = np.clip(np.linalg.eigvalsh((M @ M.T).toarray() if sp.issparse(M) else M @ M.T), 0.0, None)
        counts = np.ones(ev.size)
    ev = np.where(ev > EIG_RTOL * ev.max(), ev, 0.0) if ev.size else ev
    s = float(counts @ np.sqrt(ev))
    return math.log(s) if s > 0 else -math.inf


def log_svd_bound(workload: Workload) -> float:
    """Natural log of the SVD bound, including ``workload.log_scale``; never overflows.

    Examples
    --------
    >>> import math
    >>> from strategy_opt.workload import identity
    >>> log_svd_bound(identity(4)) == math.log(4.0)  # (1 + 1 + 1 + 1)^2 / 4
    True
    """
    workload = _check_workload(workload)
    return 2.0 * _log_nuclear(workload) + workload.log_scale - math.log(workload.n)


def log_svd_bound_or_reason(workload: Workload) -> tuple[float, str | None]:
    """``(log SVD bound, None)``, or ``(-inf, why)`` when the workload's spectrum needs a dense matrix it cannot have.

    A union of products whose factors do not commute, with more queries than `ROW_GRAM_MAX_QUERIES`
    (``all-range:256*total:256+total:256*all-range:256``), has no spectrum past the dense limit;
    its strategies are still built, analysed per factor and run, without the bound.

    Examples
    --------
    >>> from strategy_opt.workload import identity
    >>> bound, why = log_svd_bound_or_reason(identity(4))
    >>> round(math.exp(bound), 12), why
    (4.0, None)
    """
    try:
        return log_svd_bound(workload), None
    except InputError as exc:
        reason = " ".join(str(exc).split())
        log.warning("no SVD lower bound: %s", reason)
        return -math.inf, f"SVD bound: {reason}"


def svd_bound(workload: Workload) -> float:
    """SVD lower bound ``(sum_i sqrt(lambda_i(W^T W)))^2 / n`` (Li 2013, Def. 4.3, Thm 4.1).

    A lower bound on E_2 (and hence on E_1) of every strategy. Returns ``inf``
    when the value exceeds float64 range; use `log_svd_bound` then.

    Eigenvalues of ``W^T W`` below ``EIG_RTOL`` (1e-10) times the largest count
    as zero, the rank cutoff the error analysis uses: on a rank-deficient
    workload the rounding-level eigenvalues would otherwise add up to
    ``n sqrt(eps)`` of the largest singular value and could lift the bound above
    the optimum. On a workload whose singular values span more than 1e5 the
    value is therefore slightly below the formula (still a bound): with rows
    scaled from 1e-3 to 1e2, 2.4e-5 relative.

    Examples
    --------
    >>> from strategy_opt.workload import from_matrix
    >>> round(svd_bound(from_matrix([[1, 1, 1], [0, 1, 1]])), 4)
    2.6095
    """
    v = log_svd_bound(workload)
    return math.exp(v) if v < 709.0 else math.inf
