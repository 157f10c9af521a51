"""``auto``: the best strategy the library can find within its default time budget.

(epsilon, delta)-DP: the exact optimum ``minerror-l2`` with the native solver
(certified by its dual bound) where the domain is small enough to finish in the
budget, and Eigen-Design otherwise; the baselines are evaluated too and the
lowest objective value (the unit error, for the total objective) wins. On a
Kronecker product workload (``prefix:256*prefix:256``) the product of each
factor's ``auto`` strategy competes as well (`per_attribute_optimum`), and past
`FLAT_ON_PRODUCT_MAX_N` cells it replaces the flat optimisers. Only
methods that minimise the problem's objective take part, each with the options
it knows. epsilon-DP: ``auto-pure`` (the scalable epsilon-DP optimiser, which
itself compares against identity, H_b and wavelet) when it is available, and
always the closed-form baselines identity, hierarchical (its best branching) and
wavelet, which take any domain. auto-pure optimises a Kronecker product workload
per attribute (all-range:256*all-range:256 gets auto-pure's product strategy) and
any other workload on its dense Gram matrix, up to 20000 cells (larger flat
domains are refused before any method runs, with a memory estimate).

Under a non-total objective (``max``, ``weighted``, ``relative``, user
objectives) the baselines are also built as for the total error and evaluated
under the objective from their per-query variances: an optimiser's inaccurate
solve (badly scaled rows) never leaves auto worse than a fixed construction.
Under (epsilon, delta), for ``max`` and user objectives, the certified total
optimum (native minerror-l2, up to `TOTAL_OPTIMUM_MAX_N` cells) is one of them.
Under epsilon-DP the optimisers for such objectives are HDMM's marginals template on
marginal workloads (method ``marginals``) and, for ``max``, p-identity's min-max
search (on a product workload per attribute: `per_attribute_optimum`, and flat up to
`FLAT_PRODUCT_MAX_N` cells); auto-pure's strategy for the
total error is evaluated under the objective beside the baselines, and for the
linear objectives (``weighted``, ``relative``: ``sum_i c_i u_i``) auto-pure also
runs on the workload with rows scaled by ``sqrt(c_i)``, whose total error is the
objective (`_reweighted_auto_pure`; its lower bound then bounds the objective).
Measured: relative error on prefix:64 51.12 -> 42.79, all-range:64 2080 -> 2024.

The chosen strategy keeps the metadata of the method that produced it, with
``method = 'auto'``, ``auto_choice`` naming the winner and ``auto_candidates``
giving every candidate's objective value. When no candidate gives a strategy,
the error names each one's reason on one line; it is an `InputError` (the user
must change the problem) when every candidate refused with one, else a `SolverError`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import replace

import numpy as np

from ..certificates import relative_gap
from ..compiler import compile_strategy, finite_or_none
from ..error import KroneckerMatrix, per_query_variances
from ..exceptions import InputError, OptionError, SolverError
from ..marginals import marginal_attribute_sets
from ..objectives import evaluate, get_objective
from ..problem import Problem
from ..registry import methods, register_method
from ..solvers import load_profile
from ..workload import Kronecker
from .baselines import check_branching
from ..query_weights import UNWEIGHTED_OBJECTIVES, query_weights
from .minerror_l2 import FLOOR_MAX_ENTRIES, LINEAR_OBJECTIVES, default_profile, floor_bound, generic_sdp_profile
from .pidentity_max import FLAT_PRODUCT_MAX_N

log = logging.getLogger("strategy_opt")

#: The closed-form baselines auto always runs (Kronecker per attribute: any domain size).
BASELINES = ("identity", "hierarchical", "wavelet")
#: Largest domain for which ``auto`` runs the exact (epsilon, delta) program.
EXACT_L2_MAX_N = 2048
#: Optimisers that solve on the flat domain (dense n x n work, O(n^3) per iteration).
FLAT_OPTIMISERS = ("eigen-design", "minerror-l2")
#: Largest product (Kronecker) domain on which ``auto`` also runs the flat optimisers beside the
#: per-attribute optimum (total error): beyond it they take minutes to hours and gigabytes
#: (flat Eigen-Design on prefix:128*all-range:100, 12800 cells: > 10 min, 10 GB) and lose to the
#: product of per-attribute optima (prefix:64*all-range:50: 2.53e6 against 1.74e6 in 0.06 s).
FLAT_ON_PRODUCT_MAX_N = EXACT_L2_MAX_N
#: Largest domain on which ``auto`` lets a cvxpy profile solve the exact program.
GENERIC_SDP_MAX_N = 64
#: Under (epsilon, delta) and a non-linear objective (``max``, user objectives) the certified total optimum (native
#: minerror-l2) is evaluated under the objective beside the baselines up to this many cells (all ranges over 1024: ~4 s).
TOTAL_OPTIMUM_MAX_N = 1024
#: Under epsilon-DP with a ``weighted`` or ``relative`` objective, auto also runs auto-pure on the workload whose
#: rows are scaled by the square roots of their weights (that workload's total error is the objective), when the
#: scaled matrix has at most this many entries (m n; it is built explicitly) ...
REWEIGHTED_MAX_ENTRIES = 2 * 10**7
#: ... on at most this many cells (auto-pure on an explicit flat workload: about 10 s at 1024 cells).
REWEIGHTED_MAX_N = 1024
#: Seconds auto gives minerror-l2's native min-max solver (objective ``max``; it returns its best certified
#: strategy at the limit: all ranges over 256 cells reach a gap of 1e-5 in about 14 s, over 512 cells in 86 s).
NATIVE_MAX_SECONDS = 60.0
#: Seconds auto gives p-identity's min-max search under epsilon-DP (objective ``max``), its bounds included; it also
#: runs flat on a product workload of at most `FLAT_PRODUCT_MAX_N` cells, beside the product of the factors'.
PIDENTITY_MAX_SECONDS = 60.0
#: Each candidate's reason in the error raised when none gives a strategy is cut to this many characters.
REASON_MAX_CHARS = 300


def _candidates(problem: Problem) -> list[str]:
    """The methods auto runs for the problem: those for its privacy notion that minimise its objective."""
    table = methods()
    n = problem.workload.n
    if problem.privacy == "pure":
        # auto-pure first (a tie keeps its certified l2-optimum lower bound); the baselines
        # also run, since auto-pure refuses domains whose dense Gram matrix is too large
        names = (["auto-pure"] if "auto-pure" in table else []) + list(BASELINES)
        if problem.objective != "total" and "marginals" in table and marginal_attribute_sets(problem.workload) is not None:
            names.append("marginals")  # auto-pure runs the template for the total; other objectives get it here
        if problem.objective == "max" and "p-identity" in table and (not _per_attribute_applies(problem) or n <= FLAT_PRODUCT_MAX_N):
            names.append("p-identity")  # the annealed min-max search (auto-pure's strategy for the total competes too)
    else:
        names = ["identity", "wavelet", "hierarchical"]
        if "eigen-design" in table:
            names.append("eigen-design")
        if "minerror-l2" in table and n <= EXACT_L2_MAX_N:
            names.append("minerror-l2")
        if "marginals" in table and marginal_attribute_sets(problem.workload) is not None:
            names.append("marginals")  # HDMM's template: the one optimiser past the dense limit on marginal workloads
    return [k for k in names if problem.privacy in table[k].privacy and (table[k].objectives is None or problem.objective in table[k].objectives)]


def _candidate_problem(problem: Problem, name: str) -> Problem | str:
    """The problem as candidate ``name`` receives it (its own options, a solver that can run it), or why it is skipped."""
    n = problem.workload.n
    if name in FLAT_OPTIMISERS and _per_attribute_applies(problem) and n > FLAT_ON_PRODUCT_MAX_N:
        return f"a product workload of {n} cells (more than {FLAT_ON_PRODUCT_MAX_N}) is optimised per attribute; run --method {name} for the flat solve"
    info = methods()[name]
    options = {k: v for k, v in problem.options.items() if info.options is None or k in info.options}
    candidate = replace(problem, options=options)
    if name == "p-identity" and problem.objective == "max":  # its annealed search and bound, within auto's share of the time
        candidate = replace(candidate, solver=replace(problem.solver, time_limit=min(problem.solver.time_limit, PIDENTITY_MAX_SECONDS)))
    if name == "minerror-l2":
        linear = problem.objective in LINEAR_OBJECTIVES
        if problem.solver.backend != "native" and n > GENERIC_SDP_MAX_N and linear:
            # generic SDP solvers do not finish on larger domains; the native solver is certified
            candidate = replace(candidate, solver=load_profile("native"))
        elif problem.solver.backend == "native" and problem.objective == "max":
            profile = default_profile(problem.workload, "max") if n <= GENERIC_SDP_MAX_N else "native"
            if profile == "native":  # the certified native min-max solver, within auto's share of the time
                candidate = replace(candidate, solver=replace(problem.solver, time_limit=min(problem.solver.time_limit, NATIVE_MAX_SECONDS)))
            else:
                candidate = replace(candidate, solver=load_profile(profile))
        elif problem.solver.backend == "native" and not linear:  # the native solver has linear objectives and max only
            if n > GENERIC_SDP_MAX_N:
                return (
                    f"objective {problem.objective!r} needs a generic SDP solver, which auto runs up to {GENERIC_SDP_MAX_N} cells "
                    f"(this workload has {n}); give solver scs or clarabel (--solver, or solver= in Python) to run it anyway"
                )
            candidate = replace(candidate, solver=load_profile(generic_sdp_profile(problem.workload, problem.objective)))
    return candidate


def _take_best_bound(meta: dict, candidates: dict[str, dict]) -> None:
    """Give the chosen strategy's meta the largest lower bound any candidate certified (total objective).

    Every candidate's ``lower_bound`` bounds the same optimum, the least E_p of
    any strategy (a dual certificate, the (eps, delta) optimum, the SVD bound),
    so the largest is valid for the strategy returned; ``lower_bound_from``
    names the candidate it came from when that is not the chosen one.
    """
    chosen = meta.get("lower_bound_log10")
    E = meta.get("unit_total_squared_error_log10")
    best = max(((m.get("lower_bound_log10"), k) for k, m in candidates.items() if m.get("lower_bound_log10") is not None), default=None)
    if best is None or chosen is None or E is None or best[0] <= chosen + 1e-12:
        return
    log10_lb, source = best
    if log10_lb > E + BOUND_TIE_LOG10:  # above the error beyond rounding: not trusted
        return
    log10_lb = min(log10_lb, E)
    other = candidates[source]
    meta.update(
        lower_bound=other.get("lower_bound") if log10_lb == other["lower_bound_log10"] else meta.get("unit_total_squared_error"),
        lower_bound_log10=log10_lb,
        lower_bound_kind=other.get("lower_bound_kind"),
        lower_bound_from=other.get("method", source),
        ratio_to_lower_bound=finite_or_none(10 ** (E - log10_lb)),
        relative_gap=finite_or_none(10 ** (E - log10_lb) - 1.0),
    )


#: A candidate's bound above the chosen error by more than this (log10) is not taken (rounding allows less).
BOUND_TIE_LOG10 = 1e-9


def _reason(exc: Exception) -> str:
    """One line, at most `REASON_MAX_CHARS`, naming the error type unless it is an `InputError`."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > REASON_MAX_CHARS:
        text = text[: REASON_MAX_CHARS - 3].rstrip() + "..."
    return text if isinstance(exc, InputError) else f"{text} ({type(exc).__name__})"


def _reasons(failures: dict[str, Exception]) -> str:
    return " | ".join(f"{name}: {_reason(exc).removeprefix(f'{name}: ')}" for name, exc in failures.items())  # named once


def no_candidate_error(failures: dict[str, Exception]) -> InputError | SolverError:
    """The error when no candidate gave a strategy: one line with each candidate's reason.

    An `InputError` (the problem is the user's to change: CLI exit 2) when every
    candidate refused the problem with one, else a `SolverError`.

    Examples
    --------
    >>> e = no_candidate_error({"minerror-l2": InputError("too large"), "eigen-design": SolverError("diverged")})
    >>> type(e).__name__, str(e)
    ('SolverError', 'auto: no candidate method could solve this problem: minerror-l2: too large | eigen-design: diverged (SolverError); try a specific method (--method)')
    >>> type(no_candidate_error({"minerror-l2": InputError("too large")})).__name__
    'InputError'
    """
    user = bool(failures) and all(isinstance(exc, InputError) for exc in failures.values())
    reasons = _reasons(failures) or "none ran"
    if user:
        return InputError(f"auto: no candidate method can take this problem: {reasons}")
    return SolverError(f"auto: no candidate method could solve this problem: {reasons}; try a specific method (--method)")


def _baselines_under_objective(problem: Problem, weights: np.ndarray | None):
    """``(name, strategy, objective value)`` of each closed-form baseline, built as for the total error.

    Under a non-total objective the optimisers can end worse than a fixed
    construction (an inaccurate SDP solve on a badly scaled workload); the
    baselines' objective values, computed from their per-query variances, are
    a floor for auto's choice. ``weights``: the objective's per-query weights (`query_weights`).
    """
    table = methods()
    objective = get_objective(problem.objective)
    # under epsilon-DP no optimiser minimises most objectives: auto-pure's strategy for the total competes too; under
    # (epsilon, delta) the certified total optimum (native) does, which an SDP solve of the objective itself can miss
    # (a user's 3-norm on SCS: 1.69x the optimum, where the total optimum was 1.06x)
    constructions = BASELINES + (("auto-pure",) if problem.privacy == "pure" and "auto-pure" in table else ())
    if problem.privacy == "approx" and "minerror-l2" in table and problem.workload.n <= TOTAL_OPTIMUM_MAX_N and problem.objective not in LINEAR_OBJECTIVES:
        constructions += ("minerror-l2",)
    for method in constructions:
        if problem.privacy not in table[method].privacy:
            continue
        total, name = replace(problem, objective="total", options={}), method
        if method == "minerror-l2":  # on the native solver, named apart from minerror-l2's solve of the objective
            total, name = replace(total, solver=load_profile("native")), "minerror-l2/total"
        try:
            strategy = table[method].func(total)
            # past the dense limit some constructions have no per-query variances (InputError)
            variances = per_query_variances(strategy.matrix, problem.workload, problem.p)
        except (InputError, SolverError) as exc:
            log.info("auto: baseline %s skipped (%s)", name, exc)
            continue
        strategy.meta["method"] = name  # auto's choice
        value = evaluate(objective, variances, weights, f"the per-query variances of {name}")
        if math.isfinite(value):
            yield name, strategy, value


def _runs_reweighted(problem: Problem) -> bool:
    """Whether auto runs auto-pure on the reweighted workload: epsilon-DP with a weighted or relative objective."""
    return problem.privacy == "pure" and problem.objective in LINEAR_OBJECTIVES and problem.objective != "total" and "auto-pure" in methods()


def _reweighted_auto_pure(problem: Problem, weights: np.ndarray, total_meta: dict | None = None):
    """auto-pure on ``diag(sqrt(c)) W`` for a linear epsilon-DP objective ``sum_i c_i u_i`` (weighted, relative).

    That objective is exactly the unit total error of the scaled workload, so
    auto-pure minimises it and its lower bound bounds it. Returns ``(strategy
    compiled for the problem's workload, objective value, lower bound, its
    kind)``, or None where it does not apply (other objectives, more than
    `REWEIGHTED_MAX_ENTRIES` entries or `REWEIGHTED_MAX_N` cells). auto-pure
    gets the options it knows; ``total_meta``, the metadata of auto-pure's
    strategy for the total, gives its certified bound on the total error to the
    compiled strategy (else the compiler's own, the SVD bound past small domains).
    """
    import scipy.sparse as sp

    from ..workload import from_matrix

    W = problem.workload
    if not _runs_reweighted(problem):
        return None
    if W.m * W.n > REWEIGHTED_MAX_ENTRIES or W.n > REWEIGHTED_MAX_N:
        log.info("auto: auto-pure on the reweighted workload skipped (%d queries x %d cells > %d entries, or more than %d cells)", W.m, W.n, REWEIGHTED_MAX_ENTRIES, REWEIGHTED_MAX_N)
        return None
    scaled = from_matrix(sp.diags(np.sqrt(weights)) @ sp.csr_matrix(W.matrix(), dtype=float), f"{problem.objective}-weighted({W.spec})", domain=W.domain)
    log.info("auto: auto-pure on the workload with rows scaled by the square roots of the %s weights (its total error is the objective)", problem.objective)
    t0 = time.perf_counter()
    candidate = _candidate_problem(problem, "auto-pure")
    options = candidate.options if isinstance(candidate, Problem) else {}
    found = methods()["auto-pure"].func(Problem(scaled, privacy="pure", solver=problem.solver, options=options))
    bound = {}
    log10 = (total_meta or {}).get("lower_bound_log10")
    if log10 is not None and math.isfinite(log10 * math.log(10) - W.log_scale):
        bound = {"lower_bound": math.exp(log10 * math.log(10) - W.log_scale), "lower_bound_kind": total_meta.get("lower_bound_kind")}
    strategy = compile_strategy(
        found.matrix, replace(problem, objective="total", options={}), "auto-pure",
        solver=found.meta.get("solver", "auto-pure"), status=found.meta.get("solver_status", "heuristic"), solve_seconds=time.perf_counter() - t0, **bound,
        extra={"auto_pure_reweighted": problem.objective, "auto_pure_choice": found.meta.get("auto_pure_choice")},
    )
    strategy.meta["method"] = "auto-pure/reweighted"  # auto's choice names it apart from auto-pure for the total
    value = evaluate(get_objective(problem.objective), per_query_variances(strategy.matrix, W, problem.p), weights, "the per-query variances of auto-pure/reweighted")
    return strategy, value, found.meta.get("lower_bound"), f"reweighted-workload-{found.meta.get('lower_bound_kind')}"


def _objective_facts(
    problem: Problem, value: float, solved: dict, total_bound: float | None, weights: np.ndarray | None, floor: float | None
) -> dict:
    """Metadata making a baseline's strategy answer for the problem's objective.

    The bound is the optimiser's that ran (``solved``), or one from ``total_bound`` (a lower
    bound on every strategy's total error), whichever is larger: ``max_i u_i >= sum_i u_i / m``
    (kind ``total-bound-over-queries``) and ``sum_i c_i u_i >= min_i c_i sum_i u_i`` (kind
    ``total-bound-times-least-weight``), or ``floor``, the built-in objective at each query's least
    variance (`_per_query_floor`, computed once per problem).
    """
    lower, kind = solved.get("objective_lower_bound"), solved.get("objective_lower_bound_kind")
    derived = None
    if total_bound is not None and problem.objective == "max":
        derived = (total_bound / problem.workload.m, "total-bound-over-queries")
    elif total_bound is not None and problem.objective in ("weighted", "relative"):
        least = float(weights.min())
        derived = (least * total_bound, "total-bound-times-least-weight") if least > 0 else None
    if derived is not None and derived[0] <= value and (lower is None or derived[0] > lower):
        lower, kind = derived
    if floor is not None and floor <= value and (lower is None or floor > lower):
        lower, kind = floor, "per-query-floor"
    return {
        "objective": problem.objective,
        "objective_value": value,
        "objective_lower_bound": lower,
        "objective_lower_bound_kind": kind if lower is not None else None,
        "objective_relative_gap": finite_or_none(relative_gap(value, lower)) if lower is not None else None,
    }


def _per_query_floor(problem: Problem, weights: np.ndarray | None) -> float | None:
    """The objective at ``l_i = max_j w_ij^2``, each query's least variance (`minerror_l2.floor_bound`).

    Valid under both notions (``||A||_1 >= ||A||_2``) for every non-decreasing
    objective (user objectives are probed for it before any method runs); under
    epsilon-DP no optimiser states a bound on the largest variance, and the total
    bound over m can be far weaker (a rank-3 workload of 20 cells: 31.98 against
    100). None past `FLOOR_MAX_ENTRIES`, or where a user's objective fails there.
    """
    W = problem.workload
    if W.m * W.n > FLOOR_MAX_ENTRIES:
        return None
    try:
        value = floor_bound(W, get_objective(problem.objective), weights)
    except Exception as exc:  # a user's objective may fail at the floor (minerror-l2 says so too)
        log.info("auto: objective %r failed on the per-query floor (%s): no floor bound", problem.objective, " ".join(str(exc).split()))
        return None
    return value if math.isfinite(value) and value > 0 else None


def _rank(value: float) -> tuple[int, float]:
    """Sort key of a finite objective value: below every value beyond float64 (`_objective_value`).

    The value itself, not its log: a user objective may be zero or negative
    (``sum(u) - 1e6``), and every such value had log -inf, so the first candidate won.
    """
    return (0, value)


def _objective_value(meta: dict) -> tuple[float | None, tuple[int, float]]:
    """A candidate's objective value (None beyond float64) and its sort key (`_rank`; by log10 beyond float64), from its meta."""
    E = meta.get("objective_value")
    if E is not None:
        return E, _rank(E)
    log10 = meta.get("objective_value_log10", meta.get("unit_total_squared_error_log10"))
    if log10 is None:
        return None, (2, math.inf)
    return (10.0**log10, _rank(10.0**log10)) if log10 < 308 else (None, (1, log10))


#: Objectives whose optimum over a Kronecker product workload is the product of the factors' optima under
#: (epsilon, delta)-DP: the total error, and the largest variance (its optimum is gamma_2(W)^2, and gamma_2 is
#: multiplicative under Kronecker products, Lee, Shraibman and Spalek 2008).
PER_ATTRIBUTE_OBJECTIVES = ("total", "max")


def _per_attribute_applies(problem: Problem) -> bool:
    """A Kronecker product workload, objective total or max under (epsilon, delta)-DP, or max under epsilon-DP.

    Under epsilon-DP the total is auto-pure's (it descends per attribute itself); the largest
    variance of a product strategy is the product of the factors' there too (L1 column
    norms multiply), and every bound auto states on a factor's largest epsilon-DP variance
    bounds its ``gamma_2^2`` (`_product_of_factor_max`).
    """
    return (
        (problem.privacy == "approx" and problem.objective in PER_ATTRIBUTE_OBJECTIVES or problem.privacy == "pure" and problem.objective == "max")
        and isinstance(problem.workload, Kronecker)
        and len(problem.workload.factors) > 1
    )


def _product_of_factor_max(problem: Problem, factor_strategies: list) -> dict:
    """The largest variance of the product strategy and its lower bound, composed from the factors'.

    A query of ``W_1 x W_2`` is ``w_i x w_j``; through ``A_1 x A_2`` its variance
    is ``u_i(A_1) u_j(A_2)`` (L2 column norms, and so the sensitivity, multiply
    too), so the largest one is the product of the factors' largest ones,
    computed here from each factor's own per-query variances (the product's
    ``m_1 m_2`` variances are never formed). The optimum is ``gamma_2(W)^2``,
    which is multiplicative, so the product of the factors' lower bounds
    bounds it (None when a factor has none). Under epsilon-DP (L1 column norms
    multiply too) each factor's bound is one on its ``gamma_2^2`` as well: the
    (epsilon, delta) min-max dual, the per-query floor ``max_ij w_ij^2`` (``|w_ij| =
    |l_i r_j| <= gamma_2``) or the (epsilon, delta) total bound over m, so the
    product bounds ``gamma_2(W)^2``, which bounds the epsilon-DP optimum.
    """
    value, bound, kinds = 1.0, 1.0, set()
    for f, s in zip(problem.workload.factors, factor_strategies):
        value *= float(np.max(per_query_variances(s.matrix, f, problem.p)))
        lower = s.meta.get("objective_lower_bound")
        bound = bound * lower if bound is not None and lower is not None and lower > 0 else None
        kinds.add(s.meta.get("objective_lower_bound_kind"))
    if bound is not None and bound > value:  # rounding in a factor's certificate: the value is the optimum
        bound = value
    kind = f"product-of-factor-bounds ({', '.join(sorted(map(str, kinds)))})"
    facts = {
        "objective_lower_bound": finite_or_none(bound) if bound is not None else None,
        "objective_lower_bound_kind": kind if bound is not None else None,
        "objective_relative_gap": finite_or_none(relative_gap(value, bound)) if bound is not None else None,
    }
    if bound is None:
        facts["objective_lower_bound_unavailable"] = "a factor's strategy states no lower bound on its largest variance"
    return {"objective_value": value, **facts}


class _FactorWarningsAsInfo(logging.Filter):
    """Logs a factor's ``auto`` warning as information naming the factor: what it says (a fallback to a
    construction) is about one attribute, and the product competes with auto's other candidates."""

    def __init__(self, spec: str):
        super().__init__()
        self.spec = spec

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING:
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = f"factor {self.spec}: {record.getMessage()}", None
        return True


@contextlib.contextmanager
def _factor_warnings_as_info(spec: str):
    """`_FactorWarningsAsInfo` on the package logger while a factor is solved."""
    guard = _FactorWarningsAsInfo(spec)
    log.addFilter(guard)
    try:
        yield
    finally:
        log.removeFilter(guard)


def per_attribute_optimum(problem: Problem):
    """The Kronecker product of ``auto``'s strategy for each factor of a Kronecker workload (see `_per_attribute_applies`).

    Under L2 sensitivity both the error and the SVD bound factor over a
    Kronecker product: ``E_2(A_1 x A_2; W_1 x W_2) = E_2(A_1; W_1) E_2(A_2; W_2)``.
    So the product of per-attribute optima is within the product of their
    ratios to the bound (all-range:256 x all-range:256: 1.035; the plain
    wavelet, the best construction, is at 2.2), while every method that
    solves on the flat domain needs its dense 65536 x 65536 Gram matrix.
    Under objective ``max`` each factor is solved for its largest variance;
    the product's largest variance and its lower bound are the products of
    the factors' (`_product_of_factor_max`): prefix:64*prefix:64 gets 19.87
    against the best construction's 83.16 (hierarchical).

    Parameters
    ----------
    problem : Problem
        A Kronecker workload (at least two factors); each factor is solved by `auto` with no options.

    Returns
    -------
    Strategy
        Method ``per-attribute``; ``meta.per_attribute_choices`` names ``auto``'s choice per factor.

    Examples
    --------
    The identity on 2 cells (error 2) times the total on 3 cells (error 1, by its own single query, which
    several of auto's candidates find exactly: the first of them is kept):

    >>> from strategy_opt.spec import parse_spec
    >>> s = per_attribute_optimum(Problem(parse_spec("identity:2*total:3")))
    >>> s.meta["method"], s.meta["per_attribute_choices"], round(s.meta["unit_total_squared_error"], 6)
    ('per-attribute', ['identity', ...], 2.0)
    """
    t0 = time.perf_counter()
    factors, choices, solved = [], [], []
    for i, f in enumerate(problem.workload.factors):
        log.info("auto: per-attribute optimum, factor %d of %d (%s)", i + 1, len(problem.workload.factors), f.spec)
        with _factor_warnings_as_info(f.spec):
            s = auto(replace(problem, workload=f, options={}))
        factors += s.matrix.factors if isinstance(s.matrix, KroneckerMatrix) else [s.matrix]
        choices.append(s.meta["auto_choice"])
        solved.append(s)
    extra = {"per_attribute_choices": choices}
    value = None
    if problem.objective == "max":
        extra.update(_product_of_factor_max(problem, solved))
        value = extra.pop("objective_value")
    return compile_strategy(
        KroneckerMatrix(factors), problem, "per-attribute", solver="auto per factor", status="product-of-factor-optima",
        solve_seconds=time.perf_counter() - t0, objective_value=value, extra=extra,
    )


@register_method(
    "auto",
    source="strategy_opt",
    summary="best certified strategy within the default budget (minerror-l2 / eigen-design / auto-pure / baselines)",
    objectives=None,
)
def auto(problem: Problem):
    """Run the candidate methods for the problem and keep the lowest objective value (unit error for ``total``).

    Examples
    --------
    On prefix:4 (approx) minerror-l2 wins and meets the SVD bound; the identity's 10 was a candidate:

    >>> from strategy_opt import solve
    >>> s = solve("prefix:4", privacy="approx", method="auto")
    >>> s.meta["auto_choice"], s.meta["auto_candidates"]["identity"], round(s.meta["ratio_to_lower_bound"], 4)
    ('minerror-l2', 10.0, 1.0)
    """
    t0 = time.perf_counter()
    table = methods()
    names = _candidates(problem)
    if not names:  # a non-total objective no flat optimiser minimises here: the constructions are evaluated under it
        log.info(
            "auto: no %s method minimises objective %r on the flat domain; evaluating the constructions%s under it",
            problem.privacy, problem.objective,
            "".join(
                f" (and {what})" for what, runs in (("auto-pure's strategy for the total", problem.privacy == "pure"),
                                                    ("the product of the per-attribute optima", _per_attribute_applies(problem))) if runs
            ),
        )
    weights = query_weights(problem) if problem.objective != "total" else None  # once: for relative it reads every query's norm
    known = set().union(*(table[k].options or () for k in names))
    reweighted = _runs_reweighted(problem)
    if reweighted:
        known |= set(table["auto-pure"].options or ())  # the reweighted auto-pure run takes them (`_reweighted_auto_pure`)
    if reweighted or "auto-pure" in names:
        from .auto_pure import check_options

        check_options(problem)  # a bad value is refused before auto says where the options go (and, reweighted, not minutes later)
    if problem.objective not in UNWEIGHTED_OBJECTIVES:
        known.add("weights")  # read by the objective itself (`query_weights`)
    unknown = sorted(set(problem.options) - known)
    if "branching" in problem.options:  # checked before the candidates run: hierarchical runs last
        check_branching(problem.options["branching"])
    if unknown:
        raise InputError(f"method 'auto': unknown option(s) {', '.join(map(repr, unknown))}; its candidates' options: {', '.join(sorted(known)) or 'none'}")
    for key, value in sorted(problem.options.items()):  # say where each option goes: the others' results do not use it
        takers = [k for k in names if key in (table[k].options or ())] + (["auto-pure/reweighted"] if reweighted and key in (table["auto-pure"].options or ()) else [])
        log.info("auto: option %s=%s applies to %s only", key, value, ", ".join(takers) or "the objective")  # weights
    best, errors, failures, bounds = None, {}, {}, {}
    rank = {}  # log10 of each candidate's objective value: values beyond float64 (all-predicate:1100) still compare
    searched_b = None  # the best H_b branching found by auto-pure, when it ran
    for name in names:
        candidate = _candidate_problem(problem, name)
        if isinstance(candidate, str):
            log.info("auto: %s skipped (%s)", name, candidate)
            failures[name] = InputError(candidate)
            continue
        if name == "hierarchical" and "branching" not in candidate.options and searched_b:
            # auto-pure searched H_b over more branchings: build its best one, not a second search (21 s on all-range:4096)
            candidate = candidate.with_options(branching=int(searched_b))
        try:
            strategy = table[name].func(candidate)
        except OptionError:
            raise  # a bad option value is the user's to fix, not a reason to skip the candidate
        except (InputError, SolverError, np.linalg.LinAlgError) as exc:  # a numerical failure skips the candidate too
            log.info("auto: %s skipped (%s)", name, exc)
            failures[name] = exc
            continue
        E, rank[name] = _objective_value(strategy.meta)
        errors[name] = E
        bounds[name] = strategy.meta
        if name == "auto-pure":
            searched_b = strategy.meta.get("hierarchical_branching")
        log.info("auto: %s gives %s objective %s", name, problem.objective, f"{E:.8g}" if E is not None else f"10^{rank[name][1]:.6f}")
        if best is None or rank[name] < rank[best[0]]:
            best = (name, strategy)
    if _per_attribute_applies(problem):
        try:
            strategy = per_attribute_optimum(problem)
        except (InputError, SolverError, np.linalg.LinAlgError) as exc:
            log.info("auto: per-attribute skipped (%s)", exc)
            failures["per-attribute"] = exc
        else:
            name = "per-attribute"
            E, rank[name] = _objective_value(strategy.meta)
            errors[name] = E
            log.info("auto: %s gives %s objective %s", name, problem.objective, f"{E:.8g}" if E is not None else f"10^{rank[name][1]:.6f}")
            if best is None or rank[name] < rank[best[0]]:
                best = (name, strategy)
    if problem.objective != "total":  # also when every optimiser refused: the constructions still answer
        solved = best[1].meta if best is not None else None
        constructions = list(_baselines_under_objective(problem, weights))
        try:
            total = next((st.meta for name, st, _ in constructions if name == "auto-pure"), None)
            reweighted = _reweighted_auto_pure(problem, weights, total)
        except OptionError:
            raise  # a bad option value is the user's to fix
        except (InputError, SolverError, np.linalg.LinAlgError) as exc:
            log.info("auto: auto-pure on the reweighted workload skipped (%s)", exc)
            failures["auto-pure/reweighted"], reweighted = exc, None
        if reweighted is not None:
            strategy, value, bound, kind = reweighted
            constructions.append(("auto-pure/reweighted", strategy, value))
            if bound is not None and bound <= value and (solved is None or solved.get("objective_lower_bound") is None or bound > solved["objective_lower_bound"]):
                # a lower bound on the objective itself (the scaled workload's total): for every candidate
                solved = {**(solved or {}), "objective_lower_bound": float(bound), "objective_lower_bound_kind": kind}
        floor = _per_query_floor(problem, weights)
        for base, base_strategy, value in constructions:
            errors[base], rank[base] = value, _rank(value)
            log.info("auto: %s (evaluated from its per-query variances) gives %s objective %.8g", base, problem.objective, value)
            if best is None or rank[base] < rank[best[0]]:
                base_strategy.meta.update(_objective_facts(problem, value, solved or {}, base_strategy.meta.get("lower_bound"), weights, floor))
                best = (base, base_strategy)
        if solved is None and best is not None:
            if failures:
                log.warning("auto: no optimiser for objective %r ran (%s); returning the best construction evaluated under it (%s)", problem.objective, _reasons(failures), best[0])
            else:
                log.warning("auto: no %s method optimises objective %r here; returning the best construction evaluated under it (%s)", problem.privacy, problem.objective, best[0])
    if best is None:
        raise no_candidate_error(failures)
    name, strategy = best
    if problem.objective == "total":
        _take_best_bound(strategy.meta, bounds)
    strategy.meta.update(
        {"method": "auto", "auto_choice": strategy.meta.get("method", name), "auto_candidates": errors, "total_seconds": time.perf_counter() - t0}
    )
    if failures:
        strategy.meta["auto_skipped"] = {k: _reason(exc) for k, exc in failures.items()}
    return strategy
