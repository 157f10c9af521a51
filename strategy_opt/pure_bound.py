"""Lower bound on the epsilon-DP error from the (epsilon, delta) program.

For every strategy A, ``||A||_1 >= ||A||_2`` (largest column norms), so
``E_1(A) >= E_2(A) >= OPT_2``: the optimum of MINERROR-L2 (Program 3.4.2) in
unit normalisation bounds every epsilon-DP strategy's unit error from below
(issue 4, item 5). The native L2 solver (`strategy_opt.native_l2`) certifies
every iterate by a dual bound, so a solve stopped at its time limit still
gives a valid bound; stopped very early it can lie a little below the SVD
bound (4468.1 against 4469.8 on scaled random ranges), and the compiler then
states the SVD bound instead (it keeps the larger).

Kinds (``meta.lower_bound_kind``): ``l2-optimum`` when the solve reached its
target gap, ``l2-dual`` when it stopped earlier (a certified bound, below the
optimum by at most the reported gap of that solve).

Examples
--------
>>> from strategy_opt.workload import all_range
>>> bound, kind = pure_lower_bound(all_range(8), time_limit=5.0)
>>> kind, round(bound, 2)
('l2-optimum', 80.46)
"""

from __future__ import annotations

import hashlib
import logging

import numpy as np

from .exceptions import SolverError
from . import native_l2
from .workload import Workload

log = logging.getLogger("strategy_opt")

__all__ = ["LOWER_BOUND_MAX_N", "COMPILE_BOUND_MAX_N", "pure_lower_bound", "certified_l2_optimum", "lower_bound_facts", "compile_lower_bound"]

#: The bound is computed up to this many cells (above, the compiler's SVD bound stands) ...
LOWER_BOUND_MAX_N = 2048
#: ... in this share of the time a method spent (at least MIN_LOWER_BOUND_SECONDS), to this relative gap.
LOWER_BOUND_SHARE, MIN_LOWER_BOUND_SECONDS, LOWER_BOUND_TOL = 0.25, 0.5, 1e-4
#: The compiler adds the bound to every epsilon-DP strategy up to this many cells (about 0.2 s at 256),
#: so closed-form strategies (identity, H_b, wavelet, ...) state the same bound as the optimisers.
COMPILE_BOUND_MAX_N = 256
#: Up to COMPILE_BOUND_MAX_N cells the native solve runs this many iterations whatever the clock says: past
#: `strategy_opt.native_l2.DESIGN_AFTER`, where a low-rank workload restarts from its design SDP, so the bound
#: does not depend on the machine's load (a rank-2 workload on 13 cells: 37.77 after 30 iterations in 0.5 s
#: under load, 42.20 once the SDP ran). Ordinary workloads reach the target gap in 1-7 iterations.
BOUND_MIN_ITERATIONS = native_l2.DESIGN_AFTER + 1
#: Workloads whose bound is kept for the process (keyed by the Gram matrix's bytes).
_CACHE_SIZE = 16
#: ``(bound, kind, time limit it was computed in)`` per Gram matrix
_bound_cache: dict[bytes, tuple[float, str, float]] = {}


def pure_lower_bound(W: Workload, time_limit: float, G: np.ndarray | None = None) -> tuple[float | None, str]:
    """The certified (epsilon, delta) bound on E_1 and its kind, or ``(None, why not)``.

    Parameters
    ----------
    W : Workload
    time_limit : float
        Seconds for the native L2 solver (it stops with its best certified dual bound).
    G : ndarray, optional
        ``W.gram()``, when the caller has it.

    Returns
    -------
    bound : float or None
        A lower bound on the unit error ``E_1`` of every epsilon-DP strategy for W; None above
        `LOWER_BOUND_MAX_N` cells.
    kind : str
        ``'l2-optimum'`` or ``'l2-dual'`` (see the module docstring), or why there is no bound.

    Examples
    --------
    For the identity workload on n cells the L2 optimum is the identity strategy, with error ``n``; for the
    total, the single query itself, with error 1:

    >>> from strategy_opt.workload import identity, total
    >>> bound, kind = pure_lower_bound(identity(4), time_limit=5.0)
    >>> round(bound, 6), kind
    (4.0, 'l2-optimum')
    >>> round(pure_lower_bound(total(8), time_limit=5.0)[0], 6)
    1.0
    >>> pure_lower_bound(identity(4096), time_limit=5.0)
    (None, 'n > 2048: SVD bound only')
    """
    if W.n > LOWER_BOUND_MAX_N:
        return None, f"n > {LOWER_BOUND_MAX_N}: SVD bound only"
    G = W.gram() if G is None else G
    # one solve per workload and process: auto-pure's bound is the one the compiler then gives auto's baselines;
    # a bound that did not converge is recomputed when more time is given
    key = hashlib.sha256(np.ascontiguousarray(G).tobytes()).digest()
    known = _bound_cache.get(key)
    if known is not None and (known[1] == "l2-optimum" or known[2] >= time_limit):
        return known[0], known[1]
    bound, kind, _ = certified_l2_optimum(W, G, time_limit)
    if len(_bound_cache) >= _CACHE_SIZE:
        _bound_cache.pop(next(iter(_bound_cache)))
    _bound_cache[key] = (bound, kind, time_limit)
    return bound, kind


def certified_l2_optimum(W: Workload, G: np.ndarray, time_limit: float, tol: float = LOWER_BOUND_TOL) -> tuple[float, str, np.ndarray]:
    """The (epsilon, delta) optimum of ``G = W^T W``: ``(certified dual bound, kind, best L2 strategy)``.

    The native solver's dual bound; where it stalls on a small domain (at most
    `strategy_opt.programs.minerror_l2.NATIVE_FALLBACK_MAX_N` cells: low-rank
    workloads, 1-20% gaps on rank-2 Gram matrices of 6-8 cells) Clarabel solves
    the SDP too, as minerror-l2 does, and the larger certified bound and the
    better strategy are kept. The kind is ``l2-optimum`` when the best primal
    value is within ``tol`` of the bound, else ``l2-dual``.

    Parameters
    ----------
    W : Workload
        Passed to the SDP fallback.
    G : ndarray (n, n)
        ``W.gram()``.
    time_limit : float
        Seconds for the native solver.
    tol : float, default `LOWER_BOUND_TOL`
        Target relative gap.

    Returns
    -------
    bound : float
    kind : {'l2-optimum', 'l2-dual'}
    A : ndarray
        The best L2 strategy found.

    Examples
    --------
    >>> from strategy_opt.workload import identity
    >>> bound, kind, A = certified_l2_optimum(identity(3), np.eye(3), time_limit=5.0)
    >>> round(bound, 6), kind, np.round(A.T @ A, 6).tolist()  # the optimum: the identity strategy, error 3
    (3.0, 'l2-optimum', [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    """
    res = native_l2.solve_total_l2(G, time_limit=time_limit, tol=tol, min_iters=BOUND_MIN_ITERATIONS if G.shape[0] <= COMPILE_BOUND_MAX_N else 0)
    bound, A, primal = res.dual, res.A, res.primal
    if res.status == "stalled":
        from .programs.minerror_l2 import NATIVE_FALLBACK_MAX_N, sdp_total_l2

        if G.shape[0] <= NATIVE_FALLBACK_MAX_N:
            log.info("(eps, delta) optimum: the native solver stalled at relative gap %.3g on %d cells; solving the SDP with Clarabel too", res.gap, G.shape[0])
            try:
                found_A, found_primal, found_dual, _ = sdp_total_l2(W, G)
            except SolverError as exc:
                log.info("(eps, delta) optimum: Clarabel failed too (%s); the native bound stands", " ".join(str(exc).split()))
            else:
                bound = max(bound, found_dual)
                if found_primal < primal:
                    A, primal = found_A, found_primal
    closed = res.status == "optimal" or primal - bound <= tol * primal
    return bound, ("l2-optimum" if closed else "l2-dual"), A


def lower_bound_facts(W: Workload, seconds_spent: float) -> dict:
    """Keyword arguments for `compile_strategy`: the bound in a share of the time a method spent.

    Parameters
    ----------
    W : Workload
    seconds_spent : float
        The method's time; the solve gets ``max(MIN_LOWER_BOUND_SECONDS, LOWER_BOUND_SHARE * seconds_spent)``.

    Returns
    -------
    dict
        ``lower_bound``, ``lower_bound_kind`` and an empty ``extra``; or, without a bound, only
        ``extra = {"lower_bound_note": <why>}``.

    Examples
    --------
    >>> from strategy_opt.workload import identity
    >>> facts = lower_bound_facts(identity(4), seconds_spent=0.0)
    >>> round(facts["lower_bound"], 6), facts["lower_bound_kind"], facts["extra"]
    (4.0, 'l2-optimum', {})
    >>> lower_bound_facts(identity(4096), seconds_spent=10.0)
    {'extra': {'lower_bound_note': 'n > 2048: SVD bound only'}}
    """
    bound, kind = pure_lower_bound(W, max(MIN_LOWER_BOUND_SECONDS, LOWER_BOUND_SHARE * seconds_spent))
    if bound is None:
        return {"extra": {"lower_bound_note": kind}}
    return {"lower_bound": bound, "lower_bound_kind": kind, "extra": {}}


def compile_lower_bound(W: Workload, G: np.ndarray | None = None) -> tuple[float | None, str | None]:
    """The bound the compiler attaches to an epsilon-DP strategy that brings none: up to `COMPILE_BOUND_MAX_N` cells.

    Computed in `MIN_LOWER_BOUND_SECONDS`; `pure_lower_bound` remembers it per
    Gram matrix, so the candidates ``auto`` compiles for one workload share one
    solve. ``G`` is ``W.gram()`` when the caller has it.

    Parameters
    ----------
    W : Workload
    G : ndarray, optional
        ``W.gram()``.

    Returns
    -------
    (float or None, str or None)
        As `pure_lower_bound`; ``(None, None)`` above `COMPILE_BOUND_MAX_N` cells.

    Examples
    --------
    >>> from strategy_opt.workload import identity
    >>> bound, kind = compile_lower_bound(identity(4))
    >>> round(bound, 6), kind
    (4.0, 'l2-optimum')
    >>> compile_lower_bound(identity(512))
    (None, None)
    """
    if W.n > COMPILE_BOUND_MAX_N:
        return None, None
    return pure_lower_bound(W, MIN_LOWER_BOUND_SECONDS, G)
