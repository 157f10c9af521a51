"""General signed epsilon-DP strategies by multi-start local search, for small domains.

The epsilon-DP program (Li 2013, Program 3.4.1) is non-convex: its optimum need not be a
p-Identity strategy, a weighted basis or anything an SDP relaxation rounds to. On small
domains a direct search is affordable. A strategy is parametrised by a free matrix B
(``rows`` x n, entries of either sign) whose columns are scaled to L1 norm 1,

    A = B diag(1 / ||b_j||_1),   E_1(A) = trace(G (A^T A)^{-1})   (||A||_1 = 1),

and E_1 is minimised by L-BFGS from several starts: dense Gaussian matrices, the identity
plus small non-negative rows (p-Identity-like), the identity plus sparse rows, and a warm
start (the best strategy found by other means). The gradient is exact wherever no entry of
B is zero (``d|b|/db = sign(b)``); A^T A is kept positive definite (an iterate where its
Cholesky factorisation fails is priced at infinity), so every strategy found has full
column rank on the minimised workload's cells (equal workload columns merged, Li 2013
Def. 2.6, as p-Identity does) and supports the workload.

On small signed or low-rank workloads this finds strategies 6-22% below the best of the
other epsilon-DP candidates (an outside audit's random search, which this reproduces:
rank 3 over 9 cells 232.2 -> 204.1); on range workloads it rarely beats p-Identity
(benchmarks/results/pure_dp_small_global.md).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.optimize as so

from ..threads import one_blas_thread
from ..workload import gram_unit
from .pidentity import expand_cells, merged_cells

__all__ = ["normalised_error", "signed_search", "SignedSearchResult"]

log = logging.getLogger("strategy_opt")

#: Starts of one search (beside the warm start): row counts n and 2n, three kinds of start ...
SIGNED_STARTS = 12
#: ... and on up to `TINY_N` (merged) cells, where a start costs 0.05-0.2 s, this many: measured on
#: prefix:8, 36.21 -> 35.63 (2.8 -> 3.8 s), and on ten Gaussian rank-2 workloads of 3 x 6, 0.3-1.8%
#: lower E_1 on five of them (+0.6-2.5 s); on prefix:12 and all-range:8 24 starts find nothing more.
SIGNED_STARTS_TINY, TINY_N = 24, 8
#: L-BFGS iterations allowed per start.
SIGNED_MAX_ITERS = 3000
#: Weight of the extra rows in the identity-based starts.
_EXTRA_ROW_SCALE = 0.3
#: Share of non-zero entries in the sparse extra rows.
_SPARSE_SHARE = 0.3


def normalised_error(x: np.ndarray, G: np.ndarray, rows: int) -> tuple[float, np.ndarray]:
    """E_1 of B (flattened, ``rows`` x n) with its columns scaled to L1 norm 1, and its gradient in B.

    ``trace(G (A^T A)^{-1})`` with ``A = B / ||b_j||_1``; infinity (and a zero
    gradient) where a column of B is zero or ``A^T A`` is not positive definite.

    Examples
    --------
    >>> G = np.tril(np.ones((3, 3))).T @ np.tril(np.ones((3, 3)))
    >>> float(normalised_error(np.eye(3).ravel(), G, 3)[0])  # the identity: trace(G)
    6.0
    """
    n = G.shape[0]
    B = x.reshape(rows, n)
    c = np.abs(B).sum(axis=0)
    if np.any(c == 0):
        return math.inf, np.zeros_like(x)
    A = B / c
    try:
        L = la.cho_factor(A.T @ A, lower=True, check_finite=False)
    except la.LinAlgError:
        return math.inf, np.zeros_like(x)
    GM = la.cho_solve(L, G, check_finite=False)  # (A^T A)^{-1} G
    value = float(np.trace(GM))
    if not math.isfinite(value) or value <= 0:
        return math.inf, np.zeros_like(x)
    dA = -2.0 * A @ la.cho_solve(L, GM.T, check_finite=False)  # -2 A M^{-1} G M^{-1}
    dB = dA / c - np.sign(B) * (np.sum(dA * B, axis=0) / c**2)
    return value, dB.ravel()


@dataclass
class SignedSearchResult:
    """Best strategy of a `signed_search`.

    Attributes
    ----------
    A : ndarray, shape (rows, n)
        The strategy: columns of L1 norm 1, one column per merged cell (cells whose
        workload columns are equal share it; cells no query reads get zero columns,
        which the compiler completes).
    value : float
        ``trace(G (A^T A)^{-1})`` in G's units.
    start : str
        The start it came from (``'warm'``, ``'gaussian<i>'``, ``'identity+rows<i>'``, ``'identity+sparse<i>'``).
    starts : int
        Starts run (the deadline can stop the search early).
    planned : int
        Starts queued.
    cut : bool
        Whether the deadline stopped the search (a start left in the queue, or a run stopped early).

    Examples
    --------
    Queries ``x0 + x1`` and ``x2``: cells 0 and 1 share a column, and measuring each query once (error 1 + 1)
    is optimal:

    >>> W = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    >>> res = signed_search(W.T @ W, starts=2, seed=0)
    >>> round(res.value, 6), res.starts, res.planned, res.cut, bool(np.allclose(res.A[:, 0], res.A[:, 1])), np.abs(res.A).sum(axis=0).round(6).tolist()
    (2.0, 2, 2, False, True, [1.0, 1.0, 1.0])
    """

    A: np.ndarray
    value: float
    start: str
    starts: int
    planned: int = 0
    cut: bool = False


def _starts(n: int, count: int, rng: np.random.Generator):
    """``count`` starts ``(name, B)``: rows n and 2n alternately, Gaussian / identity + rows / identity + sparse rows in turn."""
    for i in range(count):
        rows = n * (1 + i % 2)
        kind = (i // 2) % 3
        if kind == 0:
            yield f"gaussian{i}", rng.standard_normal((rows, n))
        elif kind == 1:
            extra = rng.random((rows - n, n)) * _EXTRA_ROW_SCALE if rows > n else _EXTRA_ROW_SCALE * rng.standard_normal((n, n))
            yield f"identity+rows{i}", np.vstack([np.eye(n), extra]) if rows > n else np.eye(n) + extra
        else:
            sparse = rng.random((rows, n)) * (rng.random((rows, n)) < _SPARSE_SHARE)
            yield f"identity+sparse{i}", sparse + np.vstack([np.eye(n), np.zeros((rows - n, n))])


def signed_search(
    G: np.ndarray, *, starts: int | None = None, seed: int = 0, deadline: float = math.inf, warm: np.ndarray | None = None
) -> SignedSearchResult | None:
    """Multi-start L-BFGS over general strategies with L1-normalised columns (see the module docstring).

    Parameters
    ----------
    G : ndarray, shape (n, n)
        The workload's Gram matrix ``W^T W``.
    starts : int, optional
        Random starts after the warm one (default `SIGNED_STARTS`, or `SIGNED_STARTS_TINY` on up to
        `TINY_N` cells after merging).
    seed : int
        Seed of the random starts.
    deadline : float
        ``time.perf_counter()`` value after which no further start begins (and the
        running one stops at its next iteration); the warm start always runs.
    warm : ndarray, optional
        A strategy to refine first (dense, n columns; rows of it that are zero are dropped).

    Returns
    -------
    SignedSearchResult or None
        The best strategy found, or None when no start gave a finite error.

    Examples
    --------
    Refining the binary hierarchy on prefix:8 (its E_1 is 87.77; L-BFGS-B only descends from its start):

    >>> from strategy_opt.bases import hierarchical_matrix
    >>> W = np.tril(np.ones((8, 8)))
    >>> res = signed_search(W.T @ W, starts=0, warm=hierarchical_matrix(8, 2).toarray())
    >>> bool(res.value < 87.77), res.start, res.A.shape[1]
    (True, 'warm', 8)
    """
    G = np.asarray(G, dtype=float)
    cell_of, reps = merged_cells(G)  # equal workload columns share one strategy column; unread cells get none
    n = reps.size
    Gs = G[np.ix_(reps, reps)]
    unit = gram_unit(Gs)  # the search runs on G / unit (mean diagonal 1), as p-identity does
    Gs = Gs / unit
    rng = np.random.default_rng(seed)
    queue = []
    if warm is not None:
        Bw = np.asarray(warm, dtype=float)[:, reps]
        queue.append(("warm", Bw[np.abs(Bw).sum(axis=1) > 0]))
    if starts is None:
        starts = SIGNED_STARTS_TINY if n <= TINY_N else SIGNED_STARTS
    queue += list(_starts(n, starts, rng))
    best, run, cut = None, 0, False
    for name, B0 in queue:
        if run and time.perf_counter() >= deadline:
            cut = True
            break
        rows = B0.shape[0]

        def stop(_, deadline=deadline):
            if time.perf_counter() > deadline:
                raise StopIteration

        with one_blas_thread():
            res = so.minimize(normalised_error, B0.ravel(), args=(Gs, rows), jac=True, method="L-BFGS-B", callback=stop,
                              options={"maxiter": SIGNED_MAX_ITERS, "maxfun": 2 * SIGNED_MAX_ITERS})
        run += 1
        cut = cut or time.perf_counter() > deadline  # the callback stopped this run
        value = float(res.fun)  # E_1 at res.x (also when the deadline stopped the run)
        if not math.isfinite(value):
            continue
        if best is None or value < best.value:
            B = res.x.reshape(rows, n)
            best = SignedSearchResult(B / np.abs(B).sum(axis=0), value, name, run)
    if best is None:
        return None
    log.info("signed search: %d of %d start(s)%s, best E_1 %.10g (start %s)", run, len(queue), ", cut by its deadline" if cut else "", best.value * unit, best.start)
    return SignedSearchResult(expand_cells(best.A, cell_of), best.value * unit, best.start, run, len(queue), cut)
