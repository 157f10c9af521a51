"""MINERROR under epsilon-DP: Program 3.4.1 by Dattorro's convex iteration (Li 2013, Sec. 3.4.1).

Program 3.4.1 (with the PSD constraint the dissertation omits, notes Sec. 2.2)::

    minimise   trace(U)                    over A (m' x n), X (n x n), U (r x r)
    s.t.       [[X, L], [L^T, U]] ⪰ 0      (U ⪰ L^T X^{-1} L, L L^T = G = W^T W;
                                            the m LMIs (3.6) collapse to one, notes 2.4)
               sum_i |a_ij| <= 1           (L1 sensitivity at most 1, (3.7))
               Z = [[I, A], [A^T, X]] ⪰ 0, rank Z = m'     (X = A^T A, (3.8))

The rank constraint makes it non-convex. The dissertation cites Dattorro's
*convex iteration* without details; this is our reconstruction (notes, Sec.
2.3): alternate

(a) the convex SDP  ``minimise trace(U) + w <Z, Y>``  without the rank constraint;
(b) the closed-form direction ``Y = V V^T``, V the eigenvectors of the
    ``N - m'`` smallest eigenvalues of the solved Z (``N = m' + n``).

``<Z, Y>`` after (b) is the sum of the ``N - m'`` smallest eigenvalues of Z: the
*rank residual*, zero exactly when ``X = A^T A``. Without the rank term the
relaxation is unbounded (X can grow without bound), so the iteration starts
from the direction of a good feasible strategy A0 (Y0 = projector on the null
space of ``Z(A0)``, for which ``<Z, Y0> = trace((I + A0^T A0)^{-1} (X - A^T A +
(A - A0)^T (A - A0)))``: a proximal term). The weight w starts at
``INITIAL_WEIGHT ||X0^{-1} G X0^{-1}||_2 (1 + ||A0||_2^2)`` (the last factor is the
weight at which inflating X stops paying; starting lower lets the objective move
A away from A0) and doubles whenever the residual stops halving.

Every iterate's A is a valid strategy (``||A||_1 <= 1``): its true unit error
``E_1 = ||A||_1^2 trace(G (A^T A)^+)`` is evaluated (after column completion)
and the best strategy seen is returned, compared with the identity, the
Program 3.4.3-refined SVD approximation (`svd_approx`), the L2 route (the
(epsilon, delta) optimum used under Laplace noise, Sec. 3.4.2.1) and the
p-identity optimiser (`pidentity`); the iteration runs from each of them
(best first) and ``meta`` names the winner. The L2 optimum's certified dual bound is the lower bound
(kind ``l2-optimum``, or ``l2-dual`` when its solve stopped before its target gap:
``||A||_1 >= ||A||_2`` makes it a lower bound on E_1).

Solver profile: a cvxpy profile (``scs``, ``clarabel``) selects the SDP
solver; the ``native`` profile (no SDP solver of its own) uses Clarabel. The
outer iteration stops when the rank residual is at most ``max(tol, 1e-6)``
times ``trace(Z)``, after ``min(max_iters, option iterations = 50)`` rounds, at
the profile's ``time_limit``, or after `STALL_ROUNDS` rounds without a better
strategy.

Scale (measured on this 2-core machine, Clarabel, m' = 2n): an SDP round takes
about 0.05 s at n = 4, 0.3 s at n = 8, 2-4 s at n = 16 and 30-60 s at n = 32;
the method is meant for n <= 16 (refused above `MAX_N`). SCS is much slower
on these SDPs (an outside run took about 500 s at n = 9).

A round the SDP solver fails on ends the iteration from that start (status
``solver-failed`` in ``meta['iteration_statuses']``); the best strategy seen
so far stands, so the method always returns a valid strategy. ``solver_status``
is the status of the run the returned strategy comes from (``converged``,
``stalled``, ``budget``, or ``best-of-iterates`` when a later round's solve
failed), ``start-kept`` when no iteration improved on the best start, or
``optimal`` when its E_1 meets the lower bound (within the profile's ``tol``).
"""

from __future__ import annotations

import logging
import math
import time
import warnings

import numpy as np
import scipy.linalg as la

from ..augment import complete_columns_l1
from ..bases import identity_matrix
from ..certificates import gram_factor
from ..compiler import compile_strategy
from ..defaults import SUPPORT_RTOL
from ..error import ErrorProfile
from ..exceptions import InputError, OptionError, SolverError, setting
from ..pure_bound import certified_l2_optimum
from ..problem import Problem
from ..registry import register_method
from ..resources import psd_solver_bytes, require_memory
from ..solvers import require_cone, solve_cvxpy
from ..workload import Workload, gram_unit
from .svd_approx import min_l1_factor, svd_factor

__all__ = ["minerror_l1", "l1_error", "MAX_N", "STALL_ROUNDS"]

log = logging.getLogger("strategy_opt")

#: Largest domain accepted (an SDP on (m' + n)^2 = 9 n^2 entries per round).
MAX_N = 32
#: Default number of convex-iteration rounds (capped by the profile's max_iters).
ITERATIONS = 50
#: Rounds without a better strategy before stopping.
STALL_ROUNDS = 8
#: Starting rank weight as a share of ``||X0^{-1} G X0^{-1}||_2 (1 + ||A0||_2^2)`` (doubled while the residual stalls).
INITIAL_WEIGHT = 1e-2
#: Floor of the relative rank-residual tolerance (SDP solvers are not more accurate).
RANK_RTOL_FLOOR = 1e-6


def l1_error(A: np.ndarray, G: np.ndarray) -> float:
    """Unit error ``E_1`` of A after column completion (inf if A does not support G).

    The error analysis of `strategy_opt.error.ErrorProfile` (its rank cutoff and support test,
    and its QR route for ill-conditioned strategies), on the Gram matrix alone.

    Parameters
    ----------
    A : array_like, shape (p, n)
        The strategy (any scale: it is divided by its L1 sensitivity).
    G : ndarray, shape (n, n)
        The workload Gram matrix.

    Returns
    -------
    float

    Examples
    --------
    >>> from strategy_opt.workload import total
    >>> l1_error(np.eye(2), total(2).gram())  # trace(J)
    2.0
    >>> l1_error(np.array([[1.0, 1.0]]), np.eye(2))  # the total alone cannot answer the cells
    inf
    >>> l1_error(np.array([[2.0, 0.0]]), np.diag([1.0, 0.0]))  # cell 1 completed by a row (0, 2): A / 2 = I
    1.0
    """
    A, _ = complete_columns_l1(np.asarray(A, dtype=float))
    s = np.abs(A).sum(axis=0).max()
    if not s > 0:
        return math.inf
    prof = ErrorProfile(A / s)
    if prof.unsupported_fraction(G) > SUPPORT_RTOL:
        return math.inf
    return prof.trace_with(G)


def _pidentity_method(problem: Problem) -> np.ndarray | None:
    """The p-identity method's strategy (dense), or None where it refuses the workload.

    Beyond the flat optimiser of `_candidates` it has the product-domain templates:
    on ``marginals:3x5:1`` the weighted-marginals template gives 27.264 where every
    flat start, and the iteration from it, stays at the identity's 30.
    """
    from dataclasses import replace

    from ..registry import methods

    try:
        found = methods()["p-identity"].func(replace(problem, options={}))
    except (InputError, SolverError, np.linalg.LinAlgError) as exc:
        log.info("minerror-l1: the p-identity method is not a candidate (%s)", exc)
        return None
    return np.asarray(found.dense(), dtype=float)


def _sdp(n: int, rows: int, L: np.ndarray):
    """The convex SDP (a) with the weighted direction ``w Y`` as one parameter (DPP: fast re-solves)."""
    import cvxpy as cp

    r = L.shape[1]
    A = cp.Variable((rows, n))
    X = cp.Variable((n, n), symmetric=True)
    U = cp.Variable((r, r), symmetric=True)
    wY = cp.Parameter((rows + n, rows + n), symmetric=True)
    Z = cp.bmat([[np.eye(rows), A], [A.T, X]])
    cons = [cp.bmat([[X, L], [L.T, U]]) >> 0, Z >> 0, cp.sum(cp.abs(A), axis=0) <= 1]
    prob = cp.Problem(cp.Minimize(cp.trace(U) + cp.sum(cp.multiply(wY, Z))), cons)
    return prob, A, X, wY


def _direction(Z: np.ndarray, rows: int) -> tuple[np.ndarray, float]:
    """Projector on the eigenvectors of the ``N - rows`` smallest eigenvalues of Z, and their sum."""
    lam, V = np.linalg.eigh(0.5 * (Z + Z.T))
    Vs = V[:, : Z.shape[0] - rows]
    return Vs @ Vs.T, float(np.clip(lam[: Z.shape[0] - rows], 0.0, None).sum())


def _require_sdp_memory(solver: str, n: int, rows: int, rank: int) -> None:
    """Refuse (exit 2) an SDP whose PSD cones (``rows + n`` and ``n + rank``) the solver cannot hold."""
    require_memory(
        psd_solver_bytes(solver, [rows + n, n + rank]),
        f"minerror-l1 with {rows} strategy rows on {n} cells ({solver})",
        "lower option rows (default 2n)",
    )


def _solver(profile) -> tuple[str, dict]:
    if profile.backend == "cvxpy" and profile.solver:
        require_cone(profile, "PSD", "minerror-l1")
        name = profile.solver.upper()
        kw = dict(profile.options)
    else:
        name, kw = "CLARABEL", {}
    return name, kw


def _candidates(W: Workload, G: np.ndarray, n: int, budget: float) -> tuple[dict, float | None, str]:
    """Identity, refined SVD approximation, the L2 route (two factors) and p-identity, with the L2 lower bound and its kind.

    The L2 route and the bound come from `strategy_opt.pure_bound.certified_l2_optimum` (the
    native solver, and Clarabel where it stalls).
    """
    from .pidentity import expand_cells, merged_cells, optimise_theta, pidentity_matrix, solve_pidentity

    out = {"identity": identity_matrix(n).toarray()}
    A, _, V = svd_factor(G)
    out["svd-approx"], _ = min_l1_factor(A, n, V, time_limit=budget)
    bound, kind, out["l2-route"] = certified_l2_optimum(W, G, time_limit=budget)
    # the L2 route's strategy is one factor of its Gram X = A^T A (Cholesky in cell order); the factor in
    # reversed cell order has the same X and other L1 norms, and the convex iteration from it ended 1.6-11.6%
    # lower on 3 of 12 random low-rank workloads of 5-8 cells (the best start is kept, so never higher)
    X = out["l2-route"].T @ out["l2-route"]
    rev = np.arange(n)[::-1]
    try:
        out["l2-route/reversed"] = la.cholesky(X[np.ix_(rev, rev)], lower=False)[:, rev]
    except la.LinAlgError:  # a singular X (rank-deficient workload): its one factor is enough
        pass
    # the p-identity optimiser's own starts (random with p = n/16), then a wider random start (p = n/4),
    # the better one; on all cells and, if some merge, on merged cells as the p-identity method runs
    cell_of, reps = merged_cells(G)
    domains = {"p-identity": np.arange(n)} | ({"p-identity/merged-cells": reps} if reps.size < n else {})
    for name, cells in domains.items():
        Gr, r = G[np.ix_(cells, cells)], cells.size
        share = budget / 2 / len(domains)
        res = solve_pidentity(Gr, p_random=max(1, r // 16), random_starts=1, seed=0, max_iters=10_000, time_limit=share, ftol=1e-10)
        wide = np.random.default_rng(1).random((max(1, r // 4), r))
        theta, value, _, _ = optimise_theta(Gr, wide, max_iters=10_000, deadline=time.perf_counter() + share, ftol=1e-10, label="random (p = n/4)")
        out[name] = pidentity_matrix(theta if value < res.value else res.theta)
    if "p-identity/merged-cells" in out:
        out["p-identity/merged-cells"] = expand_cells(out["p-identity/merged-cells"], cell_of)
    return out, bound, kind


def _convex_iteration(sdp, A_start: np.ndarray, G: np.ndarray, rows: int, max_rounds: int, deadline: float, tol: float, solver: str, kw: dict, label: str, unit: float = 1.0):
    """Dattorro's convex iteration from one start; returns (best E_1, its A, per-round history, status).

    The SDP was built on the Gram factor divided by ``sqrt(unit)`` (data of order 1: Clarabel panicked on
    a workload scaled by 1e90); its objective values are reported times ``unit``, in G's units.
    """
    import cvxpy as cp

    prob, Av, Xv, wY = sdp
    n = G.shape[0]
    A0, _ = complete_columns_l1(np.asarray(A_start, dtype=float))
    A0 = A0 / np.abs(A0).sum(axis=0).max()
    A0 = np.vstack([A0, np.zeros((rows - A0.shape[0], n))])
    Y, _ = _direction(np.block([[np.eye(rows), A0], [A0.T, A0.T @ A0]]), rows)
    X0i = np.linalg.pinv(A0.T @ A0)
    w = INITIAL_WEIGHT * float(np.linalg.norm(X0i @ G @ X0i, 2) * (1.0 + np.linalg.norm(A0, 2) ** 2)) / unit
    best_E, best_A = l1_error(A0, G), A0
    history, last_res, stall, status = [], math.inf, 0, "budget"
    for k in range(1, max_rounds + 1):
        if time.perf_counter() > deadline:
            break
        wY.value = w * Y
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")  # each iterate is evaluated exactly
                solve_cvxpy(prob, solver, **kw)
        except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
            # a failed round ends this start; its best iterate (at worst the start itself) stands
            log.warning("minerror-l1 [%s]: round %d: %s failed (%s); keeping the best strategy of this start", label, k, solver, str(exc).split(".")[0])
            history.append({"iteration": k, "rank_residual": None, "objective": None, "unit_error": None, "solver_failed": True})
            status = "solver-failed"
            break
        if Av.value is None:
            log.info("minerror-l1 [%s]: round %d: %s returned %s; doubling the rank weight", label, k, solver, prob.status)
            w *= 2.0
            continue
        A = np.asarray(Av.value)
        Z = np.block([[np.eye(rows), A], [A.T, np.asarray(Xv.value)]])
        Y, residual = _direction(Z, rows)
        rel = residual / max(float(np.trace(Z)), 1e-300)
        E = l1_error(A, G)
        history.append({"iteration": k, "rank_residual": residual, "objective": float(prob.value) * unit, "unit_error": E if math.isfinite(E) else None})
        log.info("minerror-l1 [%s]: round %d: rank residual %.3e (relative %.2e), objective %.8g, E_1 of iterate %.8g, weight %.3g", label, k, residual, rel, prob.value * unit, E, w * unit)
        if E < best_E * (1 - 1e-9):
            best_E, best_A, stall = E, A, 0
        else:
            stall += 1
        if rel <= max(tol, RANK_RTOL_FLOOR):
            status = "converged"
            break
        if stall >= STALL_ROUNDS:
            status = "stalled"
            break
        if residual >= 0.5 * last_res:
            w *= 2.0
        last_res = min(last_res, residual)
    return best_E, best_A, history, status


@register_method(
    "minerror-l1",
    options=("rows", "iterations"),
    privacy=("pure",),
    source="Li 2013, Program 3.4.1, Sec. 3.4.1 (Dattorro's convex iteration, reconstructed)",
    summary="Program 3.4.1 (the rank-constrained epsilon-DP program) by the rank-constraint convex iteration of SDPs, a local method (best of its iterates and warm starts); small domains only (n <= 16 practical with Clarabel, the default; SCS is far slower, ~500 s at n = 9; 32 max), option rows (default 2n)",
)
def minerror_l1(problem: Problem):
    """Program 3.4.1 by convex iteration; returns the best strategy seen (options ``rows``, ``iterations``).

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("all-range:4", privacy="pure", method="minerror-l1", iterations=3)
    >>> s.meta["unit_total_squared_error"] <= 20.0   # identity: trace(G) = 20
    True
    """
    if problem.privacy != "pure":
        raise InputError(f"minerror-l1 is the epsilon-DP program (L1 sensitivity); use {setting('privacy', 'pure')}")
    t0 = time.perf_counter()
    W = problem.workload
    n = W.n
    if n > MAX_N:
        raise InputError(f"minerror-l1 solves an SDP of size (3n)^2 per round; n = {n} exceeds {MAX_N} (use {setting('method', 'p-identity')} or 'auto')")
    profile = problem.solver
    rows = problem.options.get("rows", 2 * n)
    iterations = problem.options.get("iterations", ITERATIONS)
    for name, v, lo in (("rows", rows, n), ("iterations", iterations, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise OptionError(f"option {name} must be an integer >= {lo}, got {v!r}")
    max_rounds = min(int(iterations), profile.max_iters)
    G = W.gram()
    L = gram_factor(G)
    solver, kw = _solver(profile)
    _require_sdp_memory(solver, n, int(rows), L.shape[1])  # before the candidates: option rows sets the size
    cands, bound, bound_kind = _candidates(problem.workload, G, n, budget=max(1.0, 0.1 * profile.time_limit))
    errors = {k: l1_error(A, G) for k, A in cands.items()}
    templated = _pidentity_method(problem)  # its product-domain templates (Kronecker factors, weighted marginals)
    if templated is not None and (E := l1_error(templated, G)) < min(errors.values()) * (1 - 1e-9):
        cands["p-identity/method"], errors["p-identity/method"] = templated, E
    log.info("minerror-l1: n = %d; candidates: %s", n, ", ".join(f"{k} E_1 {v:.8g}" for k, v in errors.items()))
    starts = []
    for name in sorted(errors, key=errors.get):  # one iteration per distinct start matrix
        if not any(cands[name].shape == cands[k].shape and np.array_equal(cands[name], cands[k]) for k in starts):
            starts.append(name)
    rows = max(int(rows), max(complete_columns_l1(A)[0].shape[0] for A in cands.values()))
    _require_sdp_memory(solver, n, rows, L.shape[1])
    unit = gram_unit(G)
    sdp = _sdp(n, rows, L / math.sqrt(unit))
    winner = starts[0]
    best_E, best_A = errors[winner], cands[winner]
    runs, statuses = {}, {}
    for i, name in enumerate(starts):
        remaining = profile.time_limit - (time.perf_counter() - t0)
        if remaining <= 0:
            break
        deadline = time.perf_counter() + remaining / (len(starts) - i)
        E, A, history, status = _convex_iteration(sdp, cands[name], G, rows, max_rounds, deadline, profile.tol, solver, kw, name, unit)
        runs[name], statuses[name] = history, status
        if E < best_E * (1 - 1e-9):
            best_E, best_A, winner = E, A, f"iteration from {name}"
    extra = {
        "rows": rows,
        "iterations": sum(len(h) for h in runs.values()),
        "history": runs,
        "winner": winner,
        "candidate_errors": {k: (v if math.isfinite(v) else None) for k, v in errors.items()},
        "sdp_solver": solver,
        "iteration_statuses": statuses,
    }
    # the status of the iteration the returned strategy comes from; a start no iteration improved is kept as it is
    if winner.startswith("iteration from "):
        status = statuses.get(winner.removeprefix("iteration from "), "budget")
        status = "best-of-iterates" if status == "solver-failed" else status  # a later round failed; the best one seen stands
    else:
        status = "start-kept"
    strategy = compile_strategy(
        best_A,
        problem,
        "minerror-l1",
        solver=f"convex-iteration/{solver}",
        status=status,
        solve_seconds=time.perf_counter() - t0,
        lower_bound=bound,
        lower_bound_kind=bound_kind,
        extra=extra,
    )
    ratio = strategy.meta.get("ratio_to_lower_bound")
    if ratio is not None and ratio <= 1.0 + profile.tol:  # the lower bound certifies it, however the iteration ended
        strategy.meta["solver_status"] = "optimal"
    return strategy
