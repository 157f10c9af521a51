"""MINERROR-L2: the exact (epsilon, delta) optimum, Program 3.4.2 (Li 2013, Sec. 3.4.1, Thm 3.5).

Under L2 sensitivity the sensitivity of A depends only on ``X = A^T A``
(``||A||_2^2 = max_j X_jj``), so the optimal strategy solves the convex program

    minimise  f(u)   over X ⪰ 0, u
    s.t.      [[X, w_i^T], [w_i, u_i]] ⪰ 0   (u_i >= w_i X^+ w_i^T, i = 1..m)
              X_jj <= 1                      (j = 1..n)

for a convex non-decreasing objective f of the per-query variances
(`strategy_opt.objectives`). Any A with ``A^T A = X`` is optimal.

Forms used here:

* ``total`` (and every linear objective: ``weighted``, ``relative``): the sum
  ``sum_i c_i u_i = trace(G_c X^{-1})`` with ``G_c = W^T diag(c) W`` depends on
  W only through G_c, so the m LMIs collapse to one ``cp.matrix_frac(L, X)``
  with a rank-revealing factor ``L L^T = G_c`` (notes, Sec. 2.4). Backends: the
  cvxpy profiles (``scs``, ``clarabel``) or the native certified dual-ascent
  solver (`strategy_opt.native_l2`), which scales to thousands of cells.
* ``max`` on the ``native`` profile: `strategy_opt.native_max`, the saddle point
  ``max_c min_X sum_i c_i u_i`` by exponentiated updates of the query weights c,
  each round a certified native total-error solve (target gap
  ``max(tol, NATIVE_MAX_TOL)``; ``meta.native_max``). With no solver named, ``max``
  runs there unless Clarabel's blocks fit (`default_profile`).
* ``max`` and user objectives on a cvxpy profile: one (n+1) x (n+1) Schur complement
  per query; refused when m (n+1)^2 exceeds `SCHUR_MAX_ENTRIES`.
  ``max`` writes them on the unit rows ``w_i / ||w_i||`` and adds the queries
  by constraint generation (`_max_active_set`: those of negligible scale enter
  only if they bind; ``meta.max_active_set`` has the rounds). The native
  solver's strategy for the total weighted by the SDP's multipliers (the
  saddle point of ``min_X max_c sum_i c_i u_i``) competes with the SDP's:
  the smaller largest variance wins (``meta.max_candidates``).
  The objective's cvx form must be a scalar convex expression of u
  (`objectives.check_cvx_form`: None, a number or a constant is refused); after
  solving, its optimal value is compared with the objective's ``value`` at the
  strategy's per-query variances: a ``value`` that fails or is not finite there
  is refused, and a difference beyond ``MISMATCH_RTOL`` plus the profile's
  accuracy is logged as a warning and recorded in ``meta.objective_mismatch``
  (both values, their relative difference, the tolerance and a message).

Certificates (`strategy_opt.certificates`): for the total objective the dual
bound ``||W diag(u)^{1/2}||_*^2`` at the KKT weights ``u ∝ diag(X^{-1} G X^{-1})``
(cvxpy) or at the native solver's dual iterate becomes ``meta.lower_bound``
(kind ``dual-certificate``). Every other objective gets ``objective_lower_bound``
and ``objective_lower_bound_kind`` (or, when none is available,
``objective_lower_bound`` None and ``objective_lower_bound_unavailable`` saying why):

* ``weighted``, ``relative``: the same dual bound on the reweighted Gram;
* ``max``: ``max_i u_i >= sum_i c_i u_i`` for every c on the simplex, so the
  native solver's dual bound of the total error weighted by c (the multipliers
  of the Schur complements, uniform if the solver gives none) bounds the
  optimum (kind ``simplex-weighted-dual``), or the per-query floor below when larger;
* user objectives (non-decreasing by contract, probed by `strategy_opt.solve` before any method runs): each
  variance is at least the single-query optimum ``u_i >= max_j w_ij^2`` (the
  dual bound of the rank-one workload ``w_i``), so ``f(floor)`` bounds the
  optimum (kind ``per-query-floor``; weak, but valid).

No bound is ever above the value it bounds: an excess within the solver's
accuracy (the profile's ``tol``, or `certificates.INACCURATE_RTOL` for a
``*_inaccurate`` status) is clamped, a larger one dropped, and the metadata
says which (`certificates.reconcile_bound`).

The native solver's status is ``optimal``, ``budget`` (``max_iters``), ``time_limit``
(the profile's ``time_limit``, which covers the Gram factorisation before it: the best
certified iterate is returned) or ``stalled``.

Options: ``weights`` (objective ``weighted``): one positive number per query,
as a list or a path to a ``.npy`` file. They are recorded in ``meta.weights``
(up to `strategy_opt.query_weights.WEIGHTS_INLINE_MAX` of them) with ``weights_sha256`` (SHA-256 of the
float64 little-endian vector), ``weights_count`` and, for a file, ``weights_file``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import time
import warnings
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from ..certificates import INACCURATE_RTOL, dual_bound, gram_factor, kkt_bound, reconcile_bound, relative_gap
from ..compiler import compile_strategy, finite_or_none, strategy_from_gram, supported_strategy
from ..defaults import EIG_RTOL
from ..error import ErrorProfile, per_query_variances
from ..exceptions import InputError, SolverError, SupportError, setting
from ..native_l2 import solve_total_l2
from ..native_max import solve_max_l2
from ..threads import factorization_threads
from ..objectives import BUILTIN_OBJECTIVES, check_cvx_form, get_objective
from ..problem import Problem
from ..progress import heartbeat
from ..query_weights import query_weights, weights_meta
from ..registry import register_method
from ..resources import format_count, psd_solver_bytes, require_memory
from ..solvers import cvxpy_solve_kwargs, solve_cvxpy, load_profile, rejected_option, require_cone
from ..workload import IntervalWorkload, Workload, weighted_gram

__all__ = [
    "minerror_l2",
    "objective_mismatch",
    "SCHUR_MAX_ENTRIES",
    "LINEAR_OBJECTIVES",
    "MISMATCH_RTOL",
]

log = logging.getLogger("strategy_opt")

#: Objectives that are weighted sums of the per-query variances (solved on a reweighted Gram).
LINEAR_OBJECTIVES = ("total", "weighted", "relative")
#: Largest min-max program (scaling-block entries, `max_program_block_entries`) given to Clarabel
#: rather than SCS when no solver is named: about 1 GB of Clarabel's memory.
CLARABEL_MAX_BLOCK_ENTRIES = 2e7

#: Largest ``m (n + 1)^2`` for the per-query Schur-complement form (``max``, user objectives).
SCHUR_MAX_ENTRIES = 2_000_000


#: The ``max`` objective's first active set: the queries whose squared norm is at least this fraction of the largest.
MAX_ACTIVE_FRACTION = 1e-3

#: Weight of the identity mixed into the ``max`` objective's X (its value rises by at most this, relative).
MAX_MIX_IDENTITY = 1e-6

#: Share of the max objective's simplex weights spread uniformly over the queries (`_max_bound`).
MAX_UNIFORM_SHARE = 1e-6

#: Time budget of the native solve that certifies the ``max`` objective (its Schur form keeps n small).
MAX_BOUND_SECONDS = 60.0

#: Target gap of the native ``max`` solver when the profile's is tighter (`strategy_opt.native_max`: its
#: weight updates gain about a factor of 5 per 10-20 rounds; all ranges over 64 cells: 1e-4 in 71 rounds,
#: 4e-6 after 1000).
NATIVE_MAX_TOL = 1e-5

#: Relative difference between the solver's optimal value and the objective's value at the strategy
#: tolerated on top of the profile's accuracy before ``meta.objective_mismatch`` is recorded.
MISMATCH_RTOL = 1e-3

#: From this many cells on, a cvxpy solve says what it runs and how long the solver took (Clarabel on
#: all ranges over 64 cells: 1-2 minutes with no line of its own).
GENERIC_SDP_PROGRESS_MIN_N = 32


def _solve_cvxpy(prob, X, problem: Problem, psd_sizes: list[int], time_limit: float | None = None) -> tuple[np.ndarray, str, int]:
    """Solve a cvxpy problem with the profile; returns (X value, status, iterations).

    ``psd_sizes`` are the sizes of the problem's PSD cones, for the memory
    estimate made before the solver allocates (Clarabel aborts the process when
    an allocation fails). ``time_limit`` (seconds) replaces the profile's for this solve.
    """
    import cvxpy as cp

    profile = problem.solver if time_limit is None else replace(problem.solver, time_limit=time_limit)
    if not profile.solver:
        raise InputError(f"solver profile {profile.name!r} has backend 'cvxpy' but names no solver; add solver = \"SCS\" or \"CLARABEL\"")
    require_cone(profile, "PSD", "minerror-l2")
    require_memory(
        psd_solver_bytes(profile.solver, psd_sizes),
        f"minerror-l2 with solver profile {profile.name!r} ({profile.solver}) on {problem.workload.n} cells",
        f"use {setting('solver', 'native')} (total and weighted objectives) or {setting('solver', 'scs')}",
    )
    kwargs = cvxpy_solve_kwargs(profile)
    # the profile's time_limit bounds the solver's own iterations; cvxpy's compilation comes before them
    progress = problem.workload.n >= GENERIC_SDP_PROGRESS_MIN_N
    if progress:
        log.info(
            "minerror-l2: cvxpy compiles the SDP (PSD cones of sizes %s), then %s iterates for at most %.4g s (the profile's time_limit)",
            ", ".join(map(str, sorted(set(psd_sizes)))), profile.solver, profile.time_limit,
        )
    t_solve = time.perf_counter()
    try:
        with warnings.catch_warnings(), heartbeat(f"minerror-l2: {profile.solver}", profile.time_limit):
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            solve_cvxpy(prob, profile.solver, verbose=profile.verbose, **kwargs)
    except (TypeError, ValueError) as exc:
        # options are checked on a probe when the Problem is made (solvers.check_solver_options);
        # one refused only on the real problem is still the profile's fault, not a crash
        named = [k for k in profile.options if re.search(rf"\b{re.escape(str(k))}\b", str(exc))]
        if not named:
            raise
        raise rejected_option(profile, named[0], exc) from None
    except cp.error.SolverError as exc:
        raise SolverError(f"minerror-l2 (cvxpy/{profile.solver}) failed: {exc}; try {setting('solver', 'native')} (total objective) or another profile") from None
    stats = prob.solver_stats
    solver_time = getattr(stats, "solve_time", None) if stats is not None else None
    if solver_time is not None and progress:
        log.info("minerror-l2: %s took %.3g s of %.3g s in cvxpy (the rest compiling the problem)", profile.solver, solver_time, time.perf_counter() - t_solve)
    if X.value is None or prob.status in ("infeasible", "unbounded", "infeasible_inaccurate", "unbounded_inaccurate"):
        raise SolverError(f"minerror-l2 (cvxpy/{profile.solver}) returned status {prob.status!r} without a solution; try another profile or a larger budget")
    if prob.status != "optimal":
        log.warning(
            "minerror-l2 (cvxpy/%s): status %s; meta's lower bound (and its kind) bounds how far from optimal: for a user "
            "objective it may be only the per-query floor, which cannot tell an accurate solve from a poor one", profile.solver, prob.status,
        )
    stats = prob.solver_stats
    iters = int(stats.num_iters) if stats is not None and stats.num_iters is not None else 0
    Xv = np.asarray(X.value, dtype=float)
    return 0.5 * (Xv + Xv.T), str(prob.status), iters


def _total_cvxpy(G: np.ndarray, L: np.ndarray, problem: Problem) -> tuple[np.ndarray, str, int, float]:
    """``min trace(L^T X^{-1} L) s.t. diag(X) <= 1`` with L scaled so the SVD bound is 1.

    Returns X, status, iterations and the best dual bound among the KKT
    weights of X and the solver's multipliers of ``diag(X) <= 1`` (a singular
    X, e.g. on cells no query touches, makes the KKT weights less accurate).
    """
    import cvxpy as cp

    n = G.shape[0]
    scale = math.sqrt(dual_bound(G, np.ones(n), factor=L))
    X = cp.Variable((n, n), PSD=True)
    unit = cp.diag(X) <= 1
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(L / scale, X)), [unit])
    Xv, status, iters = _solve_cvxpy(prob, X, problem, [n, n + L.shape[1]])
    bounds = [kkt_bound(G, Xv, factor=L)]
    y = np.clip(np.asarray(unit.dual_value, dtype=float).ravel(), 0.0, None) if unit.dual_value is not None else np.zeros(n)
    if y.sum() > 0:
        bounds.append(dual_bound(G, y, factor=L))
    return Xv, status, iters, max(bounds)


#: When the native solver stalls above this relative gap on at most `NATIVE_FALLBACK_MAX_N` cells, the
#: same program is solved by Clarabel and the better strategy kept (stopped by the profile's budget or
#: time limit, or on more cells, it warns with the gap):
#: on random positive 2 x 60 workloads the native dual ascent stalled at gap 0.43, 3% above the optimum
#: (before the native solver's design-SDP restart, `strategy_opt.native_l2.DESIGN_AFTER`; now a backstop).
NATIVE_FALLBACK_GAP, NATIVE_FALLBACK_MAX_N = 1e-4, 64


def sdp_total_l2(W: Workload, G: np.ndarray, L: np.ndarray | None = None) -> tuple[np.ndarray, float, float, str]:
    """Clarabel's solve of the total-error SDP: ``(A, primal, dual bound, status)``, where the native solver stalled.

    The primal value is at unit L2 sensitivity; the dual bound is certified
    (`_total_cvxpy`). ``L`` is a `gram_factor` of G when the caller has it.

    Parameters
    ----------
    W : Workload
    G : ndarray (n, n)
        ``W.gram()``.
    L : ndarray, optional
        A `gram_factor` of G.

    Returns
    -------
    A : ndarray
        The strategy (`strategy_from_gram` of the solved Gram matrix).
    primal : float
        Its unit total squared error.
    dual : float
        The certified lower bound.
    status : str
        Clarabel's status.

    Raises
    ------
    SolverError
        When Clarabel fails.

    Examples
    --------
    The identity workload on 3 cells: the optimum is the identity, error 3:

    >>> from strategy_opt.workload import identity
    >>> A, primal, dual, status = sdp_total_l2(identity(3), np.eye(3))
    >>> round(primal, 4), round(dual, 4), status, A.shape
    (3.0, 3.0, 'optimal', (3, 3))
    """
    Xv, status, _, dual = _total_cvxpy(G, gram_factor(G) if L is None else L, Problem(W, privacy="approx", solver=load_profile("clarabel")))
    primal = float(np.max(np.diag(Xv)) * np.trace(G @ np.linalg.pinv(Xv)))
    return strategy_from_gram(Xv), primal, dual, status


def _native_fallback(G: np.ndarray, L: np.ndarray, problem: Problem, res, extra: dict):
    """``(A, status, dual bound)``: the native result, or Clarabel's SDP optimum where that is better (`NATIVE_FALLBACK_GAP`).

    Past `NATIVE_FALLBACK_MAX_N` cells, or stopped by the profile's budget, a warning names the gap and the remedy instead.
    """
    n = G.shape[0]
    if n > NATIVE_FALLBACK_MAX_N or res.status != "stalled":  # a budget or time limit is the user's to raise
        log.warning(
            "minerror-l2 native: %s at relative gap %.3g (the strategy is within that of the optimum, certified); "
            "give a larger budget, or solver clarabel (%s) on a small workload", res.status, res.gap, setting("solver", "clarabel"),
        )
        return res.A, res.status, res.dual
    log.warning("minerror-l2 native: %s at relative gap %.3g on %d cells; solving the SDP with Clarabel too", res.status, res.gap, n)
    try:
        A, primal, dual, status = sdp_total_l2(problem.workload, G, L)
    except SolverError as exc:
        extra["native_fallback"] = {"solver": "clarabel", "failed": " ".join(str(exc).split())}
        return res.A, res.status, res.dual
    lower = max(res.dual, dual)
    better = primal < res.primal
    extra["native_fallback"] = {"solver": "clarabel", "status": status, "primal": primal, "dual": dual, "chosen": "clarabel" if better else "native"}
    return (A, status, lower) if better else (res.A, res.status, lower)


def _schur_rows(W: Workload, problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The query rows, the rows divided by their L2 norms (a zero row stays zero) and their squared norms.

    `_max_active_set` writes the Schur complements on unit rows,
    ``[[X, w_i/s_i], [., v_i]] ⪰ 0`` with ``u_i = s_i^2 v_i`` (a congruence: the
    same constraint), so that rows whose scales differ by orders of magnitude
    give the solver cones of one scale. Refuses (`InputError`) workloads too
    large for one Schur complement per query or known only rescaled.
    """
    n, m = W.n, W.m
    if m * (n + 1) ** 2 > SCHUR_MAX_ENTRIES:
        raise InputError(
            f"objective {problem.objective!r} needs one ({n}+1)x({n}+1) Schur complement per query; "
            f"m={format_count(m)} queries give {format_count(m * (n + 1) ** 2)} entries (limit {SCHUR_MAX_ENTRIES:,}); "
            "use a smaller workload or the total/weighted objective"
        )
    if W.log_scale != 0:
        raise InputError(f"objective {problem.objective!r} needs explicit query rows; workload {W.spec!r} is only available rescaled")
    M = W.matrix().toarray()
    s2 = np.einsum("ij,ij->i", M, M)
    norms = np.sqrt(s2)
    return M, np.divide(M, norms[:, None], out=np.zeros_like(M), where=norms[:, None] > 0), s2


def _schur_lmis(X, rows: np.ndarray, v) -> list:
    """``[[X, r_k^T], [r_k, v_k]] ⪰ 0`` for each row ``r_k``: ``v_k >= r_k X^+ r_k^T``."""
    import cvxpy as cp

    return [cp.bmat([[X, r[:, None]], [r[None, :], cp.reshape(v[k], (1, 1), order="C")]]) >> 0 for k, r in enumerate(rows)]


def _schur_cvxpy(W: Workload, objective, weights, problem: Problem) -> tuple[np.ndarray, str, int, float]:
    """Program 3.4.2 with one Schur complement per query and the objective's cvx form.

    Written on unit rows with the objective relative to its value at the identity (rows of
    scales 1e-3 ... 1e3 were reported infeasible as they are). On Clarabel the program is
    solved a second time as written (the query rows, the objective unscaled), and the X whose
    objective is lower is kept: neither form wins everywhere (the 3-norm of the variances of
    20 signed rows scaled 1e-2 ... 1e2 over 12 cells: 34073 and 33932, the optimum; of
    prefixes over 16 cells scaled 1e-3 ... 1e3: 1185129 and 1153984; the 5 x 5 rows of the
    first case fail as written).

    Returns X, status, iterations and the solver's objective value.
    """
    M, R, s2 = _schur_rows(W, problem)
    first = _schur_form(W, objective, weights, problem, R, s2, relative=True)
    if problem.solver.solver is None or problem.solver.solver.upper() != "CLARABEL":
        return first
    try:
        second = _schur_form(W, objective, weights, problem, M, np.ones_like(s2), relative=False)
    except (SolverError, InputError) as exc:
        log.info("minerror-l2: the program on the query rows as given failed (%s); the unit-row solve stands", " ".join(str(exc).split()))
        return first
    values = []
    for Xv, *_ in (first, second):
        try:
            value = float(objective.value(_variances(_mix_identity(Xv), M), weights))
        except Exception:  # a user's objective may fail at a point: that X is not preferred
            value = math.inf
        values.append(value if math.isfinite(value) else math.inf)
    log.debug("minerror-l2: objective %.10g on unit rows, %.10g on the rows as given; the lower kept", *values)
    return second if values[1] < values[0] else first


def _schur_form(W: Workload, objective, weights, problem: Problem, rows: np.ndarray, scales: np.ndarray, relative: bool) -> tuple[np.ndarray, str, int, float]:
    """One Schur-complement program: ``[[X, r_i^T], [r_i, v_i]] ⪰ 0`` on ``rows`` with variances ``u_i = scales_i v_i``,
    the objective divided by its value at the identity when ``relative``; X, status, iterations, objective value."""
    import cvxpy as cp

    n, m = W.n, W.m
    X = cp.Variable((n, n), PSD=True)
    v = cp.Variable(m)
    u = cp.multiply(scales, v)
    expr = check_cvx_form(objective, u, weights)  # an expression of u a solver can minimise, or InputError
    lmis = _schur_lmis(X, rows, v)
    ref = 1.0
    if relative:  # the solver sees the objective of order 1: at X = I, u_i = ||w_i||^2
        try:
            ref = float(objective.value(scales * np.einsum("ij,ij->i", rows, rows), weights))
        except Exception:  # a user's objective may fail there; it is then solved unscaled
            ref = math.nan
        ref = ref if math.isfinite(ref) and ref > 0 else 1.0
    prob = cp.Problem(cp.Minimize(expr / ref), [cp.diag(X) <= 1, *lmis])
    try:
        Xv, status, iters = _solve_cvxpy(prob, X, problem, [n] + [n + 1] * m)
    except SolverError:
        if str(prob.status).startswith("unbounded"):  # the program is feasible and its variances bounded below by 0
            raise InputError(
                f"objective {problem.objective!r}: its cvx form is unbounded below over the strategies (status {prob.status!r}): it decreases "
                "as variances grow; objectives must be non-decreasing in every per-query variance (check its cvx form, not only its value)"
            ) from None
        raise
    value = float(prob.value) * ref if prob.value is not None else float("nan")
    return Xv, status, iters, value


def _mix_identity(Xv: np.ndarray) -> np.ndarray:
    """``X' = (1 - MAX_MIX_IDENTITY) X + MAX_MIX_IDENTITY I``: full rank, ``diag X' <= 1`` still.

    An active set's optimum may be singular on directions only the queries
    outside it need; at X' every query has a finite variance, at most
    ``1 / (1 - MAX_MIX_IDENTITY)`` times its variance at X, so the strategy
    supports the whole workload.
    """
    return (1.0 - MAX_MIX_IDENTITY) * 0.5 * (Xv + Xv.T) + MAX_MIX_IDENTITY * np.eye(Xv.shape[0])


def _variances(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``w_i X^{-1} w_i^T`` for the rows of M, X's eigenvalues floored at `EIG_RTOL` of the largest."""
    lam, V = np.linalg.eigh(X)
    lam = np.maximum(lam, EIG_RTOL * max(lam.max(), 1e-300))
    P = M @ V
    return np.einsum("ij,ij->i", P, P / lam)


#: Seconds per Clarabel iteration of the min-max program's two forms, fitted (one BLAS thread) on random
#: ranges with k = 8 ... 128 queries over n = 8 ... 24 cells: the Schur form ``a k^b n^c`` (its k cones all
#: couple through X) and the factorization form ``f (d (d + 1) / 2)^e``, one cone of size d = k + n.
MAX_SCHUR_COST = (1.4e-10, 1.35, 5.8)
MAX_FACTORIZATION_COST = (1.06e-9, 2.53)


def _max_form(k: int, n: int) -> str:
    """``'schur'`` (k cones of size n + 1) or ``'factorization'`` (one cone of size k + n) for k queries on n cells.

    The one Clarabel solves faster by the fitted costs `MAX_SCHUR_COST` and
    `MAX_FACTORIZATION_COST` (log scale: k may be 2^1100). Measured: 30 random
    ranges over 20 cells 1.2 s (factorization) against 18.6 s (Schur); 40 random
    ranges over 32 cells 8 s against minutes; all ranges over 12 cells 1.2 s
    (Schur) against 21 s; all ranges over 16 cells (136 queries) Schur. (Comparing
    the forms' scaling-block entries, as before, chose the Schur form for the
    first: 1.60e6 against 1.63e6 entries.)
    """
    a, b, c = MAX_SCHUR_COST
    f, e = MAX_FACTORIZATION_COST
    d = k + n
    schur = math.log(a) + b * math.log(k) + c * math.log(n)
    factorization = math.log(f) + e * math.log(d * (d + 1) // 2)
    return "factorization" if factorization < schur else "schur"


def _scaling_block(d: int) -> int:
    """Entries of an interior-point scaling block of a d x d PSD cone: ``(d (d + 1) / 2)^2`` (exact integers: d may be 2^1100)."""
    return (d * (d + 1) // 2) ** 2


def generic_sdp_profile(workload: Workload, objective: str) -> str:
    """The cvxpy profile for an objective the native solver does not take: Clarabel for a min-max or
    user-objective program whose interior-point blocks fit `CLARABEL_MAX_BLOCK_ENTRIES`, else SCS.

    Used when no solver is named (``solve`` and ``auto``). Where it fits, Clarabel is faster and
    more accurate (40 ranges over 32 cells with rows scaled 1e-2 ... 1e3: 2.9 s against SCS's
    80 s, 1.0003 against 1.0012 of a reference SDP; all ranges over 16 cells: 7.5 s against
    25 s; the 3-norm of the variances of 20 signed queries over 12 cells with rows scaled
    1e-2 ... 1e2: 7 s and the optimum, where SCS stopped after 124 s at 1.69x it); its memory grows
    with the blocks (8.4 GB on all ranges over 32 cells), where SCS is used. A user objective's
    program has one Schur cone per query (``m (n + 2)^2 (n + 1)^2 / 4`` block entries).

    Parameters
    ----------
    workload : Workload
    objective : str
        The objective's name.

    Returns
    -------
    {'clarabel', 'scs'}

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> generic_sdp_profile(prefix(4), "max"), generic_sdp_profile(prefix(4), "my-objective"), generic_sdp_profile(prefix(4), "relative")
    ('clarabel', 'clarabel', 'scs')
    """
    if objective == "max":
        entries = max_program_block_entries(workload.m, workload.n)
    elif objective not in LINEAR_OBJECTIVES:  # `_schur_cvxpy`: one cone of n + 1 per query
        entries = workload.m * _scaling_block(workload.n + 1)
    else:
        return "scs"
    return "clarabel" if entries <= CLARABEL_MAX_BLOCK_ENTRIES else "scs"


def default_profile(workload: Workload, objective: str) -> str:
    """The profile minerror-l2 runs on when no solver is named: ``native`` for the linear objectives and
    for ``max`` where Clarabel's blocks do not fit (`strategy_opt.native_max`: a certified gap of 1e-5
    in seconds, where SCS took minutes), else `generic_sdp_profile`.

    Examples
    --------
    >>> from strategy_opt.workload import all_range, prefix
    >>> default_profile(prefix(4), "total"), default_profile(prefix(4), "max"), default_profile(all_range(64), "max")
    ('native', 'clarabel', 'native')
    """
    if objective in LINEAR_OBJECTIVES:
        return "native"
    profile = generic_sdp_profile(workload, objective)
    return "native" if objective == "max" and profile != "clarabel" else profile


def max_program_block_entries(k: int, n: int) -> int:
    """Scaling-block entries of the min-max program's form for k queries on n cells (the form `_max_form` picks).

    Clarabel's memory follows it at about 50 bytes an entry: 8.4 GB for all
    ranges over 32 cells (528 Schur cones, 1.7e8 entries), 0.13 GB for 40
    ranges over 32 cells (one 72-cone, 6.9e6 entries).

    Parameters
    ----------
    k : int
        Number of queries.
    n : int
        Number of cells.

    Returns
    -------
    int

    Examples
    --------
    Four queries on four cells use the Schur form: 4 blocks of ``(5 * 6 / 2)^2`` entries.

    >>> max_program_block_entries(4, 4)
    900
    """
    return _scaling_block(k + n) if _max_form(k, n) == "factorization" else k * _scaling_block(n + 1)


def _max_active_set(W: Workload, problem: Problem) -> tuple[np.ndarray, str, int, float, np.ndarray, dict]:
    """``min max_i u_i`` by constraint generation over the queries' Schur complements.

    The program ``min t s.t. (s_i^2 / S) v_i <= t`` over the unit-row Schur
    complements (`_schur_rows`, ``S`` the largest ``s_i^2``), or over the
    factorization-norm form of the same bound, ``[[P, R], [R^T, X]] ⪰ 0`` with
    ``v = diag P`` (`_max_form` picks the faster for the round), starts from the
    queries whose squared norm is at least ``MAX_ACTIVE_FRACTION`` of the
    largest; after each solve every query's variance at X is computed, the
    queries above the optimum (relative 1e-6) join, and the program is solved
    again until none is above: the last X is then optimal for all queries (a
    relaxation's optimum that satisfies every dropped constraint). Queries of
    negligible scale, which make the full SDP badly conditioned (its optimal
    value and its X disagree by a factor of 1.6 on rows spanning 1e3 .. 1e-2),
    never enter unless they bind. On workloads of one scale the first set is
    every query and one solve suffices.

    Returns X, status, total iterations, the optimal value ``S t``, the
    multipliers of ``(s_i^2/S) v_i <= t`` per query (0 off the active set) and
    the facts recorded in ``meta.max_active_set``. A round that would start
    after the profile's time limit is not run: the facts then say
    ``verified: false`` and how many queries were above the value.
    """
    import cvxpy as cp

    t0 = time.perf_counter()
    M, R, s2 = _schur_rows(W, problem)
    n, m = W.n, W.m
    S = float(s2.max())
    c = s2 / S
    active = np.flatnonzero(c >= MAX_ACTIVE_FRACTION)
    profile = problem.solver
    status, iters, rounds = "optimal", 0, []
    while True:
        form = _max_form(active.size, n)
        t = cp.Variable()
        if form == "factorization":
            # gamma_2(W)^2: [[P, R], [R^T, X]] ⪰ 0 gives P ⪰ R X^{-1} R^T, so v_k = P_kk bounds the k-th variance
            Z = cp.Variable((active.size + n, active.size + n), PSD=True)
            X, v = Z[active.size :, active.size :], cp.diag(Z[: active.size, : active.size])
            cons, sizes = [Z[: active.size, active.size :] == R[active]], [active.size + n]
        else:
            X, v = cp.Variable((n, n), PSD=True), cp.Variable(active.size)
            cons, sizes = _schur_lmis(X, R[active], v), [n] + [n + 1] * active.size
        epigraph = cp.multiply(c[active], v) <= t
        prob = cp.Problem(cp.Minimize(t), [cp.diag(X) <= 1, epigraph, *cons])
        remaining = profile.time_limit - (time.perf_counter() - t0)
        Xv, status, it = _solve_cvxpy(prob, X, problem, sizes, time_limit=max(remaining, 1.0))
        iters += it
        value = S * float(t.value)
        Xv = _mix_identity(Xv)
        u = _variances(Xv, M)
        above = np.setdiff1d(np.flatnonzero(u > value * (1 + 1e-6)), active)
        rounds.append({"queries": int(active.size), "form": form, "value": value, "above": int(above.size), "status": status})
        log.info("minerror-l2 max: round %d, %d of %d queries, value %.6g, %d other queries above it (%.1f s)", len(rounds), active.size, m, value, above.size, time.perf_counter() - t0)
        if above.size == 0 or time.perf_counter() - t0 >= profile.time_limit:
            break
        active = np.union1d(active, above)
    verified = above.size == 0
    if not verified:
        log.warning("minerror-l2 max: stopped at the time limit (%g s) with %d queries above the active set's optimum; the strategy is valid but not optimal", profile.time_limit, above.size)
    mult = np.zeros(m)
    if epigraph.dual_value is not None:
        mult[active] = np.clip(np.asarray(epigraph.dual_value, dtype=float).ravel(), 0.0, None)
    facts = {"start_fraction": MAX_ACTIVE_FRACTION, "queries": int(active.size), "rounds": rounds, "verified": verified}
    return Xv, status if verified else "user_limit", iters, value, mult, facts


def _value_at_optimum(objective, name: str, u: np.ndarray, weights, solver_value: float | None) -> float:
    """The objective's ``value`` at the returned strategy's per-query variances; `InputError` unless a finite number."""
    there = f" (its cvx form gives {solver_value:.6g} there)" if solver_value is not None and math.isfinite(solver_value) else ""
    try:
        v = float(objective.value(u, weights))
    except Exception as exc:  # a user's objective may fail where the probe did not
        raise InputError(f"objective {name!r}: its value failed at the optimum's {u.size} per-query variances ({' '.join(str(exc).split())})") from None
    if not math.isfinite(v):
        raise InputError(
            f"objective {name!r}: its value is {v} at the optimum's per-query variances{there}; "
            "value and cvx must be the same function, finite at positive variances"
        )
    return v


def objective_mismatch(name: str, solver_value: float, value: float, rtol: float) -> dict | None:
    """None when the solver's optimal value and the objective's value at the strategy agree within ``rtol`` (relative), else a record of both.

    The two are the same number for a correct objective (its cvx form and
    value the same function), up to the solver's accuracy. A larger difference
    means, for a built-in objective (whose two forms agree by construction), an
    inaccurate solve -- typically a workload whose rows differ in scale by many
    orders of magnitude, where the SDP's Gram matrix is nearly singular -- and
    for a user objective also possibly two different functions (``meta.objective_mismatch``).

    Examples
    --------
    >>> objective_mismatch("max", 2.0, 2.0 + 1e-9, 1e-3) is None
    True
    >>> round(objective_mismatch("mine", 17.87, 2.67, 1e-3)["relative_difference"], 4)
    0.8506
    """
    diff = abs(solver_value - value)
    scale = max(abs(solver_value), abs(value))
    if math.isfinite(diff) and diff <= rtol * scale:
        return None
    rel = diff / scale if scale > 0 and math.isfinite(diff) else None
    return {
        "solver_objective_value": finite_or_none(solver_value),
        "objective_value": finite_or_none(value),
        "relative_difference": finite_or_none(rel),
        "tolerance": rtol,
        "message": (
            f"objective {name!r}: the solver's optimal value {solver_value:.6g} (cvx form) and the objective's value {value:.6g} "
            f"at the returned strategy differ beyond the solver's accuracy (relative {rtol:.2g}); "
            + (
                "the solve is inaccurate (rows of very different scale make its Gram matrix nearly singular): rescale the rows, try the other solver profile, or use method 'auto' (--method auto), which also weighs the baselines"
                if name in BUILTIN_OBJECTIVES
                else "its cvx form and value are not the same function (so the strategy minimises the cvx form, not necessarily the value), or the solve is inaccurate"
            )
        ),
    }


def _max_bound(W: Workload, mult: np.ndarray | None, profile) -> tuple[float | None, dict, np.ndarray | None]:
    """Lower bound on ``min max_i u_i``: the dual bound of the total error weighted by c on the simplex.

    ``max_i u_i >= sum_i c_i u_i`` for every c on the simplex, so the best dual
    value of ``min sum_i c_i u_i`` (native solver on ``W^T diag(c) W``) bounds
    the optimum whatever c is; the solver's multipliers of the ``u_i`` make it
    tight, uniform c is the fallback. ``MAX_UNIFORM_SHARE`` of the weight is
    spread uniformly so that every query counts.

    Also returns the native solver's strategy for that weighted total (None if
    it failed): at the optimal multipliers it minimises the max objective too
    (the saddle point of ``min_X max_c sum_i c_i u_i(X)``), and it is often
    more accurate than the SDP's X.
    """
    m = W.m
    c = np.clip(mult, 0.0, None) if mult is not None and np.all(np.isfinite(mult)) else np.zeros(m)
    source = "schur-multipliers"
    if c.sum() <= 0:
        c, source = np.ones(m), "uniform"
    c = (1.0 - MAX_UNIFORM_SHARE) * c / c.sum() + MAX_UNIFORM_SHARE / m
    try:
        res = solve_total_l2(weighted_gram(W, c), max_iters=profile.max_iters, time_limit=min(profile.time_limit, MAX_BOUND_SECONDS), tol=max(profile.tol, 1e-10))
    except np.linalg.LinAlgError as exc:  # LAPACK gives up on badly scaled weighted Grams: no bound, not a crash
        return None, {"weights_from": source, "status": f"failed: {exc}"}, None
    return float(res.dual), {"weights_from": source, "status": res.status, "iterations": res.iterations}, res.A


def _better_max_strategy(A: np.ndarray, A_native: np.ndarray | None, W: Workload) -> tuple[np.ndarray, dict]:
    """The SDP's strategy or the native weighted total's, whichever has the smaller largest variance.

    The native one takes part only when it supports W. Returns the strategy and
    ``meta.max_candidates``: both values and which was chosen.
    """
    facts = {"sdp": float(per_query_variances(A, W, 2).max()), "chosen": "sdp"}
    if A_native is None:
        return A, facts
    # its X can be near-singular where only queries of negligible weight need it: mix in the identity as for the SDP's X
    A_native = strategy_from_gram(_mix_identity(A_native.T @ A_native))
    try:
        ErrorProfile(A_native).check_support(W.gram(), workload=W)
    except InputError:
        facts["weighted-total"] = "does not support the workload"
    else:
        facts["weighted-total"] = float(per_query_variances(A_native, W, 2).max())
        if facts["weighted-total"] < facts["sdp"]:
            facts["chosen"] = "weighted-total"
            return A_native, facts
    return A, facts


def floor_bound(W: Workload, objective, weights) -> float:
    """``f(l)`` with ``l_i = max_j w_ij^2``, the least variance query i can have at unit L2 sensitivity.

    The single-query optimum: ``min w X^+ w^T`` over ``diag X <= 1`` is the dual
    bound of the rank-one workload w, ``max_v sum_j v_j w_j^2 = max_j w_j^2``; as
    every strategy has ``u_i >= l_i``, a non-decreasing f has ``f(u) >= f(l)``.
    Under epsilon-DP too, since ``||A||_1 >= ||A||_2``.

    Parameters
    ----------
    W : Workload
        Its matrix is formed (sparse).
    objective : Objective
        Non-decreasing in each variance.
    weights : ndarray or None
        The objective's query weights (`strategy_opt.query_weights.query_weights`).

    Returns
    -------
    float

    Examples
    --------
    The query ``2 x_0 + x_1`` has variance at least 4 through any strategy of unit sensitivity:

    >>> import numpy as np
    >>> from strategy_opt.objectives import get_objective
    >>> from strategy_opt.workload import from_matrix
    >>> floor_bound(from_matrix(np.array([[2.0, 1.0], [0.0, 1.0]])), get_objective("max"), None)
    4.0
    """
    if isinstance(W, IntervalWorkload):  # every entry is 0 or 1: each query's floor is 1, and no matrix is built
        return float(objective.value(np.ones(W.m), weights))
    M = sp.csr_matrix(W.matrix())
    floor = np.asarray(abs(M).max(axis=1).toarray()).ravel() ** 2
    return float(objective.value(floor, weights))


#: Callers form the workload's matrix for `floor_bound` up to this many entries (m n; interval workloads need none).
FLOOR_MAX_ENTRIES = 2 * 10**7


def _factor(W: Workload, G: np.ndarray, from_workload: bool) -> np.ndarray:
    with factorization_threads():
        return gram_factor(eigh=W.gram_eigh()) if from_workload else gram_factor(G)


@contextlib.contextmanager
def _cut_solve(status: str, profile):
    """A strategy that does not support the workload after a solve that stopped short (its status not
    ``optimal``) is the solver budget's failure, not the user's input: a `SolverError` (CLI exit 1) naming the budget."""
    try:
        yield
    except SupportError as exc:
        if status == "optimal":
            raise
        raise SolverError(
            f"minerror-l2: the {profile.name} solve stopped with status {status!r} before its strategy supported the workload "
            f"({' '.join(str(exc).split()).split(' (W A+ A')[0]}); give it more iterations or time (max_iters, time_limit in the "
            f"solver profile) or use {setting('solver', 'native')}"
        ) from None


@register_method(
    "minerror-l2",
    options=("weights",),
    objectives=None,
    privacy=("approx",),
    source="Li 2013, Program 3.4.2 (Sec. 3.4.1, Thm 3.5)",
    summary="exact (eps,delta) optimum: SDP via cvxpy (scs/clarabel) or the certified native solvers (total/weighted/relative, and max)",
)
def minerror_l2(problem: Problem):
    """Optimal (epsilon, delta) strategy for the problem's objective (Program 3.4.2).

    Parameters
    ----------
    problem : Problem
        ``privacy='approx'``; objective ``total`` (default), ``weighted``
        (option ``weights``), ``max`` or any registered objective; solver
        profile ``native`` (total/weighted/relative/max) or a cvxpy profile.

    Returns
    -------
    Strategy
        A with ``A^T A = X`` at unit L2 sensitivity; ``meta`` carries the dual
        certificate (total objective), solver status and iterations.

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("all-range:8", method="minerror-l2")
    >>> round(s.meta["unit_total_squared_error"], 4), s.meta["lower_bound_kind"]
    (80.4643, 'dual-certificate')
    """
    if problem.privacy != "approx":
        raise InputError(f"minerror-l2 is the (epsilon, delta) program (L2 sensitivity); use {setting('privacy', 'approx')}")
    t0 = time.perf_counter()
    W = problem.workload
    objective = get_objective(problem.objective)
    weights = query_weights(problem)
    profile = problem.solver
    linear = problem.objective in LINEAR_OBJECTIVES
    native_max = profile.backend == "native" and problem.objective == "max"
    if profile.backend == "native" and not linear and not native_max:
        raise InputError(f"objective {problem.objective!r} needs a cvxpy solver profile, scs or clarabel (--solver on the command line, solver= in Python); the native solver handles {', '.join(LINEAR_OBJECTIVES)} and max")
    extra: dict = weights_meta(problem, weights)
    lower = obj_lower = obj_kind = no_bound = None
    reweighted = linear and weights is not None and problem.objective != "total"
    if linear:
        # the first progress line, before the first expensive step (minutes at thousands of cells)
        log.info("minerror-l2: %d cells, objective %s, solver profile %s: factoring the Gram matrix", W.n, problem.objective, profile.name)
        G = weighted_gram(W, weights) if reweighted else W.gram()
        L = _factor(W, G, from_workload=not reweighted)
        if profile.backend == "native":
            # the time limit covers the whole program: the factorisation above counts against it
            remaining = max(0.0, profile.time_limit - (time.perf_counter() - t0))
            res = solve_total_l2(G, factor=L, max_iters=profile.max_iters, time_limit=remaining, tol=profile.tol)
            A, status, iters, lower = res.A, res.status, res.iterations, res.dual
            extra.update(native_primal=res.primal, native_dual=res.dual, cells=res.cells)
            if status != "optimal" and res.gap > NATIVE_FALLBACK_GAP:
                A, status, lower = _native_fallback(G, L, problem, res, extra)
        else:
            Xv, status, iters, lower = _total_cvxpy(G, L, problem)
            A = strategy_from_gram(Xv)
        extra["iterations"] = iters
        if reweighted:
            obj_lower, obj_kind, lower = lower, "dual-certificate", None
    elif native_max:
        res = solve_max_l2(W, max_rounds=profile.max_iters, time_limit=profile.time_limit, tol=max(profile.tol, NATIVE_MAX_TOL))
        A, status = res.A, res.status
        if status == "optimal_inaccurate":
            log.warning(
                "minerror-l2 native max: the strategy's largest variance is %.3g above its certified bound, beyond the target %.1e "
                "(its rounds' variances were inexact on this nearly singular problem); the value and the bound reported are exact",
                res.gap, max(profile.tol, NATIVE_MAX_TOL),
            )
        elif status != "optimal":  # as for the total: the strategy and its bound are certified, the user may want more
            log.warning(
                "minerror-l2 native max: %s at relative gap %.3g (the strategy is within that of the optimum, certified); "
                "give a larger budget (max_iters, time_limit)%s", status, res.gap,
                "" if status != "stalled" else f", or solver clarabel ({setting('solver', 'clarabel')}) on a small workload",
            )
        extra.update(iterations=res.rounds, solver_objective_value=res.primal, native_max={"rounds": res.rounds, "largest_variance": res.primal, "bound": res.dual, "gap": res.gap})
        obj_lower, obj_kind = res.dual, "simplex-weighted-dual"
        floor = floor_bound(W, objective, weights)
        if floor > obj_lower:
            obj_lower, obj_kind = floor, "per-query-floor"
    else:
        if problem.objective == "max":
            Xv, status, iters, solver_value, mult, facts = _max_active_set(W, problem)
            extra["max_active_set"] = facts
        else:
            Xv, status, iters, solver_value = _schur_cvxpy(W, objective, weights, problem)
        A = strategy_from_gram(Xv)
        extra.update(iterations=iters, solver_objective_value=solver_value)
        try:
            floor = floor_bound(W, objective, weights)
        except Exception as exc:  # a user's objective may fail where the probe did not
            floor, no_bound = None, f"objective {problem.objective!r} failed on the per-query floor ({' '.join(str(exc).split())})"
        else:
            no_bound = None if math.isfinite(floor) else f"objective {problem.objective!r} is not finite on the per-query floor"
        obj_lower, obj_kind = (floor, "per-query-floor") if no_bound is None else (None, None)
        if problem.objective == "max":
            bound, facts, A_native = _max_bound(W, mult, profile)
            extra["objective_lower_bound_details"] = facts
            if bound is not None and (obj_lower is None or bound > obj_lower):
                obj_lower, obj_kind, no_bound = bound, "simplex-weighted-dual", None
            A, extra["max_candidates"] = _better_max_strategy(A, A_native, W)
    solve_seconds = time.perf_counter() - t0
    rtol = max(profile.tol, INACCURATE_RTOL) if str(status).endswith("_inaccurate") else profile.tol
    objective_value = None
    if problem.objective != "total":
        # the compiler's support repair first (a query of weight 1e-10 is left out of the reweighted optimum)
        with _cut_solve(status, profile):
            A, _, repair = supported_strategy(A, W, 2, ErrorProfile(A), what="the minerror-l2 strategy", weights=lambda: weights)
        if repair is not None:  # the repaired strategy is near the optimum, not at it
            extra["support_repair"] = repair
            status = "optimal_inaccurate" if status == "optimal" else status
        variances = per_query_variances(A, W, 2)
        if linear:
            objective_value = objective.value(variances, weights)
        else:
            objective_value = _value_at_optimum(objective, problem.objective, variances, weights, extra["solver_objective_value"])
            # an unverified active set's value is its relaxation's optimum, below the value by design;
            # the weighted total's strategy is not the one the SDP's value belongs to
            verified = extra.get("max_active_set", {}).get("verified", True) and extra.get("max_candidates", {}).get("chosen") != "weighted-total"
            mismatch = objective_mismatch(problem.objective, extra["solver_objective_value"], objective_value, MISMATCH_RTOL + rtol) if verified else None
            if mismatch is not None:
                log.warning("minerror-l2: %s", mismatch["message"])
                extra["objective_mismatch"] = mismatch
        extra.update(
            objective_lower_bound=finite_or_none(obj_lower),
            objective_lower_bound_kind=obj_kind,
            objective_relative_gap=finite_or_none(relative_gap(objective_value, obj_lower)) if obj_lower is not None else None,
        )
        if extra["objective_lower_bound"] is None:
            extra["objective_lower_bound_kind"] = None
            extra["objective_lower_bound_unavailable"] = no_bound or f"no finite lower bound was computed for objective {problem.objective!r}"
    with _cut_solve(status, profile):
        strategy = compile_strategy(
            A,
            problem,
            "minerror-l2",
            solver=f"{profile.name} (then clarabel)" if extra.get("native_fallback", {}).get("chosen") == "clarabel" else profile.name,
            status=status,
            solve_seconds=solve_seconds,
            objective_value=objective_value,
            lower_bound=lower,
            lower_bound_kind="dual-certificate" if lower is not None else None,
            extra=extra,
        )
    reconcile_bound(strategy.meta, rtol)
    if linear and not reweighted and _above_certificate(strategy.meta, profile):
        strategy = _resolved_with_small_eigenvalues(strategy, problem, G, L, lower, rtol, extra, t0)
    _check_certified_gap(strategy.meta, profile)
    return strategy


#: Eigenvalues of the Gram kept, relative to the largest, when a native solve on the Gram truncated at
#: ``EIG_RTOL`` left its strategy above the certificate (rounding is ~n eps of the largest, far below).
SMALL_EIG_RTOL = 1e-14


def _above_certificate(meta: dict, profile) -> bool:
    """Whether a native ``optimal`` strategy is further above its dual certificate than its tolerance allows."""
    gap = meta.get("relative_gap")
    if profile.backend != "native" or meta.get("solver_status") != "optimal" or meta.get("lower_bound_kind") != "dual-certificate" or gap is None:
        return False
    return gap > max(10.0 * profile.tol, INACCURATE_RTOL)


def _resolved_with_small_eigenvalues(strategy, problem: Problem, G: np.ndarray, L: np.ndarray, lower: float, rtol: float, extra: dict, t0: float):
    """The native solve again on the Gram factor that keeps eigenvalues down to `SMALL_EIG_RTOL`; the
    better strategy of the two by the compiled error, certified by the first solve's dual (computed on
    the truncated Gram, which is below G in the PSD order, so it stays a bound for G).

    A workload with nearly equal columns has real Gram eigenvalues below ``EIG_RTOL`` (4.5e-11 of the
    largest on a random 13 x 11 matrix): the first solve ignores those directions and its strategy ended
    1.2% above the certificate; kept, the optimum is certified to 1e-9.
    """
    with factorization_threads():
        L_small = gram_factor(G, rtol=SMALL_EIG_RTOL)
    if L_small.shape[1] <= L.shape[1]:
        return strategy
    profile = problem.solver
    log.info("minerror-l2: the strategy is %.3g above its certificate; solving again with the Gram's %d eigenvalues down to %g of the largest (%d before)",
             strategy.meta["relative_gap"], L_small.shape[1], SMALL_EIG_RTOL, L.shape[1])
    remaining = max(0.0, profile.time_limit - (time.perf_counter() - t0))
    res = solve_total_l2(G, factor=L_small, max_iters=profile.max_iters, time_limit=remaining, tol=profile.tol)
    facts = {**extra, "native_primal": res.primal, "iterations": res.iterations, "small_eigenvalues_kept": {"rtol": SMALL_EIG_RTOL, "rank": int(L_small.shape[1]), "first_rank": int(L.shape[1])}}
    again = compile_strategy(
        res.A, problem, "minerror-l2", solver=profile.name, status=res.status, solve_seconds=time.perf_counter() - t0,
        lower_bound=lower, lower_bound_kind="dual-certificate", extra=facts,
    )
    reconcile_bound(again.meta, rtol)
    better = again.meta["unit_total_squared_error"] < strategy.meta["unit_total_squared_error"]
    return again if better else strategy


def _check_certified_gap(meta: dict, profile) -> None:
    """Downgrade the native solver's ``optimal`` to ``optimal_inaccurate`` (with a warning) when the
    written strategy is further above the dual certificate than its tolerance allows.

    The native solver certifies its optimum on the Gram matrix without the
    eigenvalues below ``EIG_RTOL`` of the largest (`_resolved_with_small_eigenvalues`
    tries again with more of them); a strategy that still ends above the
    certificate is reported so. The error and the bound in the file stay valid.
    """
    if _above_certificate(meta, profile):
        gap = meta["relative_gap"]
        meta["solver_status"] = "optimal_inaccurate"
        log.warning(
            "minerror-l2: the strategy's error is %.3g above its dual certificate (status optimal_inaccurate): the optimum was "
            "certified on the workload's Gram matrix without its eigenvalues below %g of the largest, which this nearly "
            "rank-deficient workload needs; the error and the bound reported are exact",
            gap, EIG_RTOL,
        )
