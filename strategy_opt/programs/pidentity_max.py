"""p-Identity strategies for the largest per-query variance under epsilon-DP (objective ``max``).

The p-Identity template ``A(Theta) = [I; Theta] D`` (`strategy_opt.programs.pidentity`)
keeps every column's L1 norm at 1, so query i's unit variance is

    u_i(Theta) = w_i M w_i^T,    M = (A^T A)^{-1} = diag(s) (I + Theta^T Theta)^{-1} diag(s),

with ``s = 1 + 1^T Theta``. The largest of them is not smooth; we minimise its
log-sum-exp smoothing (ours; McKenna et al. optimise the total only)::

    F_tau(Theta) = tau log sum_i exp(u_i / tau),    max_i u_i <= F_tau <= max_i u_i + tau log m,

whose gradient is ``sum_i c_i grad u_i`` with ``c = softmax(u / tau)``: the
gradient of the weighted total ``trace(G_c M)``, ``G_c = W^T diag(c) W``, which
`pidentity_loss` computes in O(p n^2). The temperature is annealed: stage k
holds ``tau = MAX_TEMPERATURES[k]`` times the largest variance at its start, and
L-BFGS-B runs each stage from where the previous one stopped, the first from
the p-Identity optimum for the total error, and, where it is better at the start,
also from the best single row of ones ``[I; c 1^T] D`` (the identity is a local
optimum of the largest variance on all predicates, as of the total on 1-way marginals). The iterate with the least true
largest variance is returned.

Measured (benchmarks/results/pure_max.md, one BLAS thread; auto-pure's strategy for
the total error, which auto returned for ``max`` before, against the annealed
search): prefix:64 20.71 -> 15.52, all ranges over 64 cells 31.05 -> 21.86,
random-range:64:64:0 24.79 -> 18.34, prefix:256 37.44 -> 28.24 (15 s); a local
method (a longer anneal reached 21.43 on all ranges over 64 cells).

Lower bound (`pure_max_lower_bound`): every strategy's largest epsilon-DP
variance is at least its (epsilon, delta) one (``||A||_1 >= ||A||_2``), so at
least the (epsilon, delta) min-max optimum ``gamma_2(W)^2``, which
`strategy_opt.native_max.solve_max_l2` bounds from below with a certificate
wherever it stops.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from dataclasses import replace

import numpy as np
import scipy.linalg as la
import scipy.optimize as so

from ..cells import merged_cells
from ..exceptions import InputError
from ..problem import Problem
from ..pure_bound import LOWER_BOUND_MAX_N
from ..threads import one_blas_thread
from ..workload import IntervalWorkload, Kronecker, Workload, from_matrix, weighted_gram
from .pidentity import ONES_ROW_SCAN, ONES_ROW_SCAN_MAX_N, THETA_MAX, _solve_1d, check_options, expand_cells, pidentity_loss, pidentity_matrix

__all__ = ["theta_variances", "smoothed_max_loss", "minimax_theta", "pidentity_max_strategy", "max_strategy_with_bound", "per_query_floor", "max_bound", "pure_max_lower_bound"]

log = logging.getLogger("strategy_opt")

#: Temperatures of the annealed log-sum-exp, relative to the largest variance at each stage's start
#: (a coarser schedule ends higher: from 0.03 alone prefix:64 stops at 16.30 against 15.52).
MAX_TEMPERATURES = (0.03, 0.01, 0.003, 0.001)
#: A stage stops when its best largest variance fell by less than STALL_RTOL (relative) in STALL_ITERATIONS iterations.
STALL_ITERATIONS, STALL_RTOL = 100, 1e-5
#: Seconds between progress lines.
LOG_EVERY = 5.0
#: Share of the time limit the search for the total-error start gets (the annealed stages get the rest).
START_SHARE = 0.25
#: Tolerance of the certified (epsilon, delta) min-max bound (a looser gap: it only needs to bound) ...
BOUND_TOL = 1e-4
#: ... and the shares of p-identity's time limit the search and this bound get (the bound on the total error,
#: which every epsilon-DP strategy states, the rest).
SEARCH_SHARE, MAX_BOUND_SHARE = 0.6, 0.15
#: A Kronecker workload of more cells is solved per factor (`max_strategy_with_bound`); up to it the flat search
#: does better (prefix:16*prefix:16: 50.81 flat in 13 s, 59.31 as the product of the factors' optima).
FLAT_PRODUCT_MAX_N = 256


def theta_variances(theta: np.ndarray, W: Workload) -> np.ndarray:
    """Unit per-query variances ``w_i M w_i^T`` through ``A(Theta) = [I; Theta] D`` (``||A||_1 = 1``).

    Parameters
    ----------
    theta : ndarray, shape (p, n)
    W : Workload
        On the n cells of Theta's columns.

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    Theta = 0 is the identity: a prefix query's variance is its length.

    >>> from strategy_opt.workload import prefix
    >>> theta_variances(np.zeros((1, 3)), prefix(3)).tolist()
    [1.0, 2.0, 3.0]
    """
    p, n = theta.shape
    s = 1.0 + theta.sum(axis=0)
    cf = la.cho_factor(np.eye(p) + theta @ theta.T, lower=True, check_finite=False)
    K = np.eye(n) - theta.T @ la.cho_solve(cf, theta, check_finite=False)  # (I + Theta^T Theta)^{-1}, Woodbury
    M = s[:, None] * K * s[None, :]
    return W.query_variances(0.5 * (M + M.T))


def smoothed_max_loss(x: np.ndarray, W: Workload, p: int, tau: float) -> tuple[float, np.ndarray, np.ndarray]:
    """``F_tau`` at ``Theta = x.reshape(p, n)``, its gradient (flattened) and the variances u.

    Examples
    --------
    At the identity on prefix:2 the variances are (1, 2), so ``F = tau log(e^{1/tau} + e^{2/tau})``:

    >>> from strategy_opt.workload import prefix
    >>> F, g, u = smoothed_max_loss(np.zeros(2), prefix(2), 1, 0.5)
    >>> bool(np.isclose(F, 0.5 * np.log(np.exp(2.0) + np.exp(4.0)), rtol=1e-14)), u.tolist()
    (True, [1.0, 2.0])
    """
    n = x.size // p
    u = theta_variances(x.reshape(p, n), W)
    top = float(u.max())
    e = np.exp((u - top) / tau)
    z = float(e.sum())
    _, grad = pidentity_loss(x, weighted_gram(W, e / z), p)
    return top + tau * math.log(z), grad, u


def minimax_theta(W: Workload, T0: np.ndarray, *, deadline: float, max_iters: int, temperatures=MAX_TEMPERATURES) -> tuple[np.ndarray, float, list[dict]]:
    """Annealed log-sum-exp descent on the largest variance from ``T0``; the best Theta seen, its largest variance, the stages.

    Parameters
    ----------
    W : Workload
    T0 : ndarray, shape (p, n)
        The start (the p-Identity optimum for the total error).
    deadline : float
        ``time.perf_counter()`` value at which the search stops (the best iterate so far is kept).
    max_iters : int
        L-BFGS-B iterations per stage.
    temperatures : sequence of float
        Relative temperatures of the stages (`MAX_TEMPERATURES`).

    Returns
    -------
    (ndarray, float, list of dict)
        Theta, ``max_i u_i(Theta)``, and per stage its temperature, iterations and best value.

    Examples
    --------
    On prefix:4 from one row of weight 0.5 (largest variance 4.5; the identity's is 4, the full prefix):

    >>> from strategy_opt.workload import prefix
    >>> T0 = np.full((1, 4), 0.5)
    >>> T, value, stages = minimax_theta(prefix(4), T0, deadline=time.perf_counter() + 10, max_iters=500)
    >>> bool(value < 3.5), len(stages)
    (True, 4)
    """
    p, n = T0.shape
    best = {"x": T0.ravel().copy(), "value": float(theta_variances(T0, W).max())}
    stages: list[dict] = []
    clock = {"logged": time.perf_counter()}
    x = best["x"]
    for rel in temperatures:
        if time.perf_counter() >= deadline:
            break
        tau = rel * best["value"]

        def fun(v):
            F, g, u = smoothed_max_loss(v, W, p, tau)
            if u.max() < best["value"]:
                best["x"], best["value"] = v.copy(), float(u.max())
            return F, g

        history = collections.deque(maxlen=STALL_ITERATIONS + 1)  # the best largest variance after each iteration
        clock["iterations"] = 0

        def stop(_):
            now = time.perf_counter()
            if now - clock["logged"] > LOG_EVERY:
                log.info("p-identity max: temperature %.3g, iteration %d, largest variance %.10g", rel, clock["iterations"], best["value"])
                clock["logged"] = now
            clock["iterations"] += 1
            history.append(best["value"])
            stalled = len(history) > STALL_ITERATIONS and history[0] - history[-1] <= STALL_RTOL * history[-1]
            if now >= deadline or stalled:
                raise StopIteration

        with one_blas_thread():
            res = so.minimize(fun, x, jac=True, method="L-BFGS-B", bounds=so.Bounds(0.0, THETA_MAX), callback=stop,
                              options={"maxiter": max_iters, "ftol": 1e-12, "gtol": 0.0, "maxcor": 20})
        x = res.x
        stages.append({"temperature": rel, "iterations": int(res.nit), "largest_variance": best["value"]})
        log.info("p-identity max: temperature %.3g x largest variance, %d iterations, largest variance %.10g", rel, res.nit, best["value"])
    return best["x"].reshape(p, n), best["value"], stages


def pidentity_max_strategy(problem: Problem, time_limit: float) -> tuple[np.ndarray, dict]:
    """The p-Identity strategy of least largest variance found in ``time_limit`` seconds, and its metadata.

    Cells no query tells apart are merged first (as for the total: ``W A^+ = W' A'^+``,
    so every query's variance is the one on the merged cells).

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> A, extra = pidentity_max_strategy(Problem(prefix(16), privacy="pure", objective="max"), 10.0)
    >>> extra["largest_variance"] < 0.9 * extra["start_largest_variance"]
    True
    """
    t0 = time.perf_counter()
    W = problem.workload
    opts = check_options(problem)
    G = W.gram()
    cell_of, reps = merged_cells(G)
    # interval workloads have O(n^2) variances and weighted Grams; others are kept as their (merged) sparse matrix, built once
    merged = W if reps.size == W.n and isinstance(W, IntervalWorkload) else from_matrix(W.matrix()[:, reps], spec=f"merged({W.spec})")
    start = _solve_1d(np.array(G[np.ix_(reps, reps)]), opts, problem, START_SHARE * time_limit)
    starts = {"total-optimum": start.theta}
    ones = {c: float(theta_variances(np.full((1, reps.size), c), merged).max()) for c in ONES_ROW_SCAN} if reps.size <= ONES_ROW_SCAN_MAX_N else {}
    start_values = {"total-optimum": float(theta_variances(start.theta, merged).max())}
    c = min(ones, key=ones.get, default=None)
    if c is not None and ones[c] < start_values["total-optimum"]:
        # where the identity is a local optimum (all predicates) a row of ones is the way out of it
        starts["ones-row"], start_values["ones-row"] = np.full((1, reps.size), c), ones[c]
    best = None
    for k, (name, T0) in enumerate(starts.items()):
        log.info("p-identity max: start %s (largest variance %.10g); annealing the log-sum-exp", name, start_values[name])
        left = t0 + time_limit - time.perf_counter()
        run = minimax_theta(merged, T0, deadline=time.perf_counter() + left / (len(starts) - k), max_iters=problem.solver.max_iters)
        if best is None or run[1] < best[1][1]:
            best = (name, run)
    name, (theta, value, stages) = best
    A = expand_cells(pidentity_matrix(theta), cell_of)
    return A, {"theta_rows": int(theta.shape[0]), "start": start.start, "merged_cells": int(reps.size), "max_start": name,
               "start_largest_variance": start_values[name], "largest_variance": value, "max_stages": stages}


def max_strategy_with_bound(problem: Problem, time_limit: float) -> tuple[object, float | None, float, str, dict]:
    """p-identity's strategy for ``max`` and its certified bound: ``(A, value, bound, kind, extra)``.

    The search gets `SEARCH_SHARE` of ``time_limit``, the bound `MAX_BOUND_SHARE`
    (`max_bound`; the caller's bound on the total error the rest). A Kronecker workload of
    more than `FLAT_PRODUCT_MAX_N` cells is solved per factor: the product of the
    factors' strategies has the product of their largest variances (L1 column norms and
    each query's variance multiply; ``value`` is that product), and the product of
    their bounds bounds ``gamma_2(W)^2`` (multiplicative), so the optimum; flat, each
    L-BFGS-B step would price every one of the ``m_1 m_2`` queries. On other workloads
    ``value`` is None: the compiler evaluates it, after its support repair (cells merged
    by the Gram matrix can differ in a query 1e6 times smaller than the others), and the
    bound is at most the value it finds.

    Examples
    --------
    >>> from strategy_opt.spec import parse_spec
    >>> A, value, bound, kind, extra = max_strategy_with_bound(Problem(parse_spec("prefix:24*total:12"), privacy="pure", objective="max"), 20.0)
    >>> type(A).__name__, kind, bool(bound <= value)
    ('KroneckerMatrix', 'product-of-factor-bounds', True)
    """
    from ..error import KroneckerMatrix, per_query_variances

    W = problem.workload
    search, bounding = SEARCH_SHARE * time_limit, MAX_BOUND_SHARE * time_limit
    if isinstance(W, Kronecker) and len(W.factors) > 1 and W.n > FLAT_PRODUCT_MAX_N:
        factors, value, lower, per_factor = [], 1.0, 1.0, []
        for f in W.factors:
            log.info("p-identity max: factor %s of the product (each factor's largest variance multiplies)", f.spec)
            A_f, extra_f = pidentity_max_strategy(replace(problem, workload=f), search / len(W.factors))
            value_f = float(per_query_variances(A_f, f, 1).max())
            lower_f, kind_f = max_bound(f, bounding / len(W.factors))
            factors.append(A_f)
            value, lower = value * value_f, lower * min(lower_f, value_f)
            per_factor.append({"workload": f.spec, "largest_variance": value_f, "lower_bound": lower_f, "lower_bound_kind": kind_f, **extra_f})
        return KroneckerMatrix(factors), value, min(lower, value), "product-of-factor-bounds", {"max_factors": per_factor}
    floor = per_query_floor(W)  # before the search: a workload too large for it fails now, not after minutes
    A, extra = pidentity_max_strategy(problem, search)
    lower, kind = max_bound(W, bounding, floor)
    return A, None, lower, kind, extra


def per_query_floor(W: Workload) -> float | None:
    """``max_ij w_ij^2`` (each query's least variance, `floor_bound`): 1 for interval workloads, else from the
    matrix up to `minerror_l2.FLOOR_MAX_ENTRIES` entries (m n); None past it.

    Examples
    --------
    >>> from strategy_opt.workload import all_range
    >>> per_query_floor(all_range(5000)), per_query_floor(from_matrix([[2.0, 1.0], [0.0, 1.0]]))
    (1.0, 4.0)
    """
    from ..objectives import get_objective
    from .minerror_l2 import FLOOR_MAX_ENTRIES, floor_bound

    if not isinstance(W, IntervalWorkload) and W.m * W.n > FLOOR_MAX_ENTRIES:
        return None
    return floor_bound(W, get_objective("max"), None)


def max_bound(W: Workload, time_limit: float, floor: float | None = None) -> tuple[float, str]:
    """The larger of `pure_max_lower_bound` and the per-query floor (`per_query_floor` unless given); both bound ``gamma_2(W)^2``.

    Examples
    --------
    >>> from strategy_opt.workload import identity
    >>> max_bound(identity(3), 5.0)
    (1.0, 'per-query-floor')
    """
    lower, kind = pure_max_lower_bound(W, time_limit)
    floor = per_query_floor(W) if floor is None else floor
    if floor is not None and (lower is None or floor >= lower):
        lower, kind = floor, "per-query-floor"
    return (lower, kind) if lower is not None else (0.0, "none")


def pure_max_lower_bound(W: Workload, time_limit: float) -> tuple[float | None, str]:
    """A certified lower bound on every epsilon-DP strategy's largest unit variance, and its kind (or None and why not).

    The dual bound of the (epsilon, delta) min-max solver (`solve_max_l2`), valid at any stop:
    ``max_i u_i^{(1)}(A) >= max_i u_i^{(2)}(A) >= gamma_2(W)^2 >= dual``.

    Examples
    --------
    Two cells and the queries x_0, x_1, x_0 + x_1: the (epsilon, delta) optimum is 4/3, and no
    epsilon-DP strategy does better (the identity gives 2 under both):

    >>> bound, kind = pure_max_lower_bound(from_matrix([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), 5.0)
    >>> round(bound, 4), kind
    (1.3333, 'l2-min-max-dual')
    """
    from ..native_max import solve_max_l2

    if W.n > LOWER_BOUND_MAX_N:
        return None, f"the (epsilon, delta) min-max bound is computed up to {LOWER_BOUND_MAX_N} cells"
    try:
        res = solve_max_l2(W, time_limit=time_limit, tol=BOUND_TOL, log_every=math.inf)
    except InputError as exc:
        return None, str(exc)
    return (float(res.dual), "l2-min-max-dual") if res.dual > 0 else (None, "the (epsilon, delta) min-max solver certified no positive bound")
