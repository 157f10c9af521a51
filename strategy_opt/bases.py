"""Classic strategy matrices, also used as design bases.

* `hierarchical_matrix` -- the hierarchy H_b of interval sums (Hay et al. 2010;
  Li 2013 Fig. 2.3, Sec. 3.3), branching b, for any n (intervals split as evenly as possible).
* `wavelet_matrix` -- the Haar wavelet Y_n (Privelet, Xiao et al. 2010;
  Li 2013 Sec. 3.3.1, Prop. 3.9), unnormalised +-1 entries; for n not a power of two the
  unbalanced Haar tree (each interval split into ceil/floor halves).
* `fourier_matrix` -- the Fourier strategy for marginal workloads (Barak et al.
  2007; Li 2013 Sec. 5.3.2): the real Fourier characters needed by the marginals.

All return ``scipy.sparse.csr_matrix`` except the Fourier basis (dense).

Examples
--------
>>> hierarchical_matrix(4, 2).toarray().astype(int).tolist()[:3]
[[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
>>> wavelet_matrix(4).toarray().astype(int).tolist()
[[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
"""

from __future__ import annotations

import math
from functools import reduce
from itertools import combinations
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from .exceptions import InputError
from .resources import format_bytes, require_memory

__all__ = ["identity_matrix", "hierarchy_intervals", "hierarchical_matrix", "wavelet_matrix", "fourier_matrix", "kron_all"]


def identity_matrix(n: int) -> sp.csr_matrix:
    """The n x n identity strategy.

    Parameters
    ----------
    n : int
        Number of cells.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n, n)

    Examples
    --------
    >>> identity_matrix(3).toarray().tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return sp.identity(n, format="csr")


def _split(lo: int, hi: int, b: int) -> list[tuple[int, int]]:
    """Split [lo, hi) into min(b, hi - lo) contiguous parts of near-equal size."""
    k = min(b, hi - lo)
    edges = lo + (np.arange(k + 1) * (hi - lo)) // k
    return [(int(edges[i]), int(edges[i + 1])) for i in range(k)]


def hierarchy_intervals(n: int, branching: int = 2) -> list[tuple[int, int]]:
    """The half-open intervals ``[lo, hi)`` of the hierarchy H_b, one per row of `hierarchical_matrix`.

    The root (all cells), then breadth-first every node's children (`_split`),
    down to the n unit intervals; a node comes after its parent.

    Parameters
    ----------
    n : int
        Number of cells.
    branching : int, default 2
        Children per node (at most; a node of fewer cells has one child per cell).

    Returns
    -------
    list of (int, int)
        ``(lo, hi)`` per node, root first.

    Raises
    ------
    InputError
        If ``branching < 2``.

    Examples
    --------
    >>> hierarchy_intervals(4)
    [(0, 4), (0, 2), (2, 4), (0, 1), (1, 2), (2, 3), (3, 4)]
    >>> hierarchy_intervals(5)  # uneven splits: 5 = 2 + 3, then 3 = 1 + 2
    [(0, 5), (0, 2), (2, 5), (0, 1), (1, 2), (2, 3), (3, 5), (3, 4), (4, 5)]
    """
    if branching < 2:
        raise InputError(f"branching must be >= 2, got {branching}")
    rows = []
    level = [(0, n)]
    while level:
        rows.extend(level)
        level = [c for lo, hi in level if hi - lo > 1 for c in _split(lo, hi, branching)]
    return rows


def hierarchical_matrix(n: int, branching: int = 2) -> sp.csr_matrix:
    """Hierarchy of interval sums with the given branching factor.

    Rows: the root (all cells), then breadth-first every node's children,
    down to the n unit intervals (`hierarchy_intervals`). For n = b^k this is
    H_b of Hay et al.

    Parameters
    ----------
    n : int
        Number of cells.
    branching : int, default 2
        Branching factor b (at least 2).

    Returns
    -------
    scipy.sparse.csr_matrix, shape (len(hierarchy_intervals(n, branching)), n)
        0-1 rows, one per node.

    Raises
    ------
    InputError
        If ``branching < 2``.

    Examples
    --------
    >>> H = hierarchical_matrix(3, 3)  # the root, then the three cells
    >>> H.toarray().astype(int).tolist()
    [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    >>> hierarchical_matrix(8, 2).shape  # 1 + 2 + 4 + 8 nodes
    (15, 8)
    """
    rows = hierarchy_intervals(n, branching)
    lengths = np.array([hi - lo for lo, hi in rows])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.arange(lo, hi) for lo, hi in rows])
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), n))


def wavelet_matrix(n: int) -> sp.csr_matrix:
    """Haar wavelet strategy: the total, then (left half - right half) of every tree node.

    Parameters
    ----------
    n : int
        Number of cells.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n, n)
        Entries 0 and +-1; a node of odd size puts its extra cell in the left (+1) half.

    Examples
    --------
    >>> wavelet_matrix(3).toarray().astype(int).tolist()  # [0, 3) splits into [0, 2) and [2, 3)
    [[1, 1, 1], [1, 1, -1], [1, -1, 0]]
    """
    rows, cols, vals = [np.zeros(n, dtype=int)], [np.arange(n)], [np.ones(n)]
    r = 1
    level = [(0, n)]
    while level:
        nxt = []
        for lo, hi in level:
            if hi - lo < 2:
                continue
            mid = lo + (hi - lo + 1) // 2
            rows.append(np.full(hi - lo, r))
            cols.append(np.arange(lo, hi))
            vals.append(np.where(np.arange(lo, hi) < mid, 1.0, -1.0))
            r += 1
            nxt += [(lo, mid), (mid, hi)]
        level = nxt
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, n))


def _real_fourier_1d(d: int) -> np.ndarray:
    """Real orthogonal Fourier basis of R^d: row 0 constant, then cos/sin pairs (+-1 scale for d = 2)."""
    t = np.arange(d)
    rows = [np.ones(d)]
    for k in range(1, d // 2 + 1):
        rows.append(np.cos(2 * np.pi * k * t / d))
        if 2 * k != d:
            rows.append(np.sin(2 * np.pi * k * t / d))
    return np.array(rows[:d])


def fourier_matrix(shape: Sequence[int], attribute_sets: Sequence[Sequence[int]]) -> np.ndarray:
    """Fourier strategy for marginals over the given attribute sets.

    For binary attributes these are the Walsh-Hadamard characters chi_S
    (entries +-1) with S contained in some marginal's attribute set; for an
    attribute of size d the non-constant characters are the real cosine/sine
    rows of the d-point DFT. The marginal over T is a linear combination of the
    characters with support inside T, so the result supports the workload.

    Parameters
    ----------
    shape : sequence of int
        The attribute sizes (the data domain).
    attribute_sets : sequence of sequence of int
        The attributes (0-based indices into ``shape``) of each marginal.

    Returns
    -------
    ndarray, shape (r, prod(shape))
        Dense; blocks of characters by growing support set S (the constant row first),
        ``prod_{i in S} (shape[i] - 1)`` rows each.

    Raises
    ------
    InputError
        If the dense matrix does not fit in the available memory.

    Examples
    --------
    The 1-way marginal on attribute 0 of a 2 x 2 domain: the constant character and chi_{0}:

    >>> fourier_matrix((2, 2), [(0,)]).round(12).astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, -1, -1]]
    >>> fourier_matrix((2, 2), [(0, 1)]).shape  # all 4 characters of the 2-way marginal
    (4, 4)
    """
    shape = tuple(int(d) for d in shape)
    attribute_sets = [tuple(T) for T in attribute_sets]
    # the characters inside one attribute set T are prod_{i in T} d_i rows: a lower bound
    # checked before the subsets are enumerated
    _require_fourier_memory(shape, max((math.prod(shape[i] for i in T) for T in attribute_sets), default=1))
    needed: set[frozenset[int]] = set()
    for T in attribute_sets:
        for r in range(len(T) + 1):
            needed.update(frozenset(S) for S in combinations(T, r))
    _require_fourier_memory(shape, sum(math.prod(shape[i] - 1 for i in S) for S in needed))
    blocks = []
    bases = [_real_fourier_1d(d) for d in shape]
    for S in sorted(needed, key=lambda s: (len(s), sorted(s))):
        factors = [bases[i][1:] if i in S else bases[i][:1] for i in range(len(shape))]
        blocks.append(reduce(np.kron, factors))
    return np.vstack(blocks)


def _require_fourier_memory(shape: tuple[int, ...], rows: int) -> None:
    """Refuse (`InputError`) a dense Fourier strategy of ``rows`` rows that does not fit: its blocks and their stacked copy."""
    n = math.prod(shape)
    one = 8.0 * rows * n
    require_memory(
        2 * one,
        f"the Fourier strategy on domain {list(shape)} (a dense {rows}x{n} matrix of {format_bytes(one)}, built twice)",
        "use a smaller domain or a structured method (identity, hierarchical, wavelet)",
    )


def kron_all(factors: Sequence) -> sp.csr_matrix:
    """Sparse Kronecker product of a list of matrices.

    Parameters
    ----------
    factors : sequence of array_like or sparse matrices
        The factors, left to right.

    Returns
    -------
    scipy.sparse.csr_matrix

    Examples
    --------
    >>> kron_all([np.eye(2), [[1.0, 1.0]]]).toarray().tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """
    return sp.csr_matrix(reduce(lambda a, b: sp.kron(a, b, format="csr"), [sp.csr_matrix(f) for f in factors]))
