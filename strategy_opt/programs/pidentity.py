"""A scalable epsilon-DP optimiser: p-Identity strategies with multi-level hat starts.

Template (McKenna et al., "Optimizing error of high-dimensional statistical
queries under differential privacy", PVLDB 11(10) 2018, Sec. 5: p-Identity)::

    A(Theta) = [I; Theta] D,     Theta >= 0 (p x n),     D = diag(1 / (1 + 1^T Theta))

Every column of A sums to exactly 1, so ``||A||_1 = 1`` and the unit error is
``E_1 = trace(G (A^T A)^{-1})`` with ``A^T A = D (I + Theta^T Theta) D``. With
``s = 1 + 1^T Theta``, ``G~ = diag(s) G diag(s)``, ``C = I_p + Theta Theta^T`` and
Woodbury, ``(I + Theta^T Theta)^{-1} = I - Theta^T C^{-1} Theta``, so (derived here)::

    E_1 = trace(G~) - <C^{-1} Theta, Theta G~>
    dE_1/dTheta = -2 (C^{-1} Theta G~)(I - Theta^T C^{-1} Theta) + 1 (2 diag(G~ M^{-1}) / s)^T

at O(p n^2) per evaluation. L-BFGS-B minimises it over ``Theta >= 0``.

What is ours (not in HDMM). HDMM's OPT_0 starts from a random Theta with
p = n/16. The optima it reaches on range workloads are a small number of
*levels* of overlapping triangular "hat" rows that form a partition of unity
(linear B-splines) on top of the identity: one level at n = 256 (width about
n/6), two at n = 1024. We therefore start from explicit multi-level hat
templates -- identity plus levels with hat spacings ``h_1 < h_2 < ...``
(`hat_templates`: finest spacing in `BASE_SPACINGS`, geometric ratio in
`LEVEL_RATIOS`, weight 1 per level) -- ranked by direct evaluation of E_1 (one
O(p n^2) evaluation each). The `RACED_STARTS` best templates then race: each
runs `RACE_ITERATIONS` L-BFGS-B iterations, and the `FINALISTS` best, with
the best at the start, run on to convergence. Neither order alone is a good
guide: on prefix:256 the fourth template at the start converges to the best
E_1 (after 50 iterations it is among the best two); on prefix:600 the first
trails after 50 iterations and ends best. The identity (Theta = 0) and, in
``p-identity``, a random OPT_0-style start are tried too. The hat templates
also bring p down to what the structure needs.

Lower cost: a hat start is refined on its rows' supports widened by
`SUPPORT_MARGIN` times the row width on each side (the optima keep their rows
local; on all ranges n = 256 the restriction changes E_1 by 3e-5), so
``Theta G~`` is a sparse-dense product and the gradient is needed on the
support only: O(nnz n + p^2 n) per evaluation instead of O(p n^2)
(`pidentity_loss_on_support`); with p ~ n/14 and nnz ~ 6n at n = 4096 about
ten times cheaper. The Gram matrices of all ranges and of prefixes are
semiseparable (``G_ij = u_min(i,j) v_max(i,j)``, `strategy_opt.semiseparable`):
on them ``Theta G~`` takes O(p n) whatever the support, leaving O(p^2 n) per
evaluation (with ``C^{-1}`` applied through its inverse Cholesky factor; median
of a hat template's loss on prefixes, one BLAS thread, same session: 0.34 ->
0.22 ms at 256 cells, 12.0 -> 4.8 ms at 1024, 410 -> 176 ms at 4096).

Measured here (auto-pure, one BLAS thread, same run as our re-implementation
of OPT_0 with its published stopping rule, L-BFGS-B ftol 1e-4, median of three
seeds; benchmarks/results/pure_dp.md has the table): all ranges n = 256: E_1
1067782 in 0.43 s against OPT_0's 1078205 in 0.057 s; n = 1024: 31781200 in
10.0 s against 32402853 in 2.4 s (the issue's reference OPT_0 values are
1075312 and 32721311: 0.7% and 2.9% below them); prefix n = 256: 6874.1 in
1.3 s (OPT_0 6985.2 in 0.064 s, reference 6918.3), n = 1024: 46465 in 11.8 s
(OPT_0 47574 in 3.2 s, reference 47391); all ranges n = 4096: 8.449e8 in
214 s (OPT_0 8.724e8 in 256 s). The local optima of
this template lie within about 1% of each other: on all ranges n = 256 every
start we tried (one- and two-level hats, quadratic B-splines, shifted
duplicate levels, random starts with p = 16 ... 128, uniform or sparse) ends at
1.0669e6-1.095e6, and general signed strategies optimised from them (and from
random signed starts, the L2 optimum and svd-approx) gain at most 0.03% at
n = 64. We found no strategy 5% below OPT_0 at n = 256.

Objective ``max`` (the largest per-query variance): `strategy_opt.programs.pidentity_max`
anneals a log-sum-exp of the variances from the optimum for the total.

Multi-dimensional domains: for a Kronecker workload or a weighted union of
Kronecker workloads over the same factor domains (e.g. marginals), the
strategy is a Kronecker product of per-attribute p-Identity factors (HDMM's
OPT_kron): each factor's sensitivity is 1, so the product's is 1, and
``E_1 = sum_k w_k^2 prod_i trace(G_ki X_i^{-1})``. Factors are optimised in turn
(block coordinate descent), each on the Gram ``sum_k c_k G_ki`` with weights
``c_k = w_k^2 prod_{j != i} trace(G_kj X_j^{-1})`` from the other factors.
For marginal workloads HDMM's marginals template (weighted marginals,
`strategy_opt.programs.marginals_template`) is solved too and the better of the two is returned
(``meta.template``).

On a 1-D (non-Kronecker) workload the optimiser runs on the minimized
workload (Li 2013, Def. 2.6: cells no query tells apart merged, untouched cells
dropped; `merged_cells`, read off the Gram) and the strategy is expanded back
(`expand_cells`), with the same sensitivity and error: random query workloads
over 1000 cells often have far fewer distinguishable cells, which is what makes
the Orthogonal Mechanism competitive there.

``auto-pure`` (`strategy_opt.programs.auto_pure`) races this optimiser against the
other epsilon-DP candidates.

Options: ``p`` (rows of Theta for the random starts, default n/16; below 128
cells one more random start of min(n, `WIDE_START_ROWS`) rows runs by default),
``random_starts`` (default 1; 0 in ``auto-pure``, where they rarely pay for
their time), ``seed`` (default 0). Budget: the solver profile's ``max_iters``
(L-BFGS-B iterations per start), ``tol`` (a start has converged when E_1's
mean relative decrease per iteration over `STALL_WINDOW` iterations falls
below it; in auto-pure `strategy_opt.programs.auto_pure.AUTO_PURE_TOL` = 1e-6 unless
the profile's is looser, or its option ``tol``) and ``time_limit`` (shared among the starts).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
import itertools
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.optimize as so
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from ..cells import merged_cells
from ..compiler import compile_strategy
from ..error import KroneckerMatrix
from ..exceptions import InputError, OptionError, SolverError, setting
from ..problem import Problem
from ..pure_bound import lower_bound_facts
from ..registry import register_method
from ..semiseparable import SemiseparableGram
from ..threads import one_blas_thread
from ..workload import Kronecker, Union, Workload, gram_unit
from .marginals_template import MARGINALS_MAX_ITERS, marginals_strategy

__all__ = ["merged_cells", "expand_cells", "pidentity_strategy", "pidentity_loss", "pidentity_matrix", "hat_rows", "hat_templates", "optimise_theta", "PIdentityResult", "solve_pidentity", "p_identity", "check_options"]

log = logging.getLogger("strategy_opt")

#: Hat spacing of the finest level, in cells (the optima found on range workloads use 14-32).
BASE_SPACINGS = (14, 20, 28)
#: Ratios between the spacings of consecutive levels.
LEVEL_RATIOS = (6, 9, 12)
#: The coarsest level's spacing is at most ``n / COARSEST_DIVISOR`` (2: prefix workloads
#: want a level of half-domain hats; prefix:256 reaches 6914 from (14, 126) against 6992
#: with the coarsest level capped at n / 4; all ranges are unchanged).
COARSEST_DIVISOR = 2
#: Hat templates raced (the best ones by E_1 at the start; `race`).
RACED_STARTS = 4
#: L-BFGS-B iterations of each raced start; the `FINALISTS` best then run to convergence.
#: The order at the start is a poor guide (prefix:256: the fourth template converges to
#: the best E_1, 6871, and is among the best two after 50 iterations), and so is the
#: order after a few hundred iterations: two-level templates descend slowly and
#: overtake (prefix:450: a start second after 50 iterations and still behind after
#: 200 ends 0.65% lower), hence two finalists (measured over 12 range workloads of
#: 256-1024 cells under auto-pure: 0.3-0.65% lower E_1 on 4 of them for 20-40% more
#: time than one finalist after rounds of 50 and 150 iterations).
RACE_ITERATIONS = 50
#: Raced starts that run to convergence, besides the best start by its initial E_1, which
#: always does: on prefix:600 it trails after 50 iterations and ends 0.43% lower than the
#: two that lead there (22472.9 against 22570.5; 2.9 -> 4.0 s under auto-pure).
FINALISTS = 2
#: Hat starts are optimised on their rows' supports widened by this multiple of the row width per side.
SUPPORT_MARGIN = 1.0
#: A later start must beat the best so far by this relative margin (ties keep the simpler, earlier start).
TIE_RTOL = 1e-9
#: Fallback random starts run when the other starts leave E_1 above this share of the identity's.
RANDOM_START_ABOVE = 0.9
#: Below 128 cells HDMM's p = n/16 gives random starts of 1-7 rows: the p-identity method then adds a random
#: start of min(n, this) rows. On a rank-2 signed workload of 8 cells the 1-row start ended 22% above an 8-row
#: one (184.4 against 151.0); on prefix:16 and all-range:24 the 1-row start wins (105.8 and 2490.3 against
#: 106.2 and 2546.9), so both run.
WIDE_START_ROWS = 8
#: Upper bound on the entries of Theta. Larger entries only turn a cell's identity
#: row off (weight below 1 / THETA_MAX); they make the Woodbury form cancel.
THETA_MAX = 100.0
#: Convergence is judged over this many iterations: L-BFGS-B's own test (one step's
#: relative decrease <= ftol) stopped prefix:256 anywhere between 6914 and 6919 on
#: rounding-level changes of the loss, in a long slow descent with uneven steps.
STALL_WINDOW = 100
#: L-BFGS-B memory (number of correction pairs).
LBFGS_MEMORY = 10
#: Seconds between progress lines.
LOG_EVERY = 2.0
#: Weights c of the joint one-row start ``Theta = c 1^T`` on every Kronecker factor (`_solve_kron`),
#: scanned when every factor has at most this many (merged) cells.
ONES_ROW_SCAN = tuple(np.geomspace(1e-2, 1e3, 31))
ONES_ROW_SCAN_MAX_N = 256
#: p-Identity loss evaluations of at most this many ``p n^2`` run on one BLAS thread (`optimise_theta`).
THREADED_LOSS_FLOPS = 1e9
#: A support pattern covering at least this share of Theta is handled as a dense array
#: (measured, one BLAS thread: dense 2.3x faster at 256 cells, share 0.37; even at
#: 1024 cells, share 0.11-0.13; sparse 1.2-2.2x faster at 4096 cells, share 0.03-0.06).
DENSE_SUPPORT_SHARE = 0.2
_THREADPOOLS = ThreadpoolController()


def _capacitance_solver(T: np.ndarray, C: np.ndarray | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """``X -> C^{-1} X`` for the p x p capacitance matrix ``C = I + Theta Theta^T`` (given, or formed from ``T``).

    By the inverse of C's Cholesky factor, ``C^{-1} X = L^{-T} (L^{-1} X)``: two
    BLAS products instead of two triangular solves against the p x n right-hand
    sides, which took 100 us of a 450 us loss on prefix:256 (p = 25). Not by
    the explicit ``C^{-1}``: E_1 is a difference of two large terms, and with it
    the loss was noisy at 3e-10 relative against 1e-12 (cond(C) ~ 2e4,
    prefix:40), enough for L-BFGS-B's line search to give up early.

    Examples
    --------
    >>> solve = _capacitance_solver(np.array([[1.0, 1.0]]))  # C = 1 + 2
    >>> np.round(solve(np.array([[3.0, 6.0]])), 12).tolist()
    [[1.0, 2.0]]
    """
    if C is None:
        C = np.eye(T.shape[0]) + T @ T.T
    lost = SolverError("p-identity: I + Theta Theta^T lost positive definiteness (non-finite Theta); try another seed")
    try:
        L = la.cholesky(C, lower=True, check_finite=False)
    except la.LinAlgError:
        raise lost from None
    Li, info = la.lapack.dtrtri(L, lower=1)
    if info != 0:
        raise lost
    Li = np.tril(Li)
    return lambda X: Li.T @ (Li @ X)


def _gram_product(T: np.ndarray, s: np.ndarray, G: np.ndarray, structure: SemiseparableGram | None) -> np.ndarray:
    """``Theta G~`` with ``G~ = diag(s) G diag(s)``, for a dense Theta, by G's generators where given."""
    Ts = T * s[None, :]
    return (Ts @ G if structure is None else structure.right_product(Ts)) * s[None, :]


def pidentity_loss(theta: np.ndarray, G: np.ndarray, p: int, structure: SemiseparableGram | None = None) -> tuple[float, np.ndarray]:
    """``E_1`` of ``A(Theta) = [I; Theta] D`` and its gradient in Theta (flattened), O(p n^2).

    With ``structure``, G's semiseparable generators, the products with G take
    O(p n) (`strategy_opt.semiseparable`) and the cost is O(p^2 n).

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> f, g = pidentity_loss(np.zeros(2), G, 1)   # Theta = 0: the identity, E_1 = trace(G)
    >>> float(f)
    4.0
    """
    n = G.shape[0]
    T = theta.reshape(p, n)
    s = 1.0 + T.sum(axis=0)
    solve = _capacitance_solver(T)
    CiT = solve(T)
    TG = _gram_product(T, s, G, structure)  # Theta G~
    Gt_diag = np.diag(G) * s * s
    f = float(Gt_diag.sum() - np.einsum("ij,ij->", CiT, TG))
    Z = solve(TG)  # C^{-1} Theta G~
    ZM = Z - (Z @ T.T) @ CiT
    diag = Gt_diag - np.einsum("ij,ij->j", TG, CiT)
    grad = -2.0 * ZM + (2.0 * diag / s)[None, :]
    return f, grad.ravel()


def pidentity_loss_on_support(
    values: np.ndarray, G: np.ndarray, rows: np.ndarray, cols: np.ndarray, p: int, structure: SemiseparableGram | None = None
) -> tuple[float, np.ndarray]:
    """`pidentity_loss` for a Theta that is zero outside the pattern ``(rows, cols)``; gradient on the pattern.

    Cost O(nnz n + p^2 n) instead of O(p n^2): ``Theta G~`` is a sparse-dense
    product (O(p n) with G's semiseparable generators ``structure``) and the
    gradient ``-2 (Z - (Z Theta^T) C^{-1} Theta)`` (``Z = C^{-1} Theta G~``)
    is only needed at the nnz pattern entries. A pattern covering at least
    `DENSE_SUPPORT_SHARE` of Theta is multiplied as a dense array: on 256 cells
    SciPy's sparse bookkeeping cost more than the flops it saved (0.74 ms
    against 0.31 ms per evaluation, prefix:256).

    Parameters
    ----------
    values : ndarray, shape (nnz,)
        Theta's entries on the pattern.
    G : ndarray, shape (n, n)
        The workload Gram matrix.
    rows, cols : ndarray of int, shape (nnz,)
        The pattern.
    p : int
        Rows of Theta.
    structure : SemiseparableGram, optional
        G's generators, when it has them (`SemiseparableGram.detect`).

    Returns
    -------
    (float, ndarray of shape (nnz,))
        E_1 and its gradient on the pattern.

    Examples
    --------
    >>> G = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> f, g = pidentity_loss_on_support(np.zeros(2), G, np.array([0, 0]), np.array([0, 1]), 1)
    >>> f  # Theta = 0: the identity, E_1 = trace(G)
    4.0
    """
    n = G.shape[0]
    Td = np.zeros((p, n))
    Td[rows, cols] = values
    s = 1.0 + Td.sum(axis=0)
    if rows.size >= DENSE_SUPPORT_SHARE * p * n:
        C = None
        TG = _gram_product(Td, s, G, structure)
    else:
        T = sp.csr_matrix((values, (rows, cols)), shape=(p, n))
        C = np.eye(p) + (T @ T.T).toarray()
        if structure is None:
            TG = np.asarray(T.multiply(s[None, :]).tocsr() @ G) * s[None, :]  # Theta G~ without forming G~
        else:
            TG = _gram_product(Td, s, G, structure)
    solve = _capacitance_solver(Td, C)
    CiT = solve(Td)
    Gt_diag = np.diag(G) * s * s
    f = float(Gt_diag.sum() - np.einsum("ij,ij->", CiT, TG))
    Z = solve(TG)
    ZTt = Z @ Td.T  # Z Theta^T, p x p
    zm = Z[rows, cols] - (ZTt @ CiT)[rows, cols]  # a p x n product (BLAS) beats gathering two nnz x p arrays
    diag = Gt_diag - np.einsum("ij,ij->j", TG, CiT)
    return f, -2.0 * zm + 2.0 * diag[cols] / s[cols]


def hat_support(T0: np.ndarray, margin: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Pattern of a Theta start whose rows have contiguous supports, each widened by ``margin`` times its width per side.

    Parameters
    ----------
    T0 : ndarray, shape (p, n)
        The start; each row has a positive entry.
    margin : float, default 1.0

    Returns
    -------
    (rows, cols) : ndarray of int
        The pattern, row by row.

    Examples
    --------
    A row whose support is cell 1 (width 1), widened by one cell per side:

    >>> rows, cols = hat_support(np.array([[0.0, 1.0, 0.0, 0.0, 0.0]]))
    >>> rows.tolist(), cols.tolist()
    ([0, 0, 0], [0, 1, 2])
    """
    n = T0.shape[1]
    rows, cols = [], []
    for i, row in enumerate(T0):
        nz = np.flatnonzero(row > 0)
        width = nz[-1] - nz[0] + 1
        lo, hi = max(0, int(nz[0] - margin * width)), min(n, int(nz[-1] + margin * width) + 1)
        rows.append(np.full(hi - lo, i))
        cols.append(np.arange(lo, hi))
    return np.concatenate(rows), np.concatenate(cols)


def pidentity_matrix(theta: np.ndarray) -> np.ndarray:
    """The strategy ``[I; Theta] D`` (every column sums to 1), without the all-zero rows of Theta.

    Parameters
    ----------
    theta : ndarray, shape (p, n)
        Non-negative.

    Returns
    -------
    ndarray, shape (n + p', n)
        p' the number of non-zero rows of theta; D divides column j by ``1 + sum_i theta_ij``.

    Examples
    --------
    >>> pidentity_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])).tolist()
    [[0.5, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]]
    """
    T = np.asarray(theta, dtype=float)
    n = T.shape[1]
    T = T[T.max(axis=1) > 0] if T.size else T
    return np.vstack([np.eye(n), T]) / (1.0 + T.sum(axis=0))


def hat_rows(n: int, spacing: float) -> np.ndarray:
    """Linear B-splines ("hats") with knots every ~spacing cells: rows summing to 1 on every cell.

    Parameters
    ----------
    n : int
        Number of cells.
    spacing : float
        The knot spacing, in cells.

    Returns
    -------
    ndarray, shape (rows, n)

    Examples
    --------
    Knots at 0, 2 and 4 on cell centres 0.5 .. 3.5:

    >>> hat_rows(4, 2).tolist()
    [[0.75, 0.25, 0.0, 0.0], [0.25, 0.75, 0.75, 0.25], [0.0, 0.0, 0.25, 0.75]]
    """
    m = max(1, int(math.ceil(n / spacing)))
    h = n / m
    x = np.arange(n) + 0.5
    centres = np.arange(m + 1) * h
    R = np.maximum(0.0, 1.0 - np.abs(x[None, :] - centres[:, None]) / h)
    return R[R.sum(axis=1) > 0]


def hat_templates(n: int) -> list[tuple[float, ...]]:
    """Candidate level spacings ``(h_1, h_2, ...)``: geometric in a ratio, finest first, coarsest <= n / COARSEST_DIVISOR.

    Parameters
    ----------
    n : int
        Number of cells.

    Returns
    -------
    list of tuple of float
        Sorted; always includes the one level ``(max(1, n / 4),)``.

    Examples
    --------
    >>> hat_templates(8)
    [(2.0,)]
    """
    out = set()
    for base, ratio in itertools.product(BASE_SPACINGS, LEVEL_RATIOS):
        levels, h = [], float(base)
        while h <= n / COARSEST_DIVISOR:
            levels.append(h)
            h *= ratio
        for k in range(1, len(levels) + 1):
            out.add(tuple(levels[:k]))
    out.add((max(1.0, n / 4),))  # one level at a quarter of the domain: the small domains' optimum (all ranges on 32 cells)
    return sorted(out)


def _template_theta(n: int, spacings: tuple[float, ...]) -> np.ndarray:
    return np.vstack([hat_rows(n, h) for h in spacings])


def blas_threads() -> int:
    """Threads the BLAS libraries currently use (the largest, if several are loaded).

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> blas_threads() >= 1
    True
    """
    return max([int(c.num_threads) for c in _THREADPOOLS.select(user_api="blas").lib_controllers] or [1])


#: `optimise_theta` lets L-BFGS-B evaluate the loss this many times per allowed iteration (line searches take 1-3).
EVALUATIONS_PER_ITERATION = 20


def optimise_theta(
    G: np.ndarray,
    T0: np.ndarray,
    *,
    max_iters: int,
    deadline: float,
    ftol: float,
    label: str = "",
    support=None,
    unit: float = 1.0,
    exact: bool = True,
    structure: SemiseparableGram | None = None,
) -> tuple[np.ndarray, float, int, str]:
    """L-BFGS-B over ``Theta >= 0`` from T0 until convergence, ``max_iters`` or ``deadline``.

    Returns Theta, its exact ``trace(G (A^T A)^{-1})`` (with ``exact=False``
    the loss L-BFGS-B ended with, which skips an O(n^3) factorisation), the
    iterations and what stopped the search: ``'converged'``, ``'time'``,
    ``'iterations'`` (or ``'lbfgsb'``: L-BFGS-B's own test). Progress lines
    state E_1 times ``unit`` (the scale the caller divided G by).

    With ``support = (rows, cols)`` only those entries of Theta are free (the
    others stay 0) and the loss is `pidentity_loss_on_support`. With
    ``structure`` (G's semiseparable generators) the losses multiply by G in O(p n).

    SciPy's L-BFGS-B (C, since 1.15) calls BLAS on vectors of length p n; with
    OpenBLAS threads on a shared 2-core machine each such call costs
    milliseconds (measured: 19 s instead of 1.0 s for 510 iterations at
    p n = 70). The optimiser's own steps therefore run on one BLAS thread, and
    so do loss evaluations of at most `THREADED_LOSS_FLOPS` (``p n^2``): two
    threads made them slower at every size measured (idle machine, prefix
    templates: 0.36 vs 13.6 ms at 256 cells, 9.1 vs 20.4 ms at 1024, 239 vs
    250 ms at 4096; auto-pure on prefix:256 took 61 s instead of 2.8 s).
    Larger evaluations use the caller's thread count.

    Examples
    --------
    For the total of two cells, ``E_1 = 2 (1 + t)^2 / (1 + 2 t^2)`` along ``Theta = [[t, t]]``: from t = 1 the search runs to the bound
    ``THETA_MAX = 100``, where ``E_1 = 2 * 101^2 / 20001``:

    >>> from strategy_opt.workload import total
    >>> T, e1, iterations, stop = optimise_theta(total(2).gram(), np.array([[1.0, 1.0]]), max_iters=100, deadline=time.perf_counter() + 5, ftol=1e-12)
    >>> np.round(T, 6).tolist(), round(e1, 6)
    ([[100.0, 100.0]], 1.020049)
    """
    p, n = T0.shape
    state = {"last": time.perf_counter(), "it": 0, "f": math.inf, "stop": "lbfgsb"}
    history = collections.deque(maxlen=STALL_WINDOW + 1)  # best E_1 after each of the last iterations
    outer = blas_threads() if p * n * (n if structure is None else p) > THREADED_LOSS_FLOPS else 1

    if support is None:
        x0 = T0.ravel()

        def loss(x):
            return pidentity_loss(x, G, p, structure)
    else:
        rows, cols = support
        x0 = T0[rows, cols]

        def loss(x):
            return pidentity_loss_on_support(x, G, rows, cols, p, structure)

    def fun(x):
        with _THREADPOOLS.limit(limits=outer, user_api="blas"):
            f, g = loss(x)
        state["f"] = min(state["f"], f)
        return f, g

    def callback(xk):
        state["it"] += 1
        now = time.perf_counter()
        if now - state["last"] > LOG_EVERY:
            log.info("p-identity %s: iteration %d, E_1 %.10g", label, state["it"], state["f"] * unit)
            state["last"] = now
        if now > deadline:
            state["stop"] = "time"
            raise StopIteration
        history.append(state["f"])
        if len(history) > STALL_WINDOW and history[0] - history[-1] <= STALL_WINDOW * ftol * abs(history[-1]):
            state["stop"] = "converged"  # the mean relative decrease per iteration fell below ftol
            raise StopIteration
        if state["it"] >= max_iters:
            state["stop"] = "iterations"

    with one_blas_thread():
        res = so.minimize(
            fun,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=so.Bounds(0.0, THETA_MAX),
            callback=callback,
            # SciPy's default of 15000 evaluations would end a long run before max_iters, reported as L-BFGS-B's own stop
            options={"maxiter": max_iters, "maxfun": EVALUATIONS_PER_ITERATION * max_iters, "maxcor": LBFGS_MEMORY, "ftol": 0.0, "gtol": 0.0},
        )
    if support is None:
        T = res.x.reshape(p, n)
    else:
        T = np.zeros((p, n))
        T[rows, cols] = res.x
    return T, exact_error(T, G) if exact else float(res.fun), int(res.nit), state["stop"]


def exact_error(theta: np.ndarray, G: np.ndarray) -> float:
    """``trace(G (A^T A)^{-1})`` of ``A = [I; Theta] D`` by a Cholesky factorisation (no cancellation).

    Parameters
    ----------
    theta : ndarray, shape (p, n)
    G : ndarray, shape (n, n)

    Returns
    -------
    float

    Examples
    --------
    >>> from strategy_opt.workload import prefix, total
    >>> exact_error(np.zeros((1, 3)), prefix(3).gram())  # the identity: trace(G) = 3 + 2 + 1
    6.0
    >>> round(exact_error(np.array([[1.0, 1.0]]), total(2).gram()), 6)  # A^T A = (I + J) / 4: 2 / (3 / 4)
    2.666667
    """
    T = np.asarray(theta, dtype=float)
    s = 1.0 + T.sum(axis=0)
    X = (np.eye(T.shape[1]) + T.T @ T) / np.outer(s, s)
    L = la.cholesky(X, lower=True, check_finite=False)
    Y = la.solve_triangular(L, G, lower=True, check_finite=False)
    return float(np.trace(la.solve_triangular(L, Y.T, lower=True, check_finite=False)))


@dataclass
class PIdentityResult:
    """Best Theta found for one Gram matrix, and how it was found.

    Attributes
    ----------
    theta : ndarray, shape (p, n)
        The best Theta.
    value : float
        Its E_1 (in the units of the G given).
    start : str
        The start it came from (``'identity'``, ``'warm'``, a hat template, ``'random<i>'``).
    iterations : int
        L-BFGS-B iterations of that start.
    starts : dict
        Per start: ``unit_error``, ``iterations``, ``seconds``, ``stopped_by``.

    Examples
    --------
    On the total of two cells every start ends at a stationary point no better than the identity's ``E_1 = 2``
    (Theta = 0: see `optimise_theta` for the bound Theta runs to from a larger start):

    >>> from strategy_opt.workload import total
    >>> r = solve_pidentity(total(2).gram(), p_random=1, random_starts=1, seed=0, max_iters=200, time_limit=5, ftol=1e-12)
    >>> r.start, r.value, r.theta.tolist(), sorted(r.starts)
    ('identity', 2.0, [[0.0, 0.0]], ['identity', 'random0'])
    """

    theta: np.ndarray
    value: float
    start: str
    iterations: int
    starts: dict


def solve_pidentity(
    G: np.ndarray,
    *,
    p_random: int,
    random_starts: int,
    seed: int,
    max_iters: int,
    time_limit: float,
    ftol: float,
    warm: np.ndarray | None = None,
    fallback_random_starts: int = 0,
    wide_rows: int = 0,
) -> PIdentityResult:
    """Minimise ``trace(G (A^T A)^{-1})`` over p-Identity strategies (1-D domain).

    Starts: the identity (Theta = 0; optimal for all ranges on up to ~16
    cells), the warm start (if any), a race of the `RACED_STARTS` best hat
    templates (`RACE_ITERATIONS` each; the `FINALISTS` best and the best at
    the start run to convergence), then ``random_starts`` random OPT_0-style
    starts (uniform [0, 1), p_random rows) and, when ``wide_rows`` exceeds
    ``p_random`` and ``random_starts >= 1``, one more of ``wide_rows`` rows (drawn
    from its own generator, so the others draw as without it); the race and each
    random start share the time left equally. If the best of these is still above
    `RANDOM_START_ABOVE` times the identity's error (the hat templates model
    range-like workloads), ``fallback_random_starts`` further random starts get
    the remaining time. Returns the best; ``starts`` records each start's E_1,
    iterations, seconds and what stopped it (``'race'``: it lost the race, and
    its E_1 is where it stopped).

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> r = solve_pidentity(prefix(4).gram(), p_random=1, random_starts=0, seed=0, max_iters=200, time_limit=5, ftol=1e-10)
    >>> r.value <= 10.0  # never worse than the identity, trace(G) = 4 + 3 + 2 + 1
    True
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    n = G.shape[0]
    # E_1 is linear in G: the search runs on G / unit (mean diagonal 1), since L-BFGS-B's steps
    # lost their way on a workload scaled by 1e60 (it returned the identity); values are reported in G's units
    unit = gram_unit(G)
    G = G / unit
    structure = SemiseparableGram.detect(G)  # ranges, prefixes: products with G in O(p n)
    plain: list[tuple[str, np.ndarray, tuple | None]] = [("identity", np.zeros((1, n)), None)]
    if warm is not None:
        plain.append(("warm", warm, None))
    hats: list[tuple[str, np.ndarray, tuple | None]] = []
    if n >= 8:
        scored = []
        for spacings in hat_templates(n):
            T = _template_theta(n, spacings)
            scored.append((pidentity_loss(T.ravel(), G, T.shape[0], structure)[0], spacings, T))
        scored.sort(key=lambda t: t[0])
        hats = [(f"hats{tuple(round(h, 1) for h in sp)}", T, hat_support(T, SUPPORT_MARGIN)) for _, sp, T in scored[:RACED_STARTS]]
    rng = np.random.default_rng(seed)
    randoms = [(f"random{i}", rng.random((p_random, n)), None) for i in range(random_starts)]
    if random_starts >= 1 and wide_rows > p_random:
        randoms.append((f"random-wide{wide_rows}", np.random.default_rng(seed + 1).random((wide_rows, n)), None))
    best = None
    record: dict[str, dict] = {}

    def refine(name: str, T0: np.ndarray, support, iters: int, until: float, final: bool) -> np.ndarray:
        """Run one start for at most ``iters`` more iterations (none if it has converged) and record it; a final
        run competes for the best. Returns the start's Theta."""
        nonlocal best
        now = time.perf_counter()
        done = record.get(name, {"iterations": 0, "seconds": 0.0, "stopped_by": None})
        if done["stopped_by"] in ("converged", "lbfgsb"):  # converged in the race: its exact error only
            T, f, it, stop = T0, exact_error(T0, G), 0, done["stopped_by"]
        elif until <= now:  # no time left (a warm start, a race's leader): priced as it stands, not one costly iteration more
            T, f, it, stop = T0, exact_error(T0, G), 0, "time"
        else:
            T, f, it, stop = optimise_theta(
                G, T0, max_iters=iters, deadline=until, ftol=ftol, label=name, support=support, unit=unit, exact=final, structure=structure
            )
        f *= unit
        record[name] = {"unit_error": f, "iterations": done["iterations"] + it, "seconds": done["seconds"] + time.perf_counter() - now, "stopped_by": stop}
        if final:
            log.info("p-identity: start %s -> E_1 %.10g after %d iterations", name, f, record[name]["iterations"])
            if best is None or f < best.value * (1 - TIE_RTOL):
                best = PIdentityResult(T, f, name, record[name]["iterations"], record)
        return T

    def run(starts) -> None:
        """The starts in turn, each with an equal share of the time left (``'race'``: the hat templates' race)."""
        for i, (name, T0, support) in enumerate(starts):
            now = time.perf_counter()
            if now >= deadline and best is not None and name != "warm":  # a warm start is always priced: never lose it
                skipped = [n for n, _, _ in starts[i:]]
                log.warning(
                    "p-identity: the time budget ended before %s ran (best so far: start %s, E_1 %.7g); a longer "
                    "time_budget option or solver time_limit lets them run",
                    ", ".join("the hat templates" if n == "race" else f"start {n}" for n in skipped), best.start, best.value,
                )
                break
            until = now + (deadline - now) / (len(starts) - i)
            if name == "race":
                race(hats, until)
            else:
                refine(name, T0, support, max_iters, until, final=True)

    def race(entries, until: float) -> None:
        """`RACE_ITERATIONS` iterations of each start; the `FINALISTS` best and ``entries[0]`` (the best at the start) then run to convergence."""
        alive = list(entries)
        if len(alive) > FINALISTS:
            raced = []
            for i, (name, T0, support) in enumerate(alive):
                now = time.perf_counter()
                if now >= until:
                    break
                share = (until - now) / (len(alive) - i + FINALISTS)  # the finalists' runs count too
                raced.append((name, refine(name, T0, support, RACE_ITERATIONS, now + share, final=False), support))
            ranked = sorted(raced, key=lambda e: record[e[0]]["unit_error"])
            leaders = {e[0] for e in ranked[:FINALISTS]}
            alive = ranked[:FINALISTS] + [e for e in raced[:1] if e[0] not in leaders] or alive[:1]  # raced[0]: best at the start
            going = {e[0] for e in alive}
            for name, _, _ in ranked:
                if name not in going:
                    record[name]["stopped_by"] = "race"
            log.info(
                "p-identity: race of %d iterations: %s; %s go on",
                RACE_ITERATIONS, ", ".join(f"{e[0]} E_1 {record[e[0]]['unit_error']:.7g}" for e in ranked), ", ".join(e[0] for e in alive),
            )
        finished = set()
        for i, (name, T0, support) in enumerate(alive):
            now = time.perf_counter()
            if now >= until and best is not None:
                break
            left = max(1, max_iters - record.get(name, {}).get("iterations", 0))
            refine(name, T0, support, left, now + max(until - now, 0.0) / (len(alive) - i), final=True)
            finished.add(name)
        # the time ran out before a finalist's run: the race's leader competes as the race left it
        leader = next((e for e in sorted(alive, key=lambda e: record.get(e[0], {}).get("unit_error", math.inf)) if e[0] in record), None)
        if leader is not None and leader[0] not in finished and (best is None or record[leader[0]]["unit_error"] < best.value):
            refine(leader[0], leader[1], leader[2], 0, time.perf_counter(), final=True)

    run(plain + [("race", None, None)] * bool(hats) + randoms)
    if fallback_random_starts and best.value > RANDOM_START_ABOVE * record["identity"]["unit_error"] and time.perf_counter() < deadline:
        log.info("p-identity: the starts stay within %.0f%% of the identity; adding %d random start(s)", 100 * (1 - RANDOM_START_ABOVE), fallback_random_starts)
        run([(f"random{i}", rng.random((p_random, n)), None) for i in range(random_starts, random_starts + fallback_random_starts)])
    best.starts = record
    return best


def _warn_if_cut(results: dict[str, PIdentityResult]) -> None:
    """One warning naming the optimisations (``label: result``) whose best start the time budget stopped."""
    cut = [f"{label + ': ' if label else ''}start {res.start}" for label, res in results.items() if res.starts[res.start]["stopped_by"] == "time"]
    if cut:
        log.warning(
            "p-identity: the time budget stopped the best start before it converged (%s): E_1 depends on this "
            "machine's speed and load (a longer time_budget option or solver time_limit gives a converged result)",
            ", ".join(cut),
        )


def expand_cells(A: np.ndarray, cell_of: np.ndarray) -> np.ndarray:
    """A strategy on merged cells as one on the original cells: each cell gets its merged cell's column.

    The sensitivity is unchanged (the same columns) and, for a workload whose
    columns agree within merged cells, so is the error: with ``W = W' P`` and
    ``A = A' P`` (P the 0/1 cell-to-merged-cell matrix, full row rank),
    ``W A^+ = W' A'^+``. Untouched cells (``cell_of = -1``) get zero columns;
    the compiler's column completion measures them.

    Parameters
    ----------
    A : ndarray, shape (p, n')
        The strategy on the merged cells.
    cell_of : ndarray of int, shape (n,)
        The merged cell of each original cell, or -1.

    Returns
    -------
    ndarray, shape (p, n)
        A itself when ``cell_of`` is the identity map.

    Examples
    --------
    >>> expand_cells(np.eye(2), np.array([0, 0, -1, 1])).tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    """
    if np.all(cell_of == np.arange(cell_of.size)):
        return A
    out = np.zeros((A.shape[0], cell_of.size))
    live = cell_of >= 0
    out[:, live] = A[:, cell_of[live]]
    return out


def _kron_parts(W: Workload) -> list[tuple[float, list[Workload]]] | None:
    """``[(weight^2, factors)]`` for a Kronecker workload or a union of them over the same factor domains."""
    parts = W.parts if isinstance(W, Union) else [W]
    weights = W.weights if isinstance(W, Union) else np.ones(1)
    out, doms = [], None
    for w, part in zip(weights, parts):
        if not isinstance(part, Kronecker):
            return None
        d = [f.n for f in part.factors]
        if doms is not None and d != doms:
            return None
        doms = d
        out.append((float(w) ** 2, list(part.factors)))
    return out if doms is not None and len(doms) > 1 else None


def check_options(problem: Problem) -> dict:
    """p-identity's options ``random_starts``, ``seed`` and ``p``, checked (`OptionError`), with their defaults.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    dict
        ``{'random_starts': int, 'seed': int, 'p': int or None}``.

    Raises
    ------
    OptionError
        An option that is not an integer (>= 0; ``p`` >= 1).

    Examples
    --------
    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.workload import prefix
    >>> check_options(Problem(prefix(4), privacy="pure", options={"seed": 3}))
    {'random_starts': 1, 'seed': 3, 'p': None}
    """
    opts = {}
    for name, default, lo in (("random_starts", 1, 0), ("seed", 0, 0), ("p", None, 1)):
        v = problem.options.get(name, default)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo):
            raise OptionError(f"option {name} must be an integer >= {lo}, got {v!r}")
        opts[name] = v
    return opts


def _solve_1d(G: np.ndarray, opts: dict, problem: Problem, time_limit: float, warm=None, fallback_random_starts: int = 0) -> PIdentityResult:
    n = G.shape[0]
    return solve_pidentity(
        G,
        p_random=int(opts["p"] or max(1, n // 16)),
        wide_rows=min(n, WIDE_START_ROWS) if opts["p"] is None else 0,
        random_starts=int(opts["random_starts"]),
        seed=int(opts["seed"]),
        max_iters=problem.solver.max_iters,
        time_limit=time_limit,
        ftol=problem.solver.tol,
        warm=warm,
        fallback_random_starts=fallback_random_starts,
    )


def _solve_kron(parts, opts: dict, problem: Problem, time_limit: float) -> tuple[list[np.ndarray], dict]:
    """Block coordinate descent over per-attribute p-Identity factors (HDMM's OPT_kron); the factor strategies.

    Per attribute, cells that no factor workload tells apart are merged (as on
    1-D domains: a total factor becomes one cell, measured by one row: all-range:4*total:4
    80 -> 20). The descent runs on the merged and on the original cells when
    merging changes anything, each in half the time, and the better is kept: the
    merged sub-problems are small, and on some unions of products the 1-D
    optimiser finds less on them than on the original cells (`_descend`).
    """
    t0 = time.perf_counter()
    d = len(parts[0][1])
    grams = [[f.gram() for f in factors] for _, factors in parts]
    unmerged = [(np.arange(row_gram.shape[0]), np.arange(row_gram.shape[0])) for row_gram in grams[0]]
    merges = [merged_cells(sum(row[i] for row in grams)) for i in range(d)]  # (cell_of, reps) per attribute
    variants = [merges] if all(reps.size == cell_of.size for cell_of, reps in merges) else [merges, unmerged]
    best = None
    for k, merge in enumerate(variants):
        left = time_limit - (time.perf_counter() - t0)
        run = _descend([[G[np.ix_(reps, reps)] for G, (_, reps) in zip(row, merge)] for row in grams], parts, opts, problem, left / (len(variants) - k))
        if best is None or run[0] < best[0]:
            best = run + (merge,)
    total, thetas, rounds, last, merge = best
    _warn_if_cut(last)  # the last round's: its factors are the strategy's
    factors = [expand_cells(pidentity_matrix(T), cell_of) for T, (cell_of, _) in zip(thetas, merge)]
    return factors, {"kronecker_rounds": rounds, "starts": {label: res.starts for label, res in last.items()},
                     "theta_rows": [int(T.shape[0]) for T in thetas], "merged_cells": [int(reps.size) for _, reps in merge]}


def _descend(grams, parts, opts: dict, problem: Problem, time_limit: float):
    """The block descent on factor Grams ``grams[k][i]`` (term k, attribute i): ``(E_1, thetas, rounds, last results)``.

    It starts from the best joint one-row start (`ONES_ROW_SCAN`) when that beats
    the identity: every factor ``[I; c 1^T] D`` with the same weight c. On a
    union of products such as the 1-way marginals, the identity is a
    coordinate-wise optimum (each factor alone gains nothing from a ones row,
    ``n (1 + c)^2 / (1 + n c^2)`` first rises with c for a factor Gram J), while
    the joint move gains (marginals:4x4x4x4x4x4x4x4:1: 524288 -> 9615).
    """
    t0 = time.perf_counter()
    d = len(grams[0])
    thetas: list[np.ndarray | None] = [None] * d
    traces = np.array([[float(np.trace(G)) for G in row] for row in grams])  # identity factors
    w2 = np.array([w for w, _ in parts])
    total = float((w2 * traces.prod(axis=1)).sum())
    sizes = [G.shape[0] for G in grams[0]]
    if max(sizes) <= ONES_ROW_SCAN_MAX_N:
        scan = {c: np.array([[exact_error(np.full((1, k), c), G) for G, k in zip(row, sizes)] for row in grams]) for c in ONES_ROW_SCAN}
        c = min(scan, key=lambda c: float((w2 * scan[c].prod(axis=1)).sum()))
        if float((w2 * scan[c].prod(axis=1)).sum()) < total:
            thetas, traces = [np.full((1, k), c) for k in sizes], scan[c]
            total = float((w2 * traces.prod(axis=1)).sum())
            log.info("p-identity (Kronecker): start from one row of weight %.3g on every factor, E_1 %.10g", c, total)
    rounds, last = [], {}
    # the best state seen (a round cut by the budget can end above it); Theta = 0 is the identity factor
    kept = (total, [np.zeros((1, k)) if T is None else T for T, k in zip(thetas, sizes)], {})
    for rnd in range(1, problem.solver.max_iters + 1):
        for i in range(d):
            c = w2 * np.prod(np.delete(traces, i, axis=1), axis=1)
            Gi = sum(ck * row[i] for ck, row in zip(c, grams))
            left = time_limit - (time.perf_counter() - t0)
            res = _solve_1d(Gi, opts, problem, max(left, 0.0) / (d - i + d * (rnd == 1)), warm=thetas[i])
            thetas[i], last[f"attribute {i}"] = res.theta, res
            for k, row in enumerate(grams):
                traces[k, i] = exact_error(res.theta, row[i])
        new = float((w2 * traces.prod(axis=1)).sum())
        rounds.append(new)
        log.info("p-identity (Kronecker): round %d, E_1 %.10g", rnd, new)
        if new < kept[0]:
            kept = (new, list(thetas), dict(last))
        if new > total * (1 - max(problem.solver.tol, 1e-6)) or time.perf_counter() - t0 > time_limit:
            break
        total = new
    return kept[0], kept[1], rounds, kept[2]


@register_method(
    "p-identity",
    options=("random_starts", "seed", "p"),
    privacy=("pure",),
    objectives=("total", "max"),
    source="template: McKenna et al. PVLDB 2018 (p-Identity, OPT_0); multi-level hat starts and Kronecker block descent: strategy_opt",
    summary="epsilon-DP optimiser: p-Identity [I; Theta]D by L-BFGS-B from multi-level hat templates and random starts; Kronecker factors on product domains; n up to ~4096; objective max by an annealed log-sum-exp of the variances (per factor on products over 256 cells)",
)
def p_identity(problem: Problem):
    """Optimised p-Identity strategy (options ``p``, ``random_starts``, ``seed``); see the module docstring.

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("all-range:32", privacy="pure", method="p-identity")
    >>> s.meta["unit_total_squared_error"] < 5984.0    # identity: trace(G) = 5984
    True
    """
    if problem.privacy != "pure":
        raise InputError(f"p-identity is an epsilon-DP method (L1 sensitivity); use {setting('privacy', 'pure')}")
    if problem.objective == "max":
        return _p_identity_max(problem)
    t0 = time.perf_counter()
    A, extra = pidentity_strategy(problem, problem.solver.time_limit)
    bound = lower_bound_facts(problem.workload, time.perf_counter() - t0)
    extra.update(bound.pop("extra"))
    return compile_strategy(A, problem, "p-identity", solver="native/L-BFGS-B", status="local-optimum", solve_seconds=time.perf_counter() - t0, extra=extra, **bound)


def _p_identity_max(problem: Problem):
    """p-identity under objective ``max`` (`strategy_opt.programs.pidentity_max.max_strategy_with_bound`), compiled.

    The bound on the total error gets what is left of the profile's time limit.
    """
    from ..pure_bound import LOWER_BOUND_SHARE
    from ..certificates import relative_gap
    from .pidentity_max import max_strategy_with_bound

    t0 = time.perf_counter()
    limit = problem.solver.time_limit
    A, value, lower, kind, extra = max_strategy_with_bound(problem, limit)
    bound = lower_bound_facts(problem.workload, max(limit - (time.perf_counter() - t0), 0.0) / LOWER_BOUND_SHARE)
    extra.update(bound.pop("extra"))
    strategy = compile_strategy(A, problem, "p-identity", solver="native/L-BFGS-B", status="local-optimum", solve_seconds=time.perf_counter() - t0,
                                objective_value=value, extra=extra, **bound)
    value = strategy.meta["objective_value"]
    lower = min(lower, value)  # rounding in a certificate: the value is then the optimum
    if lower > 0:
        strategy.meta.update(objective_lower_bound=lower, objective_lower_bound_kind=kind, objective_relative_gap=relative_gap(value, lower))
    else:
        strategy.meta.update(objective_lower_bound=None, objective_lower_bound_kind=None, objective_relative_gap=None,
                             objective_lower_bound_unavailable="the workload is too large for the (epsilon, delta) min-max bound and the per-query floor")
    return strategy


def pidentity_strategy(problem: Problem, time_limit: float, fallback_random_starts: int = 0) -> tuple[object, dict]:
    """The optimised strategy (dense, Kronecker or sparse marginals) and its metadata, without compiling it.

    ``fallback_random_starts`` is passed to `solve_pidentity` on 1-D domains.

    Parameters
    ----------
    problem : Problem
        An epsilon-DP problem.
    time_limit : float
        Seconds for the search.
    fallback_random_starts : int, default 0

    Returns
    -------
    (strategy, dict)
        A dense ndarray on 1-D problems, a `KroneckerMatrix` or `MarginalsMatrix` on Kronecker workloads; and the metadata.

    Examples
    --------
    The cells of total:4 are merged into one (no query tells them apart), measured once:

    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.workload import total
    >>> A, extra = pidentity_strategy(Problem(total(4), privacy="pure"), 5.0)
    >>> A.tolist(), extra["merged_cells"], extra["start"]
    ([[1.0, 1.0, 1.0, 1.0]], 1, 'identity')
    """
    from ..error import unit_error

    W = problem.workload
    opts = check_options(problem)
    parts = _kron_parts(W)
    if parts is None:
        G = W.gram()
        cell_of, reps = merged_cells(G)
        if reps.size < W.n:
            log.info("p-identity: %d cells, %d after merging cells no query tells apart (and dropping untouched ones)", W.n, reps.size)
        res = _solve_1d(G[np.ix_(reps, reps)], opts, problem, time_limit, fallback_random_starts=fallback_random_starts)
        _warn_if_cut({"": res})
        A = expand_cells(pidentity_matrix(res.theta), cell_of)
        return A, {"theta_rows": int(res.theta.shape[0]), "start": res.start, "starts": res.starts, "iterations": res.iterations, "merged_cells": int(reps.size)}
    factors, extra = _solve_kron(parts, opts, problem, time_limit)
    A = KroneckerMatrix(factors)
    extra.update(template="kronecker")
    marg = marginals_strategy(W, 1, max_iters=min(problem.solver.max_iters, MARGINALS_MAX_ITERS), ftol=problem.solver.tol)
    if marg is not None:
        extra["marginals_template_error"] = marg[1]
        if marg[1] < unit_error(A, W, 1):
            A = marg[0]
            extra.update(template="marginals", marginal_weights=marg[2])
    return A, extra
