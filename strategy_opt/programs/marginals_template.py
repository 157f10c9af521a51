"""HDMM's marginals template (OPT_M): the best weighted stack of marginals for a marginal workload.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional
statistical queries under differential privacy", PVLDB 2018, Sec. 6. The error
of a stack of weighted marginals on a marginal workload has a closed form in
the eigenspaces of the marginal algebra (`strategy_opt.marginals`), so the
2^k weights are optimised by L-BFGS-B without any n x n matrix, under L1 (epsilon-DP)
or L2 ((epsilon, delta)-DP) sensitivity. Past `MAX_DENSE_N` cells the strategy is a
`MarginalsMatrix`, analysed, written, read and run per eigenspace.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from ..compiler import compile_strategy
from ..defaults import MAX_DENSE_N
from ..error import KroneckerMatrix
from ..exceptions import InputError
from ..marginals import MarginalsMatrix, marginal_attribute_sets, marginal_spectrum, subset_bits, subset_sums, superset_sums
from ..problem import Problem
from ..registry import register_method
from ..workload import Workload

__all__ = ["marginals_strategy", "marginals_template"]

#: The template (2^k weights) is tried up to this many attributes.
MARGINALS_MAX_ATTRIBUTES = 16
#: L-BFGS-B iterations per start.
MARGINALS_MAX_ITERS = 2000
#: Marginal weights below this share of the largest are dropped from the strategy.
MARGINAL_WEIGHT_FLOOR = 1e-6
_THREADPOOLS = ThreadpoolController()


def marginals_strategy(W: Workload, p: int = 1, *, max_iters: int, ftol: float):
    """HDMM's marginals template (OPT_M, McKenna et al. 2018, Sec. 6) under L1 (p = 1) or L2 (p = 2): weighted marginals, or None.

    For a (weighted) union of marginals over attributes of sizes d_i, strategies
    ``A = [theta_S M_S]_S`` over all attribute subsets S (M_S: the marginal on S)
    have ``||A||_1 = sum_S theta_S`` and ``||A||_2^2 = sum_S theta_S^2``
    (`strategy_opt.marginals`), and every Gram in play is a sum of
    Kronecker products of I and J, diagonalised by one basis whose eigenspaces
    are indexed by subsets U (multiplicity ``prod_{i in U} (d_i - 1)``). Derived
    here: with ``out(S) = prod_{i not in S} d_i``,

        E_1 = (sum_S theta_S)^2 sum_U mult(U) g(U) / x(U)    (E_2: sum_S theta_S^2 in front),
        x(U) = sum_{S ⊇ U} theta_S^2 out(S),   g(U) = sum_{T ⊇ U} w_T^2 out(T),

    minimised by L-BFGS-B over theta >= 0 (2^d variables, zeta transforms) from four
    starts: the workload's marginals, those plus the full table, the table alone
    (the identity) and all subsets.
    Returns ``(A, E_p, {subset: theta})`` or None if W is not a marginal workload
    or has more than `MARGINALS_MAX_ATTRIBUTES` attributes. A is a `KroneckerMatrix`
    when one marginal carries all the weight, else a sparse stack, or past
    `MAX_DENSE_N` cells a `MarginalsMatrix` (its analysis needs no n x n matrix).
    """
    domain = W.domain
    d = len(domain)
    spectrum = marginal_spectrum(W) if d <= MARGINALS_MAX_ATTRIBUTES else None
    if spectrum is None:
        return None
    mult, g, out = spectrum
    bits = subset_bits(d)
    wt = np.zeros(2**d)
    for T in marginal_attribute_sets(W):
        wt[sum(1 << (d - 1 - i) for i in T)] = 1.0  # the workload's own marginals (a start)
    cost = mult * g
    live = cost > 0

    def fun(theta):
        x = superset_sums(theta**2 * out, d)
        if np.any(x[live] <= 0):
            return math.inf, np.zeros_like(theta)
        r = cost[live] / x[live]
        e = float(r.sum())
        b = np.zeros(2**d)
        b[live] = r / x[live]
        de = -2.0 * theta * out * subset_sums(b, d)  # gradient of the trace term
        if p == 1:
            total = theta.sum()
            return total**2 * e, 2.0 * total * e + total**2 * de
        total = float(theta @ theta)
        return total * e, 2.0 * theta * e + total * de

    workload_only = np.where(wt > 0, 1.0, 1e-3)
    with_table = workload_only.copy()
    with_table[-1] = 1.0  # the full contingency table (the identity)
    best = None
    table_only = np.full(2**d, 1e-3)
    table_only[-1] = 1.0
    for theta0 in (workload_only, with_table, table_only, np.ones(2**d)):
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            res = so.minimize(fun, theta0, jac=True, method="L-BFGS-B", bounds=so.Bounds(0.0, np.inf), options={"maxiter": max_iters, "ftol": ftol, "gtol": 0.0})
        if best is None or res.fun < best.fun:
            best = res
    theta = best.x / best.x.sum()
    keep = theta > MARGINAL_WEIGHT_FLOOR * theta.max()
    from ..bases import kron_all

    def marginal_factors(m: int) -> list:
        return [np.eye(dd) if bits[m, i] else np.ones((1, dd)) for i, dd in enumerate(domain)]

    kept = np.flatnonzero(keep)
    if kept.size == 1:  # one weighted marginal: a Kronecker product, analysed per factor at any size
        A = KroneckerMatrix(marginal_factors(int(kept[0])))
    elif W.n > MAX_DENSE_N:  # analysed per eigenspace of the marginal algebra (no n x n matrix)
        A = MarginalsMatrix(domain, np.where(keep, theta, 0.0))
    else:
        A = sp.vstack([theta[m] * kron_all(marginal_factors(m)) for m in kept], format="csr")
    chosen = {"".join(map(str, bits[m])): float(theta[m]) for m in np.flatnonzero(keep)}
    return A, float(fun(np.where(keep, theta, 0.0))[0]), chosen


@register_method(
    "marginals",
    options=(),
    privacy=("pure", "approx"),
    source="McKenna et al. PVLDB 2018, Sec. 6 (OPT_M, the marginals template)",
    summary="weighted stack of marginals for a marginal workload (any domain size: analysed per eigenspace of the marginal algebra)",
)
def marginals_template(problem: Problem):
    """HDMM's marginals template for a marginal workload (`marginals_strategy`), under the problem's privacy.

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("marginals:3x3x3x3:1", privacy="approx", method="marginals")
    >>> s.meta["unit_total_squared_error"] <= solve("marginals:3x3x3x3:1", privacy="approx", method="identity").meta["unit_total_squared_error"]
    True
    """
    t0 = time.perf_counter()
    W = problem.workload
    res = marginals_strategy(W, problem.p, max_iters=min(problem.solver.max_iters, MARGINALS_MAX_ITERS), ftol=problem.solver.tol)
    if res is None:
        raise InputError(
            f"marginals: {W.spec} is not a marginal workload (a union of products of identity and total factors, as marginals:D1xD2x...:K) "
            f"of at most {MARGINALS_MAX_ATTRIBUTES} attributes; use another method (auto)"
        )
    A, value, weights = res
    return compile_strategy(A, problem, "marginals", solver="native/L-BFGS-B", status="local-optimum", solve_seconds=time.perf_counter() - t0,
                            extra={"template": "marginals", "marginal_weights": weights, "template_error": value})
