"""``auto``: the best strategy the library can find within its default time budget.

(epsilon, delta)-DP: the exact optimum ``minerror-l2`` with the native solver
(certified by its dual bound) where the domain is small enough to finish in the
budget, and Eigen-Design otherwise; the baselines are evaluated too and the
lowest unit error wins. epsilon-DP: ``auto-pure`` (the scalable epsilon-DP
optimiser, which itself compares against identity, H_b and wavelet) when it is
available, else the best baseline.

The chosen strategy keeps the metadata of the method that produced it, with
``method = 'auto'``, ``auto_choice`` naming the winner and ``auto_candidates``
giving every candidate's unit error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from ..exceptions import InputError, SolverError
from ..problem import Problem
from ..registry import methods, register_method
from ..solvers import load_profile

log = logging.getLogger("strategy_opt")

#: Largest domain for which ``auto`` runs the exact (epsilon, delta) program.
EXACT_L2_MAX_N = 2048
#: Largest domain on which ``auto`` lets a cvxpy profile solve the exact program.
GENERIC_SDP_MAX_N = 64


def _candidates(problem: Problem) -> list[str]:
    table = methods()
    n = problem.workload.n
    if problem.privacy == "pure":
        if "auto-pure" in table:
            return ["auto-pure"]
        return ["identity", "hierarchical", "wavelet"]
    names = ["identity", "wavelet", "hierarchical"]
    if "eigen-design" in table:
        names.append("eigen-design")
    if "minerror-l2" in table and n <= EXACT_L2_MAX_N and problem.objective == "total":
        names.append("minerror-l2")
    return names


@register_method(
    "auto",
    source="strategy_opt",
    summary="best certified strategy within the default budget (minerror-l2 / eigen-design / auto-pure / baselines)",
)
def auto(problem: Problem):
    """Run the candidate methods for the problem and keep the lowest unit error."""
    t0 = time.perf_counter()
    table = methods()
    best, errors = None, {}
    for name in _candidates(problem):
        if problem.privacy not in table[name].privacy:
            continue
        candidate = problem
        if name == "minerror-l2" and problem.solver.backend != "native" and problem.workload.n > GENERIC_SDP_MAX_N:
            # generic SDP solvers do not finish on larger domains; the native solver is certified
            candidate = replace(problem, solver=load_profile("native"))
        try:
            strategy = table[name].func(candidate)
        except (InputError, SolverError) as exc:
            log.info("auto: %s skipped (%s)", name, exc)
            continue
        E = strategy.meta.get("unit_total_squared_error")
        if E is None:
            E = 10 ** strategy.meta.get("unit_total_squared_error_log10", float("inf"))
        errors[name] = E
        log.info("auto: %s gives unit error %.8g", name, E)
        if best is None or E < errors[best[0]]:
            best = (name, strategy)
    if best is None:
        raise SolverError("auto: no candidate method could solve this problem; try a specific --method")
    name, strategy = best
    strategy.meta.update(
        {"method": "auto", "auto_choice": strategy.meta.get("method", name), "auto_candidates": errors, "total_seconds": time.perf_counter() - t0}
    )
    return strategy
