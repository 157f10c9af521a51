"""Workloads: sets of linear counting queries over an n-cell histogram.

A workload W is an m x n matrix, one query per row. The total error of every
matrix-mechanism strategy depends on W only through its Gram matrix
``G = W^T W``, so structured workloads compute ``gram()`` in closed form (or
from Kronecker factors) without ever building W. ``matrix()`` builds W when it
is small enough; ``operator()`` gives an implicit ``LinearOperator``;
``query_variances(M)`` gives ``diag(W M W^T)`` for a symmetric n x n matrix M
(the per-query error profile) using the structure where there is one.

Cells of multi-dimensional domains are indexed in row-major (C) order.

Examples
--------
>>> from strategy_opt.workload import all_range
>>> W = all_range(4)
>>> W.shape
(10, 4)
>>> W.gram()[0].tolist()
[4.0, 3.0, 2.0, 1.0]
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from functools import cached_property, reduce
from itertools import combinations
from typing import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .defaults import EIGVALS_MAX_DIM, MAX_CELLS, MAX_DENSE_N, MAX_FLOAT_SQUARED, MAX_MATRIX_ENTRIES, SUPPORT_PROBE_MAX_QUERIES, TINY_GRAM
from .exceptions import InputError
from .resources import format_bytes, require_memory

log = logging.getLogger("strategy_opt")

__all__ = [
    "weighted_gram",
    "gram_unit",
    "Workload",
    "ExplicitWorkload",
    "IntervalWorkload",
    "AllPredicate",
    "Kronecker",
    "Union",
    "identity",
    "total",
    "prefix",
    "all_range",
    "all_predicate",
    "random_range",
    "marginals",
    "kronecker",
    "union",
    "from_matrix",
]


def _check_dense_n(n: int, what: str) -> None:
    if n > MAX_DENSE_N:
        raise InputError(
            f"{what} needs a dense {n}x{n} matrix ({format_bytes(8.0 * n * n)}); "
            f"domains above {MAX_DENSE_N} cells are not supported for this operation"
        )


def _require_dense(n: int, what: str, copies: float = 1.0, spec: str = "") -> None:
    """Refuse (`InputError`) before allocating ``copies`` dense n x n float64 matrices that cannot fit.

    Above ``defaults.MAX_DENSE_N`` cells always (`_check_dense_n`); otherwise
    when the bytes exceed the available memory
    (`strategy_opt.resources.require_memory`, ``STRATEGY_OPT_MEMORY``).
    """
    if spec:
        what = f"{what} of workload {spec!r}"
    _check_dense_n(n, what)
    one = 8.0 * float(n) ** 2
    require_memory(
        copies * one,
        f"{what} ({n} cells, {copies:g} dense {n}x{n} matrices of {format_bytes(one)})",
        "use a smaller domain or a structured method (identity, hierarchical, wavelet)",
    )


class Workload(ABC):
    """A set of m linear queries over n cells.

    Attributes
    ----------
    spec : str
        Its label: the SPEC (see ``strategy_opt.spec``) that rebuilds it for workloads
        made from one (or by the factories here, unions without weights included);
        a label only for workloads made in Python from a matrix (``"matrix"``) or
        as a weighted union (``"union(2*(prefix:4),1*(identity:4))"``), which no
        SPEC writes: their strategy files say so, and ``error``/``run`` ask for
        ``--force``.
    domain : tuple of int
        The shape of the data domain; ``n = prod(domain)``.
    log_scale : float
        Natural log of a positive factor the Gram matrix is scaled by: the true
        Gram is ``exp(log_scale) * gram()``. Zero except for workloads whose
        Gram would overflow float64 (e.g. all predicates on 1024 cells).

    Examples
    --------
    Workloads are built by the factory functions below (or `strategy_opt.spec.parse_spec`):

    >>> W = prefix(3)
    >>> isinstance(W, Workload), W.spec, W.domain, W.log_scale
    (True, 'prefix:3', (3,), 0.0)
    """

    spec: str
    domain: tuple[int, ...]
    log_scale: float = 0.0

    @property
    def n(self) -> int:
        """Number of cells (columns).

        Examples
        --------
        >>> marginals((2, 3), 1).n
        6
        """
        return int(np.prod(self.domain))

    @property
    @abstractmethod
    def m(self) -> int:
        """Number of queries (rows).

        Examples
        --------
        >>> all_range(4).m  # 4 * 5 / 2 intervals
        10
        """

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)``.

        Examples
        --------
        >>> prefix(4).shape
        (4, 4)
        """
        return (self.m, self.n)

    @abstractmethod
    def gram(self) -> np.ndarray:
        """Dense n x n Gram matrix ``W^T W`` (divided by ``exp(log_scale)``).

        May be a cached, read-only array shared between calls (`ExplicitWorkload`
        and `Union` compute it once): copy it before modifying it in place.

        Examples
        --------
        >>> prefix(3).gram().tolist()  # entry (i, j): prefixes containing both cells, 3 - max(i, j)
        [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
        """

    @abstractmethod
    def matrix(self) -> sp.csr_matrix:
        """The m x n workload matrix as a sparse CSR matrix.

        Raises
        ------
        InputError
            If the matrix would exceed ``defaults.MAX_MATRIX_ENTRIES`` entries.

        Examples
        --------
        >>> prefix(3).matrix().toarray().tolist()
        [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
        """

    def matvec(self, x) -> np.ndarray:
        """Answers ``W x`` for a data vector x of length n (shape ``(n,)``, or ``(n, 1)`` giving ``(m, 1)``).

        Raises
        ------
        InputError
            If x is not a vector of n numbers (another length, or a matrix).

        Examples
        --------
        >>> prefix(3).matvec([1.0, 2.0, 3.0]).tolist()
        [1.0, 3.0, 6.0]
        """
        return self._checked_product(x, self.n, "data vector x", "cell", self._matvec)

    def rmatvec(self, y) -> np.ndarray:
        """``W^T y`` for a vector y of length m (shape ``(m,)``, or ``(m, 1)`` giving ``(n, 1)``).

        Examples
        --------
        >>> prefix(3).rmatvec([1.0, 0.0, 1.0]).tolist()
        [2.0, 1.0, 1.0]
        """
        return self._checked_product(y, self.m, "vector y", "query", self._rmatvec)

    def gram_matvec(self, v) -> np.ndarray:
        """``W^T W v`` for a vector v of length n (shape ``(n,)``, or ``(n, 1)`` giving ``(n, 1)``).

        By the workload's own products (``W^T (W v)``), or a closed form where one
        avoids the m answers (all ranges: O(n), not O(n^2)).

        Examples
        --------
        >>> all_range(3).gram_matvec([1.0, 0.0, 0.0]).tolist()  # the first column of W^T W
        [3.0, 2.0, 1.0]
        """
        return self._checked_product(v, self.n, "vector v", "cell", self._gram_matvec)

    def _gram_matvec(self, v: np.ndarray) -> np.ndarray:
        """``W^T W v`` for a float vector of shape ``(n,)`` (checked by `gram_matvec`)."""
        return self._rmatvec(self._matvec(v))

    def gram_matvec_cost(self) -> float:
        """Operations of one `gram_matvec` (an estimate, to choose between it and the dense Gram matrix); inf if unknown.

        Examples
        --------
        >>> all_range(1000).gram_matvec_cost() < 1000**2 < 8 * all_range(1000).m  # all ranges: a closed form, not the m answers
        True
        """
        return math.inf

    @staticmethod
    def _checked_product(v, size: int, what: str, unit: str, apply) -> np.ndarray:
        """``apply`` on ``v`` as a float vector of ``size`` entries; `InputError` for another shape (never a truncated product)."""
        try:
            a = np.asarray(v, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{what} must be numbers, got {type(v).__name__}") from None
        if a.shape == (size, 1):
            return apply(a.ravel()).reshape(-1, 1)
        if a.shape != (size,):
            raise InputError(f"{what} must have {size} entries (one per {unit}), got shape {a.shape}")
        return apply(a)

    @abstractmethod
    def _matvec(self, x: np.ndarray) -> np.ndarray:
        """``W x`` for a float vector x of shape ``(n,)`` (checked by `matvec`)."""

    @abstractmethod
    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        """``W^T y`` for a float vector y of shape ``(m,)`` (checked by `rmatvec`)."""

    def row_space_sample(self, rng: np.random.Generator) -> np.ndarray | None:
        """A random vector ``W^T g`` of W's row space (g standard normal), or None when m is too large to draw g.

        With probability one it lies outside any subspace that does not contain
        the whole row space, which makes it a probe of the support test on
        domains too large for the n x n one (`strategy_opt.executor.probe_support`).

        Examples
        --------
        >>> v = prefix(3).row_space_sample(np.random.default_rng(0))
        >>> v.shape
        (3,)
        """
        if self.m > SUPPORT_PROBE_MAX_QUERIES:
            return None
        return self.rmatvec(rng.standard_normal(self.m))

    def operator(self) -> LinearOperator:
        """Implicit ``LinearOperator`` for W (never builds the matrix).

        Examples
        --------
        >>> (prefix(4).operator() @ np.ones(4)).tolist()
        [1.0, 2.0, 3.0, 4.0]
        """
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec, dtype=float)

    def query_variances(self, M: np.ndarray) -> np.ndarray:
        """Per-query quadratic forms ``w_i M w_i^T`` for every row w_i.

        Parameters
        ----------
        M : ndarray, shape (n, n)
            Symmetric matrix, typically the error profile ``(A^T A)^+``.

        Returns
        -------
        ndarray, shape (m,)

        Examples
        --------
        With ``M = I`` (the identity strategy's profile) a range's variance is its length:

        >>> prefix(3).query_variances(np.eye(3)).tolist()
        [1.0, 2.0, 3.0]
        """
        W = self.matrix()
        out = np.empty(self.m)
        step = max(1, 4_000_000 // max(self.n, 1))
        for s in range(0, self.m, step):
            block = W[s : s + step]
            out[s : s + step] = np.asarray(block.multiply(block @ M).sum(axis=1)).ravel()
        return out

    def row_space_norms(self, V: np.ndarray) -> np.ndarray:
        """Per-query ``||w_i V||^2`` for an n x r matrix V (`query_variances` of ``V V^T``, on the same scale).

        By ``query_variances(V V^T)``; Kronecker products whose matrix is cheap to
        build, and unions of them, multiply their sparse rows by V instead
        (O(nnz r), not O(nnz n)): the support test of a strategy of few rows
        (`strategy_opt.error.ErrorProfile`) asks for it on marginal workloads.

        Examples
        --------
        >>> prefix(3).row_space_norms(np.array([[1.0], [0.0], [0.0]])).tolist()  # every prefix contains cell 0
        [1.0, 1.0, 1.0]
        """
        return self.query_variances(V @ V.T)

    def gram_diagonal(self) -> np.ndarray:
        """``diag(W^T W)`` (divided by ``exp(log_scale)``): the cells' squared column norms.

        Interval, explicit, Kronecker and union workloads give it in O(nnz + n)
        without the n x n Gram matrix (the error analysis of a strategy with
        disjoint columns, such as the identity, needs nothing more).

        Examples
        --------
        >>> prefix(4).gram_diagonal().tolist()
        [4.0, 3.0, 2.0, 1.0]
        """
        return np.diag(self.gram()).copy()

    def diagonal_query_variances(self, d: np.ndarray) -> np.ndarray:
        """Per-query quadratic forms ``w_i diag(d) w_i^T = sum_j w_ij^2 d_j`` (`query_variances` of a diagonal M).

        Examples
        --------
        >>> prefix(3).diagonal_query_variances(np.array([1.0, 2.0, 4.0])).tolist()
        [1.0, 3.0, 7.0]
        """
        d = np.asarray(d, dtype=float)
        W = self.matrix()
        return np.asarray(W.multiply(W) @ d).ravel()

    def gram_eigh(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigendecomposition ``(lam, V)`` of ``gram()``, ascending, V orthonormal columns.

        Closed forms for all-range and prefix (sine bases), Kronecker products
        of the factors' decompositions for Kronecker workloads.

        Examples
        --------
        >>> lam, V = prefix(2).gram_eigh()  # [[2, 1], [1, 1]]: (3 -+ sqrt 5) / 2
        >>> np.round(lam, 4).tolist()
        [0.382, 2.618]
        >>> bool(np.allclose(V @ np.diag(lam) @ V.T, prefix(2).gram()))
        True
        """
        _require_dense(self.n, "the Gram eigendecomposition", 3, self.spec)
        lam, V = np.linalg.eigh(self.gram())
        return lam, V

    def gram_eigvals(self) -> np.ndarray:
        """Eigenvalues of ``gram()`` (ascending).

        A workload with fewer queries than cells takes them from the m x m
        ``W W^T`` (same non-zero spectrum) when it provides one: for 2000
        ranges over 4096 cells that is an eighth of the work.

        Examples
        --------
        >>> total(3).gram_eigvals().round(12).tolist()  # the all-ones Gram J: n once, then zeros
        [0.0, 0.0, 3.0]
        """
        dim = min(self.m, self.n)
        if dim > EIGVALS_MAX_DIM:  # memory may allow it, but the solve takes many minutes in one LAPACK call
            raise InputError(
                f"the Gram eigenvalues of workload {self.spec!r} need a dense {dim}x{dim} symmetric eigenvalue problem "
                f"(more than {EIGVALS_MAX_DIM}: tens of minutes, uninterruptible); not computed"
            )
        if self.m < self.n:
            C = self._row_gram()
            if C is not None:
                return np.concatenate([np.zeros(self.n - self.m), np.clip(np.linalg.eigvalsh(C), 0.0, None)])
        _require_dense(self.n, "the Gram eigenvalues", 2, self.spec)
        return np.linalg.eigvalsh(self.gram())

    def gram_spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigenvalues of ``gram()`` and their multiplicities: ``(gram_eigvals(), ones)`` unless grouped in closed form.

        Unions of aligned Kronecker products (marginals) give one value per
        eigen-class, so ``marginals:400x400x400:2`` needs 8 numbers, not 6.4e7.

        Examples
        --------
        >>> from strategy_opt.spec import parse_spec
        >>> values, counts = parse_spec("marginals:3x4:1").gram_spectrum()
        >>> sorted(zip(values.tolist(), counts.tolist()))
        [(0.0, 6), (3.0, 3), (4.0, 2), (7.0, 1)]
        """
        ev = self.gram_eigvals()
        return ev, np.ones(ev.size, dtype=np.int64)

    def _row_gram(self) -> np.ndarray | None:
        """``W W^T`` (divided by ``exp(log_scale)``) when it is cheap to form; None otherwise."""
        return None

    def frobenius_sq(self) -> float:
        """``||W||_F^2 = trace(W^T W)`` (divided by ``exp(log_scale)``), from `gram_diagonal` (no n x n Gram where that has a closed form).

        Examples
        --------
        >>> prefix(4).frobenius_sq()  # 1 + 2 + 3 + 4 ones
        10.0
        """
        return float(self.gram_diagonal().sum())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec!r} shape={self.shape}>"


#: Cost model choosing how `ExplicitWorkload` forms ``M^T M`` from a sparse M (m x n,
#: r_k non-zeros in row k), in units of one multiply-add of the dense product:
#: the sparse product costs about ``_SPARSE_PAIR_COST`` per term of ``sum_k r_k^2``
#: plus ``_SPARSE_ENTRY_COST`` per stored entry of the result (at most
#: ``min(n^2, sum_k r_k^2)``, the bound used), the dense BLAS product (syrk) 1 per
#: multiply-add, ``m n^2 / 2``. Measured with OpenBLAS (1 and 2 threads) on
#: 1024 and 4096 cells, ranges and uniform random patterns, densities 0.3%-35%:
#: about 4e-9 s per pair, 4.5e-8 s per entry and 0.5e-10-1e-10 s per multiply-add.
_SPARSE_PAIR_COST = 40.0
_SPARSE_ENTRY_COST = 450.0

#: Entries of the dense block of rows densified at a time by the dense route.
_GRAM_BLOCK_ENTRIES = 1 << 25


def _dense_product_cheaper(M: sp.csr_matrix) -> bool:
    """True when ``M^T M`` is cheaper as a dense BLAS product than as a sparse one (cost model above)."""
    m, n = M.shape
    r = np.diff(M.indptr).astype(float)
    pairs = float(r @ r)
    sparse_cost = _SPARSE_PAIR_COST * pairs + _SPARSE_ENTRY_COST * min(float(n) * n, pairs)
    return 0.5 * m * float(n) * n < sparse_cost


def gram_unit(G: np.ndarray) -> float:
    """The mean diagonal of a Gram matrix (1.0 if it is not positive and finite).

    Unit errors are linear in the Gram, so optimisers work on ``G / gram_unit(G)``
    (entries of order 1) and report values times the unit: step sizes, smoothing
    and absolute tolerances tuned for order 1 failed on workloads scaled by 1e30 .. 1e90.

    Examples
    --------
    >>> gram_unit(prefix(4).gram())  # (4 + 3 + 2 + 1) / 4
    2.5
    >>> gram_unit(np.zeros((2, 2)))
    1.0
    """
    unit = float(np.trace(G)) / G.shape[0]
    return unit if math.isfinite(unit) and unit > 0 else 1.0


def weighted_gram(workload: "Workload", weights: np.ndarray) -> np.ndarray:
    """``W^T diag(weights) W`` from the query rows, by the cheaper dense or sparse product (`_cross_product`).

    Parameters
    ----------
    workload : Workload
        Its `matrix` is formed (mind the size).
    weights : array_like, shape (m,)
        One non-negative weight per query (row).

    Returns
    -------
    ndarray, shape (n, n)

    Examples
    --------
    >>> weighted_gram(prefix(2), [1.0, 4.0]).tolist()  # 1 * [1, 0]^T [1, 0] + 4 * [1, 1]^T [1, 1]
    [[5.0, 4.0], [4.0, 4.0]]
    """
    if isinstance(workload, IntervalWorkload):
        return workload.weighted_gram(weights)
    W = sp.csr_matrix(workload.matrix(), dtype=float)
    return _cross_product(sp.csr_matrix(sp.diags(np.sqrt(np.asarray(weights, dtype=float))) @ W))


def _symmetrize_from_upper(G: np.ndarray) -> None:
    """Copy the upper triangle of the square G onto its lower triangle, in place, block by block."""
    n = G.shape[0]
    step = 512
    for s in range(0, n, step):
        e = min(n, s + step)
        G[e:, s:e] = G[s:e, e:].T
        D = G[s:e, s:e]
        low = np.tril_indices(e - s, -1)
        D[low] = D.T[low]


def _cross_product(M) -> np.ndarray:
    """Dense ``M^T M`` of a dense array or a canonical CSR matrix, by the cheaper route.

    Dense arrays go to BLAS directly (NumPy's ``M.T @ M`` is a symmetric rank-k
    update). A sparse M whose product fills in (dense-ish rows, e.g. long ranges)
    is densified in blocks of rows accumulated by ``dsyrk`` -- the sparse product
    of 2000 random ranges on 4096 cells takes 13 s, the dense one 0.5 s; a
    genuinely sparse M keeps the sparse product. Exactly symmetric either way.
    """
    if not sp.issparse(M):
        return np.ascontiguousarray(M.T @ M)
    m, n = M.shape
    if not _dense_product_cheaper(M):
        G = (M.T @ M).toarray()
        return np.ascontiguousarray(G)
    from scipy.linalg.blas import dsyrk

    G = np.zeros((n, n), order="F")
    step = max(1, _GRAM_BLOCK_ENTRIES // n)
    for s in range(0, m, step):
        B = M[s : s + step].toarray()
        # B.T is Fortran-ordered, so no copy: C <- B^T B + C in the upper triangle
        G = dsyrk(1.0, B.T, beta=1.0, c=G, trans=0, lower=0, overwrite_c=1)
    _symmetrize_from_upper(G)
    return G.T  # C-ordered view of the symmetric matrix


def _finite_gram(G: np.ndarray, spec: str, what: str = "Gram matrix W^T W") -> np.ndarray:
    """G, or `InputError` naming the workload when its entries overflowed float64."""
    if not np.all(np.isfinite(G)):
        raise InputError(
            f"the {what} of workload {spec!r} overflows float64: its entries are too large; divide the workload "
            "by a constant (a strategy's relative error does not depend on the workload's scale)"
        )
    return G


def _entry_scale_error(spec: str, size: str, measured: str) -> InputError:
    """The error for a workload whose squared entries leave float64 (``size``: 'large' or 'small')."""
    return InputError(
        f"the entries of workload {spec!r} are too {size} for float64 ({measured}): "
        f"{'divide' if size == 'large' else 'multiply'} the workload by a constant (a strategy's relative error "
        "does not depend on the workload's scale)"
    )


def _has_explicit(workload: "Workload") -> bool:
    if isinstance(workload, (Kronecker, Union)):
        return any(_has_explicit(part) for part in (workload.factors if isinstance(workload, Kronecker) else workload.parts))
    return isinstance(workload, ExplicitWorkload)


def _check_product_scale(spec: str, log10s: list[float]) -> None:
    """`InputError` when the sums of squares of a Kronecker product, or of a run of its factors (what
    computations over the factors multiply in turn), leave float64; ``log10s`` per factor, in order."""
    low, high = math.log10(TINY_GRAM), math.log10(MAX_FLOAT_SQUARED)
    total = sum(log10s)
    if not low <= total <= high:
        raise _entry_scale_error(spec, "large" if total > 0 else "small", f"sum of squares ~10^{total:.1f}, the product of its factors'")
    for i in range(len(log10s)):
        for j in range(i + 2, len(log10s) + 1):
            part = sum(log10s[i:j])
            if not low <= part <= high:
                raise InputError(
                    f"the factors {i + 1} to {j} of workload {spec!r} have a product whose sum of squares (~10^{part:.1f}) "
                    "leaves float64, though the whole product's does not: move the scale between the factors "
                    "(multiply one by a constant and divide another by it) so that each has a moderate scale"
                )


def check_entry_scale(workload: "Workload") -> None:
    """`InputError` when an explicit part's squared entries leave float64 (``||W||_F^2`` bounds every Gram entry).

    A Kronecker product with an explicit factor is also checked as a whole: its
    ``||W||_F^2`` is the product of its factors' (1e-100 prefix factors pass one by
    one, and their product's errors underflowed to exactly 0).

    Examples
    --------
    >>> check_entry_scale(from_matrix([[1.0, 2.0]]))  # passes silently
    >>> check_entry_scale(from_matrix([[1e200]]))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: the entries of workload 'matrix' are too large for float64 ...
    """
    if isinstance(workload, (Kronecker, Union)):
        for part in workload.factors if isinstance(workload, Kronecker) else workload.parts:
            check_entry_scale(part)
        if isinstance(workload, Union):  # a part's weight scales its squares by w^2 (1e200 gave inf, 1e-200 an error of 0)
            for w, part in zip(workload.weights, workload.parts):
                squares = part.frobenius_sq()
                weighted = 2 * math.log10(w) + math.log10(squares) if squares > 0 else None
                if weighted is not None and not math.log10(TINY_GRAM) <= weighted <= math.log10(MAX_FLOAT_SQUARED):
                    size = "large" if weighted > 0 else "small"
                    raise _entry_scale_error(workload.spec, size, f"part {part.spec!r} at weight {w:g}: sum of squares ~10^{weighted:.1f}")
        if isinstance(workload, Kronecker) and _has_explicit(workload):
            squares = [f.frobenius_sq() for f in workload.factors]
            if all(v > 0 for v in squares):  # an all-zero workload is refused by its own message
                _check_product_scale(workload.spec, [math.log10(v) for v in squares])
        return
    if not isinstance(workload, ExplicitWorkload):
        return
    f = workload.frobenius_sq()
    if f > MAX_FLOAT_SQUARED:
        raise _entry_scale_error(workload.spec, "large", f"sum of squares {f:.3g}")
    if f < TINY_GRAM and workload.nnz():  # a zero part of a union is allowed
        raise _entry_scale_error(workload.spec, "small", f"sum of squares {f:.3g}")


class ExplicitWorkload(Workload):
    """A workload given as an explicit (dense or sparse) matrix.

    The matrix is copied on construction and kept read-only (sparse input in
    canonical CSR form: sorted indices, duplicates summed, explicit zeros
    dropped), so the workload is immutable: changing the array it was built
    from changes nothing, and the Gram matrices are computed once and cached
    (returned read-only). Validated as in `from_matrix`: complex, ragged,
    non-numeric or non-finite matrices and bad domains raise `InputError`.

    Parameters
    ----------
    W : array_like or scipy.sparse matrix, shape (m, n)
        The workload matrix, one query per row (real and finite).
    spec : str, default "matrix"
        The SPEC (label) recorded for the workload.
    domain : int or tuple of int, optional
        Shape of the data domain, with ``prod(domain) == n``; ``(n,)`` when omitted.

    Examples
    --------
    >>> W = ExplicitWorkload([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]], spec="pairs")
    >>> W.shape, W.spec, W.domain
    ((2, 3), 'pairs', (3,))
    >>> W.gram().tolist()
    [[1.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 1.0]]
    """

    def __init__(self, W, spec: str = "matrix", domain: tuple[int, ...] | int | None = None):
        if not isinstance(spec, str):
            raise InputError(f"workload spec must be a string (recorded in strategy metadata), got {spec!r}")
        if sp.issparse(W):
            if W.dtype.kind not in "biuf":
                raise InputError(f"workload matrix must be real, got a sparse matrix of dtype {W.dtype}")
            W = sp.csr_matrix(W, dtype=float, copy=True)
        else:
            W = _real_array(W)
        if W.ndim != 2:
            raise InputError(f"workload matrix must be 2-D, got shape {W.shape}")
        if W.shape[0] == 0 or W.shape[1] == 0:
            raise InputError(f"workload matrix is empty (shape {W.shape})")
        data = W.data if sp.issparse(W) else W
        if not np.all(np.isfinite(data)):
            raise InputError("workload matrix contains NaN or infinite entries")
        domain = (W.shape[1],) if domain is None else _shape(domain, "domain", allow_int=True)
        if math.prod(domain) != W.shape[1]:
            raise InputError(f"domain {domain} has {math.prod(domain)} cells, not the {W.shape[1]} workload columns")
        if sp.issparse(W):
            W.sum_duplicates()
            W.eliminate_zeros()
            for a in (W.data, W.indices, W.indptr):
                a.setflags(write=False)
        else:
            W.setflags(write=False)
        self._W = W
        self._gram: np.ndarray | None = None
        self._row_gram_cache: np.ndarray | None = None
        self._vanishing_checked = False  # `_warn_vanishing_rows` has run
        self.spec = spec
        self.domain = domain

    @property
    def m(self) -> int:
        """Number of queries: the rows of the matrix.

        Examples
        --------
        >>> from_matrix([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]).m
        3
        """
        return self._W.shape[0]

    def gram_matvec_cost(self) -> float:
        return 2.0 * self.nnz()

    def nnz(self) -> int:
        """Number of non-zero entries of the workload matrix.

        Examples
        --------
        >>> from_matrix([[1.0, 0.0], [1.0, 1.0]]).nnz()
        3
        """
        return int(self._W.nnz) if sp.issparse(self._W) else int(np.count_nonzero(self._W))

    def gram(self) -> np.ndarray:
        """``W^T W``, computed once and cached (read-only).

        Raises
        ------
        InputError
            When the dense n x n matrix does not fit in memory, or its entries overflow or underflow float64.

        Examples
        --------
        >>> W = from_matrix([[1.0, 0.0], [1.0, 1.0]])
        >>> W.gram().tolist()
        [[2.0, 1.0], [1.0, 1.0]]
        >>> W.gram().flags.writeable
        False
        """
        if self._gram is None:
            _require_dense(self.n, "the Gram matrix", 2 if sp.issparse(self._W) else 1, self.spec)
            with np.errstate(over="ignore", under="ignore"):  # checked by _finite_gram and below
                G = _finite_gram(_cross_product(self._W), self.spec)
            if self.nnz() and G.diagonal().max() < TINY_GRAM:
                raise _entry_scale_error(self.spec, "small", f"largest squared column norm {G.diagonal().max():.3g}")
            self._warn_vanishing_rows()
            G.setflags(write=False)
            self._gram = G
        return self._gram

    def _warn_vanishing_rows(self) -> None:
        """Log a warning (once per workload) for non-zero queries whose squared norm underflows: they count as zero queries."""
        if self._vanishing_checked:
            return
        self._vanishing_checked = True
        W = self._W
        with np.errstate(under="ignore"):
            if sp.issparse(W):
                nonzero = np.diff(W.indptr) > 0
                sq = np.asarray(W.multiply(W).sum(axis=1)).ravel()
            else:
                nonzero = np.any(W != 0, axis=1)
                sq = np.einsum("ij,ij->i", W, W)
        vanishing = np.flatnonzero(nonzero & (sq < TINY_GRAM))
        if vanishing.size:
            log.warning(
                "workload %r: %d quer%s (row %d first) with entries too small for float64 (squared norm %.3g) count as zero "
                "queries; rescale them if they matter", self.spec, vanishing.size, "y" if vanishing.size == 1 else "ies",
                vanishing[0], sq[vanishing[0]],
            )

    def matrix(self) -> sp.csr_matrix:
        """The workload matrix as a CSR matrix (a dense stored matrix is converted).

        Examples
        --------
        >>> from_matrix([[1.0, 0.0], [1.0, 1.0]]).matrix().toarray().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return sp.csr_matrix(self._W)

    def _row_gram(self) -> np.ndarray:
        if self._row_gram_cache is None:
            _require_dense(self.m, f"the {self.m}x{self.m} row Gram matrix", 2 if sp.issparse(self._W) else 1, self.spec)
            Wt = self._W.T.tocsr() if sp.issparse(self._W) else self._W.T
            with np.errstate(over="ignore"):
                C = _finite_gram(_cross_product(Wt), self.spec, "row Gram matrix W W^T")
            C.setflags(write=False)
            self._row_gram_cache = C
        return self._row_gram_cache

    def frobenius_sq(self) -> float:
        """The sum of the squared entries, ``||W||_F^2`` (inf if it overflows float64).

        Examples
        --------
        >>> from_matrix([[1.0, 2.0], [3.0, 0.0]]).frobenius_sq()  # 1 + 4 + 9
        14.0
        """
        data = self._W.data if sp.issparse(self._W) else self._W
        with np.errstate(over="ignore", under="ignore"):  # inf says the Gram overflows, which gram() reports
            return float(np.dot(data.ravel(), data.ravel()))

    def gram_diagonal(self) -> np.ndarray:
        """The squared column norms, checked as `gram` checks the Gram matrix (overflow, entries too small).

        Examples
        --------
        >>> from_matrix([[1.0, 2.0], [3.0, 0.0]]).gram_diagonal().tolist()  # 1 + 9, 4 + 0
        [10.0, 4.0]
        """
        W = self._W
        with np.errstate(over="ignore", under="ignore"):
            d = np.asarray(W.multiply(W).sum(axis=0)).ravel() if sp.issparse(W) else np.einsum("ij,ij->j", W, W)
        _finite_gram(d, self.spec, "diagonal of the Gram matrix W^T W")
        if self.nnz() and d.max() < TINY_GRAM:
            raise _entry_scale_error(self.spec, "small", f"largest squared column norm {d.max():.3g}")
        self._warn_vanishing_rows()
        return d

    def diagonal_query_variances(self, d: np.ndarray) -> np.ndarray:
        """``sum_j w_ij^2 d_j`` for every row i (see `Workload.diagonal_query_variances`).

        Examples
        --------
        >>> from_matrix([[1.0, 2.0], [3.0, 0.0]]).diagonal_query_variances(np.array([1.0, 10.0])).tolist()  # 1 + 4 * 10, 9 * 1
        [41.0, 9.0]
        """
        if sp.issparse(self._W):
            return super().diagonal_query_variances(d)
        return np.einsum("ij,ij,j->i", self._W, self._W, np.asarray(d, dtype=float))

    def dense(self) -> np.ndarray:
        """The workload matrix as a dense array (read-only when the matrix is stored dense).

        Examples
        --------
        >>> from_matrix([[1.0, 0.0], [1.0, 1.0]]).dense().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._W.toarray() if sp.issparse(self._W) else self._W

    def _matvec(self, x):
        return np.asarray(self._W @ x).ravel()

    def _rmatvec(self, y):
        return np.asarray(self._W.T @ y).ravel()

    def query_variances(self, M):
        """``w_i M w_i^T`` for every row i (see `Workload.query_variances`).

        Examples
        --------
        >>> from_matrix([[1.0, 2.0], [3.0, 0.0]]).query_variances(np.eye(2)).tolist()  # squared row norms
        [5.0, 9.0]
        """
        if sp.issparse(self._W):
            return super().query_variances(M)
        W = self._W
        step = max(1, 4_000_000 // max(self.n, 1))
        return np.concatenate([np.einsum("ij,ij->i", W[s : s + step] @ M, W[s : s + step]) for s in range(0, self.m, step)])


def _read_only(a) -> np.ndarray:
    """A read-only int64 copy of an index array."""
    out = np.array(a, dtype=np.int64)
    out.setflags(write=False)
    return out


class IntervalWorkload(Workload):
    """Range-count queries ``x[a] + ... + x[b]`` over a 1-D domain of n cells.

    Covers identity, total, prefix, all-range and random-range workloads. The
    Gram matrix is built in O(m + n^2) by a 2-D difference array (or in closed
    form by subclasses), answers by prefix sums, and per-query variances by
    2-D prefix sums of M, so nothing of size m x n is ever formed.

    Parameters
    ----------
    n : int
        Domain size.
    lo, hi : array_like of int
        Inclusive 0-based interval bounds, ``0 <= lo <= hi < n``.
    spec : str
        SPEC string of the workload.

    Examples
    --------
    >>> W = IntervalWorkload(4, [0, 1], [1, 3], spec="two-ranges")
    >>> W.shape
    (2, 4)
    >>> W.matrix().toarray().tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]]
    """

    def __init__(self, n: int, lo=None, hi=None, spec: str = ""):
        self.domain = (int(n),)
        self.spec = spec
        self._gram_cache: np.ndarray | None = None
        if lo is not None:  # own read-only copies: the Gram and answers must describe the same queries
            self._lo, self._hi = _read_only(lo), _read_only(hi)

    @property
    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: inclusive 0-based bounds of every query, in row order.

        Examples
        --------
        >>> lo, hi = all_range(3).intervals
        >>> list(zip(lo.tolist(), hi.tolist()))
        [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
        """
        return self._lo, self._hi

    @property
    def m(self) -> int:
        """Number of queries (intervals).

        Examples
        --------
        >>> IntervalWorkload(4, [0, 1], [1, 3]).m
        2
        """
        return len(self.intervals[0])

    def gram(self) -> np.ndarray:
        """The Gram matrix from a 2-D difference array; computed once (read-only, cached).

        Two cumulative sums over (n+1)^2 entries cost ~0.5 s at 4096 cells, and
        a release asks for the Gram four times (support, error, bound, run).

        Examples
        --------
        Entry (i, j) counts the intervals that contain both cells:

        >>> IntervalWorkload(4, [0, 1], [1, 3]).gram().tolist()
        [[1.0, 1.0, 0.0, 0.0], [1.0, 2.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]]
        """
        if self._gram_cache is not None:
            return self._gram_cache
        n = self.n
        _require_dense(n, "the Gram matrix", 3, self.spec)
        lo, hi = self.intervals
        D = np.zeros((n + 1, n + 1))
        np.add.at(D, (lo, lo), 1.0)
        np.add.at(D, (lo, hi + 1), -1.0)
        np.add.at(D, (hi + 1, lo), -1.0)
        np.add.at(D, (hi + 1, hi + 1), 1.0)
        G = np.ascontiguousarray(D.cumsum(axis=0).cumsum(axis=1)[:n, :n])
        G.setflags(write=False)
        self._gram_cache = G
        return G

    def weighted_gram(self, weights) -> np.ndarray:
        """``W^T diag(weights) W`` in O(n^2 + m), by sums of non-negative terms only (no cancellation).

        Entry (j, k), j <= k, is the weight of the intervals with ``lo <= j`` and ``hi >= k``:
        the weights placed at (lo, hi) summed down the rows and then back along the columns.

        Examples
        --------
        >>> IntervalWorkload(3, [0, 1], [1, 2]).weighted_gram([1.0, 10.0]).tolist()
        [[1.0, 1.0, 0.0], [1.0, 11.0, 10.0], [0.0, 10.0, 10.0]]
        """
        n = self.n
        _require_dense(n, "the weighted Gram matrix", 3, self.spec)
        c = np.asarray(weights, dtype=float)
        if c.shape != (self.m,) or not np.all(np.isfinite(c)) or np.any(c < 0):
            raise InputError(f"weights must be {self.m} finite non-negative numbers, one per interval")
        lo, hi = self.intervals
        C = np.zeros((n, n))
        np.add.at(C, (lo, hi), c)
        S = C.cumsum(axis=0)[:, ::-1].cumsum(axis=1)[:, ::-1]  # S[j, k] = sum of c over lo <= j, hi >= k
        G = np.triu(S)
        G += np.triu(S, 1).T
        return G

    def _row_gram(self) -> np.ndarray:
        _require_dense(self.m, f"the {self.m}x{self.m} row Gram matrix", 4, self.spec)
        lo, hi = self.intervals
        overlap = np.minimum.outer(hi, hi) - np.maximum.outer(lo, lo) + 1
        return np.maximum(overlap, 0).astype(float)

    def nnz(self) -> int:
        """Number of non-zeros of the workload matrix (sum of interval lengths).

        Examples
        --------
        >>> all_range(4).nnz()  # 4 * 1 + 3 * 2 + 2 * 3 + 1 * 4
        20
        """
        lo, hi = self.intervals
        return int((hi - lo + 1).sum())

    def matrix(self) -> sp.csr_matrix:
        """The m x n 0-1 matrix of the intervals, as CSR.

        Raises
        ------
        InputError
            If it would have more than ``defaults.MAX_MATRIX_ENTRIES`` non-zeros.

        Examples
        --------
        >>> IntervalWorkload(3, [0, 2], [1, 2]).matrix().toarray().tolist()
        [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        """
        nnz = self.nnz()
        if nnz > MAX_MATRIX_ENTRIES:
            raise InputError(
                f"workload {self.spec!r} has {nnz:,} non-zeros; too large to build as a matrix "
                "(its Gram matrix and implicit operator are available)"
            )
        lo, hi = self.intervals
        lengths = hi - lo + 1
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        starts = np.repeat(lo - indptr[:-1], lengths)
        indices = starts + np.arange(nnz)
        return sp.csr_matrix((np.ones(nnz), indices, indptr), shape=self.shape)

    def _matvec(self, x):
        lo, hi = self.intervals
        c = np.concatenate([[0.0], np.cumsum(np.asarray(x, dtype=float))])
        return c[hi + 1] - c[lo]

    def gram_matvec_cost(self) -> float:
        return 8.0 * self.m  # two passes with np.add.at over the interval ends

    def _rmatvec(self, y):
        lo, hi = self.intervals
        d = np.zeros(self.n + 1)
        np.add.at(d, lo, y)
        np.add.at(d, hi + 1, -np.asarray(y, dtype=float))
        return np.cumsum(d)[: self.n]

    def gram_diagonal(self) -> np.ndarray:
        """The number of intervals covering each cell, in O(m + n).

        Examples
        --------
        >>> IntervalWorkload(4, [0, 1], [1, 3]).gram_diagonal().tolist()
        [1.0, 2.0, 1.0, 1.0]
        """
        lo, hi = self.intervals
        steps = np.zeros(self.n + 1)
        np.add.at(steps, lo, 1.0)
        np.add.at(steps, hi + 1, -1.0)
        return np.cumsum(steps)[: self.n]

    def diagonal_query_variances(self, d: np.ndarray) -> np.ndarray:
        """Interval sums of d over dyadic blocks (no differences of prefix sums: no cancellation), O((m + n) log n).

        Prefix sums lose every digit of a query's sum when a huge d_j precedes
        it (d = 1e18 in one cell, 1 elsewhere: the other queries came out 0).
        Each interval is split into at most 2 log2(n) aligned blocks of 2^k
        cells, whose sums of the non-negative d are formed by pairwise addition.

        Examples
        --------
        >>> IntervalWorkload(4, [0, 1], [1, 3]).diagonal_query_variances(np.array([1.0, 2.0, 4.0, 8.0])).tolist()  # 1 + 2, 2 + 4 + 8
        [3.0, 14.0]
        """
        d = np.asarray(d, dtype=float)
        lo, hi = self.intervals
        levels, offsets, block = [d], [0], d
        while block.size > 1:  # level k: sums of the aligned blocks of 2^k cells
            offsets.append(offsets[-1] + block.size)
            block = block[: block.size // 2 * 2].reshape(-1, 2).sum(axis=1)
            levels.append(block)
        sums = np.concatenate(levels)
        pos, end = lo.astype(np.int64), hi.astype(np.int64) + 1
        out = np.zeros(pos.size)
        offsets = np.asarray(offsets)
        while True:
            todo = pos < end
            if not np.any(todo):
                return out
            p, e = pos[todo], end[todo]
            align = np.where(p == 0, 62, np.frexp(np.maximum(p & -p, 1))[1] - 1)  # trailing zeros of p (exact: frexp)
            fit = np.frexp(e - p)[1] - 1  # floor(log2(e - p))
            k = np.minimum(np.minimum(align, fit), len(levels) - 1)
            out[todo] += sums[offsets[k] + (p >> k)]
            pos[todo] = p + (np.int64(1) << k)

    def query_variances(self, M):
        """``w_i M w_i^T`` for every interval i: the sum of M over the square ``[lo_i, hi_i]^2``, by 2-D prefix sums.

        Examples
        --------
        >>> IntervalWorkload(4, [0, 1], [1, 3]).query_variances(np.eye(4)).tolist()  # with M = I: the lengths
        [2.0, 3.0]
        """
        n = self.n
        S = np.zeros((n + 1, n + 1))
        S[1:, 1:] = np.asarray(M, dtype=float).cumsum(axis=0).cumsum(axis=1)
        lo, hi = self.intervals
        return S[hi + 1, hi + 1] - S[lo, hi + 1] - S[hi + 1, lo] + S[lo, lo]


class _Identity(IntervalWorkload):
    def __init__(self, n: int):
        super().__init__(n, np.arange(n), np.arange(n), f"identity:{n}")

    def gram(self):
        _require_dense(self.n, "the Gram matrix", 1, self.spec)
        return np.eye(self.n)

    def gram_eigvals(self):
        return np.ones(self.n)

    def gram_eigh(self):
        _require_dense(self.n, "the Gram eigenvectors", 1, self.spec)
        return np.ones(self.n), np.eye(self.n)

    def matrix(self):
        return sp.identity(self.n, format="csr")


class _Total(IntervalWorkload):
    def __init__(self, n: int):
        super().__init__(n, [0], [n - 1], f"total:{n}")

    def gram(self):
        _require_dense(self.n, "the Gram matrix", 1, self.spec)
        return np.ones((self.n, self.n))


class _Prefix(IntervalWorkload):
    def __init__(self, n: int):
        super().__init__(n, np.zeros(n, dtype=np.int64), np.arange(n), f"prefix:{n}")

    def gram(self):
        n = self.n
        _require_dense(n, "the Gram matrix", 2, self.spec)
        i = np.arange(1, n + 1, dtype=float)
        return (n + 1) - np.maximum(i[:, None], i[None, :])

    # In reversed cell order the Gram is min(i, j), the inverse of a tridiagonal matrix.
    def gram_eigvals(self):
        k = np.arange(self.n, 0, -1)
        return 1.0 / (4.0 * np.sin((2 * k - 1) * np.pi / (4 * self.n + 2)) ** 2)

    def gram_eigh(self):
        n = self.n
        _require_dense(n, "the Gram eigenvectors", 2, self.spec)
        k = np.arange(n, 0, -1)
        i = np.arange(n, 0, -1)
        V = np.sin(np.outer(i, 2 * k - 1) * (np.pi / (2 * n + 1)))
        V /= np.linalg.norm(V, axis=0)
        return self.gram_eigvals(), V


class _AllRange(IntervalWorkload):
    """All n(n+1)/2 intervals, ordered by left end, then right end."""

    def __init__(self, n: int):
        super().__init__(n, spec=f"all-range:{n}")

    @property
    def m(self) -> int:
        return self.n * (self.n + 1) // 2

    def nnz(self) -> int:
        n = self.n
        return n * (n + 1) * (n + 2) // 6

    @cached_property
    def intervals(self):
        lo, hi = np.triu_indices(self.n)
        return _read_only(lo), _read_only(hi)

    def gram(self):
        n = self.n
        _require_dense(n, "the Gram matrix", 3, self.spec)
        i = np.arange(1, n + 1, dtype=float)
        G = np.minimum(i[:, None], i[None, :])
        G *= (n + 1) - np.maximum(i[:, None], i[None, :])
        return G

    def gram_diagonal(self) -> np.ndarray:
        j = np.arange(self.n, dtype=float)
        return (j + 1.0) * (self.n - j)  # intervals [a, b] with a <= j <= b, without listing n(n+1)/2 of them

    def _gram_matvec(self, v):
        # (W^T W v)_j = sum over [a, b] containing j of (S_b - S_{a-1}), S the prefix sums of v (S_{-1} = 0):
        # (j + 1) sum_{b >= j} S_b - (n - j) sum_{a <= j} S_{a-1}, in O(n) instead of the n(n+1)/2 answers
        n = self.n
        S = np.cumsum(np.asarray(v, dtype=float))
        right = np.cumsum(S[::-1])[::-1]  # sum_{b >= j} S_b
        left = np.concatenate([[0.0], np.cumsum(S[:-1])])  # sum_{k = -1}^{j - 1} S_k
        j = np.arange(n, dtype=float)
        return (j + 1.0) * right - (n - j) * left

    def gram_matvec_cost(self) -> float:
        return 10.0 * self.n

    # G = (n + 1) T^{-1} with T = tridiag(-1, 2, -1): eigenvectors are the DST-I basis.
    def gram_eigvals(self):
        n = self.n
        k = np.arange(n, 0, -1)
        return (n + 1) / (2.0 - 2.0 * np.cos(k * np.pi / (n + 1)))

    def gram_eigh(self):
        n = self.n
        _require_dense(n, "the Gram eigenvectors", 3, self.spec)
        k = np.arange(n, 0, -1)
        i = np.arange(1, n + 1)
        V = np.sin(np.outer(i, k) * (np.pi / (n + 1))) * np.sqrt(2.0 / (n + 1))
        return self.gram_eigvals(), V


class AllPredicate(Workload):
    """All 2^N predicate (0-1) queries over N cells, the empty query included.

    Row r (``0 <= r < 2^N``) has a 1 in cell j iff bit j of r is set. The Gram
    matrix is ``2^(N-2) (I + J)`` (Li 2013, Sec. 4.3.1, Cor. 4.4); it is kept as
    ``gram() = I + J`` with ``log_scale = (N - 2) ln 2``, so N in the thousands
    does not overflow float64. ``matrix()``, ``matvec`` and ``rmatvec`` exist
    only while the matrix fits ``defaults.MAX_MATRIX_ENTRIES`` (N up to ~21).

    Examples
    --------
    >>> W = all_predicate(2)
    >>> W.shape, W.log_scale
    ((4, 2), 0.0)
    >>> W.matrix().toarray().tolist()  # rows 0, 1, 2, 3 in binary, low bit first
    [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> round(all_predicate(3).log_scale, 6)  # ln 2: the true Gram is 2 (I + J)
    0.693147
    """

    def __init__(self, n: int):
        self.domain = (int(n),)
        self.spec = f"all-predicate:{n}"
        self.log_scale = (int(n) - 2) * math.log(2.0)

    @property
    def m(self) -> int:
        """``2^N`` queries.

        Examples
        --------
        >>> all_predicate(3).m
        8
        """
        return 2**self.n

    def gram(self):
        """``I + J`` (the true Gram divided by ``exp(log_scale) = 2^(N-2)``).

        Examples
        --------
        >>> all_predicate(2).gram().tolist()
        [[2.0, 1.0], [1.0, 2.0]]
        """
        _require_dense(self.n, "the Gram matrix", 2, self.spec)
        return np.eye(self.n) + 1.0

    # I + J: eigenvalue n + 1 on the constant vector, 1 on its complement (orthonormal DCT-II rows).
    def gram_eigvals(self):
        """Eigenvalues of ``I + J`` in closed form: 1 (N - 1 times), then N + 1.

        Examples
        --------
        >>> all_predicate(3).gram_eigvals().tolist()
        [1.0, 1.0, 4.0]
        """
        lam = np.ones(self.n)
        lam[-1] = self.n + 1.0
        return lam

    def gram_eigh(self):
        """``(gram_eigvals(), V)`` with V the orthonormal DCT-II basis (constant vector last).

        Examples
        --------
        >>> lam, V = all_predicate(3).gram_eigh()
        >>> bool(np.allclose(V @ np.diag(lam) @ V.T, all_predicate(3).gram()))
        True
        """
        n = self.n
        _require_dense(n, "the Gram eigenvectors", 3, self.spec)
        k = np.arange(n - 1, -1, -1)
        V = np.cos(np.outer(2 * np.arange(n) + 1, k) * (np.pi / (2 * n))) * np.sqrt(2.0 / n)
        V[:, -1] = 1.0 / np.sqrt(n)
        return self.gram_eigvals(), V

    def matrix(self):
        """The 2^N x N 0-1 matrix: row r has a 1 in cell j iff bit j of r is set.

        Raises
        ------
        InputError
            If it would exceed ``defaults.MAX_MATRIX_ENTRIES`` non-zeros (N above ~21).

        Examples
        --------
        >>> all_predicate(2).matrix().toarray().tolist()
        [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
        """
        n = self.n
        if n * 2 ** (n - 1) > MAX_MATRIX_ENTRIES:  # exact integers: 2.0 ** 1100 overflows
            raise InputError(
                f"workload {self.spec!r} has 2^{n} queries; too large to build as a matrix "
                "(its Gram matrix 2^(N-2) (I + J) is available)"
            )
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        return sp.csr_matrix(bits.astype(float))

    def _matvec(self, x):
        return np.asarray(self.matrix() @ np.asarray(x, dtype=float)).ravel()

    def _rmatvec(self, y):
        return np.asarray(self.matrix().T @ np.asarray(y, dtype=float)).ravel()


#: A Kronecker factor's product is one Python call per fibre: about this many operations' worth of overhead (`Kronecker.gram_matvec_cost`).
KRONECKER_CALL_COST = 2000.0


class Kronecker(Workload):
    """Kronecker (cross) product of workloads: one query per tuple of factor queries.

    The domain is the concatenation of the factor domains (row-major cells);
    the Gram matrix is the Kronecker product of the factor Grams.

    Parameters
    ----------
    factors : sequence of Workload
        The factor workloads, in the order of their domains.

    Examples
    --------
    >>> W = Kronecker([identity(2), total(2)])  # the totals of the two rows of a 2 x 2 grid
    >>> W.spec, W.domain, W.shape
    ('identity:2*total:2', (2, 2), (2, 4))
    >>> W.matrix().toarray().tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """

    def __init__(self, factors: Sequence[Workload]):
        self.factors = _workloads(factors, "a Kronecker workload", "factor")
        self.domain = tuple(d for f in self.factors for d in f.domain)
        self.spec = "*".join(_wrap(f.spec, "*") for f in self.factors)
        self.log_scale = float(sum(f.log_scale for f in self.factors))

    @property
    def m(self) -> int:
        """The product of the factors' numbers of queries.

        Examples
        --------
        >>> kronecker(prefix(3), all_range(2)).m  # 3 * 3
        9
        """
        return int(np.prod([f.m for f in self.factors]))

    def gram(self):
        """The Kronecker product of the factor Grams.

        Examples
        --------
        >>> kronecker(identity(2), total(2)).gram().tolist()
        [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
        """
        _require_dense(self.n, "the Gram matrix", 2, self.spec)
        with np.errstate(over="ignore"):
            return _finite_gram(reduce(np.kron, [f.gram() for f in self.factors]), self.spec)

    def gram_eigvals(self):
        """Sorted products of the factors' eigenvalues.

        Examples
        --------
        >>> kronecker(identity(2), total(2)).gram_eigvals().round(12).tolist()  # {1, 1} x {0, 2}
        [0.0, 0.0, 2.0, 2.0]
        """
        return np.sort(reduce(np.kron, [f.gram_eigvals() for f in self.factors]))

    def gram_matvec_cost(self) -> float:
        # each factor applied to every fibre of its axis, one Python call per fibre
        return sum(self.n / f.n * (f.gram_matvec_cost() + KRONECKER_CALL_COST) for f in self.factors)

    def gram_diagonal(self) -> np.ndarray:
        """The Kronecker product of the factors' Gram diagonals.

        Examples
        --------
        >>> kronecker(prefix(2), prefix(2)).gram_diagonal().tolist()  # [2, 1] kron [2, 1]
        [4.0, 2.0, 2.0, 1.0]
        """
        return reduce(np.kron, [f.gram_diagonal() for f in self.factors])

    def frobenius_sq(self) -> float:
        """The product of the factors' (no vector of n entries: 1e9 cells took 8 GB).

        Examples
        --------
        >>> kronecker(prefix(2), prefix(3)).frobenius_sq()  # 3 * 6
        18.0
        """
        return float(np.prod([f.frobenius_sq() for f in self.factors]))

    def row_space_sample(self, rng: np.random.Generator) -> np.ndarray | None:
        """The Kronecker product of one sample per factor: m may be far too large to draw g, the factors' m never are.

        A product of generic factor vectors leaves a subspace that misses part of the
        product row space with probability one, as a full sample does.

        Examples
        --------
        >>> kronecker(prefix(2), prefix(3)).row_space_sample(np.random.default_rng(0)).shape
        (6,)
        """
        parts = [f.row_space_sample(rng) for f in self.factors]
        return None if any(v is None for v in parts) else reduce(np.kron, parts)

    def diagonal_query_variances(self, d: np.ndarray) -> np.ndarray:
        """Per factor when ``d`` is a Kronecker product of factor vectors (the identity's ``d = 1``):
        ``sum_j w_ij^2 d_j = prod_k sum_j w_kj^2 d_kj``; else through the matrix.

        Examples
        --------
        >>> kronecker(identity(2), total(2)).diagonal_query_variances(np.ones(4)).tolist()  # two cells per query
        [2.0, 2.0]
        """
        parts = _kron_vector_factors(np.asarray(d, dtype=float), [f.n for f in self.factors])
        if parts is None:
            return super().diagonal_query_variances(d)
        return reduce(np.kron, [f.diagonal_query_variances(dk) for f, dk in zip(self.factors, parts)])

    def gram_eigh(self):
        """Kronecker products of the factors' eigendecompositions, sorted by eigenvalue (stable).

        Examples
        --------
        >>> W = kronecker(prefix(2), total(2))
        >>> lam, V = W.gram_eigh()
        >>> bool(np.allclose(V @ np.diag(lam) @ V.T, W.gram()))
        True
        """
        _require_dense(self.n, "the Gram eigenvectors", 3, self.spec)
        parts = [f.gram_eigh() for f in self.factors]
        lam = reduce(np.kron, [p[0] for p in parts])
        V = reduce(np.kron, [p[1] for p in parts])
        order = np.argsort(lam, kind="stable")
        return lam[order], V[:, order]

    def row_space_norms(self, V):
        """``||w_i V||^2`` per query from the multiplied-out sparse rows (O(nnz r)) where they are cheap to build
        and the factors are unscaled; else `Workload.row_space_norms`.

        Examples
        --------
        >>> kronecker(total(2), identity(2)).row_space_norms(np.eye(4)).tolist()  # two queries of two cells each
        [2.0, 2.0]
        """
        if self.log_scale != 0 or self._nnz_estimate() > MAX_MATRIX_ENTRIES:
            return super().row_space_norms(V)
        Y = np.asarray(self.matrix() @ V)
        return np.einsum("ij,ij->i", Y, Y)

    def _nnz_estimate(self) -> float:
        """Non-zeros of the multiplied-out matrix: the product of the factors' (before it is built)."""
        return float(np.prod([float(f.matrix().nnz) for f in self.factors]))

    def matrix(self):
        """The Kronecker product of the factor matrices, as CSR.

        Raises
        ------
        InputError
            If it would have more than about ``defaults.MAX_MATRIX_ENTRIES`` non-zeros.

        Examples
        --------
        >>> kronecker(total(2), identity(2)).matrix().toarray().tolist()
        [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]
        """
        nnz_est = self._nnz_estimate()
        if nnz_est > MAX_MATRIX_ENTRIES:
            raise InputError(
                f"workload {self.spec!r} has about {nnz_est:,.0f} non-zeros; too large to build "
                "as a matrix (its Gram matrix and implicit operator are available)"
            )
        return sp.csr_matrix(reduce(lambda a, b: sp.kron(a, b, format="csr"), [f.matrix() for f in self.factors]))

    def _apply(self, x, op: str):
        """Each factor's product ``op`` (``'matvec'``, ``'rmatvec'`` or ``'gram_matvec'``) along its axis."""
        sizes_in = [f.m if op == "rmatvec" else f.n for f in self.factors]
        X = np.asarray(x, dtype=float).reshape(sizes_in)
        for axis, f in enumerate(self.factors):
            X = np.moveaxis(X, axis, -1)
            shp = X.shape
            flat = X.reshape(-1, shp[-1])
            apply = getattr(f, op)
            res = np.stack([apply(row) for row in flat]) if flat.shape[0] else flat
            X = np.moveaxis(res.reshape(shp[:-1] + (res.shape[-1],)), -1, axis)
        return X.ravel()

    def _matvec(self, x):
        return self._apply(x, "matvec")

    def _rmatvec(self, y):
        return self._apply(y, "rmatvec")

    def _gram_matvec(self, v):
        return self._apply(v, "gram_matvec")  # W^T W is the Kronecker product of the factors' Gram matrices


def stated_domain(W: "Workload") -> tuple[int, ...] | None:
    """The domain shape a workload states, or None for a matrix over one flat domain (a file cannot state a grid).

    Data for a matrix workload may come in any shape of as many cells (a 256 x 256
    histogram for a 65536-column file); other workloads want a vector or their shape.

    Parameters
    ----------
    W : Workload

    Returns
    -------
    tuple of int or None
        ``W.domain``, or None for an `ExplicitWorkload` over a 1-D domain.

    Examples
    --------
    >>> stated_domain(prefix(4)), stated_domain(from_matrix([[1.0, 1.0]]))
    ((4,), None)
    """
    return None if isinstance(W, ExplicitWorkload) and len(W.domain) == 1 else tuple(W.domain)


def union_domain(domains: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The domain of a union whose terms (over the same number of cells) have these domains.

    Terms over multi-dimensional domains must all have the same one. A flat
    1-D term (``identity:12``, a 12-column matrix file) is read in the
    row-major cell order of that product domain, which the union takes
    whatever the order of its terms; a union of 1-D terms is 1-D.

    Raises
    ------
    InputError
        Two terms have different multi-dimensional domains, e.g. ``[4, 3]`` and ``[2, 6]``.

    Examples
    --------
    >>> union_domain([(4, 3), (12,)])
    (4, 3)
    """
    domains = [tuple(int(d) for d in dom) for dom in domains]
    shaped = list(dict.fromkeys(dom for dom in domains if len(dom) > 1))
    if len(shaped) > 1:
        raise InputError(f"union terms have different domains {list(shaped[0])} and {list(shaped[1])}")
    return shaped[0] if shaped else domains[0]


def _kron_vector_factors(d: np.ndarray, sizes: list[int], rtol: float = 1e-12) -> list[np.ndarray] | None:
    """Vectors ``d_k`` of the given sizes with ``d = d_1 kron d_2 kron ...`` (to ``rtol``), or None.

    Read off the fibres through d's largest entry; the product is then
    checked against d, so a d of any other form gives None.

    Examples
    --------
    >>> [v.tolist() for v in _kron_vector_factors(np.kron([1.0, 2.0], [3.0, 4.0, 5.0]), [2, 3])]
    [[0.5, 1.0], [6.0, 8.0, 10.0]]
    >>> _kron_vector_factors(np.array([1.0, 0.0, 0.0, 1.0]), [2, 2]) is None
    True
    """
    T = d.reshape(sizes)
    pivot = np.unravel_index(int(np.argmax(np.abs(T))), T.shape)
    top = T[pivot]
    if top == 0:
        return None
    parts = []
    for k in range(len(sizes)):
        index = list(pivot)
        index[k] = slice(None)
        parts.append(T[tuple(index)] / top)
    parts[-1] = parts[-1] * top  # the fibres each carry the pivot value once; keep it once
    if not np.allclose(reduce(np.kron, parts), d, rtol=rtol, atol=0.0):
        return None
    return parts


class Union(Workload):
    """Weighted union (stack) of workloads over the same domain (`union_domain`).

    Parameters
    ----------
    parts : sequence of Workload
        Workloads over the same number of cells; a part that is itself a union contributes its own parts.
    weights : sequence of float, optional
        One positive weight per part (all 1 when omitted); part k's rows are multiplied by ``weights[k]``.

    Examples
    --------
    >>> W = Union([identity(2), total(2)], weights=[1.0, 2.0])
    >>> W.spec, W.shape
    ('union(1*(identity:2),2*(total:2))', (3, 2))
    >>> W.matrix().toarray().tolist()
    [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]
    """

    def __init__(self, parts: Sequence[Workload], weights: Sequence[float] | None = None):
        parts = _workloads(parts, "a union workload", "part")
        doms = {p.n for p in parts}
        if len(doms) != 1:
            raise InputError(
                "union of workloads over different domain sizes: "
                + ", ".join(f"{p.spec} has {p.n} cells" for p in parts)
            )
        if any(p.log_scale for p in parts):
            raise InputError("union of workloads with rescaled Gram matrices is not supported")
        weights = np.ones(len(parts)) if weights is None else _weights(weights, len(parts))
        self.domain = union_domain([p.domain for p in parts])
        if np.all(weights == 1):
            self.spec = "+".join(p.spec for p in parts)
        else:
            self.spec = "union(" + ",".join(f"{w:g}*({p.spec})" for w, p in zip(weights, parts)) + ")"
        # a union of unions (marginals:4x4:1+marginals:4x4:2) is one union of their parts, in row
        # order, weights multiplied: the structured analyses (Kronecker, marginal) see every term
        self.parts, flat = [], []
        for w, part in zip(weights, parts):
            inner = zip(part.weights, part.parts) if isinstance(part, Union) else [(1.0, part)]
            for v, q in inner:
                self.parts.append(q)
                flat.append(float(w) * float(v))
        self.weights = np.asarray(flat)
        self._gram_cache: np.ndarray | None = None

    @property
    def m(self) -> int:
        """The parts' numbers of queries, summed.

        Examples
        --------
        >>> union(prefix(3), all_range(3)).m  # 3 + 6
        9
        """
        return sum(p.m for p in self.parts)

    def row_space_sample(self, rng: np.random.Generator) -> np.ndarray | None:
        """``sum_k w_k W_k^T g_k``, one sample per part (the stacked workload's ``W^T g``).

        Examples
        --------
        >>> union(prefix(3), total(3)).row_space_sample(np.random.default_rng(0)).shape
        (3,)
        """
        parts = [p.row_space_sample(rng) for p in self.parts]
        return None if any(v is None for v in parts) else sum(w * v for w, v in zip(self.weights, parts))

    def _offsets(self):
        return np.cumsum([0] + [p.m for p in self.parts])

    def gram(self):
        """``sum_k w_k^2 W_k^T W_k``, accumulated in place; computed once (read-only, cached).

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).gram().tolist()  # I + 4 J
        [[5.0, 4.0], [4.0, 5.0]]
        """
        if self._gram_cache is None:
            # the sum, a part's Gram and its weighted copy
            _require_dense(self.n, "the Gram matrix", 3, self.spec)
            from .marginals import marginal_gram  # (marginals.py builds on this module)

            G = marginal_gram(self)
            if G is None:
                G = np.zeros((self.n, self.n))
                with np.errstate(over="ignore"):
                    for w, p in zip(self.weights, self.parts):
                        G += p.gram() if w == 1 else w**2 * p.gram()
            _finite_gram(G, self.spec)
            G.flags.writeable = False
            self._gram_cache = G
        return self._gram_cache

    def gram_eigvals(self):
        """Eigenvalues of ``gram()`` (ascending), in closed form for unions of aligned Kronecker products.

        When every part is a Kronecker product over the same factor domains and,
        on each factor domain, the parts' factors are the identity, ``total``
        (the all-ones Gram J) or one common workload X, the factor Grams on
        that domain are simultaneously diagonalised (I and J by the constant
        vector and its complement, I and X by X's eigenvectors), so the
        eigenvalues are sums over parts of products of factor eigenvalues:
        marginals over 16 binary attributes (65536 cells) need 65536 numbers,
        not a 32 GiB Gram. Other unions use the dense Gram.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).gram_eigvals().round(12).tolist()  # I + 4 J: 1, then 1 + 4 * 2
        [1.0, 9.0]
        """
        spectrum = _aligned_union_spectrum(self)
        if spectrum is None:
            return super().gram_eigvals()
        values, counts = spectrum
        require_memory(16.0 * self.n, f"the Gram eigenvalues of workload {self.spec!r}", "use fewer attributes")
        return np.sort(np.repeat(values, counts))

    def gram_spectrum(self):
        """Per eigen-class for unions of aligned Kronecker products (see `gram_eigvals`), else every eigenvalue once.

        Examples
        --------
        >>> values, counts = union(identity(2), total(2)).gram_spectrum()  # I + J on 2 cells
        >>> sorted(zip(values.round(12).tolist(), counts.tolist()))
        [(1.0, 1), (3.0, 1)]
        """
        spectrum = _aligned_union_spectrum(self)
        return super().gram_spectrum() if spectrum is None else spectrum

    def frobenius_sq(self) -> float:
        """``sum_k w_k^2 ||W_k||_F^2``, from the parts (no vector of n entries).

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).frobenius_sq()  # 2 + 2^2 * 2
        10.0
        """
        return float(sum(w**2 * p.frobenius_sq() for w, p in zip(self.weights, self.parts)))

    def matrix(self):
        """The parts' weighted matrices stacked in order, as CSR.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).matrix().toarray().tolist()
        [[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]
        """
        return sp.vstack([w * p.matrix() for w, p in zip(self.weights, self.parts)], format="csr")

    def _matvec(self, x):
        return np.concatenate([w * p.matvec(x) for w, p in zip(self.weights, self.parts)])

    def _rmatvec(self, y):
        off = self._offsets()
        return sum(w * p.rmatvec(y[off[i] : off[i + 1]]) for i, (w, p) in enumerate(zip(self.weights, self.parts)))

    def query_variances(self, M):
        """The parts' query variances in row order, part k's times ``weights[k]^2``.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).query_variances(np.eye(2)).tolist()  # 1, 1, 4 * 2
        [1.0, 1.0, 8.0]
        """
        return self._stacked_forms(lambda part: part.query_variances(M))

    def row_space_norms(self, V):
        """The parts' `row_space_norms` in row order, part k's times ``weights[k]^2``.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).row_space_norms(np.eye(2)).tolist()  # 1, 1, 4 * 2
        [1.0, 1.0, 8.0]
        """
        return self._stacked_forms(lambda part: part.row_space_norms(V))

    def _stacked_forms(self, per_part) -> np.ndarray:
        """Per-query quadratic forms ``per_part(part)`` of every part in row order, part k's times ``weights[k]^2``."""
        return np.concatenate([w**2 * per_part(p) for w, p in zip(self.weights, self.parts)])

    def gram_diagonal(self) -> np.ndarray:
        """``sum_k w_k^2 diag(W_k^T W_k)``, from the parts.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).gram_diagonal().tolist()  # 1 + 4
        [5.0, 5.0]
        """
        return sum(w**2 * p.gram_diagonal() for w, p in zip(self.weights, self.parts))

    def diagonal_query_variances(self, d: np.ndarray) -> np.ndarray:
        """The parts' diagonal query variances in row order, part k's times ``weights[k]^2``.

        Examples
        --------
        >>> union(identity(2), total(2), weights=[1.0, 2.0]).diagonal_query_variances(np.array([1.0, 3.0])).tolist()  # 1, 3, 4 * (1 + 3)
        [1.0, 3.0, 16.0]
        """
        return np.concatenate([w**2 * p.diagonal_query_variances(d) for w, p in zip(self.weights, self.parts)])


def _factors_on(part: Workload, domain: tuple[int, ...]) -> list[Workload]:
    """A union term's factors over the union's domain: a flat identity or total over a product domain is
    the product of identities or of totals (``identity:24`` in ``marginals:3x4x2:2+identity:24``)."""
    if isinstance(part, Kronecker):
        return list(part.factors)
    if len(domain) > 1 and isinstance(part, (_Identity, _Total)):
        return [(identity if isinstance(part, _Identity) else total)(d) for d in domain]
    return [part]


def _aligned_union_spectrum(W: Union) -> tuple[np.ndarray, np.ndarray] | None:
    """Eigenvalues of a union of aligned Kronecker products in closed form, one per eigen-class, with
    the classes' multiplicities (see `Union.gram_eigvals`); None if it is not one.

    On factor domain a every part's factor is the identity (choice 1) or not
    (choice 0: J, or the common X); row c of ``M_a`` holds that choice's
    eigenvalues on the domain's eigen-classes (I and J: the constant vector and
    its complement, multiplicities 1 and d - 1; I and X: X's eigenvectors).
    With ``F[c_1, ..., c_N]`` the summed squared weights of the parts making
    those choices, the eigenvalues are F contracted with every ``M_a``: about
    ``N * classes`` operations however many parts (marginals over 20 binary
    attributes, k = 10: 184756 parts, 2^20 classes).
    """
    factor_lists = [_factors_on(p, W.domain) for p in W.parts]
    sizes = [f.n for f in factor_lists[0]]
    if any([f.n for f in fl] != sizes for fl in factor_lists):
        return None
    mats, mults = [], []
    for a, d in enumerate(sizes):
        factors = [fl[a] for fl in factor_lists]
        others = [f for f in factors if not isinstance(f, _Identity)]
        if all(isinstance(f, _Total) for f in others):
            mats.append(np.array([[float(d), 0.0], [1.0, 1.0]]))
            mults.append(np.array([1, d - 1], dtype=np.int64))
        elif all(_same_workload(f, others[0]) for f in others):
            mats.append(np.vstack([np.asarray(others[0].gram_eigvals(), dtype=float), np.ones(d)]))
            mults.append(np.ones(d, dtype=np.int64))
        else:
            return None
    classes = math.prod(len(m) for m in mults)
    require_memory(
        8.0 * (2.0 ** len(sizes) + 4.0 * classes),
        f"the Gram eigenvalues of workload {W.spec!r} ({len(sizes)} factor domains)",
        "use fewer attributes",
    )
    F = np.zeros((2,) * len(sizes))
    for w, fl in zip(W.weights, factor_lists):
        F[tuple(int(isinstance(f, _Identity)) for f in fl)] += w**2
    T = F
    for M in mats:  # contracts the leading choice axis; the class axis goes last
        T = np.tensordot(T, M, axes=([0], [0]))
    values = np.clip(np.asarray(T).ravel(), 0.0, None)
    return values, reduce(np.kron, mults)


#: Workloads whose Gram matrix is determined by their type and domain size.
_CLOSED_FORM = (_Identity, _Total, _Prefix, _AllRange)


#: `same_gram` compares two workloads' Gram matrices up to this many cells (two dense n x n matrices).
SAME_GRAM_MAX_N = 4096


def same_gram(a: Workload, b: Workload) -> bool | None:
    """Whether two workloads on the same cells have the same Gram matrix ``W^T W`` (Def. 4.1: equivalent workloads).

    Cells are compared in row-major order, whatever the domains' shapes (a
    Kronecker SPEC and its flat file). None when it cannot be told cheaply: past
    `SAME_GRAM_MAX_N` cells, unless both are the same closed form.

    Parameters
    ----------
    a, b : Workload

    Returns
    -------
    bool or None
        True if the Gram matrices agree (to a relative 1e-12) and the ``log_scale`` too, False if not
        (or the numbers of cells differ), None when not compared.

    Examples
    --------
    >>> same_gram(prefix(4), from_matrix(np.tril(np.ones((4, 4)))[::-1]))
    True
    >>> same_gram(prefix(4), identity(4))
    False
    """
    if a.n != b.n:
        return False
    if _same_workload(a, b):
        return True
    if a.n > SAME_GRAM_MAX_N:
        return None
    if not math.isclose(a.log_scale, b.log_scale, rel_tol=1e-12, abs_tol=1e-12):
        return False
    return bool(np.allclose(np.asarray(a.gram()), np.asarray(b.gram()), rtol=1e-12, atol=0.0))


def _same_workload(a: Workload, b: Workload) -> bool:
    """Whether two factor workloads are known to have the same Gram matrix (same object, or same closed form and size)."""
    if a is b:
        return True
    return type(a) is type(b) and type(a) in _CLOSED_FORM and a.n == b.n


def _wrap(spec: str, op: str) -> str:
    return f"({spec})" if ("+" in spec and op == "*") else spec


def _positive_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


#: Bytes per query of an interval workload's bounds: two int64 arrays, built and then copied read-only.
INTERVAL_BYTES = 32


def _count(value, name: str, intervals: str | None = None) -> int:
    """A positive number of cells or queries, at most `MAX_CELLS`; with ``intervals`` (the workload), that many
    interval bounds must fit in memory (`INTERVAL_BYTES` each)."""
    v = _positive_int(value, name)
    if v > MAX_CELLS:
        raise InputError(f"{name} = {v:,} is too large (at most {MAX_CELLS:,})")
    if intervals is not None:
        require_memory(INTERVAL_BYTES * v, f"workload {intervals} ({v:,} intervals)")
    return v


def _shape(value, name: str, allow_int: bool = False) -> tuple[int, ...]:
    """``value`` as a non-empty tuple of positive ints (NumPy integers too; a bare int if ``allow_int``)."""
    if allow_int and isinstance(value, (int, np.integer)):
        value = (value,)
    if isinstance(value, (str, bytes)) or not np.iterable(value) or len(value := tuple(value)) == 0:
        raise InputError(f"{name} must be a non-empty sequence of positive integers, got {value!r}")
    return tuple(_positive_int(d, f"each entry of {name} {value!r}") for d in value)


def _real_array(W) -> np.ndarray:
    """A float copy of the dense array_like W; InputError if it is ragged, complex or not numeric."""
    try:
        A = np.asarray(W)
    except ValueError:
        raise InputError("workload matrix is ragged: its rows must all have the same length") from None
    if A.dtype.kind not in "biufO":
        raise InputError(f"workload matrix must hold real numbers, got dtype {A.dtype}")
    try:
        return A.astype(float)
    except OverflowError:  # Python integers of 309 digits or more
        raise InputError("workload matrix holds an integer beyond float64's range (about 1.8e308)") from None
    except (TypeError, ValueError) as e:
        raise InputError(f"workload matrix must hold real numbers: {e}") from None


def _workloads(items, what: str, noun: str) -> list[Workload]:
    """``items`` (a Workload, or a list or tuple of them) as a non-empty list of Workloads."""
    items = list(items) if isinstance(items, (list, tuple)) else [items]
    if not items:
        raise InputError(f"{what} needs at least one {noun}")
    for p in items:
        if not isinstance(p, Workload):
            raise InputError(
                f"the {noun}s of {what} must be Workload objects, got {type(p).__name__} "
                "(wrap a matrix with from_matrix, a SPEC with parse_spec)"
            )
    return items


def _weights(weights, count: int) -> np.ndarray:
    """Union weights as a float array: a 1-D sequence of ``count`` finite positive numbers."""
    try:
        w = np.asarray(weights)
    except ValueError:
        w = None
    if w is None or w.ndim != 1 or w.dtype.kind not in "iuf":
        got = f"an array of shape {w.shape}" if isinstance(weights, np.ndarray) else repr(weights)
        raise InputError(f"union weights must be a 1-D sequence of real numbers, one per part, got {got}")
    if len(w) != count:
        raise InputError(f"union weights must be one per part: {count} parts, {len(w)} weights")
    w = w.astype(float)
    if not np.all(np.isfinite(w) & (w > 0)):
        raise InputError(f"union weights must be finite and positive, got {w.tolist()}")
    return w


def identity(n: int) -> Workload:
    """The n unit queries (one per cell).

    Examples
    --------
    >>> identity(3).matrix().toarray().tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return _Identity(_count(n, "n", f"identity:{n}"))


def total(n: int) -> Workload:
    """The single query summing all n cells.

    Examples
    --------
    >>> total(3).matrix().toarray().tolist()
    [[1.0, 1.0, 1.0]]
    """
    return _Total(_count(n, "n"))


def prefix(n: int) -> Workload:
    """The n prefix queries ``[1, j]`` (the CDF workload); Gram ``n - max(a, b) + 1``.

    Examples
    --------
    >>> prefix(3).matrix().toarray().tolist()
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    >>> prefix(3).gram().tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    """
    return _Prefix(_count(n, "n", f"prefix:{n}"))


def all_range(n: int) -> Workload:
    """All n(n+1)/2 range queries; Gram ``min(a, b) (n - max(a, b) + 1)`` (1-based).

    Examples
    --------
    >>> W = all_range(3)
    >>> W.shape
    (6, 3)
    >>> W.gram().tolist()
    [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]]
    """
    return _AllRange(_count(n, "n"))


def all_predicate(n: int) -> Workload:
    """All 2^n predicate queries; Gram ``2^(n-2) (I + J)`` kept rescaled (see `AllPredicate`).

    Examples
    --------
    >>> all_predicate(3).shape
    (8, 3)
    """
    return AllPredicate(_positive_int(n, "n"))


def random_range(n: int, m: int, seed: int = 0) -> Workload:
    """m random intervals ``[a, b]``: a, b uniform on the domain, sorted so a <= b.

    Parameters
    ----------
    n, m : int
        Domain size and number of queries.
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same queries.

    Examples
    --------
    >>> W = random_range(8, 5, seed=7)
    >>> W.shape, W.spec
    ((5, 8), 'random-range:8:5:7')
    >>> bool((W.matrix() != random_range(8, 5, seed=7).matrix()).nnz == 0)
    True
    """
    n, m = _count(n, "n"), _count(m, "m", f"random-range:{n}:{m}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    ab = np.sort(rng.integers(0, n, size=(m, 2)), axis=1)
    return IntervalWorkload(n, ab[:, 0], ab[:, 1], f"random-range:{n}:{m}:{seed}")


def marginals(shape: Sequence[int], k: int) -> Workload:
    """All k-way marginals over a product domain.

    Each marginal over an attribute set S is the Kronecker product over the
    attributes of ``identity:d`` (attribute in S) or ``total:d`` (summed out).

    Parameters
    ----------
    shape : sequence of int
        Attribute sizes, positive integers (a bare int is refused: write ``(4,)``).
    k : int
        Marginal order, ``0 <= k <= len(shape)``.

    Examples
    --------
    Both 1-way marginals of a 2 x 3 table: 2 row sums and 3 column sums.

    >>> W = marginals((2, 3), 1)
    >>> W.shape, W.spec
    ((5, 6), 'marginals:2x3:1')
    >>> W.matrix().toarray()[0].tolist()
    [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    """
    if isinstance(shape, (int, np.integer)):
        raise InputError(f"marginals shape must be a sequence of attribute sizes, e.g. ({shape},) or (2, 2), got {shape!r}")
    shape = _shape(shape, "marginals shape")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 0 <= k <= len(shape):
        raise InputError(f"marginal order k must be an integer between 0 and {len(shape)}, got {k!r}")
    k = int(k)
    parts = []
    for S in combinations(range(len(shape)), k):
        parts.append(Kronecker([identity(d) if i in S else total(d) for i, d in enumerate(shape)]))
    W = Union(parts)
    W.spec = f"marginals:{'x'.join(map(str, shape))}:{k}"
    W.domain = shape
    return W


def _unpack(items: tuple) -> tuple:
    """The one list or tuple passed as ``f([a, b])``, else the positional arguments ``f(a, b)``."""
    return tuple(items[0]) if len(items) == 1 and isinstance(items[0], (list, tuple)) else items


def kronecker(*factors: Workload) -> Workload:
    """Kronecker product of workloads (multi-dimensional domain).

    The factors are `Workload` objects, given as arguments or as one list or tuple.

    Examples
    --------
    >>> W = kronecker(prefix(4), identity(2))
    >>> W.shape, W.domain
    ((8, 8), (4, 2))
    """
    return Kronecker(_unpack(factors))


def union(*parts: Workload, weights: Sequence[float] | None = None) -> Workload:
    """Weighted union (stack) of workloads over the same number of cells.

    Parameters
    ----------
    *parts : Workload
        The terms, given as arguments or as one list or tuple.
    weights : sequence of float, optional
        One finite positive weight per part (default all 1).

    Examples
    --------
    >>> W = union(identity(3), total(3), weights=[1.0, 2.0])
    >>> W.matrix().toarray()[-1].tolist()
    [2.0, 2.0, 2.0]
    """
    return Union(_unpack(parts), weights)


def from_matrix(W, spec: str = "matrix", domain: tuple[int, ...] | int | None = None) -> Workload:
    """Wrap an explicit dense or sparse matrix as a workload (validated).

    Parameters
    ----------
    W : array_like or sparse matrix, shape (m, n)
        Finite real entries (bool and integer arrays are converted to float). A
        complex matrix is refused, even when its imaginary part is zero: pass
        ``W.real``. A ragged nested list is refused.
    spec : str
        Label recorded for the workload (strategy files record it as the
        workload's SPEC). A label that is a SPEC must name a workload with this
        matrix's Gram matrix ``W^T W`` (an equivalent workload, compared up to
        `SAME_GRAM_MAX_N` cells): a file would otherwise state the SPEC's
        workload with this matrix's errors.
    domain : sequence of int or int, optional
        Shape of the data domain, positive integers (NumPy integers accepted)
        whose product is n; an int is a 1-D domain. Default ``(n,)``.

    Examples
    --------
    >>> import numpy as np
    >>> W = from_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1]]), "pairs", domain=(2, 2))
    >>> W.shape, W.domain, W.gram().diagonal().tolist()
    ((2, 4), (2, 2), [1.0, 1.0, 1.0, 1.0])
    >>> from_matrix(np.eye(4), "prefix:4")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: from_matrix: spec 'prefix:4' names a workload whose Gram matrix W^T W is not this matrix's; label the matrix with a name that is not a SPEC (e.g. spec='mine')
    """
    workload = ExplicitWorkload(W, spec, domain)
    if isinstance(spec, str) and ":" in spec:
        from .spec import parse_spec

        try:
            named = parse_spec(spec, operation=None)
        except InputError:
            return workload  # a label, not a SPEC
        same = same_gram(named, workload)
        if not same:
            reason = "is not this matrix's" if same is False else f"cannot be compared with this matrix's past {SAME_GRAM_MAX_N} cells"
            raise InputError(f"from_matrix: spec {spec!r} names a workload whose Gram matrix W^T W {reason}; label the matrix with a name that is not a SPEC (e.g. spec='mine')")
    return workload
