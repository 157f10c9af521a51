"""SVD approximation for epsilon-DP (Li 2013, Sec. 3.4.2.2-3.4.2.3, Thm 3.8, Program 3.4.3).

Theorem 3.7 bounds the L1 sensitivity by the radius of the smallest L1 ball
covering the ellipsoid of A's columns; over the factors of ``A^T A`` that radius
is at least ``||A||_F``, attained by ``D_A P_A^T``. Theorem 3.8 therefore
minimises the surrogate ``||A||_F^2 ||W A^+||_F^2`` of the epsilon-DP error in
closed form: with the SVD ``W = Q_W diag(xi) P_W^T``,

    A = diag(sqrt(xi_1), ..., sqrt(xi_r)) P_W^T,          A^T A = (W^T W)^{1/2},

computed here from the eigendecomposition ``G = W^T W = V diag(lambda) V^T``
(``xi = sqrt(lambda)``, ``P_W = V``); zero singular values are dropped. Its
epsilon-DP error is at most n times the optimum (Thm 3.9).

Program 3.4.3 then asks, for the error profile ``(A^T A)^+`` fixed, for the
factor of least L1 sensitivity. Every factor with the same Gram matrix is
``Q A`` with Q having orthonormal columns (``Q^T Q = I``; Prop. 3.6), so we
search that Stiefel manifold locally (the dissertation gives no algorithm for
this rank-constrained program): Riemannian gradient descent with a QR
retraction and Armijo backtracking on a smoothed maximum column L1 norm
(log-sum-exp over columns of ``sum_i sqrt(b_ij^2 + mu^2)``), with the
smoothing tightened in stages. It starts from ``Q = I`` (the Thm 3.8 factor)
and from ``Q = V`` (the symmetric square root ``G^{1/4}``, whose rows are
localised for smooth Gram matrices) and keeps the factor of least true
sensitivity. The error profile, hence ``trace(G (A^T A)^+)``, never changes; the
unit error falls by ``(||QA||_1 / ||A||_1)^2``. The compiler's augmentation pass
(`strategy_opt.augment`, Sec. 3.4.3) completes the deficient columns.

Options
-------
refine : bool
    Run the Program 3.4.3 search (default: ``n <= REFINE_MAX_N``).
rows : int
    Rows of the refined factor (``>= rank(G)``; default n).
time_budget : float
    Seconds of the Program 3.4.3 search (default `SEARCH_SECONDS`, capped by
    the profile's time_limit), shared equally by the two starts (what one
    leaves goes to the next). Each smoothing stage runs until it stalls;
    measured on one thread: 0.4 s at 16 cells, 1.5-2 s at 64, about 120 s at
    256 (all-range:256: sensitivity 0.32 of the closed form's).
stage_steps : int
    Most descent steps per smoothing stage (default `_MAX_STEPS_PER_STAGE`;
    auto-pure, for which svd-approx is one candidate among many, runs 60).

Lower bound (``meta``): the certified (epsilon, delta) bound of
`strategy_opt.pure_bound` (kind ``l2-optimum``, or ``l2-dual`` when its solve
stopped at the time limit), else the SVD bound.

Limits: one n x n eigendecomposition plus ``O(rows * rank * n)`` per descent
step (a few thousand steps to converge); the descent is skipped above
`REFINE_MAX_N` cells unless asked for.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from ..compiler import compile_strategy
from ..defaults import EIG_RTOL
from ..exceptions import InputError, OptionError, setting
from ..problem import Problem, is_integer, is_number
from ..progress import heartbeat
from ..pure_bound import lower_bound_facts
from ..registry import register_method
from ..resources import require_memory
from ..threads import one_blas_thread
from ..workload import gram_unit

__all__ = ["svd_factor", "min_l1_factor", "svd_approx", "REFINE_MAX_N"]

log = logging.getLogger("strategy_opt")

#: Largest domain refined by default (the descent costs O(n^3) per step).
REFINE_MAX_N = 512
#: Default seconds of the Program 3.4.3 search (option ``time_budget``; the profile's time_limit caps it).
SEARCH_SECONDS = 120.0
#: Arrays of rows x (rank + n) float64 values the Program 3.4.3 search holds at once (memory estimate of option ``rows``).
SEARCH_COPIES = 6
#: Smoothing stages of the Program 3.4.3 search: (log-sum-exp sharpness, |x| smoothing relative to the mean entry).
_STAGES = ((20.0, 1e-1), (100.0, 1e-2), (500.0, 1e-3), (2000.0, 1e-4))
#: Most descent steps per smoothing stage.
_MAX_STEPS_PER_STAGE = 2000
#: A stage ends when its smoothed sensitivity fell by less than this share over the last `_STALL_WINDOW` steps.
_STAGE_RTOL = 1e-4
_STALL_WINDOW = 50
#: Armijo sufficient-decrease constant and backtracking factor.
_ARMIJO, _BACKTRACK = 1e-4, 0.5


def svd_factor(G: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Thm 3.8 strategy ``diag(lambda^{1/4}) V^T`` and the kept eigenpairs of G.

    Returns
    -------
    A : ndarray, shape (r, n)
        Rows: eigenvectors of G scaled by the square roots of the singular values of W.
    lam : ndarray, shape (r,)
        The kept (positive) eigenvalues of G.
    V : ndarray, shape (n, r)
        The matching eigenvectors.

    Parameters
    ----------
    G : ndarray, shape (n, n)
        The workload Gram matrix.

    Examples
    --------
    >>> A, lam, V = svd_factor(np.diag([16.0, 1.0, 0.0]))  # the zero eigenvalue is dropped; 16^(1/4) = 2
    >>> np.abs(A).tolist(), lam.tolist()
    ([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]], [1.0, 16.0])
    """
    lam, V = np.linalg.eigh(G)
    keep = lam > EIG_RTOL * max(lam.max(), 0.0)
    lam, V = lam[keep], V[:, keep]
    return (V * lam**0.25).T, lam, V


def _smoothed(B: np.ndarray, tau: float, mu: float) -> tuple[float, np.ndarray]:
    """Log-sum-exp (sharpness tau, relative to the largest column) of smoothed column L1 norms, and its gradient in B."""
    R = np.sqrt(B * B + mu * mu)
    col = R.sum(axis=0)
    top = col.max()
    z = tau * (col - top) / top
    w = np.exp(z)
    value = top * (1.0 + np.log(w.sum()) / tau)
    grad = (B / R) * (w / w.sum())[None, :]
    return float(value), grad


def _retract(Y: np.ndarray) -> np.ndarray:
    """QR retraction onto the Stiefel manifold (signs fixed so that it is continuous)."""
    Q, R = np.linalg.qr(Y)
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)[None, :]


def _descend(Q: np.ndarray, A: np.ndarray, deadline: float, label: str = "", stage_steps: int = _MAX_STEPS_PER_STAGE) -> tuple[np.ndarray, float, int, bool]:
    """Local Stiefel descent from Q: the best Q by true sensitivity, that sensitivity, the steps taken and whether ``deadline`` cut it.

    Each smoothing stage runs until its smoothed sensitivity stalls (less than
    `_STAGE_RTOL` decrease over `_STALL_WINDOW` steps), at most
    ``stage_steps`` steps (default `_MAX_STEPS_PER_STAGE`), or until ``deadline``.
    """
    scale = float(np.abs(A).mean())
    best_Q, best_s = Q, float(np.abs(Q @ A).sum(axis=0).max())
    steps = 0
    for stage, (tau, rel_mu) in enumerate(_STAGES, start=1):
        if stage > 1:
            log.info("svd-approx: Program 3.4.3 search from %s: stage %d/%d, sensitivity %.6g after %d steps", label, stage - 1, len(_STAGES), best_s, steps)
        mu = rel_mu * scale
        f, gB = _smoothed(Q @ A, tau, mu)
        eta = 1.0 / max(float(np.linalg.norm(gB @ A.T)), 1e-300)
        recent = [f]
        for _ in range(stage_steps):
            if time.perf_counter() > deadline:
                return best_Q, best_s, steps, True
            if len(recent) > _STALL_WINDOW and recent[-1] > (1.0 - _STAGE_RTOL) * recent[-1 - _STALL_WINDOW]:
                break
            E = gB @ A.T
            xi = E - Q @ (0.5 * (Q.T @ E + E.T @ Q))
            slope = float(np.sum(xi * xi))
            if slope <= 1e-30 * max(f * f, 1e-300):
                break
            while True:
                Qn = _retract(Q - eta * xi)
                fn, gn = _smoothed(Qn @ A, tau, mu)
                if fn <= f - _ARMIJO * eta * slope or eta < 1e-12:
                    break
                eta *= _BACKTRACK
            Q, f, gB = Qn, fn, gn
            recent.append(f)
            eta /= _BACKTRACK
            steps += 1
            s = float(np.abs(Q @ A).sum(axis=0).max())
            if s < best_s:
                best_Q, best_s = Q, s
    return best_Q, best_s, steps, False


def min_l1_factor(A: np.ndarray, rows: int, V: np.ndarray | None = None, time_limit: float = math.inf, stage_steps: int = _MAX_STEPS_PER_STAGE) -> tuple[np.ndarray, dict]:
    """Program 3.4.3, locally: a factor ``Q A`` (``Q^T Q = I``, ``rows`` rows) of small L1 sensitivity.

    Parameters
    ----------
    A : ndarray, shape (r, n)
        The factor to rotate (its Gram matrix ``A^T A`` is preserved).
    rows : int
        Number of rows of the result, ``>= r``.
    V : ndarray, shape (n, r), optional
        Eigenvectors such that ``V A`` is the symmetric square root (a second start).
    time_limit : float
        Seconds for the whole search.
    stage_steps : int
        Most descent steps per smoothing stage.

    Returns
    -------
    B : ndarray, shape (rows, n)
        The factor with the least L1 sensitivity found (``B^T B = A^T A``).
    facts : dict
        ``start`` (which start won), ``steps``, ``sensitivity_before``/``after``,
        ``time_limit_reached`` (the time limit stopped a start before its stages converged).

    Examples
    --------
    A Haar rotation of the identity has L1 sensitivity ``sqrt 2``; its symmetric-root start (``V A = I``) brings it to 1:

    >>> A = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)
    >>> B, facts = min_l1_factor(A, 2, V=A.T)
    >>> (np.round(B, 6) + 0.0).tolist(), facts["start"], round(facts["sensitivity_before"], 6), round(facts["sensitivity_after"], 6)
    ([[1.0, 0.0], [0.0, 1.0]], 'symmetric-root', 1.414214, 1.0)
    """
    r = A.shape[0]
    deadline = time.perf_counter() + time_limit
    starts = {"identity": np.eye(rows, r)}
    if V is not None and rows >= V.shape[0]:
        starts["symmetric-root"] = np.vstack([V, np.zeros((rows - V.shape[0], r))])
    s0 = float(np.abs(A).sum(axis=0).max())
    best = (None, math.inf, None, 0)
    total_steps, cut = 0, False
    for i, (name, Q0) in enumerate(starts.items()):
        start_deadline = time.perf_counter() + (deadline - time.perf_counter()) / (len(starts) - i)  # an equal share of what is left
        with one_blas_thread():  # many small products: marginals:4x4x4x4:2 took 120-206 s on two threads under load, 1.1 s on one
            Q, s, steps, stopped = _descend(Q0, A, start_deadline, name, stage_steps)
        total_steps, cut = total_steps + steps, cut or stopped
        log.info("svd-approx: Program 3.4.3 search from %s: sensitivity %.6g -> %.6g in %d steps", name, s0, s, steps)
        if s < best[1]:
            best = (Q, s, name, steps)
    Q, s, name, _ = best
    return Q @ A, {"start": name, "steps": total_steps, "sensitivity_before": s0, "sensitivity_after": s, "time_limit_reached": cut}


@register_method(
    "svd-approx",
    options=("refine", "rows", "time_budget", "stage_steps"),
    privacy=("pure",),
    source="Li 2013, Sec. 3.4.2.2-3.4.2.3, Thm 3.8, Program 3.4.3; completion Sec. 3.4.3",
    summary="epsilon-DP: closed form diag(sqrt(xi)) P_W^T, local min-L1 rotation (Program 3.4.3), column completion; any n, refined for n <= 512",
)
def svd_approx(problem: Problem):
    """The Thm 3.8 strategy, refined by Program 3.4.3 where tractable (options ``refine``, ``rows``).

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("prefix:8", privacy="pure", method="svd-approx")
    >>> s.meta["sensitivity_after"] < s.meta["sensitivity_before"]
    True
    """
    if problem.privacy != "pure":
        raise InputError(f"svd-approx is an epsilon-DP method (L1 sensitivity); use {setting('privacy', 'pure')}")
    t0 = time.perf_counter()
    W = problem.workload
    n = W.n
    refine = problem.options.get("refine", n <= REFINE_MAX_N)
    if not isinstance(refine, (bool, np.bool_)):
        raise OptionError(f"option refine must be true or false, got {refine!r}")
    budget = problem.option(
        "time_budget", min(problem.solver.time_limit, SEARCH_SECONDS), lambda v: is_number(v) and v > 0, "a positive number of seconds", method="svd-approx"
    )
    stage_steps = problem.option("stage_steps", _MAX_STEPS_PER_STAGE, lambda v: is_integer(v, 1), "an integer >= 1", method="svd-approx")
    rows = problem.options.get("rows", n)
    if isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 1:  # its least value, the rank, is known below
        raise OptionError(f"option rows must be an integer >= rank of the workload, got {rows!r}")
    # the search keeps a few rows x (rank + n) arrays (iterate, gradient, trial step, the factor and its signs): the
    # part without the rank is checked before any work, the whole once the rank is known
    memory_hint = f"use fewer rows (default: the {n} cells)"
    require_memory(SEARCH_COPIES * 8.0 * int(rows) * (1 + n), f"svd-approx with option rows={rows}", hint=memory_hint)
    G = W.gram()
    # the strategy does not depend on G's scale; its search (smoothing, step sizes) is tuned for
    # mean diagonal 1 (on a workload scaled by 1e30 it ended 22% worse)
    with heartbeat(f"svd-approx: eigendecomposition of the {n} x {n} Gram matrix (Thm 3.8)"):
        A, lam, V = svd_factor(G / gram_unit(G))
    if rows < A.shape[0]:
        raise OptionError(f"option rows must be an integer >= rank of the workload ({A.shape[0]}), got {rows!r}")
    require_memory(SEARCH_COPIES * 8.0 * int(rows) * (A.shape[0] + n), f"svd-approx with option rows={rows}", hint=memory_hint)
    log.info("svd-approx: Thm 3.8 factor of rank %d from the %d x %d Gram matrix%s", A.shape[0], n, n, ", then the min-L1 rotation (Program 3.4.3)" if refine else "")
    extra = {"rank": int(A.shape[0]), "refined": bool(refine)}
    if refine:
        A, facts = min_l1_factor(A, int(rows), V, time_limit=float(budget), stage_steps=int(stage_steps))
        extra.update(facts)
        if facts["time_limit_reached"]:
            log.info(  # status time_limit says it; auto-pure cuts this search at 1 s on purpose
                "svd-approx: the Program 3.4.3 search used its time budget of %.4g s before converging; the strategy is "
                "the best found so far (more with option time_budget, e.g. --option time_budget=%g)", float(budget), 2 * float(budget),
            )
    bound = lower_bound_facts(W, time.perf_counter() - t0)
    extra.update(bound.pop("extra"))
    return compile_strategy(A, problem, "svd-approx", solver="closed-form+stiefel-descent" if refine else "closed-form", status=("time_limit" if extra.get("time_limit_reached") else "local-optimum") if refine else "closed-form", solve_seconds=time.perf_counter() - t0, extra=extra, **bound)
