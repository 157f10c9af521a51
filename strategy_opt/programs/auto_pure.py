"""``auto-pure``: the best epsilon-DP strategy among the library's candidates (``auto`` calls it under epsilon-DP).

It returns the
best of identity, the best H_b (b = 2..16), the Haar wavelet, GreedyH (1-D and
2-D domains), ``p-identity``, ``svd-approx`` (n <= 64; up to 1024 cells when m < n) and, for marginal
workloads, the Fourier strategy and its L1 re-weighting, and on up to 32 cells the
signed multi-start search (`strategy_opt.programs.signed_search`) from the best of
them, all after column completion, in a default time budget (option ``time_budget``; 60 s + 300 s
(n/4096)^2, summed over the attributes' sizes n_i for a Kronecker
workload). p-identity runs there without random starts unless the hat
starts leave it above `strategy_opt.programs.pidentity.RANDOM_START_ABOVE` times the identity's error
(workloads that are not range-like): then one OPT_0-style random start gets
the remaining budget (``meta.auto_pure_random_start``). Up to 64 cells, a candidate that reaches
the lower bound (within `OPTIMAL_RTOL`) is optimal, and the small-domain searches after it are skipped
(``meta.auto_pure_skipped`` says so). Its ``meta.lower_bound`` is the
certified (epsilon, delta) bound of `strategy_opt.pure_bound` (valid for E_1
since ``||A||_1 >= ||A||_2``) for n <= `strategy_opt.pure_bound.LOWER_BOUND_MAX_N`, computed in a quarter
of the time the candidates took; above that the compiler's SVD bound.

See `strategy_opt.programs.pidentity` for the p-Identity optimiser it races
against the closed-form strategies, and benchmarks/results/pure_dp.md for
what it measures against HDMM's OPT_0.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from ..compiler import compile_strategy, reported_error
from ..defaults import MAX_DENSE_N
from ..error import KroneckerMatrix
from ..exceptions import InputError, OptionError, SolverError, setting
from ..problem import Problem, is_number
from ..pure_bound import lower_bound_facts
from ..registry import register_method
from ..solvers import load_profile
from ..strategy import Strategy
from .pidentity import _kron_parts, pidentity_strategy

__all__ = ["auto_pure"]

log = logging.getLogger("strategy_opt")


#: auto-pure's optimiser budget in seconds: ``AUTO_BASE_SECONDS + AUTO_SCALE_SECONDS sum_i (n_i / 4096)^2`` over the
#: domains p-identity optimises (the workload's, or each attribute's for a Kronecker workload; then the profile's time_limit caps it).
AUTO_BASE_SECONDS, AUTO_SCALE_SECONDS = 60.0, 300.0
#: auto-pure tries svd-approx (Program 3.4.3 refinement) up to this many cells ...
AUTO_SVD_MAX_N = 64
#: ... and, on workloads of fewer queries than cells (rank-deficient, where p-identity's full-rank
#: strategies waste budget on directions no query asks for), up to this many: measured on Gaussian
#: 5 x n workloads and a rank-3 40 x 100 one, svd-approx's E_1 is 0.35-0.74 of p-identity's, in 0.1-1.3 s.
AUTO_SVD_LOW_RANK_MAX_N = 1024
#: Most seconds of svd-approx's Program 3.4.3 search inside auto-pure, and the least it gets once the budget is spent ...
AUTO_SVD_SECONDS, MIN_SEARCH_SECONDS = 1.0, 0.1
#: ... and its steps per smoothing stage there: a candidate among many, it rarely wins on full-rank workloads, and
#: running stages to convergence (1-2 s at 64 cells) made auto 1.4-2.8x slower for the same choice.
AUTO_SVD_STAGE_STEPS = 60
#: auto-pure runs GreedyH up to this many cells: its strategy is analysed densely (16384 cells:
#: 80 s and 6.5 GB, where p-identity's Kronecker strategy was 0.68x its E_1).
AUTO_GREEDY_H_MAX_N = 4096
#: auto-pure runs OM when the workload matrix has at most this many entries (m n) ...
AUTO_ORTHOGONAL_MAX_ENTRIES = 10**6
#: auto-pure runs minerror-l1 (Program 3.4.1, SDPs of (2n + n)^2 variables) up to this many cells:
#: 1-2 s at 8 cells, ~30 s at 16; it beats every other candidate on signed, low-rank workloads
#: (rank 2 over 6 cells: 53.30 against the identity's 61.65; rank 3 over 16: 613 against 707).
AUTO_MINERROR_L1_MAX_N = 8
#: ... and p-identity's OPT_0-style random start from the outset up to AUTO_SVD_MAX_N cells (cheap there).
AUTO_RANDOM_STARTS_SMALL = 1
#: auto-pure runs the signed multi-start search (`strategy_opt.programs.signed_search`, warm-started from
#: the best other candidate) up to this many cells, for at most this many seconds: 0.2-4 s at 6-32 cells,
#: 6-16% below every other candidate on signed and low-rank workloads (rank 3 over 9 cells 232.2 -> 203.5).
AUTO_SIGNED_SEARCH_MAX_N, AUTO_SIGNED_SEARCH_SECONDS = 32, 30.0
#: A candidate replaces an earlier one only when its E_1 is lower by more than this (relative): the signed
#: search refining the best candidate ties it to ~1e-10 where that is already a local optimum.
CHOICE_RTOL = 1e-9
#: Up to `AUTO_SVD_MAX_N` cells the lower bound is computed before the small-domain searches (svd-approx,
#: minerror-l1, the signed search, Fourier): a candidate whose E_1 is within this (relative) of it is optimal
#: (``CHOICE_RTOL`` would keep it against any later one), and they are skipped (total:8 took 4.8 s, identity:16 3 s).
OPTIMAL_RTOL = 1e-9
#: p-identity's convergence tolerance inside auto-pure (option ``tol``; the solver profile's
#: if looser): a start stops when E_1 falls by less than 1e-4 (relative) over `STALL_WINDOW`
#: iterations. Against the native profile's 1e-8 (measured, one BLAS thread, auto-pure on
#: prefix:256 ... prefix:800, random-range:1000:300:0, all-range:500): 2-4x faster, for E_1
#: 0.01-0.09% higher on 7 of 9 workloads, 0.30% on prefix:800 and 0.54% on prefix:384.
AUTO_PURE_TOL = 1e-6
#: Branching factors auto-pure tries for H_b.
AUTO_BRANCHINGS = tuple(range(2, 17))


def _reaching_bound(cands: dict, W, seconds_spent: float) -> str | None:
    """The best candidate if its E_1 is within `OPTIMAL_RTOL` of the certified lower bound (it is then optimal), else None.

    The bound (`lower_bound_facts`) is kept per workload, so the final one costs nothing more.

    Examples
    --------
    On the identity workload the identity strategy reaches the bound n:

    >>> from strategy_opt.workload import identity
    >>> _reaching_bound({"identity": (None, 4.0), "wavelet": (None, 9.0)}, identity(4), 0.0)
    'identity'
    >>> _reaching_bound({"wavelet": (None, 9.0)}, identity(4), 0.0) is None
    True
    """
    bound = lower_bound_facts(W, seconds_spent).get("lower_bound")
    best = _chosen(cands)
    return best if bound is not None and cands[best][1] <= bound * (1 + OPTIMAL_RTOL) else None


def _chosen(cands: dict) -> str:
    """The candidate auto-pure returns: in the order tried, a later one must be better beyond rounding (`CHOICE_RTOL`).

    Examples
    --------
    >>> _chosen({"orthogonal": (None, 3.0), "p-identity": (None, 3.0 * (1 - 1e-12)), "wavelet": (None, 2.0)})
    'wavelet'
    >>> _chosen({"orthogonal": (None, 3.0), "p-identity": (None, 3.0 * (1 - 1e-12))})
    'orthogonal'
    """
    choice = None
    for name, (_, value) in cands.items():
        if choice is None or value < cands[choice][1] * (1 - CHOICE_RTOL):
            choice = name
    return choice


def _per_dimension(domain, build):
    return build(domain[0]) if len(domain) == 1 else KroneckerMatrix([build(d) for d in domain])


#: auto-pure's own option checks: (check, what the value must be).
_TIME_BUDGET_RULE = (lambda v: is_number(v) and v > 0, "a positive number of seconds")
_TOL_RULE = (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1) (the mean relative decrease of E_1 per iteration at which p-identity stops)")


def check_options(problem: Problem) -> None:
    """Refuse (`OptionError`) a bad value of any auto-pure option, before anything is solved.

    ``auto`` calls it too where it runs auto-pure after other candidates (its reweighted run
    under a weighted or relative objective), so that a bad value is refused at once.

    Parameters
    ----------
    problem : Problem
        Its options ``time_budget`` and ``tol``, and p-identity's options (`pidentity.check_options`).

    Returns
    -------
    None

    Examples
    --------
    >>> from strategy_opt.spec import parse_spec
    >>> check_options(Problem(parse_spec("prefix:4"), privacy="pure", options={"time_budget": 5}))
    >>> check_options(Problem(parse_spec("prefix:4"), privacy="pure", options={"time_budget": -1}))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.OptionError: option time_budget must be a positive number of seconds, got -1
    """
    from .pidentity import check_options as check_pidentity_options

    for name, rule in (("time_budget", _TIME_BUDGET_RULE), ("tol", _TOL_RULE)):
        if name in problem.options:
            problem.option(name, None, *rule)
    check_pidentity_options(problem)


@register_method(
    "auto-pure",
    options=("time_budget", "tol", "random_starts", "seed", "p"),
    privacy=("pure",),
    source="strategy_opt",
    summary="epsilon-DP: best of identity, best H_b, wavelet, GreedyH (1-D/2-D), OM (m n <= 1e6), p-identity on merged cells (and svd-approx for n <= 64, a signed search for n <= 32, Fourier and l1-weighted Fourier for marginals) in a default budget; (eps,delta) optimum as lower bound",
)
def auto_pure(problem: Problem):
    """The best epsilon-DP strategy among the library's candidates.

    Options: ``time_budget`` (seconds), ``tol`` (p-identity's convergence
    tolerance, `AUTO_PURE_TOL` or the solver profile's if looser), and
    p-identity's ``random_starts``, ``seed`` and ``p``.

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("prefix:32", privacy="pure", method="auto-pure")
    >>> s.meta["auto_pure_choice"] in s.meta["auto_pure_candidates"], s.meta["lower_bound_kind"]
    (True, 'l2-optimum')
    """
    from ..bases import hierarchical_matrix, identity_matrix, wavelet_matrix
    from ..marginals import marginal_attribute_sets
    from .baselines import branching_errors

    if problem.privacy != "pure":
        raise InputError(f"auto-pure chooses among epsilon-DP strategies; use {setting('privacy', 'pure')}")
    t0 = time.perf_counter()
    W = problem.workload
    n = W.n
    # p-identity's work grows with the square of the domains it optimises over: the whole domain, or each
    # attribute of a Kronecker workload (256 x 256 cells: two 256-cell problems, not one of 65536)
    parts = _kron_parts(W)
    sizes = [f.n for f in parts[0][1]] if parts is not None else [n]
    check_options(problem)  # before any candidate runs (a bad p-identity option was refused only when p-identity ran)
    budget = problem.option(
        "time_budget", min(problem.solver.time_limit, AUTO_BASE_SECONDS + AUTO_SCALE_SECONDS * sum((d / 4096) ** 2 for d in sizes)), *_TIME_BUDGET_RULE
    )
    tol = problem.option("tol", max(problem.solver.tol, AUTO_PURE_TOL), *_TOL_RULE)
    cands: dict[str, tuple[object, float]] = {}
    skipped: dict[str, str] = {}

    def attempt(name: str, make, started: float | None = None) -> None:
        """Evaluate candidate ``name`` (logged with the seconds since ``started``, default now); one that
        fails is skipped (the others stand), except for a bad option."""
        started = time.perf_counter() if started is None else started
        try:
            cands[name] = make()
        except OptionError:
            raise
        except (InputError, SolverError, np.linalg.LinAlgError, MemoryError) as exc:  # a numerical failure or a lack of memory skips the candidate too
            log.info("auto-pure: %s skipped (%s)", name, exc)
            skipped[name] = " ".join(str(exc).split())
            return
        log.info("auto-pure: %s E_1 %.10g (%.3g s)", name, cands[name][1], time.perf_counter() - started)

    repairs: dict[str, dict] = {}
    time_cut: dict[str, str] = {}  # candidates whose search a wall-clock budget stopped (their result depends on the machine's speed)

    def compiled(strategy, name: str) -> tuple[object, float]:
        """A candidate that is a compiled strategy, scored like the others (its meta's E_1 includes the
        workload's log_scale); the identity share its compiler mixed in is kept for the final meta."""
        if "support_repair" in strategy.meta:
            repairs[name] = strategy.meta["support_repair"]
        return reported_error(strategy.matrix, W, 1)

    attempt("identity", lambda: reported_error(_per_dimension(W.domain, identity_matrix), W, 1))  # Kronecker on product domains
    started = time.perf_counter()
    by_branching = branching_errors(W, AUTO_BRANCHINGS, 1)
    best_b = min(by_branching, key=by_branching.get)  # the first of equal errors, as before
    attempt("hierarchical", lambda: reported_error(_per_dimension(W.domain, lambda d: hierarchical_matrix(d, best_b)), W, 1), started)
    attempt("wavelet", lambda: reported_error(_per_dimension(W.domain, wavelet_matrix), W, 1))
    if len(W.domain) <= 2 and n <= AUTO_GREEDY_H_MAX_N:
        from .greedy_h import greedy_h_matrix

        attempt("greedy-h", lambda: reported_error(greedy_h_matrix(W)[0], W, 1))
    elif len(W.domain) <= 2:
        skipped["greedy-h"] = f"{n} cells > {AUTO_GREEDY_H_MAX_N}: its strategy (not a Kronecker product) needs dense n x n error analysis"
    if W.m * n <= AUTO_ORTHOGONAL_MAX_ENTRIES:
        from .orthogonal import om_strategy

        attempt("orthogonal", lambda: reported_error(om_strategy(W)[0], W, 1))  # may meet an ill-conditioned decomposition
    default_starts = AUTO_RANDOM_STARTS_SMALL if max(sizes) <= AUTO_SVD_MAX_N else 0  # per attribute on Kronecker workloads
    sub = problem.with_options(random_starts=problem.options.get("random_starts", default_starts))
    fallback = 0 if "random_starts" in problem.options else 1
    started = time.perf_counter()
    pid_problem = replace(sub, solver=replace(problem.solver, tol=float(tol)))
    A, pid_meta = pidentity_strategy(pid_problem, max(float(budget) - (started - t0), 1.0), fallback_random_starts=fallback)
    attempt("p-identity", lambda: reported_error(A, W, 1), started)
    random_start = pid_meta.get("starts", {}).get("random0", {}).get("unit_error") if fallback else None
    sets = marginal_attribute_sets(W)
    optimal = _reaching_bound(cands, W, time.perf_counter() - t0) if n <= AUTO_SVD_MAX_N else None
    if optimal is not None:
        reason = f"{optimal} reaches the certified lower bound (E_1 {cands[optimal][1]:.10g}): optimal"
        log.info("auto-pure: %s; the small-domain searches are skipped", reason)
        searches = ["svd-approx"] + ["minerror-l1"] * (n <= AUTO_MINERROR_L1_MAX_N) + ["signed-search"] * (n <= AUTO_SIGNED_SEARCH_MAX_N)
        for name in searches + ["fourier", "l1-weighting/fourier"] * (sets is not None):
            skipped[name] = reason
    elif n <= AUTO_SVD_MAX_N or (W.m < n and n <= AUTO_SVD_LOW_RANK_MAX_N):
        from .svd_approx import svd_approx

        # its Program 3.4.3 search gets what is left of the budget, at most AUTO_SVD_SECONDS
        svd_seconds = min(AUTO_SVD_SECONDS, max(float(budget) - (time.perf_counter() - t0), MIN_SEARCH_SECONDS))

        def refined():
            strategy = svd_approx(sub.with_options(time_budget=svd_seconds, stage_steps=AUTO_SVD_STAGE_STEPS))
            if strategy.meta.get("time_limit_reached"):
                time_cut["svd-approx"] = f"its Program 3.4.3 search stopped at its {svd_seconds:.3g} s budget"
            return compiled(strategy, "svd-approx")

        attempt("svd-approx", refined)
    if n <= AUTO_MINERROR_L1_MAX_N and optimal is None:
        from .minerror_l1 import minerror_l1

        # a candidate inside auto-pure: on Clarabel (its default) whatever the profile, since SCS takes minutes
        # on these SDPs (105-217 s at 8 cells, against about 1 s)
        attempt("minerror-l1", lambda: compiled(minerror_l1(replace(problem, options={}, solver=load_profile("clarabel"))), "minerror-l1"))
    if n <= AUTO_SIGNED_SEARCH_MAX_N and optimal is None:
        from .signed_search import signed_search

        def searched():
            warm = Strategy(cands[min(cands, key=lambda k: cands[k][1])][0]).dense()
            # what is left of the budget (none: the warm start alone, stopped after its first iteration)
            seconds = min(AUTO_SIGNED_SEARCH_SECONDS, max(float(budget) - (time.perf_counter() - t0), 0.0))
            res = signed_search(W.gram(), seed=int(problem.options.get("seed", 0)), deadline=time.perf_counter() + seconds, warm=warm)
            if res is None:
                raise SolverError("no start gave a strategy of finite error")
            if res.cut:
                time_cut["signed-search"] = f"{res.starts} of its {res.planned} starts ran within its {seconds:.3g} s"
            return reported_error(res.A, W, 1)

        attempt("signed-search", searched)
    if optimal is None and sets is not None and n > MAX_DENSE_N:
        skipped["fourier"] = skipped["l1-weighting/fourier"] = f"{n} cells > {MAX_DENSE_N}: the Fourier basis is dense (not a Kronecker product)"
    elif optimal is None and sets is not None:
        from ..bases import fourier_matrix
        from .l1_weighting import weighted_basis

        attempt("fourier", lambda: reported_error(fourier_matrix(W.domain, sets), W, 1))
        attempt("l1-weighting/fourier", lambda: reported_error(weighted_basis(problem.with_options(basis="fourier"))[0], W, 1))
    choice = _chosen(cands)
    bound = lower_bound_facts(W, time.perf_counter() - t0)
    extra = bound.pop("extra")
    extra.update(
        auto_pure_choice=choice,
        auto_pure_candidates={k: float(v[1]) for k, v in cands.items()},
        hierarchical_branching=best_b,
        auto_pure_random_start=random_start,
        time_budget=float(budget),
        p_identity_tol=float(tol),
    )
    if skipped:
        extra["auto_pure_skipped"] = skipped
    if time_cut:
        extra["auto_pure_time_cut"] = time_cut
        if choice in time_cut:
            log.warning(
                "auto-pure: the %s candidate it returns was cut by a time budget (%s): on a faster or less loaded machine it can come out "
                "different (meta.auto_pure_time_cut)", choice, time_cut[choice],
            )
    if choice in repairs:
        extra["support_repair"] = repairs[choice]
    if choice == "p-identity":
        extra.update({k: v for k, v in pid_meta.items() if k in ("theta_rows", "start", "starts", "kronecker_rounds", "template", "marginal_weights", "merged_cells")})
    return compile_strategy(cands[choice][0], problem, "auto-pure", solver="native", status="best-of-candidates", solve_seconds=time.perf_counter() - t0, extra=extra, **bound)
