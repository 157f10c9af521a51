"""Baseline strategies: identity, hierarchical H_b, Haar wavelet, Fourier.

On a multi-dimensional domain the hierarchical and wavelet strategies are
Kronecker products of the 1-D strategies over each attribute (Li 2013,
Sec. 3.3), kept factored as a `KroneckerMatrix`.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..bases import fourier_matrix, hierarchical_matrix, identity_matrix, wavelet_matrix
from ..compiler import compile_strategy, reported_error
from ..error import KroneckerMatrix
from ..exceptions import OptionError
from ..problem import Problem
from ..marginals import marginal_attribute_sets
from ..registry import register_method
from ..tree_error import hierarchy_unit_error

log = logging.getLogger("strategy_opt")

#: Branching factors tried by ``hierarchical`` when none is given (each costs one
#: n x n factorisation; the error is flat in b near the optimum, so gaps are harmless).
BRANCHING_CANDIDATES = (2, 3, 4, 5, 6, 8, 10, 12, 16)


def _per_dimension(domain, build):
    if len(domain) == 1:
        return build(domain[0])
    return KroneckerMatrix([build(d) for d in domain])


@register_method("identity", options=(), source="Li 2013, Fig. 2.3, Sec. 3.3.3", summary="ask every cell once (A = I)")
def identity(problem: Problem):
    """The identity strategy: E_p = trace(W^T W) for both privacy notions.

    Examples
    --------
    On prefix:4 every cell is asked once, so ``E = trace(W^T W) = 1 + 2 + 3 + 4``:

    >>> from strategy_opt import solve
    >>> solve("prefix:4", privacy="pure", method="identity").meta["unit_total_squared_error"]
    10.0
    """
    t0 = time.perf_counter()
    A = _per_dimension(problem.workload.domain, identity_matrix)  # Kronecker on product domains: 256 x 256 without a dense Gram
    return compile_strategy(A, problem, "identity", solve_seconds=time.perf_counter() - t0)


def branching_errors(workload, branchings, p: int) -> dict[int, float]:
    """``{b: E_p(H_b)}`` for the branchings in order, up to the first ``b >= max(domain)``.

    Every larger branching gives the same flat tree (total + cells). E_p is the
    error the compiler reports (columns completed under epsilon-DP): from the
    tree (`strategy_opt.tree_error`, O(n^2)) on a 1-D domain, from the
    Kronecker factors (`strategy_opt.compiler.reported_error`) on a product domain.

    Parameters
    ----------
    workload : Workload
    branchings : iterable of int
        Candidate branchings, in increasing order.
    p : {1, 2}
        Sensitivity norm.

    Returns
    -------
    dict of int to float

    Examples
    --------
    >>> from strategy_opt.workload import all_range
    >>> {b: round(e, 4) for b, e in branching_errors(all_range(4), (2, 3, 4, 5), 1).items()}  # b = 4: total + cells, 5 not tried
    {2: 62.5714, 3: 57.375, 4: 40.0}
    """
    errors = {}
    gram = workload.gram() if len(workload.domain) == 1 else None
    for b in branchings:
        log.info("hierarchical: evaluating branching %d", b)
        if gram is not None:
            errors[b] = hierarchy_unit_error(workload.n, b, gram, p)
        else:
            errors[b] = reported_error(KroneckerMatrix([hierarchical_matrix(d, b) for d in workload.domain]), workload, p)[1]
        if b >= max(workload.domain):
            break
    return errors


def check_branching(b) -> None:
    """Refuse (`OptionError`) a branching that is not an integer >= 2.

    Examples
    --------
    >>> check_branching(2)
    >>> check_branching(1)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.OptionError: branching must be an integer >= 2, got 1
    """
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 2:
        raise OptionError(f"branching must be an integer >= 2, got {b!r}")


@register_method(
    "hierarchical",
    options=("branching",),
    source="Hay et al. 2010; Li 2013, Fig. 2.3, Sec. 3.3",
    summary="tree of interval sums, branching B (option branching; default: best B of 2,3,4,5,6,8,10,12,16)",
)
def hierarchical(problem: Problem):
    """Hierarchical strategy H_b; without ``branching`` the best b of `BRANCHING_CANDIDATES` for the workload.

    Examples
    --------
    H_2 on two cells asks ``[1, 1]``, ``[1, 0]``, ``[0, 1]``: L1 sensitivity 2 and
    ``trace((A^T A)^{-1}) = trace([[2, 1], [1, 2]]^{-1}) = 4/3``, so ``E_1 = 4 * 4/3``:

    >>> from strategy_opt import solve
    >>> s = solve("identity:2", privacy="pure", method="hierarchical", branching=2)
    >>> s.dense().tolist(), round(s.meta["unit_total_squared_error"], 6)
    ([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]], 5.333333)
    """
    t0 = time.perf_counter()
    W = problem.workload
    b = problem.options.get("branching")
    tried = {}
    if b is None:
        tried = branching_errors(W, BRANCHING_CANDIDATES, problem.p)
        b = min(tried, key=tried.get)
    else:
        check_branching(b)
    A = _per_dimension(W.domain, lambda d: hierarchical_matrix(d, int(b)))
    extra = {"branching": int(b)}
    if tried:
        extra["branching_errors"] = {str(k): v for k, v in tried.items()}
    return compile_strategy(A, problem, "hierarchical", solve_seconds=time.perf_counter() - t0, extra=extra)


@register_method("wavelet", options=(), source="Xiao et al. 2010 (Privelet); Li 2013, Sec. 3.3.1, Prop. 3.9", summary="Haar wavelet (any n)")
def wavelet(problem: Problem):
    """Haar wavelet strategy Y_n (unbalanced Haar tree when n is not a power of two).

    Examples
    --------
    On total:4 the query is the first (all-ones) row itself, and the rows are
    orthogonal: unit variance ``(w . r_1)^2 / ||r_1||^4 = 16 / 16``, times the
    squared L2 sensitivity 3 (each column has three +-1 entries), ``E_2 = 3``:

    >>> from strategy_opt import solve
    >>> s = solve("total:4", privacy="approx", method="wavelet")
    >>> s.dense().tolist(), round(s.meta["unit_total_squared_error"], 9)
    ([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, -1.0, -1.0], [1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]], 3.0)
    """
    t0 = time.perf_counter()
    A = _per_dimension(problem.workload.domain, wavelet_matrix)
    return compile_strategy(A, problem, "wavelet", solve_seconds=time.perf_counter() - t0)


@register_method(
    "fourier",
    options=(),
    source="Barak et al. 2007; Li 2013, Sec. 5.3.2",
    summary="Fourier characters needed by a marginal workload (complete basis otherwise)",
)
def fourier(problem: Problem):
    """Fourier strategy: characters chi_S with S inside a marginal's attribute set.

    Examples
    --------
    The one-way marginals of two binary attributes need the characters of the
    empty set and of each attribute (3 rows, not 4); E = 6 against the identity's 8
    (each cell is counted by 2 of the 4 queries):

    >>> from strategy_opt import solve
    >>> s = solve("marginals:2x2:1", privacy="approx", method="fourier")
    >>> s.shape, round(s.meta["unit_total_squared_error"], 9), s.meta["attribute_sets"]
    ((3, 4), 6.0, [[0], [1]])
    """
    t0 = time.perf_counter()
    W = problem.workload
    sets = marginal_attribute_sets(W)
    if sets is None:
        sets = [tuple(range(len(W.domain)))]
    A = fourier_matrix(W.domain, sets)
    return compile_strategy(A, problem, "fourier", solve_seconds=time.perf_counter() - t0, extra={"attribute_sets": [list(s) for s in sets]})
