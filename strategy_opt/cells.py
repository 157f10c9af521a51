"""Cells a workload cannot tell apart: its equal and zero columns, read off the Gram matrix.

Columns j and k of W are equal iff ``G_jj + G_kk - 2 G_jk = ||w_j - w_k||^2`` vanishes,
and column j is zero iff ``G_jj = 0`` (Li 2013, Def. 2.6). Merging equal columns and
dropping zero ones gives the minimized workload, on which the strategy programs run.

Each pair is compared at its own scale, ``||w_j - w_k||^2 <= rtol (||w_j||^2 + ||w_k||^2)``,
so cells read by small queries are told apart even beside a query 1e5 times larger.
A diagonal entry of G is a sum of squares, so a zero column has an exactly zero diagonal
entry; `ZERO_RTOL` only absorbs rounding in Gram matrices assembled from parts.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ZERO_RTOL", "cell_classes", "merged_cells", "class_representatives"]

#: A diagonal entry of G at most this share of the largest is a zero column.
ZERO_RTOL = 1e-14


def cell_classes(G: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Group the cells of a workload by equal columns, from its Gram matrix.

    Parameters
    ----------
    G : ndarray, shape (n, n)
        The workload's Gram matrix ``W^T W``.
    rtol : float
        Two columns are equal when ``||w_j - w_k||^2 <= rtol (||w_j||^2 + ||w_k||^2)``.

    Returns
    -------
    ndarray of int, shape (n,)
        Class of every cell, numbered by first occurrence; -1 for zero columns.

    Examples
    --------
    >>> W = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1e-6, 0.0, 0.0]])
    >>> cell_classes(W.T @ W).tolist()
    [0, 1, 0, -1]
    """
    G = np.asarray(G)
    d = np.diag(G).astype(float)
    classes = np.full(d.size, -1, dtype=np.int64)
    if d.size == 0 or not d.max() > 0:
        return classes
    free = d > ZERO_RTOL * float(d.max())
    nxt = 0
    for j in np.flatnonzero(free):
        if not free[j]:
            continue
        cand = np.flatnonzero(free)
        same = cand[d[j] + d[cand] - 2.0 * G[j, cand] <= rtol * (d[j] + d[cand])]
        classes[same] = nxt
        free[same] = False
        nxt += 1
    return classes


def merged_cells(G: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """The minimized workload's cells (Li 2013, Def. 2.6): `cell_classes` and one representative per class.

    Returns
    -------
    cell_of : ndarray of int, shape (n,)
        Merged cell of each cell, -1 for cells no query touches.
    reps : ndarray of int, shape (n',)
        The first cell of every merged cell, in domain order.

    Examples
    --------
    >>> W = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    >>> cell_of, reps = merged_cells(W.T @ W)
    >>> cell_of.tolist(), reps.tolist()
    ([0, 0, 1, -1], [0, 2])
    """
    cell_of = cell_classes(G, rtol)
    return cell_of, class_representatives(cell_of)


def class_representatives(classes: np.ndarray) -> np.ndarray:
    """The first cell of every class of `cell_classes`, in class order (which is domain order).

    Examples
    --------
    >>> class_representatives(np.array([0, 1, 0, -1, 2])).tolist()
    [0, 1, 4]
    """
    classes = np.asarray(classes)
    live = np.flatnonzero(classes >= 0)
    _, first = np.unique(classes[live], return_index=True)
    return live[first]
