"""Eigen-Design: weighted eigen-queries of W^T W (Li 2013, Ch. 5; Li & Miklau, PVLDB 5(6) 2012).

Program 5.1.2 (Sec. 5.1.3), for (epsilon, delta)-DP (L2 sensitivity):

1. eigen-decompose ``G = W^T W = Q^T diag(sigma) Q`` on the *minimized* workload
   (duplicate columns merged, zero columns dropped; Def. 2.6, Prop. 5.1) and keep
   the eigen-queries (rows of Q) with ``sigma_i > 0``;
2. weights u from Program 5.1.1 with ``c_i = sigma_i`` (`strategy_opt.weighting`);
3. ``A' = diag(sqrt(u)) Q``;
4. completion rows ``D' = diag(sqrt(M^2 - m_jj^2))``, m_jj the column norms of A'
   and M their maximum (the garbled step 4 read as in the notes, Sec. 7 item 6);
5. ``A = [A'; D']``: every column reaches the sensitivity M, the error only drops
   (Thm 3.11).

Speed-ups of Sec. 5.2.2 (options): eigen-query *separation* (Program 5.1.1 on
groups of ``group_size`` consecutive eigen-queries, then one scale per group
from a second Program 5.1.1 over the groups) and *principal vectors* (k eigen-
queries weighted individually, all others share one weight).

Eigen-queries come in closed form where the workload has one
(`Workload.gram_eigh`: all ranges, ``G = (n+1) T^{-1}`` with T the 1-D Dirichlet
Laplacian, so Q is the DST-I basis; prefixes; all predicates, ``I + J``, the DCT-II
basis; identity), otherwise from a dense ``eigh`` (only the leading ones for
principal vectors on large positive definite Grams). Kronecker workloads combine
the factors' eigenpairs (eigenvectors of a Kronecker product are Kronecker
products) and build only the eigen-queries they use. Where an eigenvalue of the
dense route repeats, its eigen-queries are rotated to a basis that does not
depend on how the cells are numbered (`_canonical_eigenspaces`; LAPACK's
choice made E_2 depend on the cell order, by up to 3% on a 4-cell workload).

Objectives: ``total`` (default) and ``relative`` (Sec. 5.1.4: every query is
scaled to unit L2 norm before the design; the strategy's reported
``unit_total_squared_error`` stays that of the original workload and
``objective_value`` is the total error of the normalised workload), and
``weighted`` (option ``weights``, one per query: the design uses
``W^T diag(weights) W``).

Lower bound. The optimum of Program 5.1.1 is *not* a lower bound on the optimal
error (the completion step beats it: 1.0278 vs 1.0606 SVD bounds on all ranges
of 2048 cells). The certificate attached is the dual bound of the L2 program
(`strategy_opt.certificates.dual_bound`, a weighted SVD bound, valid for every
strategy) at the KKT weights ``u ∝ diag(X^+ G X^+)`` of the strategy's
``X = A^T A`` (`certificates.kkt_weights`); the compiler keeps the SVD bound when
it is larger. (The dual of Program 5.1.1 itself gives far weaker bounds there,
0.16-0.6 SVD bounds in our checks.) For ``relative`` and ``weighted`` the same
bound on the design's reweighted Gram is ``objective_lower_bound``; the
``weights`` option is recorded as by minerror-l2 (`strategy_opt.query_weights.weights_meta`).
No bound is left above the value it bounds (`certificates.reconcile_bound`).

Memory: refused before any allocation when `DENSE_COPIES` (or
`DENSE_COPIES_REWEIGHTED`) dense n x n matrices do not fit.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from functools import reduce
from typing import Callable

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from ..bases import fourier_matrix, wavelet_matrix
from ..cells import cell_classes
from ..certificates import INACCURATE_RTOL, kkt_bound, reconcile_bound, relative_gap
from ..compiler import compile_strategy, finite_or_none
from ..defaults import EIG_RTOL
from ..error import ErrorProfile
from ..exceptions import InputError, OptionError
from ..problem import Problem
from ..registry import register_method
from ..resources import format_bytes, require_memory
from ..threads import FACTORIZATION_THREADS, factorization_threads
from ..weighting import solve_weighting
from ..workload import (
    AllPredicate,
    IntervalWorkload,
    Kronecker,
    Union,
    Workload,
    _AllRange,
    _Identity,
    _Prefix,
    from_matrix,
    weighted_gram,
)
from ..query_weights import check_weights_objective, query_weights, weights_meta

__all__ = [
    "eigen_design",
    "minimize_workload",
    "Minimization",
    "normalized_gram",
]

log = logging.getLogger("strategy_opt")

#: Above this many cells the dual certificate is skipped unless asked for (it costs O(n^3)).
CERTIFICATE_MAX_N = 4096
#: Default fraction of eigen-queries kept as principal vectors (Sec. 5.2.2.2).
PRINCIPAL_FRACTION = 0.10
#: Domains above this size compute only the principal eigenvectors (if G is positive definite).
SUBSET_EIGH_MIN_N = 2048
#: Dense n x n float64 matrices at the peak of an eigen-design solve, above the memory the
#: process already holds (`strategy_opt.resources.require_memory` compares with the memory
#: available): Program 5.1.1 on n eigen-queries (the queries, their squares and the solver's
#: arrays), then the strategy (up to 2n rows) and the compiler's analysis of it. Measured
#: peaks (tracemalloc, n = 384-1024): 8.0-8.1 for the full design and on fixed bases, 7.2 with
#: separation, 6.3 with principal vectors, 5.5 on a low-rank workload; RSS sampled every 2 ms
#: on all-range:4096 and :8192 agrees (7.6 full, 6.4-6.8 principal). The generic estimate of a
#: solve (`strategy_opt.defaults.DENSE_WORK_COPIES` = 6) was 25-33% short of them.
DENSE_COPIES = 9
#: The same for objectives ``relative`` and ``weighted``, whose design Gram stays alive
#: through the solve (measured 9.1 and 8.8).
DENSE_COPIES_REWEIGHTED = 10
_OPTIONS = {"separation", "group_size", "principal", "basis", "certificate", "weights"}
_BASES = ("eigen", "wavelet", "fourier", "identity")


# --------------------------------------------------------------------------- minimization


@dataclass(frozen=True)
class Minimization:
    """A map from the n cells of a workload to the n' cells of its minimized form.

    ``classes[j]`` is the minimized cell of cell j (-1: a zero column, dropped).
    With the n' x n merge matrix ``M[g, j] = [classes[j] == g]`` the workload is
    ``W = W' M``, and a strategy A' for the minimized workload W' becomes
    ``A = A' M`` on the original cells: each merged cell's column is copied to
    every cell of its class and dropped cells get zero columns. A has the same
    column norms (sensitivity), supports W, and ``W A^+ = W' A'^+``, so its error
    on W equals the error of A' on W' (Li 2013, Prop. 5.1).

    Parameters
    ----------
    classes : ndarray of int, shape (n,)
        The minimized cell of each cell, or -1.

    Examples
    --------
    ``W = [[1, 1, 0, 1], [0, 0, 0, 1]]``: cells 0 and 1 have the same column, cell 2 none:

    >>> mz = Minimization(np.array([0, 0, -1, 1]))
    >>> mz.n, mz.n_min, mz.trivial
    (4, 2, False)
    """

    classes: np.ndarray

    @property
    def n(self) -> int:
        """Number of original cells.

        Examples
        --------
        >>> Minimization(np.array([0, 0, -1, 1])).n
        4
        """
        return len(self.classes)

    @property
    def n_min(self) -> int:
        """Number of cells of the minimized workload.

        Examples
        --------
        >>> Minimization(np.array([0, 0, -1, 1])).n_min
        2
        """
        return int(self.classes.max()) + 1 if self.classes.size else 0

    @property
    def trivial(self) -> bool:
        """Whether the workload is already minimal (no merge, no drop).

        Examples
        --------
        >>> Minimization.identity(3).trivial, Minimization(np.array([0, 0, 1])).trivial
        (True, False)
        """
        return self.n_min == self.n and bool(np.all(self.classes == np.arange(self.n)))

    @property
    def representatives(self) -> np.ndarray:
        """One original cell per minimized cell (the first of its class).

        Examples
        --------
        >>> Minimization(np.array([0, 0, -1, 1])).representatives.tolist()
        [0, 3]
        """
        first = np.full(self.n_min, -1, dtype=np.int64)
        for j in range(self.n - 1, -1, -1):
            if self.classes[j] >= 0:
                first[self.classes[j]] = j
        return first

    def merge_matrix(self) -> sp.csr_matrix:
        """The n' x n 0/1 matrix M with ``W = W' M``.

        Examples
        --------
        >>> Minimization(np.array([0, 0, -1, 1])).merge_matrix().toarray().astype(int).tolist()
        [[1, 1, 0, 0], [0, 0, 0, 1]]
        """
        keep = np.flatnonzero(self.classes >= 0)
        return sp.csr_matrix((np.ones(len(keep)), (self.classes[keep], keep)), shape=(self.n_min, self.n))

    def reduce_gram(self, G: np.ndarray) -> np.ndarray:
        """Gram matrix of the minimized workload (rows/columns of the representatives).

        Parameters
        ----------
        G : ndarray, shape (n, n)
            The original workload's Gram matrix.

        Returns
        -------
        ndarray, shape (n_min, n_min)
            G itself when the map is trivial.

        Examples
        --------
        >>> from strategy_opt.workload import from_matrix
        >>> G = from_matrix([[1, 1, 0, 1], [0, 0, 0, 1]]).gram()
        >>> Minimization(np.array([0, 0, -1, 1])).reduce_gram(G).tolist()  # the Gram of W' = [[1, 1], [0, 1]]
        [[1.0, 1.0], [1.0, 2.0]]
        """
        if self.trivial:
            return G
        r = self.representatives
        return G[np.ix_(r, r)]

    def expand(self, A_min: np.ndarray) -> np.ndarray:
        """Strategy ``A' M`` on the original cells (see the class docstring).

        Parameters
        ----------
        A_min : ndarray, shape (p, n_min)
            A strategy for the minimized workload.

        Returns
        -------
        ndarray, shape (p, n)
            ``A_min`` itself when the map is trivial.

        Examples
        --------
        >>> Minimization(np.array([0, 0, -1, 1])).expand(np.array([[1.0, 0.0], [0.0, 2.0]])).tolist()
        [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]]
        """
        if self.trivial:
            return A_min
        A = np.zeros((A_min.shape[0], self.n))
        keep = self.classes >= 0
        A[:, keep] = A_min[:, self.classes[keep]]
        return A

    @staticmethod
    def identity(n: int) -> "Minimization":
        """The trivial map of an already minimal n-cell workload.

        Examples
        --------
        >>> Minimization.identity(3).classes.tolist()
        [0, 1, 2]
        """
        return Minimization(np.arange(n, dtype=np.int64))

    @staticmethod
    def kron(parts: list["Minimization"]) -> "Minimization":
        """Per-factor minimizations of a Kronecker workload, combined (row-major cells).

        Parameters
        ----------
        parts : list of Minimization
            One per factor, in the order of the factors.

        Returns
        -------
        Minimization
            Over the product of the factors' cells; a cell dropped in any factor is dropped.

        Examples
        --------
        Merging the two cells of the first factor of a 2 x 2 domain:

        >>> Minimization.kron([Minimization(np.array([0, 0])), Minimization.identity(2)]).classes.tolist()
        [0, 1, 0, 1]
        """
        classes = np.zeros(1, dtype=np.int64)
        for p in parts:
            c = np.add.outer(classes * p.n_min, p.classes)
            c[(classes[:, None] < 0) | (p.classes[None, :] < 0)] = -1
            classes = c.ravel()
        return Minimization(classes)


_MINIMAL = (_AllRange, _Prefix, _Identity, AllPredicate)


def _minimization(workload: Workload) -> Minimization:
    if isinstance(workload, Kronecker):
        return Minimization.kron([_minimization(f) for f in workload.factors])
    if isinstance(workload, _MINIMAL):
        return Minimization.identity(workload.n)
    return Minimization(cell_classes(workload.gram()))


def minimize_workload(workload: Workload) -> tuple[Workload, sp.csr_matrix]:
    """The minimized workload W' (duplicate columns merged, zero columns dropped) and M with ``W = W' M``.

    Kronecker workloads are minimized factor by factor (columns that coincide
    only through scalings across factors are not merged). A strategy A' for W'
    maps back to the original cells as ``A' M`` (see `Minimization`).

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.workload import from_matrix
    >>> Wm, M = minimize_workload(from_matrix([[1, 1, 0, 1], [0, 0, 0, 1]]))
    >>> Wm.matrix().toarray().tolist(), M.toarray().astype(int).tolist()
    ([[1.0, 1.0], [0.0, 1.0]], [[1, 1, 0, 0], [0, 0, 0, 1]])
    """
    mini = _minimization(workload)
    if mini.trivial:
        return workload, mini.merge_matrix()
    if isinstance(workload, Kronecker):
        parts = [minimize_workload(f) for f in workload.factors]
        return Kronecker([p[0] for p in parts]), mini.merge_matrix()
    Wm = workload.matrix()[:, mini.representatives]
    return from_matrix(Wm, spec=f"minimized({workload.spec})"), mini.merge_matrix()


# --------------------------------------------------------------------------- design Gram matrices


def _interval_gram(n: int, lo: np.ndarray, hi: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``sum_q weight_q 1_[lo_q, hi_q] 1_[lo_q, hi_q]^T`` in O(m + n^2)."""
    F = np.bincount(lo * n + hi, weights=weight, minlength=n * n).reshape(n, n)
    return _interval_gram_from_table(F)


def _interval_gram_from_table(F: np.ndarray) -> np.ndarray:
    # C[l, h] = sum over lo <= l, hi >= h of F[lo, hi]; G[a, b] = C[min(a, b), max(a, b)]
    C = np.cumsum(F, axis=0)[:, ::-1].cumsum(axis=1)[:, ::-1]
    U = np.triu(C)
    return U + np.triu(C, 1).T


def normalized_gram(workload: Workload) -> np.ndarray:
    """Gram matrix of the workload with every row scaled to unit L2 norm (Li 2013, Sec. 5.1.4).

    ``sum_i w_i^T w_i / ||w_i||^2`` (zero rows skipped), divided by
    ``exp(workload.log_scale)`` like `Workload.gram`. Structured workloads
    (intervals, all ranges, all predicates, Kronecker products, unions) never
    build W.

    Parameters
    ----------
    workload : Workload

    Returns
    -------
    ndarray, shape (n, n)

    Examples
    --------
    prefix:2 has rows (1, 0) and (1, 1), of squared norms 1 and 2:

    >>> from strategy_opt.workload import prefix
    >>> normalized_gram(prefix(2)).tolist()  # [[1, 0], [0, 0]] + [[1, 1], [1, 1]] / 2
    [[1.5, 0.5], [0.5, 0.5]]
    """
    n = workload.n
    if isinstance(workload, Kronecker):
        return reduce(np.kron, [normalized_gram(f) for f in workload.factors])
    if isinstance(workload, Union):
        return sum(normalized_gram(p) for p in workload.parts)
    if isinstance(workload, _Identity):
        return np.eye(n)
    if isinstance(workload, _AllRange):
        i = np.arange(n)
        length = (i[None, :] - i[:, None] + 1).astype(float)
        F = np.where(length > 0, 1.0 / np.maximum(length, 1.0), 0.0)
        return _interval_gram_from_table(F)
    if isinstance(workload, IntervalWorkload):
        lo, hi = workload.intervals
        return _interval_gram(n, lo, hi, 1.0 / (hi - lo + 1))
    if isinstance(workload, AllPredicate):
        # sum over non-empty S of 1_S 1_S^T / |S|: diagonal (2^n - 1)/n, off-diagonal
        # sum_s C(n-2, s-2)/s = 2^n/n - 2^(n-1)/(n-1) + 1/(n-1) - 1/n; both over 2^(n-2)
        small = 2.0 ** -(n - 2) if n < 1000 else 0.0
        diag = 4.0 / n - small / n
        off = (4.0 / n - 2.0 / (n - 1) + small * (1.0 / (n - 1) - 1.0 / n)) if n > 1 else 0.0
        return (diag - off) * np.eye(n) + off
    W = workload.matrix()
    norms = np.sqrt(np.asarray(W.multiply(W).sum(axis=1)).ravel())
    scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    return weighted_gram(workload, scale**2)


# --------------------------------------------------------------------------- eigen-queries


@dataclass
class _Eigen:
    """Eigenpairs of one design Gram: eigenvalues descending, eigenvectors as rows on demand.

    ``partial`` eigen-systems hold only the leading eigenpairs (G positive
    definite, so ``range_diag`` is all ones and the rest sum to ``trace - sum(values)``).
    """

    values: np.ndarray
    rows: Callable[[np.ndarray], np.ndarray]
    range_diag: np.ndarray
    trace: float
    partial: bool = False
    cell_diag: np.ndarray | None = None  # the design Gram's diagonal (`_canonical_eigenspaces` of a product)


def _take_rows(VT: np.ndarray, idx) -> np.ndarray:
    """``VT[idx]``, without a copy when idx is every row in order (the full design: one n x n matrix less)."""
    idx = np.asarray(idx)
    if idx.ndim == 1 and idx.size == VT.shape[0] and np.array_equal(idx, np.arange(VT.shape[0])):
        return VT
    return VT[idx]


def _workload_eigen(f: Workload) -> _Eigen:
    """Eigen-queries from the workload's closed-form ``gram_eigh`` (all ranges, prefixes, predicates, identity)."""
    lam, V = f.gram_eigh()
    lam, VT = np.clip(lam[::-1], 0.0, None), np.ascontiguousarray(V[:, ::-1].T)
    keep = lam > EIG_RTOL * max(lam[0], 1e-300)
    range_diag = np.ones(len(lam)) if keep.all() else (VT[keep] ** 2).sum(axis=0)
    return _Eigen(lam, lambda idx: _take_rows(VT, idx), range_diag, float(lam.sum()), cell_diag=f.gram_diagonal())


def _generic_eigen(G: np.ndarray, top: int | None = None) -> _Eigen:
    n = len(G)
    G = 0.5 * (G + G.T)
    if top is not None and n >= SUBSET_EIGH_MIN_N and top < n // 2:
        try:
            with factorization_threads():
                la.cholesky(G, lower=True, check_finite=False)
        except la.LinAlgError:
            pass
        else:
            with factorization_threads():
                w, V = la.eigh(G, subset_by_index=[n - top, n - 1], driver="evr", check_finite=False)
            VT = np.ascontiguousarray(V[:, ::-1].T)
            return _Eigen(w[::-1].copy(), lambda idx: _take_rows(VT, idx), np.ones(n), float(np.trace(G)), partial=True)
    with factorization_threads():
        w, V = np.linalg.eigh(G)
    w, VT = np.clip(w[::-1], 0.0, None), np.ascontiguousarray(V[:, ::-1].T)
    keep = w > EIG_RTOL * max(w[0], 1e-300)
    _canonical_eigenspaces(w, VT, np.diag(G), keep)
    return _Eigen(w, lambda idx: _take_rows(VT, idx), (VT[keep] ** 2).sum(axis=0), float(np.trace(G)), cell_diag=np.diag(G).copy())


#: The Weyl sequence ``frac(j * GOLDEN)`` orders the cells without the symmetries of ``j`` (`_canonical_basis`).
GOLDEN = (1.0 + math.sqrt(5.0)) / 2.0


def _canonical_eigenspaces(w: np.ndarray, VT: np.ndarray, d: np.ndarray, keep: np.ndarray, rtol: float = 1e-9) -> None:
    """Rotate, in place, the eigen-queries of each repeated eigenvalue to a basis that does not depend on the cell order.

    Within an eigenspace of a repeated eigenvalue any orthonormal basis is an
    eigenbasis, and LAPACK's choice depends on how the cells are numbered; the
    weights of Program 5.1.1 (hence the error) depend on it through the
    sensitivity. The basis used is the eigenbasis of the compression
    ``V_k^T diag(d) V_k`` of the cells' Gram diagonal ``d``, which permuting the
    cells leaves unchanged: renumbering the cells (or splitting them into
    copies, `minimize_workload`) then gives the same strategy up to that
    renumbering whenever those compressions have distinct eigenvalues.
    """
    idx = np.flatnonzero(keep)
    if idx.size < 2:
        return
    for run in _repeated_runs(w[idx], rtol * w[idx[0]]):  # w descending
        rows = idx[run]
        VT[rows] = _canonical_basis(VT[rows], d, rtol)


def _repeated_runs(values: np.ndarray, tol: float) -> list[slice]:
    """The runs (slices, two entries or more) of sorted ``values`` whose neighbours differ by at most ``tol``.

    Examples
    --------
    >>> _repeated_runs(np.array([5.0, 3.0, 3.0, 3.0, 1.0, 0.5, 0.5]), 1e-9)
    [slice(1, 4, None), slice(5, 7, None)]
    """
    breaks = np.flatnonzero(np.abs(np.diff(values)) > tol) + 1
    edges = np.concatenate([[0], breaks, [values.size]])
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b - a > 1]


def _canonical_basis(block: np.ndarray, d: np.ndarray, rtol: float) -> np.ndarray:
    """The rows of ``block`` (an orthonormal basis of an eigenspace) rotated to the eigenbasis of ``block diag(d) block^T``.

    Where that compression has a repeated eigenvalue too (a constant ``d``: all
    cells of a marginal workload look alike), the sub-basis of each repeated
    value is rotated once more, by the compression of ``diag(t)`` with
    ``t_j = frac(j * golden ratio)``: a basis fixed by the eigenspace and the
    cell order, where LAPACK's depended on the BLAS kernel and thread count
    (separation on marginals:8x16x16:2: E_2 1.117-1.152 SVD bounds between
    kernels; an outside audit). Not the positions ``j`` themselves: their
    compression repeats values on symmetric domains (four times on
    marginals:4x4x4x4:2).
    """
    mu, R = np.linalg.eigh((block * d) @ block.T)
    block = R.T @ block
    position = (np.arange(block.shape[1]) * GOLDEN) % 1.0
    for run in _repeated_runs(mu, rtol * max(float(np.abs(mu).max()), 1e-300)):  # mu ascending
        sub = block[run]
        _, S = np.linalg.eigh((sub * position) @ sub.T)
        block[run] = S.T @ sub
    return block


def _kron_eigen(parts: list[_Eigen], rtol: float = 1e-9) -> _Eigen:
    """Eigen-queries of a Kronecker product: products of the factors' eigen-queries, rows on demand.

    Products of factor eigenvalues can coincide (``lambda_i mu_j = lambda_j mu_i``
    on a square grid of one workload), and within such an eigenspace the
    products are one arbitrary basis. As `_canonical_eigenspaces` does for a
    dense eigendecomposition, each repeated eigenspace is rotated to the
    eigenbasis of the compression of the cells' Gram diagonal ``d = kron(d_f)``,
    computed factor by factor (``(v_i (x) v_j)^T D (v_k (x) v_l) = (v_i^T D_1 v_k)(v_j^T D_2 v_l)``):
    the strategy is then the one the same matrix given as a file gets (an
    outside audit: prefix:16*prefix:16 had E_2 3377.9 against the file's 2808.2).
    """
    if len(parts) == 1:
        return parts[0]
    sizes = [len(p.values) for p in parts]
    values = reduce(np.multiply.outer, [p.values for p in parts]).ravel()

    def product_rows(idx):
        multi = np.unravel_index(np.asarray(idx), sizes)
        R = np.ones((len(multi[0]), 1))
        for p, i in zip(parts, multi):
            uniq, inv = np.unique(i, return_inverse=True)
            F = p.rows(uniq)[inv]
            R = (R[:, :, None] * F[:, None, :]).reshape(len(R), -1)
        return R

    rotations = _product_eigenspace_rotations(parts, sizes, values, rtol)

    def rows(idx):
        idx = np.asarray(idx)
        out = product_rows(idx)
        for members, position, R in rotations:  # one entry per group size: (groups x size) indices, rotations
            where = position[idx]
            hit = np.flatnonzero(where >= 0)
            if hit.size:
                g, a = np.divmod(where[hit], members.shape[1])
                groups, which = np.unique(g, return_inverse=True)  # each group's rows built once
                block = product_rows(members[groups].ravel()).reshape(groups.size, members.shape[1], -1)
                out[hit] = np.einsum("gba,gbn->gan", R[groups], block)[which, a]
        return out

    return _Eigen(
        values, rows, reduce(np.kron, [p.range_diag for p in parts]), float(np.prod([p.trace for p in parts])),
        cell_diag=reduce(np.kron, [p.cell_diag for p in parts]) if all(p.cell_diag is not None for p in parts) else None,
    )


def _product_eigenspace_rotations(parts: list[_Eigen], sizes: list[int], values: np.ndarray, rtol: float) -> list:
    """For each size of repeated product eigenspace: its members (groups x size), every index's position in
    its group (``-1``: none; group * size + slot) and the rotations (groups x size x size), new row a of a
    group being ``sum_b R[b, a] row_b`` (`_canonical_eigenspaces`'s ``R^T block``)."""
    if any(p.cell_diag is None for p in parts) or values.size < 2:
        return []
    order = np.argsort(-values, kind="stable")
    w = values[order]
    kept = np.flatnonzero(w > EIG_RTOL * max(w[0], 1e-300))
    if kept.size < 2:
        return []
    close = np.abs(np.diff(w[kept])) <= rtol * w[kept][:-1]  # relative: the products that coincide, not all small ones
    starts = np.flatnonzero(np.concatenate([[True], ~close]))
    lengths = np.diff(np.append(starts, kept.size))
    # a factor whose cells' Gram diagonal is constant (identity, identity + total) has a diagonal compression
    # (v_i^T D v_k = d delta_ik): products differing there are orthogonal under D whatever the rest
    constant = [bool(np.ptp(p.cell_diag) <= rtol * np.abs(p.cell_diag).max()) for p in parts]
    out = []
    for size in np.unique(lengths[lengths > 1]):
        first = starts[lengths == size]
        members = order[kept[first[:, None] + np.arange(size)[None, :]]]  # groups x size product indices
        index = np.unravel_index(members, sizes)
        varying = [(i != i[:, :1]).any(axis=1) for i in index]  # per factor: do the group's members differ there
        needed = np.zeros(members.shape[0], dtype=bool)
        for c, v in zip(constant, varying):
            if not c:
                needed |= v
        if not needed.any():
            continue
        members, index = members[needed], [i[needed] for i in index]
        C = np.ones((members.shape[0], size, size))
        for p, i in zip(parts, index):
            uniq, inv = np.unique(i, return_inverse=True)
            F = p.rows(uniq)[inv.reshape(i.shape)]  # groups x size x cells of this factor
            C *= np.matmul(F * p.cell_diag, F.transpose(0, 2, 1))
        scale = np.abs(np.einsum("gaa->ga", C)).max(axis=1)
        off = np.abs(C - np.einsum("gaa->ga", C)[:, :, None] * np.eye(size)).max(axis=(1, 2))
        rotate = off > rtol * scale  # a diagonal compression (identity factors: every product basis) needs no rotation
        if not rotate.any():
            continue
        members, C = members[rotate], C[rotate]
        _, R = np.linalg.eigh(C)
        position = np.full(values.size, -1)
        position[members.ravel()] = np.arange(members.size)
        out.append((members, position, R))
    return out


@dataclass
class _Design:
    """What Program 5.1.2 works on: the eigen-system of the design Gram and the cell map."""

    eigen: _Eigen
    mini: Minimization
    gram: Callable[[], np.ndarray]  # design Gram of the minimized workload (dense)
    total_gram: Callable[[], np.ndarray]  # Gram of the original workload, minimized (for the certificate)
    log_scale: float


def _design(problem: Problem, top: int | None) -> _Design:
    W = problem.workload
    objective = problem.objective
    factors = W.factors if isinstance(W, Kronecker) else [W]
    if objective == "total":
        parts, minis = [], []
        for f in factors:
            if isinstance(f, _MINIMAL):
                e, mi = _workload_eigen(f), Minimization.identity(f.n)
            else:
                G = f.gram()
                mi = Minimization(cell_classes(G))
                e = _generic_eigen(mi.reduce_gram(G), top if len(factors) == 1 else None)
            parts.append(e)
            minis.append(mi)
        mini = Minimization.kron(minis) if len(minis) > 1 else minis[0]

        def total_gram():
            return reduce(np.kron, [m.reduce_gram(f.gram()) for m, f in zip(minis, factors)])

        return _Design(_kron_eigen(parts), mini, total_gram, total_gram, W.log_scale)
    if objective == "relative":
        grams = [normalized_gram(f) for f in factors]
    elif objective == "weighted":
        grams = [weighted_gram(W, query_weights(problem))]  # refuses a missing or non-positive weights option
        factors = [W]
    else:
        raise InputError(f"eigen-design minimises a (weighted) total error; objective {objective!r} is not supported (use total, relative or weighted)")
    minis = [Minimization(cell_classes(G)) for G in grams]
    reduced = [m.reduce_gram(G) for m, G in zip(minis, grams)]
    mini = Minimization.kron(minis) if len(minis) > 1 else minis[0]
    eigen = _kron_eigen([_generic_eigen(G, top if len(reduced) == 1 else None) for G in reduced])

    def total_gram():
        if isinstance(W, Kronecker) and len(minis) == len(W.factors):  # one minimisation per factor (relative)
            return reduce(np.kron, [m.reduce_gram(f.gram()) for m, f in zip(minis, W.factors)])
        return mini.reduce_gram(W.gram())  # one over the whole domain (weighted: the weights need not factor)

    return _Design(eigen, mini, lambda: reduce(np.kron, reduced), total_gram, W.log_scale)


# --------------------------------------------------------------------------- programs


@dataclass
class _Weighted:
    """Weights of a design set: strategy rows ``sqrt(u_i) q_i`` before completion."""

    Q: np.ndarray  # design queries (rows) weighted individually
    u: np.ndarray
    loads: np.ndarray  # squared column norms of diag(sqrt(u)) Q (+ shared part), per cell
    value: float  # Program 5.1.1 objective: error of A' at max load 1
    program: dict
    shared: tuple[float, np.ndarray | None] | None = None  # principal vectors: (u_0, indices of the rows sharing it)


#: Least time in seconds a Program 5.1.1 solve gets once the profile's time_limit is spent (SCS reads 0 as no limit).
MIN_SOLVE_SECONDS = 1e-3


def _budget(profile, deadline: float | None):
    """The profile with its time_limit cut to what is left before ``deadline`` (a perf_counter time; None: unchanged).

    The profile's time_limit covers all of eigen-design (eigen-queries and every Program 5.1.1 solve).
    """
    if deadline is None:
        return profile
    return replace(profile, time_limit=max(min(profile.time_limit, deadline - time.perf_counter()), MIN_SOLVE_SECONDS))


def _nonzero(eigen: _Eigen) -> np.ndarray:
    order = np.argsort(-eigen.values, kind="stable")
    return order[eigen.values[order] > EIG_RTOL * max(float(eigen.values.max()), 1e-300)]


def _full(eigen: _Eigen, profile, deadline: float | None = None) -> _Weighted:
    idx = _nonzero(eigen)
    Q = eigen.rows(idx)
    B = np.ascontiguousarray((Q * Q).T)
    res = solve_weighting(eigen.values[idx], B, _budget(profile, deadline))
    return _Weighted(Q, res.u, B @ res.u, res.value, res.summary())


def _separation(eigen: _Eigen, profile, group_size: int, deadline: float | None = None) -> _Weighted:
    """Sec. 5.2.2.1: Program 5.1.1 per group of eigen-queries, then one scale per group."""
    idx = _nonzero(eigen)
    Q = eigen.rows(idx)
    c = eigen.values[idx]
    per, errors, loads = [], [], []
    iters, secs, statuses = 0, 0.0, {}
    for s in range(0, len(idx), group_size):
        Qg = Q[s : s + group_size]
        Bg = (Qg * Qg).T
        r = solve_weighting(c[s : s + group_size], Bg, _budget(profile, deadline))
        per.append(r.u)
        errors.append(r.value)
        loads.append(Bg @ r.u)
        iters += r.iterations
        secs += r.seconds
        statuses[r.status] = statuses.get(r.status, 0) + 1
    Bt = np.column_stack(loads)
    top = solve_weighting(np.array(errors), Bt, _budget(profile, deadline))
    u = np.concatenate([t * ug for t, ug in zip(top.u, per)])
    program = {**top.summary(), "groups": len(per), "group_iterations": iters, "group_seconds": secs, "group_statuses": statuses}
    unfinished = [k for k in statuses if k != "optimal"]
    if unfinished and program["status"] == "optimal":
        program["status"] = unfinished[0]  # a group stopped early (time_limit, max_iters, inaccurate): the design is not optimal either
    return _Weighted(Q, u, Bt @ top.u, float(top.value), program)


def _principal(eigen: _Eigen, profile, k: int, deadline: float | None = None) -> _Weighted:
    """Sec. 5.2.2.2: k leading eigen-queries weighted individually, the rest share one weight."""
    idx = _nonzero(eigen) if not eigen.partial else np.arange(len(eigen.values))
    top, rest = idx[:k], idx[k:]
    Q = eigen.rows(top)
    sq = Q * Q
    if eigen.partial:
        rest_value = eigen.trace - float(eigen.values[top].sum())
    else:
        rest_value = float(eigen.values[rest].sum())
    rest_load = np.clip(eigen.range_diag - sq.sum(axis=0), 0.0, None)
    if rest_value <= 0 or rest_load.max() <= 0:
        B = np.ascontiguousarray(sq.T)
        res = solve_weighting(eigen.values[top], B, _budget(profile, deadline))
        return _Weighted(Q, res.u, B @ res.u, res.value, res.summary())
    B = np.column_stack([sq.T, rest_load])
    res = solve_weighting(np.append(eigen.values[top], rest_value), B, _budget(profile, deadline))
    shared_rows = None if eigen.partial else rest
    return _Weighted(Q, res.u[:-1], B @ res.u, res.value, res.summary(), shared=(float(res.u[-1]), shared_rows))


def _basis_design(problem: Problem, basis: str, profile, deadline: float | None = None) -> tuple[_Weighted, _Design]:
    """Program 5.1.1 on a fixed basis (Sec. 5.3.5): ``c_i = ||(W Q^{-1})_{:,i}||^2``."""
    W = problem.workload
    if problem.objective != "total":
        raise InputError(f"option basis={basis!r} supports objective 'total' only")
    dom = W.domain
    if basis == "fourier":
        Q = fourier_matrix(dom, [tuple(range(len(dom)))])
    else:
        one = {"wavelet": lambda d: wavelet_matrix(d).toarray(), "identity": np.eye}[basis]
        Q = reduce(np.kron, [one(d) for d in dom])
    G = W.gram()
    Qinv = la.inv(Q)
    c = ((Qinv.T @ G) * Qinv.T).sum(axis=1)  # diag(Q^{-T} G Q^{-1})
    del G, Qinv  # two n x n matrices Program 5.1.1 does not need
    keep = c > EIG_RTOL * c.max()
    if not keep.all():
        Q = Q[keep]
    B = np.ascontiguousarray((Q * Q).T)
    res = solve_weighting(c[keep], B, _budget(profile, deadline))
    mini = Minimization.identity(W.n)
    design = _Design(None, mini, W.gram, W.gram, W.log_scale)
    return _Weighted(Q, res.u, B @ res.u, res.value, res.summary()), design


# --------------------------------------------------------------------------- assembly and certificate


def _assemble(wt: _Weighted, eigen: _Eigen | None) -> tuple[np.ndarray, int]:
    """Steps 3-5: ``A = [diag(sqrt(u)) Q; (shared rows); D']`` and the number of completion rows."""
    M2 = float(wt.loads.max())
    d2 = M2 - wt.loads
    d2[d2 <= 1e-12 * M2] = 0.0
    completion = np.flatnonzero(d2)
    n = wt.Q.shape[1]
    if wt.shared is None:
        blocks = [(np.sqrt(wt.u), wt.Q)]  # diag(sqrt(u)) Q, written straight into A
        diag = d2
    else:
        u0, rest = wt.shared
        if np.allclose(eigen.range_diag, 1.0, rtol=0.0, atol=1e-9):
            # G positive definite: the shared block is u0 (I - Q^T Q), so
            # X = Q^T diag(u - u0) Q + diag(u0 + d2), k + n rows instead of 2n
            up = wt.u >= u0
            blocks = [np.sqrt(wt.u[up] - u0)[:, None] * wt.Q[up]]
            diag = u0 + d2
            if not up.all():
                # principal weights below u0: factor diag(u0 + d2) - Q_-^T diag(u0 - u_-) Q_- (positive definite)
                Qm = wt.Q[~up]
                C = np.diag(diag) - (Qm.T * (u0 - wt.u[~up])) @ Qm
                with factorization_threads():
                    blocks.append(la.cholesky(C, lower=False, check_finite=False))
                diag = np.zeros(n)
        else:
            blocks = [np.sqrt(wt.u)[:, None] * wt.Q, math.sqrt(u0) * eigen.rows(rest)]
            diag = d2
    rows = np.flatnonzero(diag)
    # one preallocated matrix instead of a dense D' and a stacked copy (two n x n matrices fewer at the peak)
    sizes = [b[1].shape[0] if isinstance(b, tuple) else b.shape[0] for b in blocks]
    A = np.zeros((sum(sizes) + len(rows), n))
    start = 0
    for i, size in enumerate(sizes):
        if isinstance(blocks[i], tuple):
            np.multiply(blocks[i][0][:, None], blocks[i][1], out=A[start : start + size])
        else:
            A[start : start + size] = blocks[i]
        blocks[i] = None
        start += size
    A[start + np.arange(len(rows)), rows] = np.sqrt(diag[rows])
    nonzero = np.any(A != 0, axis=1)
    return (A if nonzero.all() else A[nonzero]), len(completion)


def _certificate(A_min: np.ndarray, gram: Callable[[], np.ndarray], factor: np.ndarray | None) -> float:
    """Dual bound of the L2 program at the KKT weights of ``X = A^T A`` (see the module docstring).

    With a factor ``L L^T = G`` the weights come from ``X^{-1} L`` and G is never formed.
    """
    with factorization_threads():
        if factor is not None:
            return kkt_bound(None, A_min.T @ A_min, factor=factor)
        G = gram()
        return kkt_bound(G, A_min.T @ A_min)


def _gram_factor(eigen: _Eigen) -> np.ndarray | None:
    """``L = Q^T diag(sqrt(sigma))`` with ``L L^T = G`` from complete eigen-queries (None if partial)."""
    if eigen.partial:
        return None
    idx = _nonzero(eigen)
    return eigen.rows(idx).T * np.sqrt(eigen.values[idx])


# --------------------------------------------------------------------------- the method


def _options(problem: Problem, n: int) -> dict:
    opts = dict(problem.options)  # names checked against _OPTIONS by the registry (api.solve)
    basis = opts.get("basis", "eigen")
    if basis not in _BASES:
        raise OptionError(f"eigen-design: basis must be one of {', '.join(_BASES)}, got {basis!r}")
    group = opts.get("group_size")
    sep = opts.get("separation", group is not None)
    if not isinstance(sep, (bool, np.bool_)):
        raise OptionError(f"eigen-design: separation must be true or false, got {sep!r}")
    sep = bool(sep)
    if not sep and group is not None:
        raise OptionError("eigen-design: group_size applies to eigen-query separation; drop separation=false or group_size")
    if sep:
        group = max(1, round(n ** (1.0 / 3.0))) if group is None else group
        if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or not 1 <= group <= n:
            raise OptionError(f"eigen-design: group_size must be an integer in [1, {n}] (the number of cells), got {group!r}")
    principal = opts.get("principal", False)
    if isinstance(principal, np.bool_):
        principal = bool(principal)
    k = None
    if principal is True:
        k = max(1, math.ceil(PRINCIPAL_FRACTION * n))
    elif principal is not False:
        if isinstance(principal, (int, np.integer)) and not isinstance(principal, bool) and 1 <= principal <= n:
            k = int(principal)
        elif isinstance(principal, float) and 0 < principal <= 1:
            k = max(1, math.ceil(principal * n))
        else:
            raise OptionError(f"eigen-design: principal must be true, a fraction in (0, 1] or a count in [1, {n}] (the number of cells), got {principal!r}")
    if sep and k is not None:
        raise InputError("eigen-design: choose either separation (group_size) or principal vectors, not both")
    if basis != "eigen" and (sep or k is not None):
        given = ", ".join(name for name in ("separation", "group_size", "principal") if name in opts)
        raise InputError(f"eigen-design: {given} (eigen-query separation or principal vectors) apply to eigen-queries only (basis=eigen), "
                         f"not to basis={basis}; drop {given} or the basis")
    check_weights_objective(problem)
    cert = opts.get("certificate")
    if cert is not None and not isinstance(cert, (bool, np.bool_)):
        raise OptionError(f"eigen-design: certificate must be true or false, got {cert!r}")
    cert = None if cert is None else bool(cert)
    return {"basis": basis, "group_size": int(group) if sep else None, "principal": k, "certificate": cert}


@register_method(
    "eigen-design",
    options=tuple(_OPTIONS),
    objectives=("total", "relative", "weighted"),
    privacy=("approx",),
    source="Li 2013, Ch. 5, Programs 5.1.1/5.1.2; Li & Miklau, PVLDB 5(6) 2012",
    summary="optimally weighted eigen-queries of W^T W plus completion rows",
)
def eigen_design(problem: Problem):
    """Eigen-Design strategy for (epsilon, delta)-DP (see the module docstring).

    Options (``problem.options``)
    -----------------------------
    separation : bool
        Eigen-query separation (Sec. 5.2.2.1); group size ``group_size``
        (default ``round(n^(1/3))``; giving ``group_size`` turns it on).
    principal : bool, float or int
        Principal vectors (Sec. 5.2.2.2): ``true`` keeps 10% of the
        eigen-queries, a float in (0, 1] that fraction, an int that count.
    basis : {'eigen', 'wavelet', 'fourier', 'identity'}
        Design set of Program 5.1.1 (Sec. 5.3.5); ``eigen`` is Eigen-Design.
    certificate : bool
        Compute the dual lower bound (default: n <= 4096 and complete eigen-queries).
    weights : list of float
        Per-query weights for objective ``weighted``.

    Examples
    --------
    On identity:3 the eigenvectors are the unit vectors and Eigen-Design returns
    the identity (in reversed eigen order), ``E = 3``, the SVD bound:

    >>> from strategy_opt import solve
    >>> s = solve("identity:3", privacy="approx", method="eigen-design")
    >>> s.dense().tolist(), round(s.meta["unit_total_squared_error"], 9)
    ([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], 3.0)
    """
    t0 = time.perf_counter()
    W = problem.workload
    opts = _options(problem, W.n)
    copies = DENSE_COPIES if problem.objective == "total" else DENSE_COPIES_REWEIGHTED
    require_memory(
        copies * 8.0 * float(W.n) ** 2,
        f"eigen-design on {W.n} cells ({copies} dense {W.n}x{W.n} matrices of {format_bytes(8.0 * W.n * W.n)})",
        "try a smaller domain, or hierarchical/wavelet (structured strategies)",
    )
    profile = problem.solver
    deadline = t0 + profile.time_limit  # the profile's time_limit covers the eigen-queries and Program 5.1.1
    if opts["basis"] != "eigen":
        wt, design = _basis_design(problem, opts["basis"], profile, deadline)
        variant = f"basis:{opts['basis']}"
        eig_seconds = 0.0
    else:
        design = _design(problem, opts["principal"])
        eig_seconds = time.perf_counter() - t0
        log.info("eigen-design: eigen-queries of %d cells ready (%.1fs)", design.mini.n_min, eig_seconds)
        rank = design.mini.n_min if design.eigen.partial else len(_nonzero(design.eigen))
        if opts["principal"] is not None and opts["principal"] < rank - 1:
            wt = _principal(design.eigen, profile, opts["principal"], deadline)
            variant = "principal"
        elif opts["group_size"] is not None:
            wt = _separation(design.eigen, profile, opts["group_size"], deadline)
            variant = "separation"
        else:
            wt = _full(design.eigen, profile, deadline)
            variant = "full"
    reduced = variant in ("separation", "principal")  # a smaller program than 5.1.1 (Sec. 5.2.2)
    A_min, n_completion = _assemble(wt, design.eigen)
    solve_seconds = time.perf_counter() - t0
    extra = {
        "eigen_design": {
            "variant": variant,
            "design_queries": int(wt.Q.shape[0]),
            "group_size": opts["group_size"],
            "principal_vectors": int(wt.Q.shape[0]) if variant == "principal" else None,
            "minimized_cells": design.mini.n_min,
            "completion_rows": n_completion,
            "pre_completion_error": float(wt.value),
            "eigen_seconds": eig_seconds,
            # separation and principal vectors solve a smaller program than 5.1.1 (one scale per group; k weights
            # and one shared weight): its status and dual value are that program's, not Program 5.1.1's
            ("reduced_program" if reduced else "program_5_1_1"): wt.program,
        }
    }
    extra.update(weights_meta(problem, query_weights(problem) if problem.objective == "weighted" else None))
    M2 = float(wt.loads.max())
    solver, status = wt.program["backend"], wt.program["status"]
    if reduced and status == "optimal":
        status = "heuristic"  # the reduced program's optimum is not Program 5.1.1's
    if problem.solver.backend == "cvxpy" and solver == f"cvxpy:{problem.solver.solver}":
        solver = problem.solver.name  # the profile that ran, as the other methods record it (minerror-l2's "scs1")
    del wt  # the design queries (up to n x n) are not needed past this point
    want_cert = opts["certificate"]
    if want_cert is None:
        want_cert = design.mini.n_min <= CERTIFICATE_MAX_N and not (design.eigen is not None and design.eigen.partial)
    objective_value = None
    if problem.objective != "total":
        G_design = design.gram()
        E = M2 * ErrorProfile(A_min).trace_with(G_design)
        log_val = math.log(E) + design.log_scale if E > 0 else -math.inf
        objective_value = math.exp(log_val) if log_val < 709 else math.inf
        extra["objective_value_log10"] = log_val / math.log(10)
        if want_cert:
            # the dual bound of the program the design minimises (weighted Gram) at the strategy's KKT weights
            with factorization_threads():
                kkt = kkt_bound(G_design, A_min.T @ A_min)
            log_lower = math.log(kkt) + design.log_scale if kkt > 0 else -math.inf
            obj_lower = math.exp(log_lower) if log_lower < 709 else math.inf
            extra.update(
                objective_lower_bound=finite_or_none(obj_lower),
                objective_lower_bound_log10=log_lower / math.log(10) if math.isfinite(log_lower) else None,
                objective_lower_bound_kind="dual-certificate",
                objective_relative_gap=finite_or_none(relative_gap(objective_value, obj_lower)),
            )
        else:
            extra.update(objective_lower_bound=None, objective_lower_bound_kind=None, objective_relative_gap=None)
            extra["objective_lower_bound_unavailable"] = "certificate skipped (more than CERTIFICATE_MAX_N cells or partial eigen-queries); pass certificate=True (--option certificate=true)"
        del G_design
    lower, kind = None, None
    factor = _gram_factor(design.eigen) if want_cert and problem.objective == "total" and design.eigen is not None else None
    design.eigen = design.gram = None  # the eigen-queries and the design Gram (n x n each) are not needed past here
    if want_cert:
        tc = time.perf_counter()
        log.info("eigen-design: computing the dual certificate (a lower bound on every strategy's error)")
        lower, kind = _certificate(A_min, design.total_gram, factor), "dual-certificate"
        extra["certificate_seconds"] = time.perf_counter() - tc
        log.info("eigen-design: dual certificate %.10g in %.1f s", lower, extra["certificate_seconds"])
    del factor
    extra["eigen_design"]["factorization_threads"] = FACTORIZATION_THREADS
    rtol = max(problem.solver.tol, INACCURATE_RTOL) if str(status).endswith("_inaccurate") else problem.solver.tol
    A = design.mini.expand(A_min)
    del A_min
    with factorization_threads():  # the compiler factors A^T A (see strategy_opt.threads)
        strategy = compile_strategy(
            A,
            problem,
            "eigen-design",
            solver=solver,
            status=status,
            solve_seconds=solve_seconds,
            objective_value=objective_value,
            lower_bound=lower,
            lower_bound_kind=kind,
            extra=extra,
        )
    reconcile_bound(strategy.meta, rtol)
    return strategy
