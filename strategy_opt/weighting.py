"""Optimal query weighting, L2 (Li 2013, Program 5.1.1; Li & Miklau, PVLDB 2012).

Given design queries q_1..q_k (rows of Q, n cells) and costs c_i > 0, choose
weights ``u_i = lambda_i^2`` of the strategy ``A = diag(sqrt(u)) Q`` by ::

    minimize  sum_i c_i / u_i     s.t.  B u <= 1,  u >= 0,      B = (Q o Q)^T   (n x k)

(the LMI form of Program 5.1.1 with ``v_i = 1 / u_i``). Row j of ``B u <= 1``
says column j of A has squared L2 norm at most 1 (sensitivity 1); with
``c_i = ||(W Q^+)_{:,i}||^2`` (Thm 5.1; ``c_i = sigma_i`` for eigen-queries)
the objective is the total error of A before completion.

Dual and certificate (notes thesis-mm-eigen.md Sec. 4.3): minimising the
Lagrangian ``sum_i c_i/u_i + y^T (B u - 1)`` over u gives
``u_i = sqrt(c_i / (B^T y)_i)`` and ``2 sum_i sqrt(c_i (B^T y)_i) - sum_j y_j``;
maximising over the scale of y, for every ``y >= 0``::

    d(y) = ( sum_i sqrt(c_i (B^T y)_i) )^2 / sum_j y_j  <=  optimum,

and the primal point ``u_i ∝ sqrt(c_i / (B^T y)_i)`` is optimal at the dual
optimum. Every result carries a feasible u (``max(B u) = 1``), its value, a
dual lower bound and their relative gap.

Backends
--------
``native`` (default): a primal-dual interior-point method (Mehrotra
predictor-corrector) on the k weights, with the k x k Newton system
``diag(2 c / u^3) + B^T diag(y / s) B`` solved by Cholesky: O(n k^2) per
iteration, 10-30 iterations to a relative gap of 1e-8 in our runs (n up to 8192).
``cvxpy``: the same program as an SOCP (``inv_pos``) through the profile's
solver (SCS or Clarabel), for cross-checks on small k.

Examples
--------
>>> import numpy as np
>>> r = solve_weighting(np.array([4.0, 1.0]), np.eye(2))
>>> np.round(r.u, 6).tolist(), round(r.value, 6)
([1.0, 1.0], 5.0)
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
from scipy.linalg.blas import dsyrk

from .threads import factorization_threads
from .exceptions import InputError, SolverError, setting
from .progress import heartbeat
from .solvers import SolverProfile, cvxpy_solve_kwargs, load_profile, solve_cvxpy

__all__ = ["WeightingResult", "solve_weighting", "dual_value", "weights_from_dual"]

log = logging.getLogger("strategy_opt")

#: Seconds between two progress lines of the native solver.
_LOG_EVERY = 2.0
#: Fraction of the distance to the boundary taken by an interior-point step.
_STEP_TO_BOUNDARY = 0.99
#: Consecutive interior-point steps shorter than `_TINY_STEP` before giving up.
_STALL_ITERS = 5
_TINY_STEP = 1e-8
#: Cap on interior-point iterations (they converge in 10-30; profiles' max_iters target first-order methods).
_MAX_IPM_ITERS = 300
#: Lower bound on the centring target relative to the dual infeasibility (see `_solve_native`).
_INFEASIBILITY_SHARE = 0.1
#: Relative diagonal shift retried when the Newton matrix is numerically singular.
_REGULARIZATION = 1e-13
@dataclass
class WeightingResult:
    """Solution of Program 5.1.1 with its certificate.

    Attributes
    ----------
    u : ndarray, shape (k,)
        Feasible weights, scaled so that ``max(B u) = 1``.
    value : float
        ``sum_i c_i / u_i`` at u (an upper bound on the optimum).
    dual_value : float
        ``d(y)`` at the returned dual point (a lower bound on the optimum).
    y : ndarray, shape (n,)
        Dual point (one multiplier per cell), normalised to sum 1.
    iterations : int
    status : str
        ``optimal`` (gap <= tol), ``max_iters``, ``time_limit`` or ``stalled``;
        for cvxpy the solver's own status.
    seconds : float
    backend : str
        ``native`` or ``cvxpy:<SOLVER>``.

    Examples
    --------
    Two queries on one cell with costs 4 and 1: ``u ∝ sqrt(c)`` with ``u_1 + u_2 = 1``, value ``(2 + 1)^2``:

    >>> r = solve_weighting(np.array([4.0, 1.0]), np.array([[1.0, 1.0]]))
    >>> np.round(r.u, 6).tolist(), round(r.value, 6), round(r.dual_value, 6), r.y.tolist(), r.status, r.backend
    ([0.666667, 0.333333], 9.0, 9.0, [1.0], 'optimal', 'native')
    """

    u: np.ndarray
    value: float
    dual_value: float
    y: np.ndarray
    iterations: int
    status: str
    seconds: float
    backend: str

    @property
    def gap(self) -> float:
        """Relative duality gap ``value / dual_value - 1`` (inf without a positive bound).

        Examples
        --------
        >>> WeightingResult(np.ones(2), 10.0, 8.0, np.ones(1), 3, "max_iters", 0.0, "native").gap
        0.25
        >>> WeightingResult(np.ones(2), 10.0, 0.0, np.ones(1), 3, "stalled", 0.0, "native").gap  # no positive bound
        inf
        """
        return self.value / self.dual_value - 1.0 if self.dual_value > 0 else float("inf")

    def summary(self) -> dict:
        """JSON-ready facts for strategy metadata.

        Returns
        -------
        dict
            ``value``, ``dual_value``, ``relative_gap`` (`gap`), ``iterations``, ``status``, ``seconds`` and
            ``backend``, as Python floats, ints and strings (the weights and the dual point are left out).

        Examples
        --------
        >>> r = WeightingResult(np.ones(2), 10.0, 8.0, np.ones(1), 3, "max_iters", 0.5, "native")
        >>> r.summary()
        {'value': 10.0, 'dual_value': 8.0, 'relative_gap': 0.25, 'iterations': 3, 'status': 'max_iters', 'seconds': 0.5, 'backend': 'native'}
        """
        return {
            "value": float(self.value),
            "dual_value": float(self.dual_value),
            "relative_gap": float(self.gap),
            "iterations": int(self.iterations),
            "status": self.status,
            "seconds": float(self.seconds),
            "backend": self.backend,
        }


def dual_value(c: np.ndarray, B: np.ndarray, y: np.ndarray) -> float:
    """Lower bound ``(sum_i sqrt(c_i (B^T y)_i))^2 / sum(y)`` on Program 5.1.1 for any ``y >= 0``.

    Parameters
    ----------
    c : ndarray, shape (k,)
        Positive costs.
    B : ndarray, shape (n, k)
        Non-negative loads.
    y : array_like, shape (n,)
        Dual point; negative entries are clipped to 0.

    Returns
    -------
    float
        The bound; 0 when ``y`` sums to 0.

    Examples
    --------
    With ``B = I`` and ``c = (4, 1)`` the optimum is 5 (``u = (1, 1)``): ``y = (1, 1)`` bounds it by
    ``(2 + 1)^2 / 2``, and the optimal dual point ``y = c`` by ``(4 + 1)^2 / 5``:

    >>> c = np.array([4.0, 1.0])
    >>> dual_value(c, np.eye(2), np.array([1.0, 1.0])), dual_value(c, np.eye(2), np.array([4.0, 1.0]))
    (4.5, 5.0)
    """
    y = np.clip(np.asarray(y, dtype=float), 0.0, None)
    total = y.sum()
    if total <= 0:
        return 0.0
    return float(np.sqrt(c * np.clip(B.T @ y, 0.0, None)).sum() ** 2 / total)


def weights_from_dual(c: np.ndarray, B: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Primal recovery ``u_i ∝ sqrt(c_i / (B^T y)_i)``, scaled to ``max(B u) = 1``.

    Parameters
    ----------
    c : ndarray, shape (k,)
        Positive costs.
    B : ndarray, shape (n, k)
        Non-negative loads.
    y : ndarray, shape (n,)
        Dual point (``>= 0``); entries of ``B^T y`` at 0 are replaced by a tiny positive number.

    Returns
    -------
    ndarray, shape (k,)
        Feasible weights.

    Examples
    --------
    Two queries on one cell, costs 4 and 1: ``u ∝ (2, 1)``, scaled to sum 1:

    >>> np.round(weights_from_dual(np.array([4.0, 1.0]), np.array([[1.0, 1.0]]), np.array([1.0])), 6).tolist()
    [0.666667, 0.333333]
    """
    By = np.asarray(B.T @ y, dtype=float)
    tiny = np.finfo(float).tiny
    u = np.sqrt(c / np.maximum(By, tiny * max(By.max(), 1.0)))
    return u / (B @ u).max()


def _validate(c, B) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(c, dtype=float)
    B = np.asarray(B, dtype=float)
    if c.ndim != 1 or B.ndim != 2 or B.shape[1] != c.shape[0]:
        raise InputError(f"Program 5.1.1 needs costs c (k,) and loads B (n, k); got {c.shape} and {B.shape}")
    if c.size == 0:
        raise InputError("Program 5.1.1 needs at least one design query")
    if not (np.all(np.isfinite(c)) and np.all(c > 0)):
        raise InputError("Program 5.1.1 costs c must be finite and positive; drop design queries with c_i = 0")
    if not np.all(np.isfinite(B)) or B.min() < 0:
        raise InputError("Program 5.1.1 loads B = (Q o Q)^T must be finite and non-negative")
    if np.any(B.max(axis=0) <= 0):
        raise InputError("Program 5.1.1: a design query is all zeros (a column of B has no positive entry)")
    return c, B


def solve_weighting(c, B, profile: SolverProfile | None = None) -> WeightingResult:
    """Solve Program 5.1.1 ``min sum c_i/u_i s.t. B u <= 1, u >= 0``.

    Parameters
    ----------
    c : array_like, shape (k,)
        Positive costs (eigenvalues sigma_i for eigen-queries).
    B : array_like, shape (n, k)
        Non-negative loads ``B[j, i] = Q[i, j]^2``.
    profile : SolverProfile, optional
        ``backend = 'native'`` (default) or ``'cvxpy'`` with ``solver``;
        ``tol`` (relative gap), ``max_iters``, ``time_limit``, ``options``.

    Returns
    -------
    WeightingResult

    Raises
    ------
    InputError
        On malformed c or B.
    SolverError
        If the backend produces no usable solution.

    Examples
    --------
    Queries ``x0 + x1`` (cost 4) and ``x1`` (cost 1): cell 0 limits ``u_1 <= 1`` and cell 1 ``u_1 + u_2 <= 1``;
    the optimum ``u = (2/3, 1/3)`` costs ``4 * 3/2 + 3 = 9``:

    >>> r = solve_weighting([4.0, 1.0], [[1.0, 0.0], [1.0, 1.0]])
    >>> np.round(r.u, 6).tolist(), round(r.value, 6), r.gap <= 1e-8
    ([0.666667, 0.333333], 9.0, True)
    """
    c, B = _validate(c, B)
    profile = profile or load_profile(None)
    if profile.backend == "cvxpy":
        return _solve_cvxpy(c, B, profile)
    return _solve_native(c, B, profile)


def _max_step(x: np.ndarray, dx: np.ndarray) -> float:
    neg = dx < 0
    return float(min(1.0, (-x[neg] / dx[neg]).min())) if neg.any() else 1.0


def _solve_native(c: np.ndarray, B: np.ndarray, profile: SolverProfile) -> WeightingResult:
    """Primal-dual interior point (Mehrotra predictor-corrector) in scaled variables.

    Variables ``u = a * v`` with ``a ∝ sqrt(c)`` (the SVD-bound point, Li 2013
    Sec. 5.1.4, optimal when that bound is tight) so that the start ``v = 1`` is
    interior and the Newton matrix well scaled; slacks ``s = 1 - B u``;
    multipliers y >= 0 (one per cell). Every iteration evaluates the
    certificate (best feasible primal, best dual bound) and stops at
    ``gap <= profile.tol``.
    """
    t0 = time.perf_counter()
    n, k = B.shape
    a = np.sqrt(c)
    a /= 2.0 * (B @ a).max()
    Bs = B * a  # scaled loads, B diag(a)
    BsF = np.asfortranarray(Bs)
    scale = float((c / a).sum())
    g = c / a / scale  # scaled costs, objective sum(g / v)
    v = np.ones(k)
    s = 1.0 - Bs @ v
    col = Bs.T @ np.ones(n)
    y = np.full(n, float(g @ col / (col @ col)))  # least-squares fit of B^T y = g / v^2 at v = 1
    best_u, best_val, best_dual, best_y = None, np.inf, 0.0, y / y.sum()
    status, it, last_log, stall = "max_iters", 0, t0, 0
    for it in range(1, min(profile.max_iters, _MAX_IPM_ITERS) + 1):
        # certificate: feasible rescaled primal (and the dual's primal recovery), dual bound at y
        for cand in (v / (Bs @ v).max(), weights_from_dual(g, Bs, y)):
            val = float((g / cand).sum())
            if val < best_val:
                best_val, best_u = val, cand
        dval = dual_value(g, Bs, y)
        if dval > best_dual:
            best_dual, best_y = dval, y / y.sum()
        gap = best_val / best_dual - 1.0 if best_dual > 0 else np.inf
        now = time.perf_counter()
        if profile.verbose or now - last_log >= _LOG_EVERY:
            log.info("Program 5.1.1 (native IPM, k=%d, n=%d): iter %d value %.10g bound %.10g gap %.2e (%.1fs)", k, n, it, best_val * scale, best_dual * scale, gap, now - t0)
            last_log = now
        if gap <= profile.tol:
            status = "optimal"
            break
        if now - t0 > profile.time_limit:
            status = "time_limit"
            break
        # Newton system of the perturbed KKT conditions
        r_d = -g / v**2 + Bs.T @ y
        r_p = Bs @ v + s - 1.0
        mu = float(s @ y) / n
        D = y / s
        M = dsyrk(1.0, np.asfortranarray(BsF * np.sqrt(D)[:, None]), trans=1, lower=0)
        M[np.diag_indices(k)] += 2.0 * g / v**3
        try:
            with factorization_threads():
                factor = la.cho_factor(M, lower=False, check_finite=False)
        except la.LinAlgError:
            M[np.diag_indices(k)] += _REGULARIZATION * M.diagonal().max()
            try:
                with factorization_threads():
                    factor = la.cho_factor(M, lower=False, overwrite_a=True, check_finite=False)
            except la.LinAlgError:
                status = "stalled"
                break

        def direction(r_c):
            dv = la.cho_solve(factor, -r_d - Bs.T @ ((y * r_p - r_c) / s), check_finite=False)
            ds = -r_p - Bs @ dv
            return dv, ds, (-r_c - y * ds) / s

        dv, ds, dy = direction(s * y)
        step = min(_max_step(v, dv), _max_step(s, ds), _max_step(y, dy))
        mu_aff = float((s + step * ds) @ (y + step * dy)) / n
        sigma = (mu_aff / mu) ** 3
        # keep the complementarity gap n * mu above a share of the relative dual infeasibility
        # times f(v): Newton on 1/v grows v by at most ~1.5x per step, so mu must not run ahead
        rho = float(np.abs(r_d).max() / np.abs(g / v**2).max())
        sigma = max(sigma, min(1.0, _INFEASIBILITY_SHARE * rho * float((g / v).sum()) / (n * mu)))
        dv, ds, dy = direction(s * y + ds * dy - sigma * mu)
        step = _STEP_TO_BOUNDARY * min(_max_step(v, dv), _max_step(s, ds), _max_step(y, dy))
        if not np.all(np.isfinite(dv)):
            status = "stalled"
            break
        stall = stall + 1 if step < _TINY_STEP else 0
        if stall >= _STALL_ITERS:
            status = "stalled"
            break
        v, s, y = v + step * dv, s + step * ds, y + step * dy
    if best_u is None:
        raise SolverError(f"Program 5.1.1 (native interior point) found no feasible weights; try {setting('solver', 'clarabel')}")
    u = a * best_u
    u /= (B @ u).max()
    value = float((c / u).sum())
    dual = dual_value(c, B, best_y)
    seconds = time.perf_counter() - t0
    log.info("Program 5.1.1 (native IPM): %s after %d iterations, value %.10g, gap %.2e, %.1fs", status, it, value, value / dual - 1.0 if dual > 0 else np.inf, seconds)
    return WeightingResult(u, value, dual, best_y, it, status, seconds, "native")


def _solve_cvxpy(c: np.ndarray, B: np.ndarray, profile: SolverProfile) -> WeightingResult:
    """Program 5.1.1 as an SOCP in cvxpy, in the same scaled variables as the native solver."""
    import cvxpy as cp

    t0 = time.perf_counter()
    k = B.shape[1]
    a = np.sqrt(c)
    a /= (B @ a).max()
    Bs = B * a
    g = c / a
    g_scale = g.sum()
    v = cp.Variable(k, nonneg=True)
    cons = Bs @ v <= 1
    prob = cp.Problem(cp.Minimize((g / g_scale) @ cp.inv_pos(v)), [cons])
    kwargs = cvxpy_solve_kwargs(profile)  # [options] with the profile's time_limit and max_iters under the solver's names
    try:
        # cvxpy evaluates 1/v at a stopped iterate with zeros (Clarabel user_limit): inf, unused here
        with warnings.catch_warnings(), np.errstate(divide="ignore"), heartbeat(f"Program 5.1.1: {profile.solver}", profile.time_limit):
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")  # reported through the status and the log
            solve_cvxpy(prob, profile.solver, verbose=profile.verbose, **kwargs)
    except cp.error.SolverError as exc:
        raise SolverError(f"Program 5.1.1 (cvxpy/{profile.solver}) failed: {exc}; try {setting('solver', 'native')}") from None
    if v.value is None or cons.dual_value is None:
        raise SolverError(f"Program 5.1.1 (cvxpy/{profile.solver}) returned status {prob.status}; try {setting('solver', 'native')}")
    u = a * np.clip(v.value, 0.0, None)
    if np.any(u <= 0):
        u = weights_from_dual(c, B, cons.dual_value)
    u /= (B @ u).max()
    y = np.clip(np.asarray(cons.dual_value, dtype=float).ravel(), 0.0, None)
    candidates = [u, weights_from_dual(c, B, y)] if y.sum() > 0 else [u]
    u = min(candidates, key=lambda w: float((c / w).sum()))
    seconds = time.perf_counter() - t0
    stats = prob.solver_stats
    if prob.status != "optimal":  # e.g. SCS optimal_inaccurate or Clarabel user_limit at the profile's time_limit / max_iters
        log.warning(
            "Program 5.1.1 (cvxpy/%s): status %s after %d iterations in %.1fs (solver settings %s); the weights come from its last iterate",
            profile.solver, prob.status, int(stats.num_iters or 0) if stats is not None else 0, seconds, kwargs,
        )
    return WeightingResult(
        u,
        float((c / u).sum()),
        dual_value(c, B, y),
        y / y.sum() if y.sum() > 0 else y,
        int(stats.num_iters or 0) if stats is not None else 0,
        str(prob.status),
        seconds,
        f"cvxpy:{profile.solver}",
    )
