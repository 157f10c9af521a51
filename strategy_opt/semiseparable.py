"""Gram matrices of generator-representable semiseparable form, multiplied in O(p n).

The Gram matrices of all ranges, prefixes, suffixes and the total query over a
1-D domain share one structure::

    G_ij = u_min(i,j) * v_max(i,j)

(all ranges: ``u_i = i + 1``, ``v_j = n - j``, since G_ij counts the intervals
``[a, b]`` with ``a <= min(i, j)`` and ``b >= max(i, j)``; prefixes ``[0, b]``:
``u = 1``; the total: ``u = v = 1``). A product ``X G`` with a p x n matrix X then
takes two cumulative sums, O(p n) instead of O(p n^2)::

    (X G)_j = v_j * sum_{i <= j} X_i u_i  +  u_j * sum_{i > j} X_i v_i

`SemiseparableGram.detect` reads the generators off a dense Gram matrix and keeps
them only when they reproduce it to rounding; the p-Identity optimiser
(`strategy_opt.programs.pidentity`) uses them for its products with the Gram matrix.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SemiseparableGram"]

#: Largest entrywise deviation, relative to the largest entry, of a Gram matrix from its
#: generators' reconstruction for the structure to be used.
DETECT_RTOL = 1e-12
#: Largest ratio of a generator's largest to its smallest entry (`SemiseparableGram.detect`): all ranges span n,
#: while the Kac matrix ``0.25^|i - j|`` on 512 cells spans 1e307 and overflowed the products.
MAX_GENERATOR_RANGE = 1e50


class SemiseparableGram:
    """The symmetric matrix ``G_ij = u_min(i,j) v_max(i,j)`` from its generators u, v.

    Parameters
    ----------
    u, v : ndarray, shape (n,)
        The generators.

    Examples
    --------
    The Gram matrix of the prefixes of three cells, ``G_ij = 3 - max(i, j)``:

    >>> G = SemiseparableGram(np.ones(3), np.array([3.0, 2.0, 1.0]))
    >>> G.dense().tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    >>> G.right_product(np.array([[1.0, 0.0, 1.0]])).tolist()  # rows 0 + 2 of G
    [[4.0, 3.0, 2.0]]
    """

    def __init__(self, u: np.ndarray, v: np.ndarray):
        self.u = np.asarray(u, dtype=float)
        self.v = np.asarray(v, dtype=float)

    def dense(self) -> np.ndarray:
        """The n x n matrix.

        Examples
        --------
        >>> SemiseparableGram(np.array([1.0, 2.0]), np.array([2.0, 1.0])).dense().tolist()  # all ranges of 2 cells
        [[2.0, 1.0], [1.0, 2.0]]
        """
        upper = np.triu(np.outer(self.u, self.v))
        return upper + np.triu(upper, 1).T

    def diagonal(self) -> np.ndarray:
        """``G_ii = u_i v_i``.

        Examples
        --------
        >>> SemiseparableGram(np.array([1.0, 2.0]), np.array([2.0, 1.0])).diagonal().tolist()
        [2.0, 2.0]
        """
        return self.u * self.v

    def right_product(self, X: np.ndarray) -> np.ndarray:
        """``X G`` for X of shape (p, n), by two cumulative sums along the rows (O(p n)).

        The sums run forward over ``X u`` and backward over ``X v``, with no
        differences of running totals, so a non-negative X loses no digits.

        Examples
        --------
        >>> G = SemiseparableGram(np.arange(1.0, 5.0), np.arange(4.0, 0.0, -1.0))  # all ranges of 4 cells
        >>> X = np.arange(8.0).reshape(2, 4)
        >>> bool(np.allclose(G.right_product(X), X @ G.dense()))
        True
        """
        X = np.asarray(X, dtype=float)
        out = np.cumsum(X * self.u, axis=1) * self.v
        tail = np.cumsum((X * self.v)[:, :0:-1], axis=1)[:, ::-1]  # sum over i > j of X_i v_i, for j < n - 1
        out[:, :-1] += tail * self.u[:-1]
        return out

    @classmethod
    def detect(cls, G: np.ndarray) -> SemiseparableGram | None:
        """The generators of a dense symmetric G, or None when G has no such form (to `DETECT_RTOL`).

        With ``u_0 = 1``: ``v_j = G_0j`` and ``u_i = G_ii / v_i``; they are kept
        when they are positive, span at most `MAX_GENERATOR_RANGE` each and
        reproduce G. O(n^2) once.

        Examples
        --------
        >>> from strategy_opt.workload import all_range, identity
        >>> S = SemiseparableGram.detect(all_range(4).gram())
        >>> S.u.tolist(), S.v.tolist()
        ([1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0])
        >>> SemiseparableGram.detect(identity(4).gram()) is None  # diagonal: v_j = G_0j = 0
        True
        """
        G = np.asarray(G, dtype=float)
        if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
            return None
        v = G[0].copy()
        if not np.all(v > 0):
            return None
        u = np.diag(G) / v
        # generators spanning a huge range (the Kac matrix rho^|i-j| has u_i = rho^-i) overflow X u in `right_product`
        # where X G is finite: such a G is used densely
        if not (np.all(u > 0) and u.max() <= MAX_GENERATOR_RANGE * u.min() and v.max() <= MAX_GENERATOR_RANGE * v.min()):
            return None
        candidate = cls(u, v)
        scale = np.abs(G).max()
        if not np.isfinite(scale) or np.abs(candidate.dense() - G).max() > DETECT_RTOL * scale:
            return None
        return candidate
