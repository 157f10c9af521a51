"""Native solver for the ``max`` objective under (epsilon, delta)-DP: the least largest per-query variance.

The program is ``min_X max_i u_i(X)`` over ``X ⪰ 0`` with ``diag(X) <= 1``, where
``u_i(X) = w_i X^+ w_i^T``. Each ``u_i`` is convex in X and ``max_i u_i = max_c sum_i
c_i u_i`` over the simplex, so by the minimax theorem

    min_X max_i u_i(X) = max_c d(c),   d(c) = min_X sum_i c_i u_i(X) = min_X trace(G_c X^{-1}),

with ``G_c = W^T diag(c) W``: the inner problem is the total error of the reweighted
workload, which `strategy_opt.native_l2.solve_total_l2` solves with a certified dual
bound. Every round therefore certifies both sides:

* its dual value is at most ``d(c)``, hence a lower bound on the optimum (kind
  ``simplex-weighted-dual``, as the SDP route's bound);
* its strategy is feasible, and its largest variance is an upper bound.

d is concave and, where the inner optimum X(c) is unique, differentiable with gradient
``u(X(c))``; the weights climb it by exponentiated steps ``c_i <- c_i (u_i / max_j u_j)^eta``
(renormalised; a floor of `WEIGHT_FLOOR` / m keeps every query's weight positive, and
`MIX_IDENTITY` of the identity mixed into each X makes every strategy support W), with eta raised by `ETA_GROWTH` after a round whose largest variance
fell and halved after one where it rose. Each inner solve starts from the previous round's
dual weights. The run stops when the best strategy's largest variance is within ``tol`` of
the best bound, after ``max_rounds`` rounds, at the time limit, or when the gap has not
shrunk by 1% in `STALL_ROUNDS` rounds.

Measured (benchmarks/results/minerror_l2_max.md, one BLAS thread, gap 1e-5): prefix:100 in 18
rounds (0.15 s; SCS stopped at its 120 s cap at a gap of 3.8e-3), all ranges over 64 cells in 182
rounds (0.4 s; the Schur form of their 2,080 queries is refused), over 256 cells in 543 rounds (14 s),
over 512 cells in 584 rounds (86 s). A round's strategy answers its weighting best and can miss the
min-max point however many rounds run, so every `AVERAGE_EVERY` rounds the average of the rounds'
Gram matrices since the last power-of-2 round (feasible: ``diag(X) <= 1`` is convex; its largest variance
approaches the optimum as the weights' regret vanishes) is priced too: on prefixes over 64 cells whose rows
are scaled by 1e-3 ... 1e3 every round stayed 28% above the bound (stalled after 505 rounds, 32 s) where
the average reaches a gap of 6e-5 by round 50 (Clarabel: gap 1.8e-5 in 256 s).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la

from .error import per_query_variances
from .exceptions import InputError
from .native_l2 import solve_total_l2
from .resources import format_count, require_memory
from .threads import factorization_threads
from .workload import Workload, weighted_gram

log = logging.getLogger("strategy_opt")

#: Every query keeps at least this share of the uniform weight 1/m (its direction stays in G_c).
WEIGHT_FLOOR = 1e-9
#: First step size of the exponentiated weight update ...
ETA_START = 4.0
#: ... raised by this factor after a round whose largest variance fell, halved after one where it rose, ...
ETA_GROWTH = 1.2
#: ... and kept within these limits.
ETA_MIN, ETA_MAX = 0.5, 32.0
#: The run stops as stalled when the gap has not shrunk by 1% in this many rounds.
STALL_ROUNDS = 500
#: Each inner total-error solve aims at this fraction of the outer target gap.
INNER_TOL_SHARE = 1e-2
#: Bytes per query the solver holds (weights, variances and their updates), checked before it starts.
BYTES_PER_QUERY = 64.0
#: Weight of the identity mixed into each round's X (every query's variance rises by at most this, relative).
MIX_IDENTITY = 1e-7
#: Every this many rounds without a round's strategy improving on the best, the average of the rounds' X since the
#: last power-of-2 round is priced too (where rounds keep improving it would cost a tenth more time for nothing:
#: all ranges over 256 cells, 541 rounds either way).
AVERAGE_EVERY = 10


def _supporting(X: np.ndarray, W: Workload) -> tuple[np.ndarray, np.ndarray]:
    """A full-rank strategy near the Gram matrix ``X = A^T A`` at unit L2 sensitivity, and the workload's variances through it.

    ``X' = (1 - MIX_IDENTITY) X + MIX_IDENTITY I``, rescaled to ``max diag X' = 1``: the
    inner optimum may be singular on directions that only queries of negligible weight need,
    while through X' every query has a finite variance, at most ``1 / (1 - MIX_IDENTITY)``
    times its variance through X. Returns the Cholesky factor ``R`` (``R^T R = X'``) and
    ``w_i X'^{-1} w_i^T`` for every query.
    """
    n = X.shape[0]
    X = (1.0 - MIX_IDENTITY) * 0.5 * (X + X.T) + MIX_IDENTITY * np.eye(n)
    X /= np.diag(X).max()
    with factorization_threads():
        R = la.cholesky(X, lower=False)
        Xinv = la.cho_solve((R, False), np.eye(n))
    return R, W.query_variances(0.5 * (Xinv + Xinv.T))


@dataclass
class NativeMaxResult:
    """Outcome of `solve_max_l2`.

    Attributes
    ----------
    A : ndarray, shape (p, n)
        Strategy at unit L2 sensitivity with the smallest largest variance found.
    primal : float
        Its largest per-query variance ``max_i u_i``.
    dual : float
        Best certified lower bound on the optimum.
    weights : ndarray, shape (m,)
        The query weights c (simplex) whose inner solve gave ``dual``.
    rounds : int
    status : {'optimal', 'optimal_inaccurate', 'budget', 'time_limit', 'stalled'}
        ``optimal_inaccurate``: the rounds reached the target, the error analysis of the
        strategy returned puts the gap above it.
    seconds : float
    """

    A: np.ndarray
    primal: float
    dual: float
    weights: np.ndarray
    rounds: int
    status: str
    seconds: float

    @property
    def gap(self) -> float:
        """``primal / dual - 1``."""
        return self.primal / self.dual - 1.0 if self.dual > 0 else math.inf


def solve_max_l2(W: Workload, *, max_rounds: int = 10_000, time_limit: float = 600.0, tol: float = 1e-5, log_every: float = 2.0) -> NativeMaxResult:
    """Minimise the largest per-query variance ``max_i w_i X^+ w_i^T`` s.t. ``diag(X) <= 1``, with a certified gap.

    Parameters
    ----------
    W : Workload
        Its dense Gram matrices ``W^T diag(c) W`` are formed (n x n).
    max_rounds : int
        Rounds of the weight update (one total-error solve each).
    time_limit : float
        Seconds; the round running at the deadline finishes.
    tol : float
        Target relative gap between the best strategy's largest variance and the best bound.
    log_every : float
        Seconds between INFO progress lines on the ``strategy_opt`` logger.

    Returns
    -------
    NativeMaxResult

    Examples
    --------
    Two cells and the three queries x_0, x_1 and x_0 + x_1: the identity gives variances
    (1, 1, 2); the optimum 4/3 answers the sum as well as each cell, and the bound meets it:

    >>> from strategy_opt.workload import from_matrix
    >>> res = solve_max_l2(from_matrix([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), tol=1e-8)
    >>> res.status, round(res.primal, 6), round(res.dual, 6)
    ('optimal', 1.333333, 1.333333)
    """
    if not (isinstance(max_rounds, (int, np.integer)) and max_rounds >= 1):
        raise InputError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")
    if not (tol > 0 and time_limit >= 0):
        raise InputError(f"tol must be > 0 and time_limit >= 0, got {tol!r} and {time_limit!r}")
    m = W.m
    require_memory(  # one weight and one variance per query, and their updates (all-predicate:1100 has 2^1100)
        BYTES_PER_QUERY * float(min(m, 10**300)),
        f"the min-max solver's weights and variances for the {format_count(m)} queries",
        "the total objective needs only W^T W (--objective total)",
    )
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    log.info("minerror-l2 native max: %d queries over %d cells, target gap %.1e, time limit %.4g s; each round solves the total error of the queries weighted", m, W.n, tol, time_limit)
    floor = WEIGHT_FLOOR / m
    c = np.full(m, 1.0 / m)
    start = None
    best_p, best_A, best_d, best_c = math.inf, None, 0.0, c
    eta, last_p = ETA_START, math.inf
    gap_mark, mark = math.inf, 0
    status, k, last_log = "budget", 0, t0
    X_sum, X_count, improved = None, 0, 0  # the rounds' X since round 2^j (suffix averaging); the last round that improved
    while k < max_rounds:
        inner = solve_total_l2(weighted_gram(W, c), time_limit=max(0.0, deadline - time.perf_counter()), tol=max(tol * INNER_TOL_SHARE, 1e-12), log_every=math.inf, start=start)
        start = inner.u
        X = inner.A.T @ inner.A
        A, u = _supporting(X, W)
        p = float(u.max())
        k += 1
        if p < best_p:
            best_p, best_A, improved = p, A, k
        # the rounds' strategies answer each round's weighting best and can all miss the min-max point (rows
        # scaled over 1e-3 ... 1e3: every round's largest variance stayed 28% above the bound), while the average
        # of their X, feasible too (diag <= 1 is convex), approaches it as the weights' regret vanishes
        if k & (k - 1) == 0:
            X_sum, X_count = np.zeros_like(X), 0
        X_sum += X
        X_count += 1
        if k % AVERAGE_EVERY == 0 and k - improved >= AVERAGE_EVERY and X_count > 1:
            A_avg, u_avg = _supporting(X_sum / X_count, W)
            if float(u_avg.max()) < best_p:
                best_p, best_A = float(u_avg.max()), A_avg
        if inner.dual > best_d:
            best_d, best_c = float(inner.dual), c
        gap = best_p / best_d - 1.0 if best_d > 0 else math.inf
        now = time.perf_counter()
        if now - last_log >= log_every or k == 1:
            log.info("minerror-l2 native max: round %d largest variance %.10g bound %.10g gap %.3e (%.1f s)", k, best_p, best_d, gap, now - t0)
            last_log = now
        if gap <= tol:
            status = "optimal"
            break
        if gap < gap_mark * (1 - 1e-2):
            gap_mark, mark = gap, k
        elif k - mark >= STALL_ROUNDS:
            status = "stalled"
            break
        if now >= deadline:
            status = "time_limit"
            break
        eta = max(eta / 2, ETA_MIN) if p > last_p else min(eta * ETA_GROWTH, ETA_MAX)
        last_p = p
        c = np.maximum(c * (u / p) ** eta, floor)
        c /= c.sum()
    # the rounds' variances come from X's inverse, which loses up to ~1e-4 relative where X is nearly singular
    # (low-rank workloads over many cells): the returned largest variance is the error analysis's, and a gap
    # that then exceeds the target is no longer 'optimal'
    best_p = float(per_query_variances(best_A, W, 2).max())
    if status == "optimal" and best_p / best_d - 1.0 > tol:
        status = "optimal_inaccurate"
    seconds = time.perf_counter() - t0
    log.info("minerror-l2 native max: %s after %d rounds, largest variance %.10g bound %.10g gap %.3e (%.1f s)", status, k, best_p, best_d, best_p / best_d - 1.0, seconds)
    return NativeMaxResult(best_A, best_p, best_d, best_c, k, status, seconds)
