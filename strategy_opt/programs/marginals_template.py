"""HDMM's marginals template (OPT_M): the best weighted stack of marginals for a marginal workload.

McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional
statistical queries under differential privacy", PVLDB 2018, Sec. 6. The error
of a stack of weighted marginals on a marginal workload has a closed form in
the eigenspaces of the marginal algebra (`strategy_opt.marginals`), so the
2^k weights are optimised by L-BFGS-B without any n x n matrix, under L1 (epsilon-DP)
or L2 ((epsilon, delta)-DP) sensitivity. The strategy is a `MarginalsMatrix` (or a
`KroneckerMatrix` when one marginal carries all the weight), analysed, written, read and run
per eigenspace at any size.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize as so

from ..certificates import relative_gap
from ..compiler import compile_strategy
from ..error import KroneckerMatrix
from ..exceptions import InputError
from ..marginals import MarginalsMatrix, marginal_attribute_sets, marginal_spectrum, marginal_variance_terms, subset_bits, subset_mask, subset_sums, superset_sums
from ..problem import Problem
from ..registry import register_method
from ..threads import one_blas_thread
from ..workload import Union, Workload
from ..query_weights import check_weights_objective, query_weights, weights_meta

__all__ = ["TemplateObjective", "template_objective", "marginals_strategy", "marginals_template"]

#: The template (2^k weights) is tried up to this many attributes.
MARGINALS_MAX_ATTRIBUTES = 16
#: L-BFGS-B iterations per start.
MARGINALS_MAX_ITERS = 2000
#: Marginal weights below this share of the largest are dropped from the strategy.
MARGINAL_WEIGHT_FLOOR = 1e-6


#: Exponents q of the smooth maximum ``(sum_t v_t^q)^(1/q)`` that objective ``max`` anneals through
#: (each stage warm-starts the next; at q = 2048 it exceeds the maximum by at most a factor
#: (marginals)^(1/q): 0.7% for 2^14 marginals). The reported value is the exact maximum.
MAX_ANNEALING = (8.0, 32.0, 128.0, 512.0, 2048.0)
#: Random starts (seed 0, weights uniform on [0, 1)) of objective ``max``, beside the structured ones.
MAX_RANDOM_STARTS = 4


#: Weights within a marginal are equal when they differ by at most this share of the largest.
WEIGHTS_RTOL = 1e-12


@dataclass(frozen=True)
class TemplateObjective:
    """What the template minimises over a marginal workload's marginals (one entry per workload marginal).

    ``kind`` is ``"linear"`` (``sum_t c_t m_t v_t``: per-query weights ``c_t``, equal within a
    marginal) or ``"max"`` (``max_t v_t``), with ``v_t`` the variance of each query of marginal t.

    Attributes
    ----------
    kind : {'linear', 'max'}
    part_weights : ndarray or None
        ``c_t`` per workload marginal (None: 1 for every query).

    Examples
    --------
    >>> TemplateObjective("linear")
    TemplateObjective(kind='linear', part_weights=None)
    """

    kind: str
    part_weights: np.ndarray | None = None


def template_objective(problem: Problem) -> tuple[TemplateObjective, np.ndarray | None]:
    """The problem's objective over the workload's marginals, and the per-query weights it read (or None).

    ``total``: weight 1 per query; ``relative``: ``1 / ||w_i||^2 = 1 / (w_T^2 out(T))``,
    from each marginal's size (no workload matrix); ``weighted``: the ``weights``
    option, which must be equal within each marginal (the template treats a marginal's
    queries alike); ``max``: the largest variance.

    Parameters
    ----------
    problem : Problem
        Over a marginal workload.

    Returns
    -------
    (TemplateObjective, ndarray or None)

    Raises
    ------
    InputError
        Weights that differ within a marginal, or bad weights for the objective.

    Examples
    --------
    The 1-way marginals of a 2 x 3 table: the marginal on attribute 0 sums 3 cells per query, the other 2:

    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.spec import parse_spec
    >>> W = parse_spec("marginals:2x3:1")
    >>> template_objective(Problem(W, privacy="pure"))
    (TemplateObjective(kind='linear', part_weights=None), None)
    >>> obj, _ = template_objective(Problem(W, privacy="pure", objective="relative"))
    >>> np.round(obj.part_weights, 6).tolist()  # 1 / ||w_i||^2
    [0.333333, 0.5]
    """
    W = problem.workload
    check_weights_objective(problem)
    if problem.objective == "max":
        return TemplateObjective("max"), None
    if problem.objective == "total":
        return TemplateObjective("linear"), None
    _, counts = marginal_variance_terms(W)
    if problem.objective == "relative":
        sizes = np.asarray(W.domain, dtype=float)
        weights = W.weights if isinstance(W, Union) else np.ones(1)
        norms = [float(w) ** 2 * W.n / np.prod(sizes[list(T)]) for w, T in zip(weights, marginal_attribute_sets(W))]
        return TemplateObjective("linear", 1.0 / np.asarray(norms)), None
    weights = query_weights(problem)
    blocks = np.split(weights, np.cumsum(counts)[:-1])
    for t, block in enumerate(blocks):
        if np.ptp(block) > WEIGHTS_RTOL * block.max():
            first = int(np.sum(counts[:t]))
            raise InputError(  # the template's limit, not a bad value: auto skips the method
                f"marginals: option weights must be equal within each marginal (the template treats a marginal's queries alike); "
                f"queries {first}..{first + counts[t] - 1} (marginal {t}) have weights from {block.min():.6g} to {block.max():.6g}; "
                "use minerror-l2 or eigen-design for weights that differ within a marginal"
            )
    return TemplateObjective("linear", np.array([b[0] for b in blocks])), weights


def _svd_bound_reweighted(W: Workload, per_query: np.ndarray) -> float:
    """SVD bound of the workload whose marginal t's queries are scaled by ``sqrt(per_query[t])``.

    ``(sum_U mult(U) sqrt(g_c(U)))^2 / n`` with ``g_c(U) = sum_{T ⊇ U} c_T w_T^2 out(T)``
    (`strategy_opt.marginals.marginal_spectrum` with these weights): a lower bound on
    ``sum_i c_i u_i`` for every strategy of unit L2 (hence L1) sensitivity.
    """
    mult, g, _ = marginal_spectrum(W, per_query)
    return float(np.sum(mult * np.sqrt(np.maximum(g, 0.0)))) ** 2 / W.n


def marginals_strategy(W: Workload, p: int = 1, *, max_iters: int, ftol: float, objective: TemplateObjective | None = None):
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
    (the identity) and all subsets. Every query of the workload's marginal t has
    unit variance ``v_t = (V @ (1/x))_t`` (`strategy_opt.marginals.marginal_variance_terms`),
    so other objectives (`TemplateObjective`) replace ``mult(U) g(U)`` by
    ``sum_t c_t m_t V[t, U]`` (per-query weights c_t), or minimise ``max_t v_t`` through
    smooth maxima ``(sum_t v_t^q)^(1/q)`` annealed over `MAX_ANNEALING`.
    Returns ``(A, value, {subset: theta}, facts)`` or None if W is not a marginal workload
    or has more than `MARGINALS_MAX_ATTRIBUTES` attributes; ``value`` is the objective at A
    (E_p for the total) and ``facts`` has ``objective_lower_bound`` (None for the total: the
    compiler's bounds apply): the SVD bound of the reweighted workload (linear objectives), or for
    ``max`` the largest such bound over two query distributions pi (uniform, and the smooth
    maximum's weights at the optimum), since ``max_i u_i >= sum_i pi_i u_i``. A is a
    `KroneckerMatrix` when one marginal carries all the weight, else a `MarginalsMatrix` (its
    analysis needs no n x n matrix, at any size).

    Parameters
    ----------
    W : Workload
    p : {1, 2}
    max_iters : int
        L-BFGS-B iterations per start.
    ftol : float
        L-BFGS-B's ``ftol``.
    objective : TemplateObjective, optional
        Default: the total.

    Examples
    --------
    A single marginal (attribute 0 of a 2 x 3 table) is best answered by itself: E_1 = its rank, 2.

    >>> from strategy_opt.spec import parse_spec
    >>> A, value, theta, facts = marginals_strategy(parse_spec("identity:2*total:3"), 1, max_iters=200, ftol=1e-12)
    >>> type(A).__name__, round(value, 6), theta
    ('KroneckerMatrix', 2.0, {'10': 1.0})

    For both 1-way marginals the full table (mask ``11``) wins: the identity, ``E_1 = ||W||_F^2 = 6 * 2``.

    >>> round(marginals_strategy(parse_spec("marginals:2x3:1"), 1, max_iters=200, ftol=1e-12)[1], 6)
    12.0
    >>> marginals_strategy(parse_spec("prefix:4"), 1, max_iters=10, ftol=1e-9) is None
    True
    """
    domain = W.domain
    d = len(domain)
    spectrum = marginal_spectrum(W) if d <= MARGINALS_MAX_ATTRIBUTES else None
    if spectrum is None:
        return None
    objective = objective or TemplateObjective("linear", None)
    mult, g, out = spectrum
    bits = subset_bits(d)
    V, counts = marginal_variance_terms(W)
    wt = np.zeros(2**d)
    wt[[subset_mask(T, d) for T in marginal_attribute_sets(W)]] = 1.0  # the workload's own marginals (a start)
    cost = mult * (g if objective.part_weights is None else marginal_spectrum(W, objective.part_weights)[1])  # m @ V, reweighted
    live = np.asarray(V.sum(axis=0)).ravel() > 0

    def eigen_inverse(theta):
        x = superset_sums(theta**2 * out, d)
        if np.any(x[live] <= 0):
            return None
        inv = np.zeros(2**d)
        inv[live] = 1.0 / x[live]
        return inv

    def scaled(theta, e, de):
        """``S(theta) e`` and its gradient, S the squared sensitivity (p = 1: (sum theta)^2; p = 2: sum theta^2)."""
        if p == 1:
            total = theta.sum()
            return total**2 * e, 2.0 * total * e + total**2 * de
        total = float(theta @ theta)
        return total * e, 2.0 * theta * e + total * de

    def linear(theta):
        inv = eigen_inverse(theta)
        if inv is None:
            return math.inf, np.zeros_like(theta)
        e = float(cost @ inv)
        de = -2.0 * theta * out * subset_sums(cost * inv**2, d)  # gradient of the trace term
        return scaled(theta, e, de)

    def smooth_max(theta, q):
        inv = eigen_inverse(theta)
        if inv is None:
            return math.inf, np.zeros_like(theta)
        v = V @ inv
        top = v.max()
        s = float(np.sum((v / top) ** q))
        dv = (v / top) ** (q - 1) / s ** ((q - 1) / q)  # d(sum v^q)^(1/q) / dv
        de = -2.0 * theta * out * subset_sums((V.T @ dv) * inv**2, d)
        return scaled(theta, top * s ** (1.0 / q), de)

    def value(theta):
        if objective.kind == "linear":
            return linear(theta)[0]
        inv = eigen_inverse(theta)
        return math.inf if inv is None else scaled(theta, float((V @ inv).max()), np.zeros_like(theta))[0]

    def minimise(f, theta0):
        with one_blas_thread():
            res = so.minimize(f, theta0, jac=True, method="L-BFGS-B", bounds=so.Bounds(0.0, np.inf), options={"maxiter": max_iters, "ftol": ftol, "gtol": 0.0})
        return res.x / res.x.sum() if res.x.sum() > 0 else theta0

    workload_only = np.where(wt > 0, 1.0, 1e-3)
    with_table = workload_only.copy()
    with_table[-1] = 1.0  # the full contingency table (the identity)
    table_only = np.full(2**d, 1e-3)
    table_only[-1] = 1.0
    starts = [workload_only, with_table, table_only, np.ones(2**d)]
    if objective.kind == "max":
        # under L1 a weight at 0 is a stationary point (x(U) grows with theta^2, the sensitivity with
        # theta), so the max needs more starts: the total's optimum, the table with the total query
        # (marginals:4x4:0+1+2, pure: 7.2 where the four starts above end at 10.24) and random weights
        table_total = table_only.copy()
        table_total[0] = 1.0
        rng = np.random.default_rng(0)
        starts += [minimise(linear, with_table), table_total] + [rng.random(2**d) for _ in range(MAX_RANDOM_STARTS)]
    best, best_value = None, math.inf
    for theta in starts:
        if objective.kind == "linear":
            theta = minimise(linear, theta)
        else:
            for q in MAX_ANNEALING:
                theta = minimise(lambda t, q=q: smooth_max(t, q), theta)
        if (v := value(theta)) < best_value:
            best, best_value = theta, v
    theta = best / best.sum()
    keep = theta > MARGINAL_WEIGHT_FLOOR * theta.max()
    theta = np.where(keep, theta, 0.0)
    facts = {"objective_lower_bound": None}
    if objective.kind == "max":
        inv = eigen_inverse(theta)
        v = V @ inv
        q = MAX_ANNEALING[-1]
        soft = (v / v.max()) ** (q - 1)
        # pi_t: share of the query distribution on marginal t; each of its m_t queries gets pi_t / m_t
        facts["objective_lower_bound"] = max(_svd_bound_reweighted(W, pi / counts) for pi in (counts / counts.sum(), soft / soft.sum()))
    elif objective.part_weights is not None:
        facts["objective_lower_bound"] = _svd_bound_reweighted(W, objective.part_weights)
    kept = np.flatnonzero(keep)
    if kept.size == 1:  # one weighted marginal: a Kronecker product, analysed per factor at any size
        m = int(kept[0])
        A = KroneckerMatrix([np.eye(dd) if bits[m, i] else np.ones((1, dd)) for i, dd in enumerate(domain)])
    else:  # analysed per eigenspace of the marginal algebra at any size (no n x n matrix: 4096 cells took 40 s, 16384 cells 10 GB)
        A = MarginalsMatrix(domain, theta)
    chosen = {"".join(map(str, bits[m])): float(theta[m]) for m in kept}
    return A, float(value(theta)), chosen, facts


@register_method(
    "marginals",
    options=("weights",),
    objectives=("total", "max", "weighted", "relative"),
    privacy=("pure", "approx"),
    source="McKenna et al. PVLDB 2018, Sec. 6 (OPT_M, the marginals template)",
    summary="weighted stack of marginals for a marginal workload (any domain size: analysed per eigenspace of the marginal algebra)",
)
def marginals_template(problem: Problem):
    """HDMM's marginals template for a marginal workload (`marginals_strategy`), under the problem's privacy and objective.

    Objectives ``total``, ``max``, ``relative`` and ``weighted`` (option ``weights``,
    equal within each marginal). For all but the total, ``meta.objective_value`` is
    the objective at the strategy and ``meta.objective_lower_bound`` a bound on its
    optimum over every strategy (kind ``reweighted-svd-bound``, or for ``max``
    ``simplex-weighted-svd-bound``; see `marginals_strategy`).

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("marginals:3x3x3x3:1", privacy="approx", method="marginals")
    >>> s.meta["unit_total_squared_error"] <= solve("marginals:3x3x3x3:1", privacy="approx", method="identity").meta["unit_total_squared_error"]
    True
    >>> m = solve("marginals:2x3x4:1+marginals:2x3x4:2", privacy="approx", method="marginals", objective="max")
    >>> m.meta["objective_lower_bound"] <= m.meta["objective_value"]
    True
    """
    t0 = time.perf_counter()
    W = problem.workload
    if len(W.domain) > MARGINALS_MAX_ATTRIBUTES or marginal_attribute_sets(W) is None:
        raise InputError(
            f"marginals: {W.spec} is not a marginal workload (a union of products of identity and total factors, as marginals:D1xD2x...:K) "
            f"of at most {MARGINALS_MAX_ATTRIBUTES} attributes; use another method (auto)"
        )
    objective, weights = template_objective(problem)
    A, value, chosen, facts = marginals_strategy(W, problem.p, max_iters=min(problem.solver.max_iters, MARGINALS_MAX_ITERS), ftol=problem.solver.tol, objective=objective)
    extra = {"template": "marginals", "marginal_weights": chosen}
    objective_value = None
    if problem.objective == "total":
        extra["template_error"] = value
    else:
        objective_value, lower = value, facts["objective_lower_bound"]
        extra.update(weights_meta(problem, weights))
        extra.update(
            objective_lower_bound=lower,
            objective_lower_bound_kind="simplex-weighted-svd-bound" if objective.kind == "max" else "reweighted-svd-bound",
            objective_relative_gap=relative_gap(value, lower),
        )
    return compile_strategy(A, problem, "marginals", solver="native/L-BFGS-B", status="local-optimum", solve_seconds=time.perf_counter() - t0,
                            objective_value=objective_value, extra=extra)
