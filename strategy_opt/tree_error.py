"""Unit error of a hierarchical strategy H_b from its tree, in O(n^2) instead of O(n^3).

Choosing the branching of H_b (``hierarchical`` without ``--branching``,
``auto-pure``) compares the unit error ``E_p = ||A||_p^2 trace(G (A^T A)^{-1})``
of a dozen trees. The general route factors the dense n x n matrix ``A^T A``
for each; a tree of intervals gives ``(A^T A)^{-1}`` directly.

Every row of H_b is the indicator of an interval, the intervals are nested and
the leaves are the n unit intervals, so (derived here) ``A^T A = M_root`` with
``M_leaf(j) = d_j`` (1, plus the squared deficit of column j that the
epsilon-DP column completion of `strategy_opt.augment` appends) and, for a node
v with children c_1 .. c_k,

    M_v = blockdiag(M_c1, ..., M_ck) + 1 1^T.

By Sherman-Morrison, with ``B = blockdiag(M_c)``, ``u = B^{-1} 1``:

    M_v^{-1} = B^{-1} - u u^T / (1 + 1^T u),

a rank-one update of the node's diagonal block. Bottom-up over the tree this
builds ``(A^T A)^{-1}`` in ``sum_v |v|^2 <= n^2 / (1 - 1/b)`` operations (plus
a Python step per internal node), and ``trace(G (A^T A)^{-1})`` is one
elementwise product. It equals the general route to rounding (tests compare
the two, completed columns included); the compiler still analyses the chosen
tree by the general route.

Examples
--------
>>> from strategy_opt.bases import hierarchical_matrix
>>> from strategy_opt.compiler import reported_error
>>> from strategy_opt.workload import prefix
>>> W = prefix(8)
>>> tree = hierarchy_unit_error(8, 2, W.gram(), p=1)
>>> general = reported_error(hierarchical_matrix(8, 2), W, 1)[1]
>>> round(tree, 6), abs(tree - general) <= 1e-12 * general
(87.771429, True)
"""

from __future__ import annotations

import numpy as np

from .augment import COMPLETION_RTOL
from .bases import hierarchy_intervals
from .workload import _require_dense

__all__ = ["hierarchy_unit_error"]


def _column_counts(n: int, intervals: list[tuple[int, int]]) -> np.ndarray:
    """How many intervals contain each cell (the column sums of the 0/1 strategy)."""
    steps = np.zeros(n + 1)
    lo, hi = np.array(intervals).T
    np.add.at(steps, lo, 1.0)
    np.add.at(steps, hi, -1.0)
    return np.cumsum(steps[:n])


def hierarchy_unit_error(n: int, branching: int, gram: np.ndarray, p: int) -> float:
    """``E_p`` of H_b (as `strategy_opt.compiler.reported_error` gives it) on a workload with this Gram.

    Parameters
    ----------
    n : int
        Number of cells.
    branching : int
        Branching factor b >= 2 (`strategy_opt.bases.hierarchy_intervals`).
    gram : ndarray, shape (n, n)
        The workload's Gram matrix ``W^T W``.
    p : {1, 2}
        Sensitivity norm. Under L1 the deficient columns (cells at a shallower
        depth when n is not a power of b) are completed as the compiler
        completes them, which never raises E_1.

    Returns
    -------
    float
        ``||A||_p^2 trace(G (A^T A)^{-1})``.

    Examples
    --------
    H_2 on 2 cells is ``[[1, 1], [1, 0], [0, 1]]``: ``A^T A = I + J``, column norms 2 (L1) and ``sqrt 2`` (L2).
    For the total query ``[1, 1]`` (eigenvalue 3 of ``I + J``) ``trace(G (A^T A)^{-1}) = 2 / 3``:

    >>> from strategy_opt.workload import total
    >>> round(hierarchy_unit_error(2, 2, total(2).gram(), 1), 6), round(hierarchy_unit_error(2, 2, total(2).gram(), 2), 6)  # 4 * 2/3, 2 * 2/3
    (2.666667, 1.333333)
    """
    intervals = hierarchy_intervals(n, branching)
    _require_dense(n, "tree error of a hierarchical strategy", copies=3.0)
    counts = _column_counts(n, intervals)
    top = counts.max()
    diagonal = np.ones(n)
    if p == 1:
        deficit = top - counts
        deficit[deficit <= COMPLETION_RTOL * top] = 0.0
        diagonal += deficit**2
        sensitivity_sq = top**2
    else:
        sensitivity_sq = top
    inverse = np.diag(1.0 / diagonal)
    for lo, hi in reversed(intervals):  # children before their parent
        if hi - lo < 2:
            continue
        block = inverse[lo:hi, lo:hi]
        u = block.sum(axis=1)
        block -= np.multiply.outer(u, u / (1.0 + u.sum()))
    return float(sensitivity_sq * np.vdot(gram, inverse))
