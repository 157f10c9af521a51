"""L1 query weighting on a design basis (Li 2013, Sec. 5.1.5, Program 5.1.3, Thm 5.3).

Given design queries q_1..q_k (rows of Q) the epsilon-DP strategy
``A = diag(u) Q`` (u >= 0) has L1 sensitivity ``max_j (|Q|^T u)_j``. Fixing it
at 1, Program 5.1.3 chooses the weights by ::

    minimise  sum_i c_i / u_i^2     s.t.  |Q|^T u <= 1,  u >= 0,

with ``c_i = ||(W Q^+)_{:,i}||_2^2`` (Thm 5.1/5.3). The dissertation prints the
L2 constraint ``(Q o Q)^T u <= 1``; for L1 sensitivity the column sums of ``|A|``
give ``|Q|^T u <= 1`` (notes, Sec. 4.8 and Sec. 7 item 7), which is used here.

Exactness. When Q has full row rank (eigen, wavelet and Fourier bases) the
pseudo-inverse factors, ``A^+ = Q^+ diag(1/u)``, and the objective is exactly
the unit error ``E_1`` of A. When Q has more rows than columns (the
hierarchical basis) ``W Q^+ diag(1/u)`` is one solution X of ``X A = W`` but
not the least-squares one, so the objective is an *upper bound* on ``E_1``
(``||W A^+||_F <= ||X||_F`` for every such X); the compiler reports the true
``E_1``, and the compiler's column completion can only lower it further.

Bases (option ``basis``): ``eigen`` (eigenvectors of ``W^T W``, ``c_i = lambda_i``),
``wavelet`` (Haar, per attribute, Kronecker), ``hierarchical`` (H_b per
attribute, option ``branching``, default 2), ``fourier`` (the characters a
marginal workload needs, the full real Fourier basis otherwise).

Backends. Native (default): a primal log-barrier method with Newton steps on
the k weights; the Newton matrix ``diag(6 c / u^4) + mu B^T diag(1/s^2) B``
(``B = |Q|^T``, s the constraint slacks) is factored densely by Cholesky, or by
sparse LU when B is sparse (tree bases: the matrix couples only nested
intervals, a chordal pattern without fill). Every iterate is certified by the
dual bound below. cvxpy: the same program with ``c @ power(u, -2)`` (power
cones / SOC) through the profile's solver (SCS or Clarabel).

Dual bound (derived for this module). For any ``y >= 0`` on the n
constraints, minimising the Lagrangian over u > 0 and then over the scale of y
gives ::

    optimum >= h(z)^3,   h(z) = sum_i c_i^{1/3} (B^T z)_i^{2/3},   z = y / sum(y),

and the primal point ``u_i ∝ (c_i / (B^T z)_i)^{1/3}`` (scaled to ``max B u = 1``)
is optimal at the dual optimum (the analogue of Program 5.1.1's
``(sum_i sqrt(c_i (B^T y)_i))^2``). The program's status (``meta.program_status``)
is ``optimal`` when the relative gap ``value / bound - 1`` is at most the profile's
``tol``; the strategy's ``solver_status`` is that status only when the strategy is the
program's optimum and its objective is E_1 (full-row-rank bases), ``local-optimum``
after the completion-aware search below, and ``heuristic`` otherwise.

Lower bound (``meta``): the certified (epsilon, delta) bound of
`strategy_opt.pure_bound` (kind ``l2-optimum``, or ``l2-dual`` when its solve
stopped at the time limit), else the SVD bound.

Reported by Li 2013 (Sec. 5.1.5): re-weighting improves the wavelet strategy
by factors 1.2 (all ranges) and 2.3 (random ranges) and Fourier by 2.7 on
low-order marginals. Measured here (benchmarks/pure_dp.py, total squared
error, 2048 cells): 1.04 on all ranges, 1.06 on uniformly sampled random
ranges, 1.76 on 2-way marginals of 11 binary attributes (for the program's
own weights, completed; the identity does better there, 2.19 below the plain
Fourier strategy, and is returned: see `scale_search_against_identity`). The program weighs
the queries *before* the compiler's column completion: on bases whose columns
have unequal ``|Q|`` sums (the real Fourier basis of non-binary attributes)
the completed plain basis can win (8 x 16 x 16, 2-way marginals: factor
0.88 before completion-aware search); `completion_line_search` therefore
evaluates the completed error along the segment from uniform to optimal
weights and keeps the best point (``meta.completion_line_search``), then
`refine_completed_weights` searches locally around it with the completion rows
priced in (``meta.completion_line_search.local_search``; up to `REFINE_MAX_N`
cells, or `REFINE_LARGE_MAX_N` for at most `REFINE_LARGE_MAX_QUERIES` design
queries, within `refine_iteration_budget`: 2-way marginals on 8 x 16 x 16, Fourier
basis, E_1 307572 -> 6144, the identity's, which its pruning reaches). The local search runs even when the optimal
weights load every column equally (up to `REFINE_EQUAL_LOADS_MAX_N` cells): shrinking some design queries and
completing their columns can still pay (hierarchical basis, all ranges on 32
cells: E_1 14527 -> 5996; total on 8 cells: 5.91 -> 1.0015, where the root
row alone gives 1). The search runs from the program's weights, their best
scaling and the plain basis, and then drops weights left at its floor where
that pays (dropping all leaves the identity, which is then returned: it is the
zero weighting completed). On a 1-D hierarchical basis GreedyH's node weights are
a start too, where its tree is the basis's (`weights_of`). Hierarchical basis,
prefix:64: 2084 -> 1056 (GreedyH 1310, identity 2080). Where the local search
does not run (up to `REFINE_LARGE_MAX_N` cells), a completed optimum worse than
the identity is priced at the scalings `IDENTITY_SCALES` of its weights, the
identity included, and the best is returned with a warning
(`scale_search_against_identity`, ``meta.identity_scale_search``; eigen basis,
all ranges on 1024 cells: 1.97e9 -> the identity's 1.79e8).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.optimize as so
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..bases import fourier_matrix, hierarchical_matrix, kron_all, wavelet_matrix
from ..augment import COMPLETION_RTOL
from ..compiler import compile_strategy, reported_error
from ..defaults import EIG_RTOL
from ..exceptions import InputError, OptionError, SolverError, setting
from ..problem import Problem
from ..progress import heartbeat
from ..pure_bound import lower_bound_facts
from ..resources import require_memory
from .greedy_h import greedy_h_matrix
from ..registry import register_method
from ..solvers import SolverProfile, cvxpy_solve_kwargs, solve_cvxpy
from ..threads import one_blas_thread
from ..workload import gram_unit
from ..marginals import marginal_attribute_sets

__all__ = ["weights_of", "BASES", "L1WeightingResult", "design_basis", "weighting_costs", "dual_bound_l1", "solve_l1_weighting", "weighted_basis", "completion_line_search", "scale_search_against_identity", "LINE_SEARCH_POINTS", "refine_completed_weights", "completed_error", "l1_weighting"]

log = logging.getLogger("strategy_opt")

BASES = ("eigen", "wavelet", "fourier", "hierarchical")
#: Barrier parameter reduction per centring stage.
_MU_FACTOR = 0.1
#: Newton steps allowed per centring stage.
_NEWTON_PER_STAGE = 50
#: Centring stops when the Newton decrement squared falls below this share of the barrier parameter.
_CENTRED = 1e-3
#: Fraction of the distance to the boundary a Newton step may travel.
_TO_BOUNDARY = 0.99
#: Seconds between progress lines.
_LOG_EVERY = 2.0
#: Design queries with ``c_i <= _COST_RTOL * max c`` are dropped (the workload does not use them).
_COST_RTOL = 1e-12


@dataclass
class L1WeightingResult:
    """Outcome of `solve_l1_weighting`.

    Attributes
    ----------
    u : ndarray, shape (k,)
        Feasible weights (``max |Q|^T u = 1``).
    value : float
        ``sum_i c_i / u_i^2`` at u.
    dual : float
        Certified lower bound on the optimum.
    iterations : int
        Newton steps (native) or solver iterations (cvxpy).
    status : {'optimal', 'budget', 'stalled'} or the cvxpy status.
    seconds : float
    backend : str

    Examples
    --------
    Two design queries loading one cell each with cost 1: ``u = (1/2, 1/2)``, value ``1/u_1^2 + 1/u_2^2 = 8``, and the dual bound agrees:

    >>> from strategy_opt.solvers import load_profile
    >>> r = solve_l1_weighting(np.array([1.0, 1.0]), np.ones((1, 2)), load_profile("native"))
    >>> np.round(r.u, 6).tolist(), round(float(r.value), 6), round(r.dual, 6), r.status
    ([0.5, 0.5], 8.0, 8.0, 'optimal')
    """

    u: np.ndarray
    value: float
    dual: float
    iterations: int
    status: str
    seconds: float
    backend: str

    @property
    def gap(self) -> float:
        """Certified relative gap ``value / dual - 1``.

        Examples
        --------
        >>> L1WeightingResult(np.ones(1), 1.1, 1.0, 1, "optimal", 0.0, "native").gap  # doctest: +ELLIPSIS
        0.100000000...
        >>> L1WeightingResult(np.ones(1), 1.0, 0.0, 1, "optimal", 0.0, "native").gap
        inf
        """
        return self.value / self.dual - 1.0 if self.dual > 0 else math.inf


def _per_attribute(domain, build):
    return build(domain[0]) if len(domain) == 1 else kron_all([build(d) for d in domain])


def design_basis(workload, basis: str, branching: int = 2, eig: tuple[np.ndarray, np.ndarray] | None = None):
    """Design queries Q (rows) of the named basis for the workload's domain.

    Returns a dense array or a CSR matrix with n columns. ``eigen`` needs the
    Gram eigendecomposition ``eig = (lam, V)`` (computed when not given).

    Parameters
    ----------
    workload : Workload
    basis : {'eigen', 'wavelet', 'hierarchical', 'fourier'}
    branching : int, default 2
        For the hierarchical basis.
    eig : (lam, V), optional
        For the eigen basis.

    Raises
    ------
    InputError
        An unknown basis.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> design_basis(prefix(3), "hierarchical").toarray().astype(int).tolist()
    [[1, 1, 1], [1, 0, 0], [0, 1, 1], [0, 1, 0], [0, 0, 1]]
    """
    domain = workload.domain
    if basis == "eigen":
        lam, V = eig if eig is not None else np.linalg.eigh(workload.gram())
        return V.T
    if basis == "wavelet":
        return _per_attribute(domain, wavelet_matrix)
    if basis == "hierarchical":
        return _per_attribute(domain, lambda d: hierarchical_matrix(d, branching))
    if basis == "fourier":
        sets = marginal_attribute_sets(workload) or [tuple(range(len(domain)))]
        return fourier_matrix(domain, sets)
    raise InputError(f"unknown basis {basis!r}; choose one of {', '.join(BASES)}")


def _orthogonal_rows(Q) -> np.ndarray | None:
    """Squared row norms if the rows of Q are mutually orthogonal, else None."""
    QQ = Q @ Q.T
    QQ = QQ.toarray() if sp.issparse(QQ) else np.asarray(QQ)
    d = np.diag(QQ).copy()
    off = QQ - np.diag(d)
    return d if np.abs(off).max(initial=0.0) <= 1e-10 * d.max() else None


#: Operations per second of the dense solves in `weighting_costs` (one BLAS thread; measured: the
#: hierarchical basis on 4096 cells, 2 n^2 k = 2.7e11 operations, in about 27 s of a 28 s solve).
COST_FLOPS_PER_SECOND = 1e10


def weighting_costs(G: np.ndarray, Q, time_limit: float = math.inf) -> tuple[np.ndarray, bool]:
    """Costs ``c_i = ||(W Q^+)_{:,i}||^2 = (Q^{+T} G Q^+)_{ii}`` and whether the objective is exact.

    Orthogonal rows: ``Q^+ = Q^T diag(1/||q_i||^2)``. Otherwise
    ``Q^+ = (Q^T Q)^{-1} Q^T`` (full column rank, more rows than columns: the
    objective is then an upper bound on E_1) or ``Q^T (Q Q^T)^{-1}`` (full row rank),
    by dense solves of about ``2 n^2 k`` operations that no deadline interrupts: where
    they would take longer than ``time_limit`` seconds (what is left of the solver's;
    `COST_FLOPS_PER_SECOND`), an `InputError` says so before they start.

    Parameters
    ----------
    G : ndarray, shape (n, n)
        The workload Gram matrix.
    Q : ndarray or sparse matrix, shape (k, n)
        The design queries.
    time_limit : float, default inf
        Seconds the dense solves may take.

    Returns
    -------
    (ndarray of shape (k,), bool)
        The costs, and whether the objective is exactly E_1.

    Raises
    ------
    InputError
        When the dense solves would take longer than ``time_limit``.

    Examples
    --------
    The Haar basis of 2 cells, rows (1, 1) and (1, -1) of squared norm 2: ``c_i = q_i G q_i^T / 4``.

    >>> from strategy_opt.workload import identity, total
    >>> Q = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> c, exact = weighting_costs(total(2).gram(), Q)  # J: 4 / 4, then 0
    >>> c.tolist(), exact
    ([1.0, 0.0], True)
    >>> weighting_costs(identity(2).gram(), Q)[0].tolist()  # I: 2 / 4 each
    [0.5, 0.5]
    """
    k, n = Q.shape
    norms = _orthogonal_rows(Q)
    if norms is not None:
        QG = np.asarray(Q @ G)
        quad = np.asarray(sp.csr_matrix(Q).multiply(QG).sum(axis=1)).ravel() if sp.issparse(Q) else np.einsum("ij,ij->i", Q, QG)
        return quad / norms**2, True
    seconds = 2.0 * n * n * k / COST_FLOPS_PER_SECOND
    if seconds > time_limit:
        raise InputError(
            f"the costs of {k:,} non-orthogonal design queries on {n:,} cells take about {seconds:.0f} s of dense solves "
            f"(no deadline can stop them), beyond the {time_limit:.3g} s left of the solver's time_limit; raise time_limit or use "
            "an orthogonal basis (wavelet, fourier, eigen)"
        )
    Qd = Q.toarray() if sp.issparse(Q) else np.asarray(Q)
    if k >= n:
        cf = la.cho_factor(Qd.T @ Qd, lower=True)
        P = la.cho_solve(cf, Qd.T)  # Q^+ (n x k)
        exact = k == n
    else:
        cf = la.cho_factor(Qd @ Qd.T, lower=True)
        P = la.cho_solve(cf, Qd).T  # Q^T (Q Q^T)^{-1}
        exact = True
    return np.einsum("ji,ji->i", P, G @ P), exact  # diag(P^T G P) with one BLAS product (a three-operand einsum: 89 s at 4096 cells)


def dual_bound_l1(c: np.ndarray, B, y: np.ndarray) -> float:
    """Lower bound ``h(z)^3`` on Program 5.1.3 from any ``y >= 0`` (``z = y / sum y``).

    Parameters
    ----------
    c : ndarray, shape (k,)
        The costs.
    B : ndarray or sparse matrix, shape (n, k)
        The loads ``|Q|^T``.
    y : ndarray, shape (n,)
        Dual weights (negative entries are clipped to 0).

    Returns
    -------
    float
        0.0 when y is all zero.

    Examples
    --------
    Two queries loading the one cell, cost 1 each: the optimum is ``u = (1/2, 1/2)``, value 8, and uniform y certifies it
    (``h = 1^(2/3) + 1^(2/3) = 2``):

    >>> dual_bound_l1(np.array([1.0, 1.0]), np.ones((1, 2)), np.ones(1))
    8.0
    """
    y = np.clip(np.asarray(y, dtype=float), 0.0, None)
    if y.sum() <= 0:
        return 0.0
    t = np.clip(np.asarray(B.T @ (y / y.sum())).ravel(), 0.0, None)
    return float((np.cbrt(c) * t ** (2.0 / 3.0)).sum() ** 3)


def _primal_from_dual(c: np.ndarray, B, y: np.ndarray) -> np.ndarray:
    t = np.asarray(B.T @ y).ravel()
    u = np.cbrt(c / np.maximum(t, np.finfo(float).tiny * max(t.max(), 1.0)))
    return u / np.asarray(B @ u).max()


def _newton_matrix(c, u, B, d) -> np.ndarray | sp.spmatrix:
    if sp.issparse(B):
        H = (B.T @ sp.diags(d) @ B).tocsc()
        return H + sp.diags(6.0 * c / u**4)
    H = (B.T * d) @ B
    H[np.diag_indices_from(H)] += 6.0 * c / u**4
    return H


def _solve_newton(H, rhs):
    if sp.issparse(H):
        return spla.splu(H, permc_spec="MMD_AT_PLUS_A").solve(rhs)
    return la.cho_solve(la.cho_factor(H, lower=True, check_finite=False), rhs, check_finite=False)


def _solve_native(c: np.ndarray, B, profile: SolverProfile) -> L1WeightingResult:
    t0 = time.perf_counter()
    n = B.shape[0]
    u = np.full(c.size, 0.5 / np.asarray(B @ np.ones(c.size)).max())
    s = 1.0 - np.asarray(B @ u).ravel()
    f = float((c / u**2).sum())
    mu = f / n
    best_u, best_val, best_dual = u / (1.0 - s.min()), f * (1.0 - s.min()) ** 2, 0.0
    iters, status, last_log = 0, "budget", t0
    while iters < profile.max_iters and time.perf_counter() - t0 < profile.time_limit:
        for _ in range(_NEWTON_PER_STAGE):
            g = -2.0 * c / u**3 + mu * np.asarray(B.T @ (1.0 / s)).ravel()
            H = _newton_matrix(c, u, B, mu / s**2)
            try:
                du = -_solve_newton(H, g)
            except (la.LinAlgError, RuntimeError) as exc:
                raise SolverError(f"l1-weighting (native): Newton system singular ({exc}); try {setting('solver', 'clarabel')}") from None
            iters += 1
            ds = -np.asarray(B @ du).ravel()
            step = 1.0
            for x, dx in ((u, du), (s, ds)):
                neg = dx < 0
                if neg.any():
                    step = min(step, _TO_BOUNDARY * float((-x[neg] / dx[neg]).min()))
            phi = f - mu * np.log(s).sum()
            while True:
                un, sn = u + step * du, s + step * ds
                fn = float((c / un**2).sum())
                if fn - mu * np.log(sn).sum() <= phi + 1e-4 * step * float(g @ du) or step < 1e-12:
                    break
                step *= 0.5
            u, s, f = un, sn, fn
            if -float(g @ du) <= _CENTRED * mu or step < 1e-12:
                break
        y = mu / s
        dual = dual_bound_l1(c, B, y)
        scale = 1.0 - s.min()
        recovered = _primal_from_dual(c, B, y)
        for cu, cv in ((u / scale, f * scale**2), (recovered, float((c / recovered**2).sum()))):
            if cv < best_val:
                best_u, best_val = cu, cv
        best_dual = max(best_dual, dual)
        gap = best_val / best_dual - 1.0 if best_dual > 0 else math.inf
        if time.perf_counter() - last_log > _LOG_EVERY:
            log.info("l1-weighting: newton step %d, value %.10g, dual bound %.10g, gap %.2e", iters, best_val, best_dual, gap)
            last_log = time.perf_counter()
        if gap <= profile.tol:
            status = "optimal"
            break
        if mu < 1e-15 * best_val / n:
            status = "stalled"
            break
        mu *= _MU_FACTOR
    return L1WeightingResult(best_u, float(best_val), float(best_dual), iters, status, time.perf_counter() - t0, "native")


def _solve_cvxpy(c: np.ndarray, B, profile: SolverProfile) -> L1WeightingResult:
    import cvxpy as cp

    t0 = time.perf_counter()
    u = cp.Variable(c.size, nonneg=True)
    con = B @ u <= 1
    prob = cp.Problem(cp.Minimize(c @ cp.power(u, -2)), [con])
    name = (profile.solver or "CLARABEL").upper()
    kw = cvxpy_solve_kwargs(profile, name)
    try:
        with warnings.catch_warnings(), heartbeat(f"l1-weighting: {name}", profile.time_limit):
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")  # reported through the status
            solve_cvxpy(prob, name, verbose=profile.verbose, **kw)
    except cp.error.SolverError as exc:
        raise SolverError(f"l1-weighting (cvxpy/{name}): {exc}; try {setting('solver', 'native')}") from None
    if u.value is None:
        raise SolverError(f"l1-weighting (cvxpy/{name}) returned no solution (status {prob.status}); try {setting('solver', 'native')}")
    uv = np.clip(np.asarray(u.value, dtype=float), 0.0, None)
    cover = np.asarray(B @ uv).max()
    uv = uv / cover
    value = float((c / uv**2).sum()) if np.all(uv > 0) else math.inf
    y = np.asarray(con.dual_value, dtype=float) if con.dual_value is not None else np.ones(B.shape[0])
    dual = dual_bound_l1(c, B, y)
    v = _primal_from_dual(c, B, y)
    if float((c / v**2).sum()) < value:
        uv, value = v, float((c / v**2).sum())
    iters = int(prob.solver_stats.num_iters or 0) if prob.solver_stats is not None else 0
    return L1WeightingResult(uv, value, float(dual), iters, str(prob.status), time.perf_counter() - t0, f"cvxpy/{name}")


def solve_l1_weighting(c, B, profile: SolverProfile) -> L1WeightingResult:
    """Solve Program 5.1.3 ``min sum c_i/u_i^2 s.t. B u <= 1, u >= 0`` (``B = |Q|^T``, n x k).

    Parameters
    ----------
    c : array_like, shape (k,)
        Positive costs.
    B : ndarray or sparse matrix, shape (n, k)
        Non-negative loads ``|Q|^T``.
    profile : SolverProfile
        ``native`` (barrier Newton) or a cvxpy profile; ``tol`` is the target
        relative gap, ``max_iters`` / ``time_limit`` the budget.

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.solvers import load_profile
    >>> r = solve_l1_weighting(np.array([1.0, 8.0]), np.array([[1.0, 1.0]]), load_profile("native"))
    >>> np.round(r.u, 6).tolist(), round(r.value, 6)
    ([0.333333, 0.666667], 27.0)
    """
    c = np.asarray(c, dtype=float)
    if c.ndim != 1 or B.shape[1] != c.size or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise InputError("Program 5.1.3 needs positive finite costs c (k,) and loads B (n, k)")
    if profile.backend == "cvxpy":
        return _solve_cvxpy(c, B, profile)
    return _solve_native(c, B, profile)


@register_method(
    "l1-weighting",
    options=("basis", "branching"),
    privacy=("pure",),
    source="Li 2013, Sec. 5.1.5, Program 5.1.3 (L1 constraint |Q|^T u <= 1)",
    summary="epsilon-DP: optimal L1 weights of a design basis (option basis: eigen|wavelet|fourier|hierarchical, default wavelet); native barrier solver or cvxpy",
)
def l1_weighting(problem: Problem):
    """Weighted design basis ``A = diag(u) Q`` with the optimal Program 5.1.3 weights.

    Options: ``basis`` (default ``wavelet``), ``branching`` (hierarchical basis, default 2).

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("all-range:16", privacy="pure", method="l1-weighting", basis="wavelet")
    >>> s.meta["weighting_exact"], s.meta["weighting_relative_gap"] <= 1e-6
    (True, True)
    """
    if problem.privacy != "pure":
        raise InputError(f"l1-weighting is the epsilon-DP weighting (L1 sensitivity); use {setting('privacy', 'pure')}")
    t0 = time.perf_counter()
    A, res, extra = weighted_basis(problem)
    scaled = extra.get("identity_scale_search")
    # what A is, at the top of the metadata: the weighting_* fields describe the program's optimum, before completion
    extra["l1_weighting_returned"] = "weighted basis"
    if scaled is not None:  # here, for the method's user; auto's candidates (weighted_basis) are compared silently
        program, best = scaled["points"]["1.0"], scaled["chosen_scale"]
        extra["l1_weighting_returned"] = "identity (the zero weighting)" if best == 0.0 else f"weights scaled by {best:g}"
        identity = scaled["points"]["0.0"]
        log.warning(
            "l1-weighting: the completed weighting of the %d design queries has E_1 %.6g, %.3gx the identity's %.6g; %s",
            extra["design_queries"], program, program / identity, identity,
            "no scaling of it beats the identity: returning the identity (the zero weighting, completed)" if best == 0.0
            else f"returning the weights scaled by {best:g} (E_1 {scaled['points'][str(best)]:.6g})",
        )
    local = extra.get("completion_line_search", {}).get("local_search") or {}
    if local.get("design_queries_kept") == 0 and local.get("result") is not None and local["result"] < local["start"]:
        extra["l1_weighting_returned"] = "identity (every design query dropped)"
        log.warning(
            "l1-weighting: every weighting of the %d design queries of the %s basis found loses to the identity once completed "
            "(the program's, completed: E_1 %.6g); returning the identity (E_1 %.6g)",
            extra["design_queries"], extra["basis"], local["start"], local["result"],
        )
    status = extra.pop("strategy_status")
    if local.get("stopped_by_time_limit"):  # the search's end depends on the machine's speed
        status = "time_limit"
    bound = lower_bound_facts(problem.workload, time.perf_counter() - t0)
    extra.update(bound.pop("extra"))
    with _search_threads(problem.workload.n):  # compiled on the thread count it was searched with (meta.blas_threads)
        return compile_strategy(A, problem, "l1-weighting", solver=res.backend, status=status, solve_seconds=time.perf_counter() - t0, extra=extra, **bound)


def _search_threads(n: int):
    """One BLAS thread up to `REFINE_LARGE_MAX_N` cells, where the local search runs, else the process's setting.

    The search's end follows the rounding, which the thread count changes (Fourier basis on prefix:200:
    E_1 11749 on one thread, the identity's 20100 on two).
    """
    return one_blas_thread() if n <= REFINE_LARGE_MAX_N else contextlib.nullcontext()


#: Dense k x k matrices over the k design queries l1-weighting holds at once (their Gram and the Newton system with its factor).
DESIGN_GRAM_COPIES = 3


#: Points ``t`` of the completion-aware search on the segment from the uniform weights (t = 0) to the Program 5.1.3 optimum (t = 1).
LINE_SEARCH_POINTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _completed(Q, u: np.ndarray):
    """``[diag(u) Q; diag(1 - |Q|^T u)]`` without its zero rows: completed to unit column L1 norms, as `completed_error` prices it.

    Dense for a dense basis, CSR for a sparse one.
    """
    v = 1.0 - np.asarray(abs(Q).T @ u).ravel()
    v = np.where(v > COMPLETION_RTOL, v, 0.0)  # a deficit at rounding level is a complete column (as the compiler's rule)
    if sp.issparse(Q):
        kept = sp.csr_matrix(Q)[np.flatnonzero(u > 0)]
        return sp.vstack([sp.diags(u[u > 0]) @ kept, sp.identity(v.size, format="csr")[np.flatnonzero(v)] @ sp.diags(v)], format="csr")
    return np.vstack([(Q * u[:, None])[u > 0], np.diag(v)[v > 0]])


def _weighted(Q, u: np.ndarray):
    """``diag(u) Q`` for a dense or sparse design basis."""
    return sp.diags(u) @ Q if sp.issparse(Q) else u[:, None] * Q


def _compiled_error(Q, u: np.ndarray, W) -> float:
    """``E_1`` of ``diag(u) Q`` as the compiler will report it (column completion, numerical null space removed)."""
    return reported_error(_weighted(Q, u), W, 1)[1]


def _equal_loads(loads: np.ndarray) -> bool:
    return bool(loads.max() - loads.min() <= 1e-9 * loads.max())


def completion_line_search(u: np.ndarray, Q, B, W) -> tuple[np.ndarray, dict]:
    """Weights on the segment from uniform to ``u`` whose *completed* strategy has the least ``E_1``.

    Program 5.1.3 prices the design queries before the compiler's column
    completion (`strategy_opt.augment`). When the basis's columns carry unequal
    loads ``|Q|^T 1`` (the real Fourier basis of non-binary attributes, eigen
    bases), the completion rows of the plain basis can be worth more than the
    re-weighting (8 x 16 x 16, 2-way marginals: the weighted basis alone is 0.88x
    the completed plain one). Every point ``t u + (1 - t) u_0`` of the segment
    from the uniform weights ``u_0 = 1 / max(|Q|^T 1)`` is feasible (the
    constraint is convex), so the completed ``E_1`` is evaluated at
    `LINE_SEARCH_POINTS` and the best point is returned: never worse than the
    completed plain basis nor than the completed optimum of the program.
    Nothing is searched when both end points load every column equally
    (completion adds nothing, e.g. Haar wavelets): returns ``(u, {})``.

    Returns
    -------
    (ndarray, dict)
        The chosen weights, and the completed E_1 at each point with the chosen ``t`` (empty when nothing was searched).

    Examples
    --------
    The Haar basis loads both cells equally: nothing to search.

    >>> from strategy_opt.workload import identity
    >>> Q = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> completion_line_search(np.array([0.5, 0.5]), Q, np.abs(Q).T, identity(2))
    (array([0.5, 0.5]), {})
    """
    u0 = np.full(u.size, 1.0 / float(np.asarray(B @ np.ones(u.size)).max()))
    if _equal_loads(np.asarray(B @ u0)) and _equal_loads(np.asarray(B @ u)):
        return u, {}
    errors = {}
    for t in LINE_SEARCH_POINTS:
        ut = t * u + (1.0 - t) * u0
        errors[t] = _compiled_error(Q, ut, W)
    best = min(errors, key=errors.get)
    log.info("l1-weighting: completed E_1 along uniform -> optimal weights %s; t = %g chosen", {t: f"{e:.6g}" for t, e in errors.items()}, best)
    return best * u + (1.0 - best) * u0, {"points": {str(t): float(e) for t, e in errors.items()}, "chosen_t": float(best)}


#: Scalings ``s u`` of the program's weights priced (completed) by `scale_search_against_identity`; 0 is the identity.
IDENTITY_SCALES = (0.5, 0.2, 0.1, 0.03, 0.01, 0.0)


def scale_search_against_identity(
    u: np.ndarray, Q, W, G: np.ndarray, error: float | None = None, scales: tuple[float, ...] = IDENTITY_SCALES
) -> tuple[object | None, dict]:
    """Scalings of ``u`` when the completed Program 5.1.3 optimum is worse than the identity, where the local search does not run.

    Every ``s u`` with ``0 <= s <= 1`` is feasible, and ``s = 0`` completes to the
    identity, whose ``E_1`` is ``trace(W^T W)``. Past `REFINE_MAX_N` cells the
    eigen and Fourier bases of range workloads are many times worse than the
    identity at the program's optimum (all-range:1024, eigen basis: 1.97e9 against
    1.79e8; shrinking the weights approaches the identity monotonically there), so
    when the optimum loses to the identity the scalings ``scales`` (default `IDENTITY_SCALES`; the
    identity alone past `REFINE_LARGE_MAX_N` cells, where each scaling is a dense analysis) are priced
    and the best is returned: the strategy (``diag(s u) Q`` completed to unit
    column norms, or the identity) and the prices (``E_1`` without the workload's
    log scale, as `reported_error`); ``(None, {})`` when the optimum beats the
    identity (nothing priced beyond it). ``error``: u's compiled ``E_1`` when
    already known (`completion_line_search` priced it).

    Examples
    --------
    On the identity workload the Haar strategy ``diag(1/2, 1/2) Q`` has ``A^T A = I / 2``, so ``E_1 = 4``, twice the identity's 2:
    every scaling is priced and the identity (scale 0) wins.

    >>> from strategy_opt.workload import identity
    >>> Q = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> A, facts = scale_search_against_identity(np.array([0.5, 0.5]), Q, identity(2), identity(2).gram())
    >>> A.toarray().tolist(), facts["chosen_scale"], facts["points"]["1.0"], facts["points"]["0.0"]
    ([[1.0, 0.0], [0.0, 1.0]], 0.0, 4.0, 2.0)
    """
    identity_error = float(np.trace(G))
    errors = {1.0: _compiled_error(Q, u, W) if error is None else error}
    if errors[1.0] <= identity_error:
        return None, {}
    for s in scales:  # the compiler completes to the largest column norm: complete to 1 here, or every scaling is u's
        errors[s] = identity_error if s == 0.0 else reported_error(_completed(Q, s * u), W, 1)[1]
    best = min(errors, key=errors.get)
    log.info("l1-weighting: completed E_1 at scalings of the program's weights %s; %g chosen", {s: f"{e:.6g}" for s, e in errors.items()}, best)
    A = sp.identity(W.n, format="csr") if best == 0.0 else _completed(Q, best * u)
    return A, {"points": {str(s): float(e) for s, e in errors.items()}, "chosen_scale": float(best)}


def _completion_rows(A, Q, u: np.ndarray, refined, search: dict, scale_search: dict) -> int:
    """Rows appended to the weighted design queries by the searches (the compiler adds its own completion rows to this count)."""
    if refined is not None:
        return search["local_search"]["completion_rows"]
    if scale_search:  # the identity (scale 0) is the zero weighting, completed
        return int(A.shape[0] - (np.count_nonzero(u) if scale_search["chosen_scale"] > 0 else 0))
    return int(A.shape[0] - Q.shape[0])


#: `refine_completed_weights`: weights stay above this fraction of the uniform weight (every design query stays in the strategy) ...
REFINE_FLOOR = 1e-3
#: ... and the local search stops after this many SLSQP iterations; it runs up to `REFINE_MAX_N` cells
#: (one n x n eigendecomposition per evaluation: ~0.05 s at 512 cells, ~3 s at 2048) ...
REFINE_MAX_ITERS, REFINE_MAX_N = 200, 512
#: ... and up to `REFINE_LARGE_MAX_N` cells when it weighs at most `REFINE_LARGE_MAX_QUERIES` design
#: queries (SLSQP's dense subproblem grows with their number, and the time limit is checked between its
#: iterations). Measured with one BLAS thread, 2-way marginals, Fourier basis (289 and 473 queries):
#: 8 x 16 x 8 113240 -> 3077 (+6.5 s), 8 x 16 x 16 307572 -> 6253 (+17 s); identity gives 3072 and
#: 6144: the weights shrink until the completion rows make an almost-identity strategy (dropping the
#: weights left at the floor then returns the identity itself, `REFINE_PRUNE`).
REFINE_LARGE_MAX_N, REFINE_LARGE_MAX_QUERIES = 2048, 512
#: ... and within an iteration budget fixed by the problem's size, not by the clock, so that the same input gives the same
#: strategy whatever the machine's load (a 20 s deadline ended all-range:300, hierarchical basis, anywhere in 1.93e6-2.62e6
#: and once at the identity, 4.55e6). The budget is this many seconds of a modelled iteration (one BLAS thread, unloaded) ...
REFINE_BUDGET_SECONDS = 20.0
#: ... modelled as ``a k^3 + b n^3`` seconds for k design queries on n cells: SLSQP's dense subproblem plus its ~2
#: evaluations (an n x n eigendecomposition each: 0.011 s at 256 cells, 0.075 s at 512, 0.41 s at 1024, 2.8 s at 2048).
#: Measured per iteration: 0.15 s (n = 256, k = 511), 0.17 s (300, 599), 1.04 s (512, 1023), 0.04 s (256, 256); the
#: model gives 0.13, 0.18, 1.07, 0.03. Larger searches run over it (3 evaluations an iteration; k = 1377 on 225 cells:
#: 3.3 s an iteration against 2.2): the whole search took 26 s at load 0.7 on prefix:433 (wavelet basis) and 29 s on
#: marginals:5x5x9:1 (hierarchical), and on a loaded machine it takes proportionally longer (70-90 s at load 4), where
#: the 20 s deadline it replaces stopped it at 20 s with whatever it had.
REFINE_SECONDS_PER_K3, REFINE_SECONDS_PER_N3 = 8.5e-10, 1.2e-9


def refine_iteration_budget(n: int, k: int, starts: int) -> int:
    """SLSQP iterations the completion-aware local search may spend over ``starts`` starts (k design queries, n cells).

    `REFINE_BUDGET_SECONDS` of the modelled iteration time: at least one in all, at most `REFINE_MAX_ITERS` per start
    (past the budget's share of the earlier starts a start is only priced as given).

    Examples
    --------
    >>> refine_iteration_budget(64, 127, 3), refine_iteration_budget(300, 599, 3), refine_iteration_budget(2048, 473, 4)
    (600, 92, 1)
    """
    seconds = REFINE_SECONDS_PER_K3 * float(k) ** 3 + REFINE_SECONDS_PER_N3 * float(n) ** 3
    return int(min(REFINE_MAX_ITERS * starts, max(1, REFINE_BUDGET_SECONDS // seconds)))


#: From weights that load every column equally the search runs up to this many cells (all ranges, Haar
#: wavelet: 256 cells 0.3 s -> 1.6 s for E_1 0.84x; at 512 cells 20 s without a gain).
REFINE_EQUAL_LOADS_MAX_N = 256
#: After the search, weights at most each of these multiples of its floor are dropped where that lowers
#: the completed E_1 (the zero weighting, the identity, is priced beside them).
REFINE_PRUNE = (1.5, 10.0, 100.0)
#: Scalings of the weights tried as SLSQP starts (1: the segment search's best point).
REFINE_START_SCALES = (1.0, 0.5, 0.2, 0.1, 0.03, 0.01)


def completed_error(u: np.ndarray, Q: np.ndarray, G: np.ndarray) -> tuple[float, np.ndarray]:
    """``E_1`` of ``diag(u) Q`` completed to unit column L1 norms, when ``max |Q|^T u <= 1``, and its gradient in u.

    The completed strategy is ``[diag(u) Q; diag(v)]`` with ``v = 1 - |Q|^T u``
    (`strategy_opt.augment`: one row per deficient column), so ``E_1 =
    trace(G M^+)`` with ``M = Q^T diag(u)^2 Q + diag(v)^2``. With every
    ``u_i > 0`` the rows of Q (which span W's rows) lie in M's range, so the
    pseudo-inverse is the right inverse on G's support.

    Parameters
    ----------
    u : ndarray, shape (k,)
        Weights with ``|Q|^T u <= 1``.
    Q : ndarray, shape (k, n)
        Design queries (dense).
    G : ndarray, shape (n, n)
        The workload Gram matrix.

    Returns
    -------
    (float, ndarray of shape (k,))

    Examples
    --------
    The Haar basis of 2 cells at weights 1/2 loads every column fully (no completion row): ``M = I / 2``, ``E_1 = trace(I) * 2``:

    >>> Q = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> e1, grad = completed_error(np.array([0.5, 0.5]), Q, np.eye(2))
    >>> e1, grad.tolist()
    (4.0, [-8.0, -8.0])
    """
    absQ = np.abs(Q)
    v = np.maximum(1.0 - absQ.T @ u, 0.0)
    M = Q.T @ (u[:, None] ** 2 * Q) + np.diag(v**2)
    lam, V = np.linalg.eigh(M)
    keep = lam > EIG_RTOL * lam.max()
    Mi = (V[:, keep] / lam[keep]) @ V[:, keep].T
    K = Mi @ G @ Mi  # -d trace(G M^+) / dM
    grad = -2.0 * u * np.einsum("ij,ij->i", Q @ K, Q) + 2.0 * absQ @ (np.diag(K) * v)  # diag(Q K Q^T) by one BLAS product
    return float(np.einsum("ij,ji->", G, Mi)), grad


def weights_of(A, Q) -> np.ndarray | None:
    """The weights u with ``diag(u) Q = A`` up to row order and zero rows, when every row of A is a multiple of a row of Q with its support; else None.

    Examples
    --------
    >>> import numpy as np
    >>> Q = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    >>> weights_of(np.array([[0.0, 0.5], [0.25, 0.25]]), Q).tolist()
    [0.25, 0.0, 0.5]
    >>> weights_of(np.array([[0.5, 0.25]]), Q) is None  # not a multiple of a row of Q
    True
    """
    A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=float)
    Q = np.asarray(Q.toarray() if sp.issparse(Q) else Q, dtype=float)
    rows = {np.flatnonzero(q).tobytes(): i for i, q in enumerate(Q)}
    u = np.zeros(Q.shape[0])
    for a in A:
        support = np.flatnonzero(a)
        if support.size == 0:
            continue
        i = rows.get(support.tobytes())
        if i is None:
            return None
        ratio = a[support] / Q[i, support]
        if np.ptp(ratio) > 1e-9 * np.abs(ratio).max() or ratio[0] < 0:
            return None
        u[i] += ratio[0]
    return u


def refine_completed_weights(u: np.ndarray, Q, W, G: np.ndarray, deadline: float, extra_starts: dict | None = None) -> tuple[np.ndarray | None, dict]:
    """Local search (SLSQP) on the *completed* ``E_1`` over weights with ``|Q|^T u <= 1``, from ``u``, the plain basis and ``extra_starts``.

    Returns the completed strategy ``[diag(u) Q; diag(1 - |Q|^T u)]`` (its
    completion rows are part of the optimised object: the compiler's own
    completion pads to the largest column norm, not to 1) if it beats the
    start, else None, and the search facts.

    Program 5.1.3 prices the design queries alone; when the basis loads the
    columns unequally the completion rows are part of the strategy, and moving
    weight between design queries and completion rows can pay. Measured on
    2-way marginals (completed E_1 against the completed plain Fourier basis):
    3 x 5 x 7 0.745, 5 x 5 x 5 0.948, 6 x 6 x 6 0.770, 3 x 3 x 3 0.103 and
    8 x 8 x 8 0.04: on the last two Fourier is 10-25 x the identity, and the
    weights shrink until the completion rows make an almost-identity strategy.
    The result is returned only if its completed ``E_1``, as the compiler
    computes it, beats the start's. The searches share the iteration budget
    `refine_iteration_budget` (the same input gives the same result under any
    load); ``deadline`` (a `time.perf_counter` value: the solver profile's
    time limit) stops them early, and the facts then name the starts it cut
    (``stopped_by_time_limit``).

    Examples
    --------
    A start too small for the search's floor is not searched:

    >>> from strategy_opt.workload import identity
    >>> Q = np.array([[1.0, 1.0], [1.0, -1.0]])
    >>> refine_completed_weights(np.array([1.0, 1e-9]), Q, identity(2), np.eye(2), time.perf_counter() + 5)
    (None, {'skipped': 'smallest weight 1e-09 below the search floor 0.0005'})
    """
    Q = Q.toarray() if sp.issparse(Q) else np.asarray(Q)
    absQ = np.abs(Q)
    G = G / gram_unit(G)  # SLSQP's ftol is absolute: E_1 near 1 (a workload scaled by 1e60 stopped it at once)
    u = u / float((absQ.T @ u).max())  # unit sensitivity: the constraint is tight at the start
    floor = REFINE_FLOOR / float(absQ.sum(axis=0).max())
    # scalings of u: shrinking the design queries hands budget to the completion rows (towards the
    # identity), which SLSQP alone does not always find from the tight start
    scales = [sc for sc in REFINE_START_SCALES if sc * u.min() >= floor]
    if not scales:  # a weight below the search's floor at every start scale (badly scaled workload rows)
        log.info("l1-weighting: completion-aware local search skipped: smallest weight %.3g is below its floor %.3g", u.min(), floor)
        return None, {"skipped": f"smallest weight {u.min():.3g} below the search floor {floor:.3g}"}
    # SLSQP from three starts, best end kept: the start's weights (tight), their best scaling, and the plain
    # basis (uniform, tight). The scaling that starts lowest is often near the identity and ends there
    # (hierarchical basis, prefix:64: 2084 from it, 1057 from the tight uniform start, identity 2080)
    uniform = np.full(Q.shape[0], 1.0 / float(absQ.sum(axis=0).max()))
    starts = {"weights": u, "best scaling": min((sc * u for sc in scales), key=lambda x: completed_error(x, Q, G)[0]), "uniform": uniform, **(extra_starts or {})}
    if np.array_equal(starts["best scaling"], u):
        del starts["best scaling"]
    # the iteration budget, not the clock, ends a search (the same input gives the same strategy under any load); a
    # start that converges early leaves its iterations to the next. The deadline (the solver profile's time limit)
    # is a hard stop only, and says so in the facts
    budget = refine_iteration_budget(Q.shape[1], Q.shape[0], len(starts))
    best, ends, iterations, stopped = None, {}, 0, []  # ends: completed E_1 (unit Gram) where each start's search stopped
    for i, (name, u0) in enumerate(starts.items()):
        share = min(REFINE_MAX_ITERS, -(-(budget - iterations) // (len(starts) - i)))  # the first starts take the rounding
        if share <= 0:  # budget spent (large domains): the start is priced as given below
            continue
        if time.perf_counter() > deadline:
            stopped.append(name)
            continue

        def stop(_):
            if time.perf_counter() > deadline:
                raise StopIteration

        with one_blas_thread():  # SLSQP's many small steps: 4.7 s on one thread, 26 s on two under load (Fourier, 256 cells)
            res = so.minimize(
                completed_error, np.clip(u0, floor, None), args=(Q, G), jac=True, method="SLSQP", callback=stop,
                bounds=so.Bounds(floor, np.inf), constraints=[so.LinearConstraint(absQ.T, -np.inf, 1.0)],
                options={"maxiter": share, "ftol": 1e-10},
            )
        if time.perf_counter() > deadline:
            stopped.append(name)
        iterations += int(res.nit)
        u_end = np.clip(res.x, floor, None)
        u_end = u_end / max(1.0, float((absQ.T @ u_end).max()))  # SLSQP may end a hair outside the constraint
        ends[name] = completed_error(u_end, Q, G)[0]
        if best is None or ends[name] < ends[best[0]]:
            best = (name, u_end)
    if stopped:
        log.warning("l1-weighting: the solver profile's time limit stopped the completion-aware local search (%s): its result depends on the machine's speed", ", ".join(stopped))
    before = _compiled_error(Q, u, W)
    # candidates beside the search's best end: its small weights dropped where that pays, the identity (every
    # weight dropped: the completion rows alone, which the floor kept the search 0.05-0.2% above on prefix:16 and
    # all-range:64), and every start as it is, below the search's floor too (GreedyH's zeros)
    candidates = {"none (the identity)": np.zeros_like(u)}
    if best is not None:
        candidates[best[0]] = best[1]
        for factor in REFINE_PRUNE:
            small = best[1] <= factor * floor
            if small.any():
                candidates[f"{best[0]}, weights <= {factor:g} x floor dropped"] = np.where(small, 0.0, best[1])
    candidates.update({f"{name} (as given)": u0 for name, u0 in starts.items()})
    # each also scaled up until its most loaded column is full: completing that to unit norms is the compiler's rule
    # (complete to the largest column norm, never raising the sensitivity), which the search's end can beat
    # (prefix:100, hierarchical: 2104.54 against 2106.64 completed to 1 from a largest load of 0.9995)
    for name, cand in list(candidates.items()):
        load = float(np.asarray(absQ.T @ cand).max(initial=0.0))
        if 0.0 < load < 1.0 - COMPLETION_RTOL:
            candidates[f"{name}, scaled to full load"] = cand / load
    after, A, u_final, chosen = math.inf, None, None, None
    for name, cand in candidates.items():
        completed = _completed(Q, cand)
        try:
            E = reported_error(completed, W, 1)[1]
        except InputError:  # dropped queries the workload needs
            continue
        if E < after:
            after, A, u_final, chosen = E, completed, cand, name
    facts = {"start": float(before), "result": None, "iterations": iterations, "iteration_budget": budget, "ends": {k: float(e) for k, e in ends.items()}}
    if stopped:
        facts["stopped_by_time_limit"] = stopped
    if A is None:
        return None, facts
    log.info("l1-weighting: completion-aware local search: completed E_1 %.8g -> %.8g (%s; %d of %d SLSQP iterations)", before, after, chosen, iterations, budget)
    facts.update({
        "result": float(after), "best_start": chosen,
        "design_queries_kept": int(np.count_nonzero(u_final)), "completion_rows": int(A.shape[0] - np.count_nonzero(u_final)),
    })
    return (A if after < before * (1 - 1e-12) else None), facts


def _greedy_h_start(W, basis: str, branching: int, Q) -> dict:
    """GreedyH's node weights as a start of the hierarchical basis search, when its tree is the basis's (1-D; else none).

    GreedyH weighs the nodes of a tree of intervals for the workload at L1 sensitivity 1, a
    point of the same feasible set when the trees agree (powers of the branching): without it
    the search ended at the identity on prefix:16 and all-range:64 (136 and 45760); with it,
    GreedyH's own 134.72 and, searched from it, 40950 (GreedyH 41221).
    """
    if basis != "hierarchical" or len(W.domain) != 1:
        return {}
    try:
        A, _ = greedy_h_matrix(W, branching)
    except InputError:
        return {}
    u = weights_of(A, Q)
    return {} if u is None else {"greedy-h": u}


def weighted_basis(problem: Problem):
    """``A = diag(u) Q`` with the Program 5.1.3 weights, the solver result and metadata, without compiling.

    Parameters
    ----------
    problem : Problem
        Options ``basis`` (default ``'wavelet'``) and ``branching`` (hierarchical basis only).

    Returns
    -------
    (strategy, L1WeightingResult, dict)

    Raises
    ------
    OptionError
        A bad ``branching``, or ``branching`` with another basis.

    Examples
    --------
    On total:2 only the Haar row (1, 1) has a cost (1; the other, 0, is dropped): ``u = 1``, ``A = [[1, 1]]``:

    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.workload import total
    >>> A, res, meta = weighted_basis(Problem(total(2), privacy="pure"))
    >>> A.toarray().tolist(), round(float(res.value), 6), meta["design_queries"]
    ([[1.0, 1.0]], 1.0, 1)
    """
    with _search_threads(problem.workload.n):  # for every caller: l1-weighting and auto-pure's candidate
        return _weighted_basis(problem)


def _weighted_basis(problem: Problem):
    """`weighted_basis` on the thread count it sets."""
    t0 = time.perf_counter()
    W = problem.workload
    basis = problem.options.get("basis", "wavelet")
    if "branching" in problem.options and basis != "hierarchical":
        raise OptionError(f"branching applies to the hierarchical basis only, not to basis {basis!r}")
    branching = problem.options.get("branching", 2)
    if isinstance(branching, bool) or not isinstance(branching, (int, np.integer)) or branching < 2:
        raise OptionError(f"branching must be an integer >= 2, got {branching!r}")
    G = W.gram()
    eig = np.linalg.eigh(G) if basis == "eigen" else None
    Q = design_basis(W, basis, int(branching), eig)
    k = Q.shape[0]
    # the design queries' Gram Q Q^T (orthogonality test) and the Newton system are dense k x k
    require_memory(DESIGN_GRAM_COPIES * 8.0 * k * k, f"l1-weighting on the {basis} basis of {W.spec} ({k:,} design queries)",
                   "choose a basis with fewer design queries (wavelet, fourier and eigen have one per cell)")
    if basis == "eigen":
        lam = eig[0]
        c, exact = np.clip(lam, 0.0, None), True
    else:
        # dense solves of O(n^2 k) when Q's rows are not orthogonal (the hierarchy): minutes past 4096 cells
        log.info("l1-weighting: costs of %d %s design queries on %d cells", k, basis, W.n)
        c, exact = weighting_costs(G, Q, max(0.0, problem.solver.time_limit - (time.perf_counter() - t0)))
        log.info("l1-weighting: costs ready")
    keep = c > _COST_RTOL * c.max()
    if sp.issparse(Q):
        Q = sp.csr_matrix(Q)[np.flatnonzero(keep)]
        B = sp.csr_matrix(abs(Q).T)
    else:
        Q = np.asarray(Q)[keep]
        B = np.abs(Q).T
    res = solve_l1_weighting(c[keep], B, problem.solver)
    u, search = completion_line_search(res.u, Q, B, W)
    refined = None
    if search:  # unequal column loads: completion rows are worth weighing
        refine = W.n <= REFINE_MAX_N or (W.n <= REFINE_LARGE_MAX_N and Q.shape[0] <= REFINE_LARGE_MAX_QUERIES)
    else:  # even from equal loads, on small domains
        refine = W.n <= REFINE_EQUAL_LOADS_MAX_N
    if refine:
        refined, search["local_search"] = refine_completed_weights(u, Q, W, G, t0 + problem.solver.time_limit, _greedy_h_start(W, basis, int(branching), Q))
    scaled, scale_search = None, {}
    if not refine:  # past REFINE_LARGE_MAX_N cells only against the identity itself (each scaling is a dense analysis)
        known = search["points"][str(search["chosen_t"])] if search else None  # the line search priced u already
        scales = IDENTITY_SCALES if W.n <= REFINE_LARGE_MAX_N else (0.0,)
        scaled, scale_search = scale_search_against_identity(u, Q, W, G, known, scales)
    if scaled is not None:
        A = scaled
    else:
        A = _weighted(Q, u) if refined is None else refined
    searched_off = refined is not None or scaled is not None or search.get("chosen_t", 1.0) < 1.0
    extra = {
        # the program's status describes A only when A is its optimum and its objective is E_1 (full-row-rank bases)
        "strategy_status": "local-optimum" if refined is not None else (res.status if exact and not searched_off else "heuristic"),
        "program_status": res.status,
        "completion_rows": _completion_rows(A, Q, u, refined, search, scale_search),
        "basis": basis,
        "design_queries": int(keep.sum()),
        "weighting_value": res.value,
        "weighting_dual_bound": res.dual,
        "weighting_relative_gap": res.gap,
        "weighting_exact": bool(exact),
        "iterations": res.iterations,
    }
    if search:
        extra["completion_line_search"] = search
    if scale_search:
        extra["identity_scale_search"] = scale_search
    if basis == "hierarchical":
        extra["branching"] = int(branching)
    return A, res, extra
