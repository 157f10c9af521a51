"""The Python API: `solve` a problem, get an `error_report` for a strategy."""

from __future__ import annotations

import logging
import math
import os
import time

import scipy.sparse as sp
from numpy.typing import ArrayLike

from .defaults import MAX_DENSE_N, VARIANCE_BYTES_PER_QUERY
from .error import supports
from .exceptions import InputError
from .fingerprints import content_hash, matrix_fingerprint, meta_fingerprint, workload_file_hashes
from .objectives import BUILTIN_OBJECTIVES, check_monotone, get_objective
from .problem import Problem
from .registry import get_method
from .resources import require_memory
from .solvers import SolverProfile, check_profile, load_profile
from .spec import file_paths, parse_spec
from .strategy import Strategy
from .workload import ExplicitWorkload, Kronecker, Union, Workload, check_entry_scale

__all__ = ["solve", "error_report", "as_workload"]

log = logging.getLogger("strategy_opt")

#: `solve` warns about a strategy this many times worse than the identity (which answers every workload):
#: 10% more error than the trivial strategy is worth a line (l1-weighting on the eigen basis of prefix:4096
#: past its local search, 1.36 times the identity's, went unsaid under the earlier 2.0).
IDENTITY_WARNING_RATIO = 1.1
#: A registered method's stated lower bound above its strategy's own error by more than this (relative) is refused.
BOUND_CLAIM_RTOL = 1e-6

NOTIONS = ("pure", "approx")


def _check_notion(privacy) -> str:
    """``privacy`` as a notion name, 'pure' or 'approx'; `InputError` for anything else (a `Privacy` object included)."""
    from .privacy import Privacy

    if isinstance(privacy, Privacy):
        raise InputError(
            f"privacy must be 'pure' or 'approx' (the notion's name; strategies do not depend on epsilon), "
            f"got {privacy!r}: pass privacy={privacy.notion!r}"
        )
    if not isinstance(privacy, str) or privacy not in NOTIONS:
        raise InputError(f"privacy must be 'pure' or 'approx', got {privacy!r}")
    return privacy


def _is_all_zero(workload: Workload) -> bool:
    """Whether no query of the workload has a non-zero coefficient (``trace(W^T W) == 0``), without forming its Gram matrix.

    Interval and all-predicate workloads always count some cell; a product is
    zero when one factor is; a union (positive weights) when all its parts
    are; an explicit matrix when its Frobenius norm is (O(nnz)).
    """
    if isinstance(workload, Kronecker):
        return any(_is_all_zero(f) for f in workload.factors)
    if isinstance(workload, Union):
        return all(_is_all_zero(p) for p in workload.parts)
    if isinstance(workload, ExplicitWorkload):
        return workload.nnz() == 0
    return False


def as_workload(workload) -> Workload:
    """A `Workload` from a Workload, a SPEC string, or a matrix, whose squared entries fit float64 (`check_entry_scale`).

    Parameters
    ----------
    workload : Workload, str or array_like
        A workload object (returned as is), a SPEC string, or a dense or sparse matrix.

    Returns
    -------
    Workload

    Raises
    ------
    InputError
        A SPEC that does not parse, a value that is no matrix, or entries whose squares leave float64.

    Examples
    --------
    >>> as_workload("prefix:4").spec, as_workload([[1.0, 1.0]]).shape
    ('prefix:4', (1, 2))
    """
    if isinstance(workload, str):
        workload = parse_spec(workload)
    elif not isinstance(workload, Workload):
        workload = _from_matrix(workload)
    check_entry_scale(workload)
    return workload


def _from_matrix(workload) -> Workload:
    from .workload import from_matrix

    if workload is None or isinstance(workload, (bytes, dict, Strategy)) and not sp.issparse(workload):  # DOK is a dict
        raise InputError(f"workload must be a Workload, a SPEC string or a matrix, got {type(workload).__name__}")
    try:
        return from_matrix(workload)
    except OverflowError:
        raise InputError("workload matrix holds a number beyond float64's range (about 1.8e308)") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"workload must be a Workload, a SPEC string or a numeric matrix: {exc}") from None


def solve(
    workload: Workload | str | ArrayLike,
    *,
    privacy: str = "approx",
    method: str = "auto",
    objective: str = "total",
    solver: SolverProfile | str | os.PathLike | None = None,
    **options,
) -> Strategy:
    """Compute a strategy for a workload.

    Parameters
    ----------
    workload : Workload, str or array_like
        The workload (object, SPEC string such as ``"all-range:256"``, or matrix).
    privacy : {'approx', 'pure'}
        (epsilon, delta)-DP (L2 sensitivity) or epsilon-DP (L1 sensitivity).
        The notion's name, not a `PureDP`/`ApproxDP` object: strategies do not
        depend on epsilon (or delta).
    method : str
        A registered method (``strategy_opt.registry.methods()``).
    objective : str
        A registered objective (``strategy_opt.objectives.objectives()``).
    solver : str, path or SolverProfile, optional
        Solver profile name (``scs``, ``clarabel``, ``native``) or file. Default:
        ``native``; for minerror-l2 with ``max``: ``clarabel`` when its program is
        small enough, else ``native`` (the certified min-max solver); with a user
        objective: ``clarabel`` or ``scs`` (`programs.minerror_l2.default_profile`). Methods with an optimiser of their own
        (p-identity, auto-pure, ...) read only the profile's budget (``max_iters``,
        ``time_limit``, ``tol``); closed forms use none of it (both say so in the log).
        The profile is checked whatever the method: a cvxpy solver without
        second-order cones (OSQP, HiGHS) is refused.
    **options
        Method options (``branching``, ``basis``, ``group_size``, ...).

    Returns
    -------
    Strategy
        With ``meta`` filled by the compiler.

    Raises
    ------
    InputError
        A bad workload (an all-zero one included: no query has a non-zero
        coefficient), privacy, method, objective, solver or option.
    SolverError
        The method's program could not be solved (the message says what to try).

    Notes
    -----
    Closed-form methods (identity, hierarchical, wavelet, fourier, ...) use no
    solver; a ``solver`` given to them is noted in the log and not used
    (``meta['solver']`` says ``closed-form``).

    Examples
    --------
    >>> s = solve("prefix:16", privacy="pure", method="hierarchical", branching=2)
    >>> s.meta["sensitivity"]
    5.0
    """
    workload = as_workload(workload)
    privacy = _check_notion(privacy)
    if not isinstance(method, str):
        raise InputError(f"method must be a method name (a string), got {method!r}")
    info = get_method(method)
    if privacy not in info.privacy:
        raise InputError(f"method {method!r} supports privacy {'/'.join(info.privacy)}, not {privacy!r}")
    get_objective(objective)
    info.check(objective, options)
    if solver is not None and not isinstance(solver, (str, os.PathLike, SolverProfile)):
        raise InputError(f"solver must be a profile name (scs, clarabel, native), a profile file path or a SolverProfile, got {solver!r}")
    if solver is None and method == "minerror-l2":
        from .programs.minerror_l2 import LINEAR_OBJECTIVES, default_profile

        if objective not in LINEAR_OBJECTIVES:  # the native profile takes the linear objectives and max only
            solver = default_profile(workload, objective)
            log.info("minerror-l2: objective %r runs on the %s profile (no solver named)", objective, solver)
    if isinstance(solver, SolverProfile):
        check_profile(solver)  # as a profile file with these values would be
    profile = solver if isinstance(solver, SolverProfile) else load_profile(solver)
    if _is_all_zero(workload):  # once here, for every method (some would fail on it with an internal error)
        raise InputError(f"workload {workload.spec!r} is all zeros: no query has a non-zero coefficient (its Gram matrix is zero), so there is nothing to optimise")
    problem = Problem(workload, privacy, objective, profile, options)
    if objective not in BUILTIN_OBJECTIVES:  # a user's objective: its contract probed before any method runs (whatever it declares)
        from .query_weights import query_weights

        check_monotone(get_objective(objective), workload.m, query_weights(problem))
    t0 = time.perf_counter()
    strategy = info.func(problem)
    if not isinstance(strategy, Strategy):
        raise InputError(
            f"method {method!r} returned a {type(strategy).__name__}, not a Strategy; a registered method returns "
            "strategy_opt.compiler.compile_strategy(A, problem, name), which checks A and computes its error and bound"
        )
    _check_returned(strategy, problem, info)
    strategy.meta.setdefault("total_seconds", time.perf_counter() - t0)
    files = _workload_files(workload.spec)  # once per solve (auto compiles many candidates)
    if files:
        strategy.meta["workload_files"] = files
    elif isinstance(workload, ExplicitWorkload) and ":" not in workload.spec:  # a matrix given in Python, recorded by a label
        strategy.meta["workload_sha256"] = content_hash(workload.matrix())  # so the same matrix given as a file is recognised
    if solver is not None and strategy.meta.get("solver") == "closed-form":
        log.info("method %r is a closed form: solver profile %r not used", method, profile.name)
    elif solver is not None and profile.backend != "native" and not any(k in str(strategy.meta.get("solver")).lower() for k in ("cvxpy", "scs", "clarabel")):
        log.info("method %r runs its own optimiser, not the %s backend of solver profile %r: only the profile's budget applies, where the method has one",
                 method, profile.backend, profile.name)
    ratio = strategy.meta.get("ratio_to_identity")
    if ratio is not None and ratio >= IDENTITY_WARNING_RATIO and objective == "total" and strategy.meta.get("auto_choice", method) != "identity":
        # here, for the strategy returned: not for each candidate auto compares and drops
        log.warning(
            "%s: this strategy's E_%d is %.3g times the identity's on %s; the identity (or method auto) does better here",
            method, problem.p, ratio, workload.spec,
        )
    strategy.fingerprint = matrix_fingerprint(strategy.matrix)  # write_strategy refuses a matrix changed since
    strategy.meta_fingerprint = meta_fingerprint(strategy.meta)  # ... and checks metadata edited since
    return strategy


def _check_returned(strategy: Strategy, problem: Problem, info) -> None:
    """Refuse (`InputError`) a strategy that is not the compiled answer to ``problem``, before it is sealed.

    Every method's strategy must be for the problem's workload, privacy notion
    and domain. A method registered from outside the package must also return
    `compile_strategy`'s result for its own name unchanged: its metadata must be
    the compiler's as made (`Strategy.meta_fingerprint`), and its recorded error
    and sensitivity are recomputed from the matrix (the seal `solve` adds would
    otherwise certify a matrix or metadata edited after compiling), and a lower
    bound above that error by more than `BOUND_CLAIM_RTOL` is refused (within
    it, rounding, `strategy_opt.certificates.reconcile_bound` sets it to the error).
    """
    meta, W, name = strategy.meta, problem.workload, info.name
    where = f"method {name!r} returned a strategy"
    fix = f"build the matrix, then return compile_strategy(A, problem, {name!r}) unchanged"
    shape = tuple(getattr(strategy.matrix, "shape", ()))
    for key, want in (("workload", W.spec), ("privacy", problem.privacy)):
        if meta.get(key) != want:
            raise InputError(f"{where} for {key} {meta.get(key)!r}, not the problem's {want!r}; {fix}")
    if len(shape) != 2 or shape[1] != W.n or list(shape) != list(meta.get("shape", [])):
        raise InputError(f"{where} of shape {shape} (metadata: {meta.get('shape')}) for a workload of {W.n} cells; {fix}")
    if info.func.__module__.startswith("strategy_opt."):
        return
    if meta.get("method") != name:
        raise InputError(f"{where} compiled as method {meta.get('method')!r}; {fix}")
    if strategy.meta_fingerprint is None or strategy.meta_fingerprint != meta_fingerprint(meta):
        # a lower bound, objective value or solver fact edited there would be sealed as computed (audit E1: lower_bound
        # set to 10x the error was written and read back); extra metadata goes in through compile_strategy(..., extra=)
        edited = "not made by compile_strategy" if strategy.meta_fingerprint is None else "edited after compile_strategy made it"
        raise InputError(f"{where} whose metadata was {edited} (add fields with compile_strategy(..., extra={{...}})); {fix}")
    from .error import scaled_unit_error, sensitivity

    value = sensitivity(strategy.matrix, problem.p)
    if meta.get("sensitivity") is not None and not math.isclose(meta["sensitivity"], value, rel_tol=1e-6):
        raise InputError(f"{where} whose metadata does not match its matrix (sensitivity {meta['sensitivity']:.8g} recorded, {value:.8g} computed); {fix}")
    scaled = scaled_unit_error(strategy.matrix, W, problem.p)
    if not scaled > 0:
        return
    computed = (math.log(scaled) + W.log_scale) / math.log(10)  # in logs: errors of all-predicate workloads pass 1e308
    bound_log10 = meta.get("lower_bound_log10")
    if bound_log10 is not None and bound_log10 > computed + BOUND_CLAIM_RTOL / math.log(10):
        # a lower bound on the optimum is at most any strategy's error (an outside audit: a method stated 1e9 beside E_1 = 10)
        raise InputError(
            f"{where} whose lower_bound {meta.get('lower_bound'):.10g} ({meta.get('lower_bound_kind')}) is above its own error "
            f"{10.0 ** computed:.10g}: a lower bound on the optimum cannot exceed an error a strategy attains; {fix}"
        )
    from .certificates import reconcile_bound

    reconcile_bound(meta, BOUND_CLAIM_RTOL)  # within it, rounding: the bound is set to the error, and a note says so
    value = meta.get("unit_total_squared_error")
    for recorded in (meta.get("unit_total_squared_error_log10"), math.log10(value) if isinstance(value, (int, float)) and value > 0 else value):
        if recorded is not None and not (isinstance(recorded, (int, float)) and abs(computed - recorded) * math.log(10) <= 1e-6):
            shown = _power(recorded) if isinstance(recorded, (int, float)) else repr(recorded)
            raise InputError(f"{where} whose metadata does not match its matrix (unit_total_squared_error {shown} recorded, {_power(computed)} computed); {fix}")


def _power(log10: float) -> str:
    """``10^log10`` for a message: the number while float64 holds it, else the power."""
    return f"{10.0**log10:.8g}" if log10 < 308 else f"10^{log10:.6f}"


def _workload_files(spec: str) -> dict[str, str]:
    """``meta.workload_files``: the content hashes of the SPEC's files (empty if it names none or they cannot be read again)."""
    try:
        return workload_file_hashes(spec)
    except (InputError, OSError):  # not SPEC syntax (a label such as 'matrix'), or the file went away since it was read
        return {}


def _uncheckable(recorded: str) -> bool:
    """Whether a recorded workload that does not parse may stand unchecked: it names ``file:`` atoms
    (a moved file) or is a label, not SPEC syntax (``'matrix'``, which `solve` records for a matrix)."""
    if ":" not in recorded:
        return True
    try:
        return bool(file_paths(recorded))
    except InputError:
        return False


def checked_hand_written(strategy: Strategy, where) -> Strategy:
    """Metadata not computed by strategy_opt, about to be sealed in a file: refuse what the matrix contradicts, mark the rest.

    A recorded workload must have as many cells as the matrix has columns and
    be supported by it (checked up to `MAX_DENSE_N` cells). The stated
    ``unit_total_squared_error`` is recomputed on the recorded
    workload and ``lower_bound`` must not exceed it; the numbers derived from
    them (`DERIVED_FIELDS`, and ``objective_value`` under the total objective)
    must agree (shape, norm and sensitivity are checked by `strategy_opt.io`).
    The returned strategy's metadata records ``metadata_origin: 'hand-written'``
    and the claims nothing could check (``unchecked_fields``: a lower bound below
    the error, an error whose workload no longer parses, another objective's
    value and bound, the solver's claims `SOLVER_FIELDS`), so that a reader
    without strategy_opt can tell. A stated ``supports_workload`` must be true
    when the recorded workload was checked.

    Parameters
    ----------
    strategy : Strategy
    where : str
        Starts every error message (e.g. ``"cannot write s.npz"``).

    Returns
    -------
    Strategy
        The same matrix; metadata completed (error and SVD bound when the privacy
        notion is recorded) and marked.

    Examples
    --------
    >>> import numpy as np
    >>> s = Strategy(np.eye(2), {"workload": "identity:2", "privacy": "approx", "unit_total_squared_error": 2.0})
    >>> meta = checked_hand_written(s, "cannot write s.npz").meta  # E = trace(I) = 2: true
    >>> meta["lower_bound"], meta["metadata_origin"], meta["unchecked_fields"]
    (2.0, 'hand-written', [])
    >>> checked_hand_written(Strategy(np.eye(2), {"workload": "identity:3"}), "cannot write s.npz")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: cannot write s.npz: metadata records workload 'identity:3', but it has 3 cells and the matrix 2 columns
    """
    meta = dict(strategy.meta)
    claims = {k: meta[k] for k in ("unit_total_squared_error", "lower_bound") if meta.get(k) is not None}
    for key, value in claims.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"{where}: metadata field {key!r} must be a finite number, got {value!r}")
    unchecked = sorted(claims) + [k for k in (*DERIVED_FIELDS, *OBJECTIVE_FIELDS) if meta.get(k) is not None]  # until checked below
    recorded, privacy = meta.get("workload"), meta.get("privacy")
    if recorded is not None and not isinstance(recorded, str):
        raise InputError(f"{where}: metadata field 'workload' must be a SPEC string, got {recorded!r:.80}")
    workload = None
    if recorded is not None:
        try:
            workload = parse_spec(recorded, operation=None)
        except InputError as exc:
            if not _uncheckable(recorded):  # SPEC syntax that does not parse
                raise InputError(f"{where}: metadata records workload {recorded!r:.80}, which is not a SPEC ({exc})") from None
    if workload is not None:
        check_claims = privacy in ("pure", "approx")  # claims checked, missing ones computed
        try:  # the recorded workload must be one this matrix answers (error_report checks its support too)
            if workload.n != strategy.shape[1]:
                raise InputError(f"it has {workload.n} cells and the matrix {strategy.shape[1]} columns")
            if check_claims:
                report = error_report(strategy, workload, privacy)
                error = report["unit_total_squared_error"]
            elif workload.n <= MAX_DENSE_N and not supports(strategy.matrix, workload):
                raise InputError("the matrix does not support it (W A+ A != W)")
        except InputError as exc:
            raise InputError(f"{where}: metadata records workload {recorded!r}, but {exc}") from None
        if check_claims:
            stated = claims.get("unit_total_squared_error")
            if stated is not None and error is not None and not math.isclose(stated, error, rel_tol=1e-6):
                raise InputError(f"{where}: metadata states unit_total_squared_error {stated!r} but the matrix gives {error:.10g} on {recorded!r} ({privacy})")
            bound = claims.get("lower_bound")
            if bound is not None and error is not None and bound > error * (1 + 1e-9):
                raise InputError(f"{where}: metadata states lower_bound {bound!r}, above the matrix's error {error:.10g} on {recorded!r} ({privacy})")
            unchecked = ["lower_bound"] if "lower_bound" in claims else []
            unchecked += _check_derived(strategy.matrix, meta, report, workload, where, recorded, privacy)
            if meta.get("unit_total_squared_error") is None:  # computed here, so checked
                meta["unit_total_squared_error"] = error
            if meta.get("lower_bound") is None and report.get("svd_bound") is not None:
                meta["lower_bound"], meta["lower_bound_kind"] = report["svd_bound"], "svd-bound"
    supported = meta.get("supports_workload")
    if supported is not None and workload is not None and supported is not True:  # the recorded workload was checked above
        raise InputError(f"{where}: metadata states supports_workload {supported!r}, but the matrix supports {recorded!r}")
    if supported is not None and workload is None:
        unchecked.append("supports_workload")
    unchecked += [k for k in SOLVER_FIELDS if strategy.meta.get(k) is not None]
    for kind, bound in KIND_FIELDS.items():
        if meta.get(kind) is not None and meta.get(bound) is None:  # a kind with no bound describes nothing: dropped
            del meta[kind]
        elif strategy.meta.get(kind) is not None and strategy.meta.get(bound) is not None:
            unchecked.append(kind)
    meta["metadata_origin"] = "hand-written"
    meta["unchecked_fields"] = sorted(set(unchecked))
    return Strategy(strategy.matrix, meta)


#: Metadata numbers derived from the error and the bounds, which hand-written metadata must state consistently (`_check_derived`).
DERIVED_FIELDS = ("unit_total_squared_error_log10", "svd_bound", "svd_bound_log10", "ratio_to_identity", "lower_bound_log10", "ratio_to_lower_bound", "relative_gap")
#: Numbers about an objective other than the total, which the matrix alone does not decide (listed as unchecked).
OBJECTIVE_FIELDS = ("objective_value", "objective_lower_bound", "objective_value_log10", "objective_lower_bound_log10")
#: Claims about how the matrix was solved, which the matrix alone does not decide (listed as unchecked when present):
#: an outside audit sealed hand-written ``solver_status: optimal`` and a ``native_dual`` of 1e6 beside an error of 36.
SOLVER_FIELDS = ("solver_status", "native_dual", "native_primal")
#: The kind of a stated bound is unchecked with it (a bound computed here names its own kind; a kind with no bound is dropped).
KIND_FIELDS = {"lower_bound_kind": "lower_bound", "objective_lower_bound_kind": "objective_lower_bound"}


def _check_derived(A, meta: dict, report: dict, workload, where: str, recorded: str, privacy: str) -> list[str]:
    """Refuse derived numbers (`DERIVED_FIELDS`) the matrix contradicts; the objective's numbers it cannot decide, returned as unchecked.

    They are recomputed from the matrix's error on the recorded workload, its SVD
    bound, the identity's error ``trace(W^T W)`` and the stated lower bound.
    """
    error = report["unit_total_squared_error"]
    if error is None:
        return [k for k in (*DERIVED_FIELDS, *OBJECTIVE_FIELDS) if meta.get(k) is not None]
    from .compiler import ratio_to_identity

    scaled = math.exp(math.log(error) - workload.log_scale) if error > 0 else 0.0  # as the compiler's E (without the log scale)
    truth = {
        "unit_total_squared_error_log10": (report.get("unit_total_squared_error_log10"), 1e-9),
        "svd_bound": (report.get("svd_bound"), None),
        "svd_bound_log10": (report.get("svd_bound_log10"), 1e-9),
        "ratio_to_identity": (ratio_to_identity(A, workload, 1 if privacy == "pure" else 2, scaled), None),
    }
    bound = meta.get("lower_bound")
    if bound is not None and bound > 0:
        truth.update(lower_bound_log10=(math.log10(bound), 1e-9), ratio_to_lower_bound=(error / bound, None), relative_gap=(error / bound - 1.0, 1e-9))
    unchecked = [k for k in DERIVED_FIELDS if meta.get(k) is not None and (k not in truth or truth[k][0] is None)]
    for key, (value, abs_tol) in truth.items():
        stated = meta.get(key)
        if stated is None or value is None:
            continue
        if isinstance(stated, bool) or not isinstance(stated, (int, float)) or not math.isclose(stated, value, rel_tol=1e-6, abs_tol=abs_tol or 0.0):
            raise InputError(f"{where}: metadata states {key} {stated!r} but the matrix gives {value:.10g} on {recorded!r} ({privacy})")
    total = meta.get("objective") in (None, "total")
    stated = meta.get("objective_value")
    if total and stated is not None and (isinstance(stated, bool) or not isinstance(stated, (int, float)) or not math.isclose(stated, error, rel_tol=1e-6)):
        raise InputError(f"{where}: metadata states objective_value {stated!r} for the total, but the matrix gives {error:.10g} on {recorded!r} ({privacy})")
    return unchecked + [k for k in OBJECTIVE_FIELDS if meta.get(k) is not None and not (total and k == "objective_value")]


def error_report(strategy: Strategy | ArrayLike, workload: Workload | str | ArrayLike, privacy: str | None = None) -> dict:
    """Unit error, SVD bound and per-query statistics of a strategy on a workload.

    Parameters
    ----------
    strategy : Strategy or matrix
        A matrix is wrapped as a `Strategy` without metadata.
    workload : Workload, str or array_like
    privacy : {'pure', 'approx'}, optional
        Defaults to the strategy's own ``meta['privacy']``; for a strategy
        without a recorded privacy (a bare matrix, a file without metadata)
        ``pure`` (L1 sensitivity), as the CLI's ``strategy-opt error`` does. A
        strategy without provenance (no recorded workload or privacy) then
        gets a warning (logger ``strategy_opt``) that it is unverified.

    Returns
    -------
    dict
        ``workload`` (its SPEC), ``privacy``, ``sensitivity_norm`` (``l1`` or
        ``l2``), ``sensitivity`` (the largest column norm), ``shape``,
        ``unit_total_squared_error`` (E_p, None if it overflows float64, with
        ``..._log10`` given unless E_p is 0, on an all-zero workload),
        ``svd_bound`` and ``svd_bound_log10``, ``ratio_to_svd_bound``,
        ``unit_mean_squared_error_per_query`` (E_p / m; None beyond float64) and
        ``unit_max_query_variance`` (None when the workload's queries are too many to
        enumerate, as all-predicate's 2^n, or a Kronecker factor's are). ``unit_`` values
        exclude the noise: multiply them by the noise variance at sensitivity 1,
        ``2 / epsilon^2`` (Laplace) or ``sigma^2`` (Gaussian), for the answers' squared errors.

    Raises
    ------
    InputError
        A bad strategy, workload or privacy; a strategy whose columns are not
        the workload's cells, or that does not support the workload.

    Examples
    --------
    The identity on the 4 prefixes: E_1 = trace(W^T W) = 1 + 2 + 3 + 4.

    >>> import numpy as np
    >>> r = error_report(np.eye(4), "prefix:4", privacy="pure")
    >>> r["unit_total_squared_error"], r["unit_max_query_variance"], round(r["ratio_to_svd_bound"], 4)
    (10.0, 4.0, 1.5597)
    """
    from .error import ErrorProfile, _analysable_rows, _kron_parts, check_columns, log_svd_bound_or_reason, scaled_unit_error, sensitivity
    from .marginals import MarginalsMatrix, marginals_query_variances

    if not isinstance(strategy, Strategy):
        strategy = Strategy(strategy)
    W = as_workload(workload)
    defaulted = privacy is None
    if defaulted:
        privacy = strategy.meta.get("privacy") or "pure"
    privacy = _check_notion(privacy)
    p = 1 if privacy == "pure" else 2
    A = strategy.matrix
    check_columns(A, W)
    sens = sensitivity(A, p)
    max_var = None
    kparts = _kron_parts(A, W)
    if kparts is not None:
        E = scaled_unit_error(A, W, p)
        # a product query's variance is the product of its factors' (each query's weight squared)
        pinvs = [ErrorProfile(f).pinv() for f in A.factors]
        try:
            max_var = sens**2 * max(float(w) ** 2 * math.prod(float(Wj.query_variances(P).max()) for Wj, P in zip(factors, pinvs)) for w, factors in kparts)
        except InputError:  # a factor with too many queries to enumerate
            max_var = None
    elif isinstance(A, MarginalsMatrix) and (variances := marginals_query_variances(A, W)) is not None:
        E = scaled_unit_error(A, W, p)  # per eigenspace of the marginal algebra, at any size
        max_var = sens**2 * float(variances.max())
    else:
        A = _analysable_rows(A)
        prof = ErrorProfile(A)
        G = prof.check_workload(W)
        E = sens**2 * prof.workload_trace(W, G)  # from diag(W^T W) alone when A^T A is diagonal
        try:  # rows are the true queries even where the Gram is rescaled (all-predicate)
            require_memory(float(min(VARIANCE_BYTES_PER_QUERY * W.m, 10**300)), f"the variances of the {W.m:,} queries")
            max_var = float(prof.query_variances(W).max()) * sens**2
        except InputError:  # too many queries to enumerate; the total is still exact
            max_var = None
    log_E = math.log(E) + W.log_scale if E > 0 else -math.inf
    lb = log_svd_bound_or_reason(W)[0]  # -inf: no bound (a spectrum only a dense Gram gives, past the dense limit)
    log_mse = log_E - math.log(W.m)
    missing = strategy.unverified() if defaulted else None
    if missing is not None:  # after the work, as the CLI does, so that errors stay one line
        log.warning("strategy has %s; privacy %s (the default, as for the CLI's error and run; choose with privacy='pure' or 'approx'); sensitivity from the matrix", missing, privacy)
    return {
        "workload": W.spec,
        "privacy": privacy,
        "sensitivity_norm": f"l{p}",
        "sensitivity": sens,
        "shape": list(strategy.shape),
        "unit_total_squared_error": E if W.log_scale == 0 else (math.exp(log_E) if log_E < 709 else None),
        "unit_total_squared_error_log10": log_E / math.log(10) if math.isfinite(log_E) else None,
        "svd_bound": math.exp(lb) if math.isfinite(lb) and lb < 709 else None,
        "svd_bound_log10": lb / math.log(10) if math.isfinite(lb) else None,
        "ratio_to_svd_bound": math.exp(log_E - lb) if math.isfinite(log_E) and math.isfinite(lb) else None,
        "unit_mean_squared_error_per_query": math.exp(log_mse) if log_mse < 709 else None,
        "unit_max_query_variance": max_var,
    }
