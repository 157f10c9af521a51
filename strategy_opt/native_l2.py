"""Native solver for the total-error (epsilon, delta) program: accelerated dual ascent.

Program 3.4.2 (Li 2013, Sec. 3.4.1, Thm 3.5) with the total-error objective is

    minimise trace(G X^{-1})   over X ⪰ 0 with X_jj <= 1,   G = W^T W = L L^T.

Its dual (see `strategy_opt.certificates`) maximises over weights u on the
simplex ``s(u) = trace(N(u)^{1/2})`` with ``N(u) = L^T D_u L`` (r x r); the bound
is ``s(u)^2``. This is the Kiefer phi_{1/2} criterion of optimal design
(Pukelsheim 2006, Ch. 6) over the "regression vectors" l_j (rows of L), and the
facts below follow from one eigendecomposition ``N = V diag(sigma^2) V^T``:

* gradient: ``ds/du_j = r_j / 2`` with ``r_j = l_j^T N^{-1/2} l_j``, and
  ``sum_j u_j r_j = s``; u is optimal iff ``r_j <= s`` for all j (equality on
  the support), the equivalence theorem of optimal design;
* primal recovery: ``X(u) = L N^{-1/2} L^T`` has ``diag X(u) = r`` and
  ``trace(G X(u)^+) = s``; scaled by ``1/max r`` and completed with
  ``diag(1 - r / max r)`` (Li 2013, Lemma 3: completing columns never raises
  the error) it is feasible with error ``<= s max r``. At the optimum
  ``X D_u X ∝ G``, i.e. u ∝ diag(X^{-1} G X^{-1}) (`certificates.kkt_weights`).

The iteration is the multiplicative fixed point ``u_j <- u_j (r_j / s)^rho``
(rho = 2; the classic design algorithm of Silvey, Titterington and Torsney
uses rho <= 1), run on ``log u`` and accelerated by Anderson mixing (Walker &
Ni 2011) with a safeguard: an accelerated step that lowers the dual by more
than a multiple of the current gap is rejected and replaced by the plain step,
which never lowered the dual in our experiments. Weights of cells that should
leave the support are floored at a negligible mass so the acceleration sees
only the free coordinates. On all ranges and prefixes this certifies 1e-8 in
3 to 12 iterations from the uniform start (whose bound is the SVD bound).

Low-rank workloads (few queries) have optimal weights on a small support (at
most r(r+1)/2 cells, Caratheodory), where multiplicative updates crawl. After
`NEWTON_AFTER` iterations, when the Hessian is small (cells x r^2 entries
``<= NEWTON_MAX_ENTRIES``), the solver prunes once to the heaviest r(r+1)/2 cells
and then takes Newton steps on the weighted cells plus those the gradient
calls in (``r_j > s``), an active-set method with exact second derivatives
(Daleckii-Krein formula) and a backtracking line search on the dual; a failed
Newton step falls back to the accelerated multiplicative one. Where that still
crawls (two positive queries on 65-250 cells stalled at gaps of 0.03-0.56 before it), a
low-rank workload not optimal after `DESIGN_AFTER` iterations restarts from the
weights of the dual as a small SDP (`_design_weights`, Clarabel, one PSD cone
of size 2r), which the iteration then certifies.

Every iteration certifies itself: the best dual value and the best feasible
primal give the reported relative gap; both are exact bounds whatever the
iterate, so an exhausted budget still returns a certified strategy (status
``'budget'`` after ``max_iters``, ``'time_limit'`` after ``time_limit``). The
deadline is checked before every expensive step (each primal evaluation, Newton
step and line-search trial), and an iteration does not start when the previous
one's duration would carry it past the deadline, so a run overshoots its time
limit by at most one such step plus the assembly of the final strategy (an
n x n factorisation, and an SVD of the factor for the certified dual bound);
the first dual step (one r x r eigendecomposition) always runs, as a strategy
needs it, and so does the one that prices the design SDP's weights (without
it an SDP that ended past the deadline was wasted: a rank-2 workload on 13
cells kept a bound 10.5% below the optimum the SDP had found). Measured on
all-range:4096 with a 20 s limit (one BLAS thread): the first iteration ended
at 33.6 s and the assembly took 27 s more, 62 s in all;
a limit below one iteration's time is not a way to get a quick answer there.
Duplicate columns of W are merged and zero columns dropped first
(Li 2013, Def. 2.6 and Prop. 4.1: the minimized workload has the same optimum).

Cost per iteration: one eigendecomposition of the r x r matrix N and three
matrix products; the primal (a Cholesky factorisation of the n x n completed
X) every iteration when r ~ n, less often when r << n.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la

from .cells import merged_cells
from .certificates import gram_factor, nuclear_norm_weighted
from .exceptions import InputError
from .threads import factorization_threads

__all__ = ["NativeL2Result", "solve_total_l2", "factorization_threads"]

log = logging.getLogger("strategy_opt")

#: Exponent of the multiplicative update ``u_j <- u_j (r_j/s)^rho``.
RHO = 2.0
#: Anderson memory (number of past differences).
MEMORY = 5
#: An accelerated step may lower the dual by at most this multiple of the gap.
DUAL_SLACK = 2.0
#: Floor of the weights, as a total mass spread over the cells.
WEIGHT_FLOOR = 1e-12
#: Only weights above this mass (over the cells) take part in the acceleration.
ACCELERATE_ABOVE = 1e-6
#: The primal (an n x n Cholesky) is evaluated every few iterations so that its flops
#: stay within this multiple of the dual steps' (every iteration when r ~ n).
PRIMAL_SHARE = 3.0
#: Newton steps (on the cells carrying weight) start after this many iterations ...
NEWTON_AFTER = 5
#: ... when the Hessian's factor (cells x r^2 entries) is at most this large.
NEWTON_MAX_ENTRIES = 4_000_000
#: ... and on at most this many cells (an eigendecomposition of their Hessian per step).
NEWTON_MAX_CELLS = 3000
#: Pruning to the rank bound is kept if the dual bound keeps this fraction of its value.
PRUNE_KEEP = 0.5
#: Cells whose weight is below this fraction of the largest take part only if the gradient calls them.
NEWTON_SUPPORT = 1e-6
#: Rounds of dropping cells that a Newton step would make negative.
NEWTON_DROP_ROUNDS = 20
#: Step halvings (by 4) tried before a Newton step is abandoned for the multiplicative one.
NEWTON_BACKTRACKS = 5
#: Completion masses below this are dropped from the final strategy (they vanish at the optimum).
COMPLETION_FLOOR = 1e-8
#: Cholesky diagonal ratio below which the final error is recomputed by least squares.
WELL_CONDITIONED = 1e-5
#: Largest change of log u in one step.
MAX_LOG_STEP = 10.0
#: Stop as 'stalled' when the gap has not improved by 0.1 % over this many primal evaluations.
STALL_EVALS = 100
#: Low-rank workloads (factor rank r below the cells and at most this) not optimal after `DESIGN_AFTER`
#: iterations restart from the optimal design weights of the small SDP `_design_weights` (one PSD cone of
#: size 2r; 1.8 s at 2048 cells, 6.5 s at 8192, rank 16): from the uniform start the iteration stalled at
#: gaps of 0.03-0.56 on 2 x 65..250 positive workloads (2.9% above the optimum at 65 cells), while the
#: workloads it solves finish in 3-13 iterations.
DESIGN_SDP_MAX_RANK, DESIGN_AFTER = 16, 30
#: Floor of the per-cell loads ``r_j`` in the multiplicative update (their logs must stay finite).
#: Eigenvalues of ``N(u)`` below this share of the largest are rounding (eigh's absolute error is about
#: eps times the largest): the search directions floor them there (below 1e-30 the Newton Hessian
#: overflowed on prefix rows weighted 1e-3 .. 1e3; the dual value and the primal check use the exact spectrum).
EIGENVALUE_RTOL = float(np.finfo(float).eps)
_TINY = np.finfo(float).tiny
@dataclass
class NativeL2Result:
    """Outcome of `solve_total_l2`.

    Attributes
    ----------
    A : ndarray, shape (p, n)
        Strategy at unit L2 sensitivity (``max diag A^T A = 1``) with the
        best error found.
    primal : float
        ``trace(G (A^T A)^+)``: the unit total squared error E_2 of A.
    dual : float
        Best dual bound ``s(u)^2 <= optimum``.
    u : ndarray, shape (n,)
        Dual weights (simplex) attaining ``dual``.
    iterations : int
    status : {'optimal', 'budget', 'time_limit', 'stalled'}
        ``optimal``: relative gap <= tol; ``budget``: max_iters reached;
        ``time_limit``: the time limit was hit (the best iterate so far is
        returned); ``stalled``: no progress (gap at the floating-point floor).
    seconds : float
    cells : int
        Distinct non-zero workload columns the solver worked on (duplicate
        columns are merged, zero columns dropped: Li 2013, Def. 2.6, Prop. 4.1).

    Examples
    --------
    Queries ``x0 + x1`` and ``x2`` on 4 cells: cells 0 and 1 are merged and cell 3 is never queried, so the solver
    works on 2 cells; the optimum measures both queries at unit sensitivity (error 1 + 1) and completes cell 3:

    >>> W = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    >>> res = solve_total_l2(W.T @ W)
    >>> res.cells, res.status, round(res.primal, 6), round(res.dual, 6), res.A.tolist()
    (2, 'optimal', 2.0, 2.0, [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    """

    A: np.ndarray
    primal: float
    dual: float
    u: np.ndarray
    iterations: int
    status: str
    seconds: float
    cells: int

    @property
    def gap(self) -> float:
        """Certified relative gap ``primal / dual - 1``.

        Returns
        -------
        float
            ``inf`` when the dual bound is not positive.

        Examples
        --------
        >>> res = solve_total_l2(np.eye(3))  # the identity workload: optimum 3, attained by the identity
        >>> round(res.primal, 6), res.gap <= 1e-8
        (3.0, True)
        """
        return self.primal / self.dual - 1.0 if self.dual > 0 else math.inf


def cell_classes(G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Representatives of the distinct non-zero columns of W, and each cell's class.

    Cells j, k have equal columns in W iff ``G_jj + G_kk - 2 G_jk = ||W_j - W_k||^2``
    vanishes; a zero column has ``G_jj = 0`` (`strategy_opt.cells.merged_cells`,
    at relative tolerance 1e-12).

    Parameters
    ----------
    G : ndarray (n, n)
        The workload Gram matrix ``W^T W``.

    Returns
    -------
    reps : ndarray of int
        The first cell of each class.
    cls : ndarray of int, shape (n,)
        ``cls[j] = -1`` for zero columns and ``reps[cls[j]]`` the first cell of j's class.

    Examples
    --------
    >>> W = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    >>> reps, cls = cell_classes(W.T @ W)
    >>> reps.tolist(), cls.tolist()  # cells 0 and 1 share a column; cell 3 is never queried
    ([0, 2], [0, 0, 1, -1])
    """
    cls, reps = merged_cells(G, 1e-12)
    return reps, cls


def _dual_step(L: np.ndarray, u: np.ndarray):
    """s(u), the gradient factors r, Q = L V diag(sigma)^{-1/2} (X(u) = Q Q^T) and sigma."""
    B = L * np.sqrt(u)[:, None]
    N = B.T @ B
    with factorization_threads():
        lam, V = np.linalg.eigh(N)
    s = float(np.sqrt(np.clip(lam, 0.0, None)).sum())
    sig = np.sqrt(np.maximum(lam, lam[-1] * EIGENVALUE_RTOL))
    Q = (L @ V) / np.sqrt(sig)
    r = np.einsum("ij,ij->i", Q, Q)
    return s, r, Q, sig


def _newton_direction(u: np.ndarray, r: np.ndarray, Q: np.ndarray, sig: np.ndarray, S: np.ndarray) -> np.ndarray | None:
    """Newton direction of s(u) on the cells S within the simplex, dropping cells that would go negative.

    Hessian (Daleckii-Krein formula for the derivative of ``N^{1/2}``):
    ``d^2 s / du_j du_k = -1/2 sum_ab Q_ja Q_jb Q_ka Q_kb / (sigma_a + sigma_b)``.
    The equality-constrained step ``max g^T d + d^T H d / 2, sum d = 0`` is solved on
    the free cells; cells the step would make negative are fixed at zero (their
    mass is redistributed) and the step is solved again. None when the Hessian
    is not finite in float64 (nearly singular ``X(u)`` on badly scaled workloads:
    the first-order iteration goes on without Newton steps).
    """
    QS = Q[S]
    k, rr = QS.shape
    Z = (QS[:, :, None] * QS[:, None, :]).reshape(k, rr * rr)
    with np.errstate(over="ignore", invalid="ignore"):
        M = 0.5 * (Z / (sig[:, None] + sig[None, :]).ravel()) @ Z.T  # = -H, PSD
    if not np.isfinite(M).all():
        return None
    g, uS = 0.5 * r[S], u[S]
    free = np.ones(k, bool)
    for _ in range(NEWTON_DROP_ROUNDS):
        F, D = np.flatnonzero(free), np.flatnonzero(~free)
        with factorization_threads():
            lam, U = np.linalg.eigh(M[np.ix_(F, F)])
        keep = lam > 1e-12 * lam[-1]
        U, lam = U[:, keep], lam[keep]
        rhs = g[F] + M[np.ix_(F, D)] @ uS[D]
        a = U @ ((U.T @ rhs) / lam)
        b = U @ (U.T.sum(axis=1) / lam)
        mu = (a.sum() - uS[D].sum()) / b.sum()
        dF = a - mu * b
        neg = uS[F] + dF < 0
        if not neg.any():
            break
        free[F[neg]] = False
    d = -uS.copy()
    d[F] = dF
    return d


def _newton_update(L, u, s, r, Q, sig, floor: float, prune: bool, deadline: float = math.inf) -> np.ndarray | None:
    """A safeguarded Newton step on the dual weights, or None when it does not apply or fails.

    With ``prune`` (once) and fewer rank-bound cells ``r(r+1)/2`` than cells, first
    keep only that many heaviest cells (an optimal design needs no more support
    points: Caratheodory), if the bound stays within `PRUNE_KEEP` of its value.
    The Newton step runs on the cells carrying weight and on as many of those the
    gradient calls in (``r_j > s``, largest first); the other cells go to the floor.
    Backtracking until the dual does not decrease. Gives up (None) once the
    ``deadline`` (a `time.perf_counter` value) has passed.
    """
    nc, rk = Q.shape
    if prune and rk * (rk + 1) // 2 < nc:
        v = np.full(nc, floor)
        keep = np.argsort(-u)[: rk * (rk + 1) // 2]
        v[keep] = u[keep]
        v /= v.sum()
        if _dual_step(L, v)[0] >= PRUNE_KEEP * s:
            return v
        if time.perf_counter() >= deadline:
            return None
    S = np.flatnonzero(u > NEWTON_SUPPORT * u.max())
    callers = np.setdiff1d(np.flatnonzero(r > s * (1 + 1e-12)), S)
    if callers.size:
        S = np.union1d(S, callers[np.argsort(-r[callers])[: max(rk, S.size)]])
    if S.size * rk * rk > NEWTON_MAX_ENTRIES or S.size > NEWTON_MAX_CELLS:
        return None
    step = _newton_direction(u, r, Q, sig, S)
    if step is None:
        return None
    t = 1.0
    for _ in range(NEWTON_BACKTRACKS):
        if time.perf_counter() >= deadline:
            return None
        v = np.zeros(nc)
        v[S] = np.maximum(u[S] + t * step, 0.0)
        v = np.maximum(v / v.sum(), floor)
        v /= v.sum()
        if _dual_step(L, v)[0] >= s:
            return v
        t /= 4
    return None


def _completed(Q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``X(u) / max r + diag(1 - r / max r)``: feasible, unit diagonal (Li 2013, Lemma 3)."""
    m = float(r.max())
    X = (Q @ Q.T) / m
    X[np.diag_indices_from(X)] += 1.0 - r / m
    return X


def _primal_value(X: np.ndarray, L: np.ndarray) -> tuple[float, np.ndarray | None]:
    """``trace(L^T X^{-1} L)`` and the Cholesky factor of X (inf, None if X is singular)."""
    try:
        with factorization_threads():
            R = la.cholesky(X, lower=True, check_finite=False)
    except la.LinAlgError:
        return math.inf, None
    Y = la.solve_triangular(R, L, lower=True, check_finite=False)
    return float(np.einsum("ij,ij->", Y, Y)), R


def solve_total_l2(
    G: np.ndarray,
    *,
    factor: np.ndarray | None = None,
    max_iters: int = 10_000,
    time_limit: float = 600.0,
    tol: float = 1e-8,
    log_every: float = 2.0,
    start: np.ndarray | None = None,
    min_iters: int = 0,
) -> NativeL2Result:
    """Minimise ``trace(G X^{-1})`` s.t. ``diag(X) <= 1`` with a certified gap.

    Parameters
    ----------
    G : ndarray, shape (n, n)
        Workload Gram matrix.
    factor : ndarray, shape (n, r), optional
        A `certificates.gram_factor` of G (e.g. from a closed-form eigendecomposition).
    max_iters, time_limit, tol : budget and target relative gap (solver profile).
    log_every : float
        Seconds between INFO progress lines on the ``strategy_opt`` logger
        (``math.inf``: none, and the first and last lines at DEBUG level).
    start : ndarray, shape (n,), optional
        Dual weights to start from (for instance ``u`` of an earlier result on a
        nearby Gram matrix); the uniform weights by default.
    min_iters : int, default 0
        Iterations that run whatever the clock says: the time limit applies from
        the next one on, so a small problem's result does not depend on the
        machine's load (`strategy_opt.pure_bound` runs past `DESIGN_AFTER`).

    Returns
    -------
    NativeL2Result

    Examples
    --------
    >>> from strategy_opt.workload import all_range
    >>> res = solve_total_l2(all_range(8).gram())
    >>> res.status, round(res.primal, 5), res.gap <= 1e-8
    ('optimal', 80.46427, True)
    """
    t0 = time.perf_counter()
    limit_at = t0 + time_limit
    deadline = math.inf if min_iters > 0 else limit_at  # limit_at from iteration min_iters on
    G = np.asarray(G, dtype=float)
    n = G.shape[0]
    if G.shape != (n, n) or not np.all(np.isfinite(G)):
        raise InputError(f"Gram matrix must be a finite square matrix, got shape {G.shape}")
    if not np.diag(G).max() > 0:
        raise InputError("the workload's Gram matrix is zero: no query has a non-zero coefficient")
    # the first progress line comes before the first expensive step (at thousands of cells one
    # iteration, an eigendecomposition and a Cholesky factorisation of n x n matrices, takes minutes)
    say = log.info if math.isfinite(log_every) else log.debug  # an inner solve of another program: its caller reports
    say("minerror-l2 native: %d cells, target gap %.1e, time limit %.4g s, at most %d iterations; starting", n, tol, time_limit, max_iters)
    reps, cls = cell_classes(G)
    if factor is None:
        with factorization_threads():
            factor = gram_factor(G[np.ix_(reps, reps)])
    else:
        factor = np.asarray(factor, dtype=float)[reps]
    L = factor
    nc = L.shape[0]
    xmin = math.log(WEIGHT_FLOOR / nc)
    x = np.full(nc, -math.log(nc))
    if start is not None:  # a warm start: each merged cell gets its cells' weights
        if np.shape(start) != (n,):
            raise InputError(f"start must hold one weight per cell ({n}), got shape {np.shape(start)}")
        w = np.bincount(cls[cls >= 0], weights=np.clip(np.asarray(start, dtype=float)[cls >= 0], 0.0, None), minlength=nc)
        if w.sum() > 0 and np.all(np.isfinite(w)):
            x = np.maximum(np.log(np.maximum(w / w.sum(), math.exp(xmin))), xmin)
    r_cols = L.shape[1]

    best_p, best_Q, best_r = math.inf, None, None
    best_d, best_u, certified = 0.0, None, False  # certified: best_d is `_certified_dual` of best_u
    xs: list[np.ndarray] = []
    fs: list[np.ndarray] = []
    prev, accelerated, cooldown = None, False, 0
    stride = max(1, round((nc**3 / 3 + 2 * nc**2 * r_cols) / (PRIMAL_SHARE * (2 * nc * r_cols**2 + 9 * r_cols**3))))
    status, k = "budget", 0
    last_log, gap_mark, mark, evals = t0, math.inf, 0, 0
    step_seconds, step_start = 0.0, time.perf_counter()
    restarted = False  # the design SDP's weights: their dual step runs whatever the clock says (they cost more than it)
    while True:
        now = time.perf_counter()
        step_seconds, step_start = (now - step_start if k > 0 else 0.0), now
        if k >= min_iters:
            deadline = limit_at
        # the first dual step always runs (a strategy needs one); a step that would end past the deadline does not start
        if k > 0 and not restarted and now + step_seconds >= deadline:
            status = "time_limit"
            break
        restarted = False
        u = np.exp(x)
        s, r, Q, sig = _dual_step(L, u)
        d = s * s
        m = float(r.max())
        if s * m < best_p:
            best_p, best_Q, best_r = s * m, Q, r
        evaluated = False
        if (k < 3 or k % stride == 0) and time.perf_counter() < deadline:
            value, _ = _primal_value(_completed(Q, r), L)
            if value < best_p:
                best_p, best_Q, best_r = value, Q, r
            evals += 1
            evaluated = True
        f = RHO * (np.log(np.maximum(r, _TINY)) - math.log(s))  # r_j underflows to 0 on cells ~1e-14 below the largest
        f[(x <= xmin + 1e-9) & (f < 0)] = 0.0
        if accelerated and d < prev[2] * (1 - 1e-13) - DUAL_SLACK * (best_p - prev[2]):
            xs, fs, cooldown = [], [], MEMORY
            x, f, d = prev
        if d > best_d:
            best_d, best_u, certified = d, np.exp(x), False
        k += 1
        gap = best_p / best_d - 1.0
        if gap <= tol:  # certify with the accurate dual value before stopping
            best_d, certified = _certified_dual(L, best_u), True
            gap = best_p / best_d - 1.0
        now = time.perf_counter()
        if now - last_log >= log_every or k == 1:
            say("minerror-l2 native: iteration %d primal %.10g dual %.10g gap %.3e (%.1f s)", k, best_p, best_d, gap, now - t0)
            last_log = now
        if gap <= tol:
            status = "optimal"
            break
        if gap < gap_mark * (1 - 1e-3):
            gap_mark, mark = gap, evals
        elif evals - mark >= STALL_EVALS:
            status = "stalled"
            break
        if now >= deadline:
            status = "time_limit"
            break
        if k >= max_iters:
            if not evaluated:
                value, _ = _primal_value(_completed(Q, r), L)
                if value < best_p:
                    best_p, best_Q, best_r = value, Q, r
            break
        prev = (x, f, d)
        if k == DESIGN_AFTER and r_cols < nc and r_cols <= DESIGN_SDP_MAX_RANK and time.perf_counter() < deadline:
            u0 = _design_weights(L)
            step_start = time.perf_counter()  # the SDP is not an iteration: its time must not stop the next one
            if u0 is not None:  # a fresh start: the acceleration's history belongs to the old path
                x = np.log(np.maximum(u0, math.exp(xmin)))
                x = np.maximum(x - (x.max() + math.log(np.exp(x - x.max()).sum())), xmin)
                xs, fs, accelerated, restarted = [], [], False, True
                continue
        if k >= NEWTON_AFTER:
            v = _newton_update(L, u, s, r, Q, sig, math.exp(xmin), prune=k == NEWTON_AFTER, deadline=deadline)
            if v is not None:
                x, xs, fs, accelerated = np.log(v), [], [], False
                continue
            if time.perf_counter() >= deadline:
                status = "time_limit"
                break
        xs, fs = (xs + [x])[-(MEMORY + 1) :], (fs + [f])[-(MEMORY + 1) :]
        step, accelerated = f, False
        if cooldown:
            cooldown -= 1
        elif len(fs) > 1:
            free = x > math.log(ACCELERATE_ABOVE / nc)
            dF = np.diff(np.array(fs), axis=0).T[free]
            dX = np.diff(np.array(xs), axis=0).T[free]
            gamma = np.linalg.lstsq(dF, f[free], rcond=None)[0]
            step = f.copy()
            step[free] -= (dX + dF) @ gamma
            accelerated = True
        x = x + np.clip(step, -MAX_LOG_STEP, MAX_LOG_STEP)
        x -= x.max() + math.log(np.exp(x - x.max()).sum())
        x = np.maximum(x, xmin)

    if status == "time_limit":
        say("minerror-l2 native: time limit of %.4g s reached after %d iterations; assembling the best strategy so far", time_limit, k)
    A, best_p = _strategy(best_Q, best_r, L, cls)
    if not certified:  # an optimal stop has it already (one SVD of the factor: ~1 s at 2048 cells)
        best_d = _certified_dual(L, best_u)
    uf = np.zeros(n)
    counts = np.bincount(cls[cls >= 0], minlength=nc)
    uf[cls >= 0] = (best_u / best_u.sum() / counts)[cls[cls >= 0]]
    seconds = time.perf_counter() - t0
    say("minerror-l2 native: %s after %d iterations, primal %.10g dual %.10g gap %.3e (%.1f s)", status, k, best_p, best_d, best_p / best_d - 1, seconds)
    return NativeL2Result(A, best_p, best_d, uf, k, status, seconds, nc)


def _design_weights(L: np.ndarray) -> np.ndarray | None:
    """The optimal dual weights of a low-rank Gram matrix ``L L^T`` (L: cells x r), by Clarabel; None if it fails.

    The dual ``max_u trace(N(u)^{1/2})`` over the simplex with ``N(u) = sum_j u_j l_j l_j^T``
    is the SDP ``max trace(Z)`` s.t. ``[[N(u), Z], [Z, I]] ⪰ 0`` (``Z^2 ⪯ N`` and the square
    root is operator monotone): one PSD cone of size 2r and a variable per cell, solved in
    well under a second where the multiplicative and Newton steps crawl. The result is only
    a starting point: the iteration certifies (and polishes) it as any other.
    """
    import cvxpy as cp

    nc, r = L.shape
    scale = float(np.abs(L).max())
    Ls = L / scale  # N scales by scale^2, its square root (the objective) by scale: the weights do not change
    K = np.einsum("ja,jb->abj", Ls, Ls).reshape(r * r, nc)  # column j: vec(l_j l_j^T)
    u = cp.Variable(nc, nonneg=True)
    Z = cp.Variable((r, r), symmetric=True)
    N = cp.reshape(K @ u, (r, r), order="C")
    prob = cp.Problem(cp.Maximize(cp.trace(Z)), [cp.bmat([[0.5 * (N + N.T), Z], [Z, np.eye(r)]]) >> 0, cp.sum(u) == 1])
    t0 = time.perf_counter()
    try:
        prob.solve(solver=cp.CLARABEL)
    except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
        log.info("minerror-l2 native: the design SDP for the start failed (%s); starting from uniform weights", exc)
        return None
    if u.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
        log.info("minerror-l2 native: the design SDP for the start ended %s; starting from uniform weights", prob.status)
        return None
    w = np.clip(np.asarray(u.value, dtype=float), 0.0, None)
    log.info("minerror-l2 native: rank %d on %d cells: start from the design SDP's weights (%s, %.2f s)", r, nc, prob.status, time.perf_counter() - t0)
    return w / w.sum() if w.sum() > 0 else None


def _certified_dual(L: np.ndarray, u: np.ndarray) -> float:
    """The dual value ``s(u)^2`` from the singular values of ``diag(u)^{1/2} L``.

    The iterations take ``s`` from the square roots of the eigenvalues of
    ``L^T D_u L``, which is fast but about sqrt(eps) high on rounding-level
    eigenvalues; the value a bound is stated with comes from here.
    """
    return nuclear_norm_weighted(L, u / u.sum()) ** 2


def _least_squares_error(B: np.ndarray, L: np.ndarray) -> float:
    """``trace(L^T (B B^T)^+ L) = ||B^+ L||_F^2`` for L in the range of B.

    B (n x p) has full column rank in practice (its columns are Q and unit vectors of
    the completed cells), so ``B^+ L = (B^T B)^{-1} B^T L`` from a p x p Cholesky
    factorization; otherwise a pivoted-QR least-squares solve.
    """
    try:
        with factorization_threads():
            c = la.cho_factor(B.T @ B, lower=True, check_finite=False)
        if np.diag(c[0]).min() >= WELL_CONDITIONED * np.diag(c[0]).max():
            Y = la.cho_solve(c, B.T @ L, check_finite=False)
            return float(np.einsum("ij,ij->", Y, Y))
    except la.LinAlgError:
        pass
    Y = la.lstsq(B, L, lapack_driver="gelsy", check_finite=False)[0]
    return float(np.einsum("ij,ij->", Y, Y))


def _strategy(Q: np.ndarray, r: np.ndarray, L: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, float]:
    """Strategy on all n cells from the best iterate, and its error ``trace(G X^+)``.

    The Gram is ``X = B B^T`` with B = [Q / sqrt(max r), completion columns
    ``sqrt(1 - r_j / max r) e_j``] (Li 2013, Lemma 3) where that mass exceeds
    `COMPLETION_FLOOR`. A well-conditioned X gives the square strategy R^T
    (Cholesky ``X = R R^T``); otherwise the strategy is B^T, whose error is
    computed by least squares: completions below the floor vanish at the
    optimum, and dropping them keeps near-zero directions (sparse optimal
    supports) out of the Gram, so the error is computed here and by the
    compiler without cancellation. Columns are copied to duplicate cells and
    every zero column gets an identity row.
    """
    m = float(r.max())
    c = 1.0 - r / m
    rows = np.flatnonzero(c > COMPLETION_FLOOR)
    B = np.hstack([Q / math.sqrt(m), np.zeros((Q.shape[0], rows.size))])
    B[rows, Q.shape[1] + np.arange(rows.size)] = np.sqrt(c[rows])
    value, R = _primal_value(B @ B.T, L)
    if R is not None and np.diag(R).min() >= WELL_CONDITIONED * np.diag(R).max():
        B = R
    else:
        value = _least_squares_error(B, L)
    n = cls.size
    zero = np.flatnonzero(cls < 0)
    A = np.zeros((B.shape[1] + zero.size, n))
    A[: B.shape[1], cls >= 0] = B.T[:, cls[cls >= 0]]
    A[B.shape[1] + np.arange(zero.size), zero] = 1.0
    return A, value
