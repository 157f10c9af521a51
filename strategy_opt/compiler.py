"""The strategy compiler: turns a solved program into a certified `Strategy`.

Every method ends in `compile_strategy`, which

1. verifies that A supports the workload (``W A^+ A = W``); a strategy that misses
   directions only tiny queries need gets a share of the identity mixed in, at the same
   sensitivity (`supported_strategy`, recorded as ``meta.support_repair``),
2. computes the unit error ``E_p`` of the problem's privacy notion,
3. attaches a lower bound (the SVD bound unless the program supplies a better
   one; for epsilon-DP strategies up to `strategy_opt.pure_bound.COMPILE_BOUND_MAX_N`
   cells that bring none, the certified (epsilon, delta) bound) and the relative gap,
4. fills the ``meta`` fields of a strategy file (README.md, "Strategy files") (workload, privacy, method, objective,
   solver facts, times, library version, creation time).

`strategy_from_gram` turns a solved Gram matrix X (``A^T A = X``) into a
strategy matrix by eigendecomposition, dropping numerically zero directions.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import datetime, timezone

import numpy as np
import scipy.sparse as sp

from . import __version__
from .augment import complete_columns_l1
from .defaults import EIG_RTOL, FILE_FORMAT_VERSION
from .error import STRUCTURED, ErrorProfile, KroneckerMatrix, log_svd_bound_or_reason, scaled_unit_error, sensitivity
from .marginals import MarginalsMatrix
from .exceptions import InputError, SupportError
from .fingerprints import meta_fingerprint
from .problem import Problem
from .progress import PROGRESS_MIN_N
from .pure_bound import compile_lower_bound
from .query_weights import query_weights
from .strategy import Strategy
from .threads import blas_threads
from .workload import weighted_gram

__all__ = ["compile_strategy", "strategy_from_gram", "finite_or_none", "ratio_to_identity"]

log = logging.getLogger("strategy_opt")

#: A step of the compiler's checks taking at least this many seconds gets a progress line.
STEP_LOG_SECONDS = 2.0
#: Product domains up to this many cells also try completing a Kronecker strategy's product (`_completed_l1`).
FLAT_COMPLETION_MAX_N = 1024
#: Identity shares tried when a strategy misses directions the workload needs (`supported_strategy`).
SUPPORT_REPAIR_SHARES = (1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
#: A strategy is repaired only when the directions it misses carry at most this share of the
#: workload's squared norm (weighted by the objective's query weights): an optimiser's rounding
#: leaves out what queries 1e5 times smaller need (measured shares 2.5e-12 to 4.2e-11); a strategy
#: missing more (a method's matrix that measures half the cells: 0.3) is refused.
SUPPORT_REPAIR_MAX_SHARE = 1e-6
#: Bounds closer than this (relative, in logs) tie: a program's bound and the SVD bound, a bound and the error.
BOUND_TIE_RTOL = 1e-9


def finite_or_none(v: float | None) -> float | None:
    """``v`` as a float, or None when it is None, infinite or NaN (JSON has no inf).

    Parameters
    ----------
    v : float or None
        Any value ``float()`` accepts (a NumPy scalar, an int, ...).

    Returns
    -------
    float or None

    Examples
    --------
    >>> finite_or_none(np.float32(2.5)), finite_or_none(3), finite_or_none(math.inf), finite_or_none(math.nan), finite_or_none(None)
    (2.5, 3.0, None, None, None)
    """
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def strategy_from_gram(X: np.ndarray, rtol: float = EIG_RTOL) -> np.ndarray:
    """A strategy A with ``A^T A = X`` (rows: scaled eigenvectors of X).

    Eigen-directions with eigenvalue ``<= rtol * max`` are dropped; A is
    rescaled to unit L2 sensitivity (largest column L2 norm 1).

    Parameters
    ----------
    X : ndarray (n, n)
        A positive semidefinite Gram matrix (it is symmetrised first).
    rtol : float, default `EIG_RTOL`
        Relative eigenvalue cut-off.

    Returns
    -------
    ndarray (r, n)
        One row per kept eigenvalue, in increasing order of eigenvalue; ``A^T A = X / c`` (up to the dropped
        directions) where ``c`` is the largest diagonal entry of X. Row signs are those of `numpy.linalg.eigh`'s eigenvectors.

    Examples
    --------
    ``X = diag(4, 1)``: rows ``1 * e_2`` and ``2 * e_1``, divided by the largest column norm 2:

    >>> A = strategy_from_gram(np.diag([4.0, 1.0]))
    >>> np.abs(A).tolist(), (A.T @ A).tolist()
    ([[0.0, 0.5], [1.0, 0.0]], [[1.0, 0.0], [0.0, 0.25]])

    A rank-one X keeps one row:

    >>> np.abs(strategy_from_gram(np.ones((2, 2)))).round(12).tolist()
    [[1.0, 1.0]]
    """
    X = 0.5 * (X + X.T)
    lam, V = np.linalg.eigh(X)
    keep = lam > rtol * lam.max()
    A = (V[:, keep] * np.sqrt(lam[keep])).T
    return A / sensitivity(A, 2)


def _null_space_removed(A) -> tuple[object, ErrorProfile | None]:
    """A dense strategy with the directions that `ErrorProfile` counts as null projected out exactly,
    and the error profile of the result when it was computed (A unchanged).

    A strategy from a factorised SDP or a local search can keep directions with
    singular values ~1e-8 of the largest: the error analysis treats them as null
    (eigenvalues of ``A^T A`` below ``EIG_RTOL``), while a pseudo-inverse with a
    smaller cutoff keeps them and reports a different E (measured: 6e-5 relative
    on a rank-deficient 14-cell workload). Removing them makes the file's error
    the same under every reasonable rank cutoff; the support check that follows
    still refuses a strategy whose removed directions W needs. Sparse and
    Kronecker strategies are returned unchanged (their zeros are exact).
    """
    if not isinstance(A, np.ndarray):
        return A, None
    profile = ErrorProfile(A)
    removed = profile.without_null_directions(A)
    return (A, profile) if removed is None else (removed, None)


def _completed_l1(A, workload) -> tuple[object, int]:
    """`complete_columns_l1` of A; for a Kronecker strategy on at most `FLAT_COMPLETION_MAX_N` cells
    (given the workload) also the completion of the product matrix, keeping the smaller E_1.

    Completing factor by factor keeps the strategy a Kronecker product (analysed per factor, any
    size) but pads every factor's columns, which multiplies into many product rows; one row per
    deficient product column can be much better (H_10 x H_10 on prefix:12*all-range:9: E_1 31512
    against 45071), at the cost of a dense analysis of the product.
    """
    completed, added = complete_columns_l1(A)
    if workload is None or not isinstance(A, KroneckerMatrix) or added == 0 or A.shape[1] > FLAT_COMPLETION_MAX_N:
        return completed, added
    flat, flat_added = complete_columns_l1(A.tocsr())
    try:
        better = scaled_unit_error(flat, workload, 1) < scaled_unit_error(completed, workload, 1) * (1 - 1e-12)
    except InputError:  # the flat analysis may refuse what the per-factor one takes: keep the latter
        return completed, added
    return (flat, flat_added) if better else (completed, added)


def final_strategy(A, p: int, workload=None) -> tuple[object, dict | None, ErrorProfile | None]:
    """A with columns completed under epsilon-DP (Li 2013, Sec. 3.4.3; never raises E_1; `_completed_l1`
    with the workload) and its numerical null space removed; with the completion facts and the error
    profile (None for a structured strategy -- Kronecker or a stack of marginals -- which is analysed per factor or per marginal).

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy a method produced.
    p : int
        1 (epsilon-DP: columns are completed) or 2 (no completion).
    workload : Workload, optional
        Lets a Kronecker strategy on at most `FLAT_COMPLETION_MAX_N` cells also try completing its product.

    Returns
    -------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        The final strategy.
    completed : int or None
        Rows appended by the completion (None when ``p == 2``).
    profile : ErrorProfile or None
        Its error profile (None for structured strategies).

    Examples
    --------
    Column 0 sums to 1 and column 1 to 2, so under epsilon-DP the row ``(1, 0)`` is appended:

    >>> A, completed, profile = final_strategy(np.array([[1.0, 1.0], [0.0, 1.0]]), 1)
    >>> A.tolist(), completed
    ([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]], 1)
    >>> A, completed, profile = final_strategy(np.array([[1.0, 1.0], [0.0, 1.0]]), 2)
    >>> A.tolist(), completed
    ([[1.0, 1.0], [0.0, 1.0]], None)
    """
    completed = None
    if p == 1:
        A, completed = _completed_l1(A, workload)
    A, profile = _null_space_removed(A)
    if profile is None and not isinstance(A, STRUCTURED):
        profile = ErrorProfile(A)
    return A, completed, profile


def _identity_mixed(A, p: int, share: float):
    """``[a A; b s I]`` with s = ||A||_p: every column norm stays <= s, so the sensitivity is unchanged.

    (a, b) = (1 - share, share) under L1; (sqrt(1 - share), sqrt(share)) under L2,
    where ``A'^T A' = (1 - share) A^T A + share s^2 I``.
    """
    a, b = (1.0 - share, share) if p == 1 else (math.sqrt(1.0 - share), math.sqrt(share))
    s = sensitivity(A, p)
    n = A.shape[1]
    if sp.issparse(A):
        return sp.vstack([a * sp.csr_matrix(A), sp.identity(n, format="csr") * (b * s)], format="csr")
    return np.vstack([a * np.asarray(A), np.eye(n) * (b * s)])


def supported_strategy(
    A, workload, p: int, profile: ErrorProfile | None, what: str = "strategy", weights: Callable[[], np.ndarray | None] | None = None
) -> tuple[object, ErrorProfile | None, dict | None]:
    """A, or A with a share of the identity mixed in when A misses directions only tiny queries need.

    An optimiser works from the Gram matrix W^T W, where a query 1e5 times smaller
    than the others contributes 1e-10 of the largest eigenvalue: below `EIG_RTOL`,
    so the optimum leaves its direction out and the strategy would be refused. Mixing
    in the identity (`_identity_mixed`, sensitivity unchanged) supports every query;
    the share is the best of `SUPPORT_REPAIR_SHARES` by E_p (each raises the other
    queries' variances by at most 1/(1 - share) under L2, 1/(1 - share)^2 under L1).
    Only strategies whose missing directions carry at most `SUPPORT_REPAIR_MAX_SHARE`
    of ``sum_i c_i ||w_i||^2`` (c: the objective's query weights, which ``weights``
    returns when called, only if A misses a direction; else 1) are repaired; any
    other is refused as it stands.

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy (as `final_strategy` returns it).
    workload : Workload
    p : int
        Sensitivity norm order (1 or 2).
    profile : ErrorProfile or None
        A's error profile; None (a structured strategy) skips the check.
    what : str, default "strategy"
        How the support error names A.
    weights : callable, optional
        Returns the objective's query weights (or None); called only when A misses a direction.

    Returns
    -------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy, repaired or as given.
    profile : ErrorProfile or None
        Its error profile.
    repair : dict or None
        ``{"identity_share", "rows_added", "reason"}``; None when A supports W as it is, or is a
        Kronecker strategy, whose support is checked per factor.

    Raises
    ------
    SupportError
        The support check's error (naming ``what``) when A misses more, or no share helps.

    Examples
    --------
    A strategy that measures only ``x0 + x1`` cannot answer the identity (half of ``||W||_F^2`` is missing):

    >>> from strategy_opt.error import ErrorProfile
    >>> from strategy_opt.workload import from_matrix, identity
    >>> A = np.array([[1.0, 1.0, 0.0]])
    >>> supported_strategy(A, identity(3), 2, ErrorProfile(A))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.SupportError: strategy does not support the workload (W A+ A != W: 0.667 of ||W||_F^2 lies outside ...

    With a second query ``1e-5 x2`` only 5e-11 of ``||W||_F^2`` is missing, and the identity is mixed in:

    >>> A2, profile, repair = supported_strategy(A, from_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1e-5]]), 2, ErrorProfile(A))
    >>> A2.shape, repair["identity_share"], repair["rows_added"]
    ((4, 3), 1e-05, 3)
    """
    if profile is None or profile.full_rank:  # a full-column-rank strategy supports every workload
        return A, profile, None
    G = workload.gram()
    try:
        profile.check_support(G, what=what, workload=workload)  # per query too: a strategy error and run would refuse
        return A, profile, None
    except SupportError as exc:
        refusal = exc
    c = None if weights is None else weights()
    missing = profile.unsupported_fraction(G if c is None else weighted_gram(workload, c))
    if missing > SUPPORT_REPAIR_MAX_SHARE:  # more than rounding left out: the strategy itself is short
        if c is None:
            raise refusal
        raise SupportError(f"{refusal} (weighted by the objective's query weights: {missing:.3g})") from None
    best = None
    for share in SUPPORT_REPAIR_SHARES:
        A_mix = _identity_mixed(A, p, share)
        prof = ErrorProfile(A_mix)
        try:
            prof.check_support(G, workload=workload)  # under L1 the identity's share enters A^T A squared
            E = scaled_unit_error(A_mix, workload, p, profile=prof)
        except InputError:
            continue
        if best is None or E < best[3]:
            best = (A_mix, prof, share, E)
    if best is None:
        raise refusal
    log.info("compiler: the strategy missed directions the workload needs; mixed in %.0e of the identity (E_%d %.8g)", best[2], p, best[3])
    return best[0], best[1], {"identity_share": best[2], "rows_added": int(A.shape[1]), "reason": str(refusal).split(" (W A+ A")[0]}


def reported_error(A, workload, p: int) -> tuple[object, float]:
    """``(final_strategy(A), E_p)`` with E_p as `compile_strategy` will report it, for comparing candidates.

    E_p is that of the strategy after `supported_strategy`; the matrix returned is the one
    before it, so that `compile_strategy` repeats the repair and records it in ``meta``.
    Like the programs' ``total`` objective, E_p excludes ``workload.log_scale``.

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        A candidate strategy.
    workload : Workload
    p : int
        Sensitivity norm order (1 or 2).

    Returns
    -------
    (strategy, float)

    Raises
    ------
    SupportError
        When A does not support the workload and cannot be repaired.

    Examples
    --------
    The identity on ``prefix:4``: ``E_2 = trace(W^T W) = 1 + 2 + 3 + 4``; the identity plus the total under
    epsilon-DP: ``E_1 = 16``:

    >>> from strategy_opt.workload import prefix
    >>> A, E = reported_error(np.eye(4), prefix(4), 2)
    >>> A.shape, round(E, 6)
    ((4, 4), 10.0)
    >>> round(reported_error(np.vstack([np.eye(4), np.ones((1, 4))]), prefix(4), 1)[1], 6)
    16.0
    """
    A, _, profile = final_strategy(A, p, workload)
    A_supported, profile, _ = supported_strategy(A, workload, p, profile)
    return A, scaled_unit_error(A_supported, workload, p, profile=profile)


def compile_strategy(
    A,
    problem: Problem,
    method: str,
    *,
    solver: str = "closed-form",
    status: str = "constructed",
    solve_seconds: float = 0.0,
    objective_value: float | None = None,
    lower_bound: float | None = None,
    lower_bound_kind: str | None = None,
    extra: dict | None = None,
) -> Strategy:
    """Verify A, compute its error and bounds, and wrap it with full metadata.

    Parameters
    ----------
    A : ndarray, sparse matrix or KroneckerMatrix
        The strategy matrix.
    problem : Problem
        The problem it solves (workload, privacy notion, objective).
    method : str
        Registered method name.
    solver, status : str
        Backend/profile that produced A and its final status: a program's solver
        status (``optimal``, ``budget``, ...), ``local-optimum`` for local searches,
        ``heuristic`` for heuristics with no optimality claim, ``constructed`` (the
        default) for fixed constructions such as the identity.
    solve_seconds : float
        Time spent in the program (the compiler adds its own time separately).
    objective_value : float, optional
        Value of the problem's objective at A, if not the total error; when
        the objective is not ``total`` and none is given, the compiler
        evaluates the objective at A's per-query variances.
    lower_bound, lower_bound_kind : optional
        A lower bound on the optimum of the total-error objective supplied by
        the program (e.g. a dual certificate); the SVD bound is used when it is
        larger or when none is given (under epsilon-DP on small domains the
        compiler first computes `strategy_opt.pure_bound.compile_lower_bound`).
    extra : dict, optional
        Additional metadata (iterations, options, per-method facts). Its
        ``completion_rows`` (rows the method appended itself by the completion
        rule) is added to the compiler's own count.

    Returns
    -------
    Strategy

    Raises
    ------
    InputError
        If A does not support the workload: only a strategy missing directions
        that tiny queries need (at most `SUPPORT_REPAIR_MAX_SHARE` of the
        workload's squared norm) is repaired instead (`supported_strategy`).
        If ``lower_bound`` is not a finite number >= 0. (A bound above A's own
        error is kept here: the built-in programs reconcile it with their
        solver's accuracy, `strategy_opt.certificates.reconcile_bound`; `solve`
        refuses it from a method registered outside the package.)

    Examples
    --------
    The identity plus the total on 4 cells, under epsilon-DP: L1 sensitivity 2, E_1 = 4 * 4 on the prefixes.

    >>> import numpy as np
    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.spec import parse_spec
    >>> A = np.vstack([np.eye(4), np.ones((1, 4))])
    >>> s = compile_strategy(A, Problem(parse_spec("prefix:4"), privacy="pure"), "identity-plus-total")
    >>> s.meta["sensitivity"], round(s.meta["unit_total_squared_error"], 6), s.meta["supports_workload"]
    (2.0, 16.0, True)
    """
    t0 = time.perf_counter()
    if not (isinstance(A, (np.ndarray, *STRUCTURED)) or sp.issparse(A)):
        raise InputError(f"compile_strategy expects the strategy as a NumPy array, a SciPy sparse matrix or a KroneckerMatrix, got {type(A).__name__}")
    if lower_bound is not None:
        given = lower_bound
        try:
            lower_bound = float(lower_bound)
        except (TypeError, ValueError):
            lower_bound = math.nan
        if not (math.isfinite(lower_bound) and lower_bound >= 0):
            raise InputError(f"{method}: lower_bound must be a finite number >= 0, got {given!r}")
    W = problem.workload
    if W.n >= PROGRESS_MIN_N:
        log.info("%s: checking the %d x %d strategy (completion, support, error, lower bound)", method, *A.shape)
    step_start = t0

    def done(what: str) -> None:
        """A progress line for a step of at least `STEP_LOG_SECONDS` (an 8192-cell check was silent for 3 minutes)."""
        nonlocal step_start
        now = time.perf_counter()
        if now - step_start >= STEP_LOG_SECONDS:
            log.info("%s: %s in %.1f s", method, what, now - step_start)
        step_start = now

    A, completed, profile = final_strategy(A, problem.p, W)
    done("columns completed")
    weights = (lambda: query_weights(problem)) if problem.objective in ("weighted", "relative") else None
    A, profile, repair = supported_strategy(A, W, problem.p, profile, what=f"the {method} strategy", weights=weights)
    done("support checked")
    E = scaled_unit_error(A, W, problem.p, profile=profile)
    done("error computed")
    if objective_value is None and problem.objective != "total":  # the total error is not this objective's value
        objective_value = _objective_at(A, problem)
        done("objective evaluated")
    log_scale = W.log_scale
    log_E = (math.log(E) + log_scale) if E > 0 else -math.inf
    # exact value when no rescaling is involved; through logs only when it could overflow
    true_E = E if log_scale == 0 else (math.exp(log_E) if log_E < 709 else None)
    if problem.p == 1 and lower_bound is None:
        lower_bound, lower_bound_kind = compile_lower_bound(W)
    log_svdb, no_bound = log_svd_bound_or_reason(W)
    done("lower bounds computed")
    lb_log, lb_kind = log_svdb, "svd-bound"
    lb_value = None  # the program's own number when it is the bound and no rescaling is involved (no exp(log) rounding)
    if lower_bound is not None and lower_bound > 0 and math.log(lower_bound) + log_scale > log_svdb - BOUND_TIE_RTOL:
        # a program's bound that ties the SVD bound names itself (it certifies the SVD bound is the optimum)
        lb_log, lb_kind = max(math.log(lower_bound) + log_scale, log_svdb), lower_bound_kind or "program"
        if log_scale == 0 and lb_log == math.log(lower_bound):
            lb_value = float(lower_bound)
    if not math.isfinite(lb_log):  # no bound at all (the SVD bound needs eigenvalues this workload cannot give)
        lb_kind = None
    if lb_value is None:
        lb_value = math.exp(lb_log) if math.isfinite(lb_log) and lb_log < 709 else None
    if math.isfinite(log_E) and log_E <= lb_log <= log_E + BOUND_TIE_RTOL:
        # a bound that meets the error exceeds it only by rounding (identity, total)
        lb_log, lb_value = log_E, true_E
    gap = (math.exp(log_E - lb_log) - 1.0) if math.isfinite(log_E) and math.isfinite(lb_log) else None
    meta = {
        "format_version": FILE_FORMAT_VERSION,
        "workload": W.spec,
        "shape": [int(s) for s in A.shape],
        "domain": [int(d) for d in W.domain],
        "privacy": problem.privacy,
        "sensitivity_norm": "l1" if problem.p == 1 else "l2",
        "sensitivity": sensitivity(A, problem.p),
        "method": method,
        "objective": problem.objective,
        "objective_value": finite_or_none(objective_value if objective_value is not None else true_E),
        "unit_total_squared_error": finite_or_none(true_E),
        "unit_total_squared_error_log10": log_E / math.log(10) if math.isfinite(log_E) else None,
        "lower_bound": finite_or_none(lb_value),
        "lower_bound_log10": lb_log / math.log(10) if math.isfinite(lb_log) else None,
        "lower_bound_kind": lb_kind,
        "svd_bound": finite_or_none(math.exp(log_svdb)) if math.isfinite(log_svdb) and log_svdb < 709 else None,
        "svd_bound_log10": log_svdb / math.log(10) if math.isfinite(log_svdb) else None,  # where svd_bound overflows too
        "ratio_to_lower_bound": finite_or_none(gap + 1.0) if gap is not None else None,
        "relative_gap": finite_or_none(gap),
        "supports_workload": True,
        "solver": solver,
        "solver_profile": {"name": problem.solver.name, "file": problem.solver.source or None},
        "solver_status": status,
        "solve_seconds": float(solve_seconds),
        "strategy_opt_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if no_bound is not None:
        meta["lower_bound_unavailable"] = no_bound
    extra = dict(extra or {})
    if completed is not None or "completion_rows" in extra:
        # rows a method appended itself by the same rule (l1-weighting's local search) count too
        meta["completion_rows"] = (completed or 0) + extra.pop("completion_rows", 0)
    if repair is not None:
        meta["support_repair"] = repair
    if isinstance(A, KroneckerMatrix):
        meta["kronecker_factor_shapes"] = [[int(s) for s in f.shape] for f in A.factors]
    if isinstance(A, MarginalsMatrix):  # read back as stacked marginals (`MarginalsMatrix.from_meta`)
        meta["marginal_weights"] = A.weights_by_subset()
    ratio = ratio_to_identity(A, W, problem.p, E)
    done("ratio to the identity computed")
    if ratio is not None:
        meta["ratio_to_identity"] = ratio
    if extra:
        meta.update(extra)
    meta["blas_threads"] = blas_threads()  # a search's end follows the rounding, which the thread count changes
    meta["compile_seconds"] = time.perf_counter() - t0
    return Strategy(A, meta, meta_fingerprint=meta_fingerprint(meta))  # metadata edited after compiling is told apart


def _objective_at(A, problem: Problem) -> float:
    """The problem's objective at A's per-query variances (unit sensitivity); `InputError` if it gives no number."""
    from .error import per_query_variances
    from .objectives import evaluate, get_objective

    return evaluate(get_objective(problem.objective), per_query_variances(A, problem.workload, problem.p), query_weights(problem))


def ratio_to_identity(A, W, p: int, E: float) -> float | None:
    """``E_p(A) / E_p(identity)``: the identity answers every workload, with ``E_p = trace(W^T W)``.

    ``trace(W^T W)`` is `Workload.frobenius_sq` (per factor and per part for Kronecker products and
    unions: marginals over 1e9 cells summed a vector of 1e9 squared norms, killed at 22 GB), for a
    Kronecker strategy per factor; the workload's Gram matrix is never formed. None when the
    identity's error is 0 or not finite.

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy (only its form matters: a Kronecker strategy is compared with the identity per factor).
    W : Workload
    p : int
        Sensitivity norm order (1 or 2).
    E : float
        The strategy's unit error ``E_p(A)``.

    Returns
    -------
    float or None

    Examples
    --------
    On ``prefix:4`` the identity's error is ``1 + 2 + 3 + 4 = 10``; the identity plus the total has ``E_1 = 16``:

    >>> from strategy_opt.workload import prefix
    >>> ratio_to_identity(np.vstack([np.eye(4), np.ones((1, 4))]), prefix(4), 1, 16.0)
    1.6
    """
    if not isinstance(A, KroneckerMatrix):  # the identity's E_p is trace(W^T W) whatever the strategy's form
        ident = W.frobenius_sq()
    else:
        ident = scaled_unit_error(KroneckerMatrix([sp.identity(f.shape[1], format="csr") for f in A.factors]), W, p)
    return float(E / ident) if math.isfinite(ident) and ident > 0 and math.isfinite(E) else None
