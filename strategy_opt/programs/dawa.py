"""DAWA: the data- and workload-aware algorithm for range queries under eps-DP.

Li, Hay, Miklau, Wang, "A Data- and Workload-Aware Algorithm for Range Queries
Under Differential Privacy", PVLDB 7(5), 2014; Li 2013 (dissertation), Ch. 6.

The budget is split ``eps1 = rho eps``, ``eps2 = (1 - rho) eps`` (rho = 0.25
by default, Sec. 6.5.1) and spent by sequential composition:

1. `strategy_opt.partition.private_partition` (eps1, Thm 6.1) chooses buckets
   over which the data are nearly uniform; only the partition is released.
2. GreedyH (`strategy_opt.programs.greedy_h`, eps2, Thm 6.3) maps the workload
   onto the buckets, weights a hierarchy of bucket intervals for it, measures
   it through `strategy_opt.executor.measure` (Laplace noise at its
   sensitivity 1, i.e. Laplace(1/eps2)) and estimates the bucket counts by
   least squares.
3. Uniform expansion spreads each bucket's estimate over its cells (Def. 6.1).

2-D domains (any n1 x n2) are linearised along a Hilbert curve (Sec. 6.5.5);
the workload (e.g. rectangles) is mapped onto the buckets exactly, whatever
cells a bucket holds.

Samplers: both stages draw their noise with the sampler the caller chooses:
OpenDP's vetted Laplace (``'opendp'``, the default unless a seed ``rng`` is
given) or NumPy's generator seeded by ``rng`` (``'simulate'``, for simulations).

Special cases: ``rho = 0`` skips stage 1 (every cell its own bucket: GreedyH
alone with the whole budget); a 1-cell domain has a single possible
partition, so stage 1 releases nothing and the whole budget goes to stage 2.
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..exceptions import InputError, PrecisionError
from ..executor import Release, check_histogram, measure, resolve_sampler, resolution_exponent
from ..partition import NOISE_RULES, bucket_counts, candidate_lengths, cost_noise_scales, expand, private_partition
from ..privacy import Privacy, PureDP
from ..registry import register_release
from ..workload import ExplicitWorkload, Workload
from .greedy_h import Hierarchy, MappedWorkload, check_branching, domain_order, greedy_hierarchy

__all__ = ["DawaResult", "dawa_estimate", "dawa", "rectangle_workload", "random_rectangles", "DEFAULT_RHO"]

log = logging.getLogger("strategy_opt")

#: Default share of the budget spent on the partition (Li 2013, Sec. 6.5.1).
DEFAULT_RHO = 0.25


@dataclass
class DawaResult:
    """Everything one DAWA run produced.

    Attributes
    ----------
    x_hat : ndarray (n,)
        Estimated histogram (row-major cells).
    edges : ndarray of int
        Bucket boundaries along ``order`` (the released partition).
    order : ndarray of int
        Cell ids in domain order (identity for 1-D, Hilbert for 2-D).
    hierarchy : Hierarchy
        The weighted bucket hierarchy measured in stage 2.
    eps1, eps2 : float
        Budgets of the two stages.
    noise_scale : float
        Laplace scale of every stage-2 answer.

    Examples
    --------
    With ``rho=0`` there is no partition stage: every cell is its own bucket, and for the identity workload
    stage 2 measures each cell once (sensitivity 1, Laplace scale ``1 / epsilon``):

    >>> from strategy_opt.workload import identity
    >>> r = dawa_estimate(np.arange(4.0), identity(4), epsilon=0.5, rng=0, rho=0)
    >>> r.edges.tolist(), r.order.tolist(), r.eps1, r.eps2, r.noise_scale, r.buckets
    ([0, 1, 2, 3, 4], [0, 1, 2, 3], 0.0, 0.5, 2.0, 4)
    """

    x_hat: np.ndarray
    edges: np.ndarray
    order: np.ndarray
    hierarchy: Hierarchy
    eps1: float
    eps2: float
    noise_scale: float

    @property
    def buckets(self) -> int:
        """Number of buckets k.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> r = dawa_estimate(np.array([5.0, 5.0, 0.0, 9.0]), prefix(4), 1.0, rng=0)
        >>> r.buckets == r.edges.size - 1
        True
        """
        return int(self.edges.size - 1)


def _check_rho(rho) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.floating, np.integer)) or not 0.0 <= float(rho) < 1.0:
        raise InputError(f"rho (share of epsilon for the partition) must be in [0, 1), got {rho!r}")
    return float(rho)


def dawa_estimate(
    x,
    workload: Workload,
    epsilon: float,
    *,
    rng=None,
    sampler: str | None = None,
    rho: float = DEFAULT_RHO,
    branching: int = 2,
    all_intervals: bool = False,
    noise: str = "bucket",
) -> DawaResult:
    """Run DAWA and return the estimate with its partition and hierarchy.

    Parameters
    ----------
    x : array_like (n,)
        Non-negative histogram, row-major cells of ``workload.domain``.
    workload : Workload
        Queries over a 1-D or 2-D domain.
    epsilon : float
        Total budget (eps-DP).
    rng : int or numpy Generator, optional
        Seed of the ``simulate`` sampler (refused with ``'opendp'``).
    sampler : {'opendp', 'simulate'}, optional
        Sampler of both stages' noise. Default: ``'simulate'`` if ``rng`` is
        given, else the vetted ``'opendp'`` (as `strategy_opt.executor.run`).
    rho : float
        Share of epsilon for the partition, in [0, 1).
    branching : int
        Branching factor of the stage-2 hierarchy.
    all_intervals : bool
        Stage-1 candidates: all intervals instead of power-of-two lengths.
    noise : {'bucket', 'uniform'}
        Stage-1 noise rule (`strategy_opt.partition`).

    Returns
    -------
    DawaResult

    Raises
    ------
    InputError
        For a bad histogram, budget or option, or a histogram whose total is too large for float64 to carry the noise.

    Examples
    --------
    The budget is split ``rho = 0.25`` to the partition and 0.75 to the hierarchy; at epsilon = 1e4 the noise
    (Laplace scale about 1e-4) does not show at two decimals:

    >>> from strategy_opt.workload import prefix
    >>> x = np.r_[np.zeros(4), np.full(4, 50.0)]
    >>> r = dawa_estimate(x, prefix(8), epsilon=1e4, rng=0)
    >>> r.eps1, r.eps2, (np.round(r.x_hat, 2) + 0.0).tolist()
    (2500.0, 7500.0, [0.0, 0.0, 0.0, 0.0, 50.0, 50.0, 50.0, 50.0])
    """
    x = check_histogram(x, workload.n, workload.domain)
    rho = _check_rho(rho)
    branching = check_branching(branching)
    if not isinstance(all_intervals, (bool, np.bool_)):
        raise InputError(f"all_intervals must be true or false, got {all_intervals!r}")
    if noise not in NOISE_RULES:
        raise InputError(f"unknown stage-1 noise rule {noise!r}; use one of {', '.join(NOISE_RULES)}")
    epsilon = PureDP(epsilon).epsilon  # validated as every privacy setting is
    MappedWorkload.check(workload)  # stage 2's mapping must be possible before stage 1 draws noise
    sampler = resolve_sampler(sampler, rng)
    order = domain_order(workload.domain)
    gen = np.random.default_rng(rng) if sampler == "simulate" else None  # OpenDP draws its own noise
    x_ord = x[order]
    n = x.size
    if rho == 0.0 or n == 1:
        eps1, eps2 = 0.0, float(epsilon)
    else:
        eps1 = rho * epsilon
        eps2 = epsilon - eps1
        while Fraction(eps1) + Fraction(eps2) > Fraction(epsilon):  # the stages' exact sum stays within epsilon (math.fsum rounds: 0.025 + 0.07500000000000001 passed it at 0.1)
            eps2 = math.nextafter(eps2, 0.0)
    _check_resolution(x, eps1, eps2, bool(all_intervals), noise)
    if eps1 == 0.0:
        edges = np.arange(n + 1)
    else:
        edges = private_partition(x_ord, eps1, eps2, gen, all_intervals=bool(all_intervals), noise=noise, sampler=sampler)
    log.info("DAWA stage 1: %d buckets over %d cells (eps1 = %.4g)", edges.size - 1, n, eps1)
    tree = greedy_hierarchy(MappedWorkload(workload, order, edges), branching)
    A = tree.strategy()
    y, scale = measure(
        A, bucket_counts(x_ord, edges), PureDP(eps2), rng=gen, sampler=sampler,
        what="DAWA's stage-2 answers (hierarchy queries over the bucket totals)",
    )
    x_hat = np.empty(n)
    x_hat[order] = expand(tree.least_squares(y), edges)
    log.info("DAWA stage 2: %d strategy queries, Laplace scale %.4g", A.shape[0], scale)
    return DawaResult(x_hat, edges, order, tree, eps1, eps2, scale)


#: Relative rounding margin of `_check_resolution`'s limits (GreedyH's strategy sensitivity, 1.0000000000000002
#: measured; the rounding of a computed stage-1 cost).
_SENSITIVITY_MARGIN = 1e-12


def _binade_top(scale: float) -> float:
    """The least power of two that `check_noise_resolution` refuses a value at for noise of ``scale`` (inf past float64)."""
    if not 0.0 < scale < math.inf:
        return math.inf
    e = resolution_exponent(scale)
    return 2.0**e if e < 1024 else math.inf


def _check_resolution(x: np.ndarray, eps1: float, eps2: float, all_intervals: bool, noise: str) -> None:
    """Refuse, before any noise, a histogram whose total is too large for float64 to carry either stage's noise.

    Both stages' noisy values are bounded through the total count t alone: a
    stage-1 cost of a bucket of length L by ``2 t (1 - 1/L) + 1/eps2`` at its
    Laplace scale (Thm 6.1, `cost_noise_scales`), a stage-2 answer by ``t``
    (GreedyH's strategy has sensitivity 1, up to rounding) at scale ``1/eps2``.
    The largest total all of them allow under `check_noise_resolution`'s rule is
    one threshold, so a refusal depends on the data only through whether t
    reaches it (an outside audit found neighbouring histograms refused by
    different stages, with different messages, at epsilon = 4e9), and the
    per-stage checks then pass. Limits that no data could meet (the noise
    itself beyond float64) are left to the checks that refuse them for every data.
    The price is a refusal of some histograms whose buckets the per-stage checks
    would have passed (arange(16) at epsilon 1e13: every bucket's total is below
    64, the whole total is not; flat data, whose deviations are zero, up to 15x
    the limit); at epsilon 1 the threshold is about 5.6e14 (rho 0.25).
    """
    # stage 2: values up to Delta_A t at scale Delta_A / eps2, Delta_A = 1 up to rounding (1.0 or 1.0000000000000002
    # over 315 GreedyH strategies measured, never below 1)
    limits = [_binade_top(1.0 / eps2) * (1.0 - _SENSITIVITY_MARGIN)]
    if eps1 > 0:
        lengths = candidate_lengths(x.size, all_intervals)
        lengths = lengths[lengths > 1]
        for L, scale in zip(lengths, cost_noise_scales(lengths, eps1, noise)):
            # the margin covers the rounding of the computed cost dev + 1/eps2 (it reached 2^e exactly in an audit)
            limits.append((_binade_top(float(scale)) * (1.0 - _SENSITIVITY_MARGIN) - 1.0 / eps2) / (2.0 * (1.0 - 1.0 / L)))
    limits = [v for v in limits if v > 0]
    limit = min(limits, default=math.inf)
    if limit < 1.0:  # no histogram with a count in it fits: the epsilon, not the data, is the cause
        raise PrecisionError(
            f"DAWA at epsilon {eps1 + eps2:g}: its noise (stage-2 scale {1.0 / eps2:.3g}) is finer than float64 resolves "
            f"at any count of 1 or more; use a smaller epsilon"
        )
    if not float(x.sum()) < limit:
        raise PrecisionError(
            f"DAWA's input: a histogram whose total count reaches {limit:.5g} is too large for float64 to carry DAWA's noise "
            f"(stage-2 scale {1.0 / eps2:.3g}); rescale the data (count in larger units), split it into parts with smaller "
            f"counts, or spend a smaller epsilon (larger noise)"
        )


#: DAWA's options and their defaults (those of `dawa_estimate`).
_OPTIONS = {"rho": DEFAULT_RHO, "branching": 2, "all_intervals": False, "noise": "bucket"}


@register_release(
    "dawa",
    privacy=("pure",),
    source="Li, Hay, Miklau, Wang, PVLDB 2014; Li 2013, Ch. 6",
    summary="private partition + GreedyH + uniform expansion (options rho=0.25, branching=2, all_intervals=false, noise=bucket|uniform)",
)
def dawa(x, workload: Workload, privacy: Privacy, *, rng=None, sampler: str | None = None, **options) -> Release:
    """DAWA release: workload answers from the expanded estimate.

    Options: ``rho``, ``branching``, ``all_intervals``, ``noise`` (see `dawa_estimate`).
    No confidence intervals: the error includes the partition's bias.

    Examples
    --------
    At an epsilon so large that the noise vanishes, the answers are the true prefix sums:

    >>> from strategy_opt.privacy import PureDP
    >>> x = np.array([10.0, 10.0, 10.0, 10.0, 0.0, 0.0, 0.0, 50.0])
    >>> r = dawa(x, "prefix:8", PureDP(1e6), rng=0)
    >>> r.answers.round(3).tolist(), r.facts["epsilon_partition"]  # rho = 0.25 of epsilon
    ([10.0, 20.0, 30.0, 40.0, 40.0, 40.0, 40.0, 90.0], 250000.0)
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InputError(f"unknown DAWA option(s) {', '.join(unknown)}; available: {', '.join(_OPTIONS)}")
    if privacy.notion != "pure":
        raise InputError(f"DAWA is eps-DP (privacy 'pure'), got {privacy.notion!r}")
    effective = {**_OPTIONS, **options}
    result = dawa_estimate(x, workload, privacy.epsilon, rng=rng, sampler=sampler, **effective)
    facts = effective | {"epsilon_partition": result.eps1, "epsilon_measurement": result.eps2, "buckets": result.buckets}
    return Release(workload.matvec(result.x_hat), None, None, result.x_hat, result.noise_scale, facts)


def rectangle_workload(shape, lo, hi, spec: str = "rectangles") -> ExplicitWorkload:
    """Axis-aligned rectangle counts on a 2-D grid as an explicit sparse workload.

    Parameters
    ----------
    shape : (n1, n2)
    lo, hi : array_like, shape (m, 2)
        Inclusive 0-based corners: query r sums cells ``lo[r] <= (i, j) <= hi[r]``.
    spec : str
        Name recorded as the workload's spec.

    Examples
    --------
    >>> W = rectangle_workload((3, 4), [[0, 1]], [[1, 2]])
    >>> W.matrix().toarray().reshape(3, 4).astype(int).tolist()
    [[0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    """
    n1, n2 = (int(d) for d in shape)
    lo = np.asarray(lo, dtype=np.int64).reshape(-1, 2)
    hi = np.asarray(hi, dtype=np.int64).reshape(-1, 2)
    if lo.shape != hi.shape or np.any(lo < 0) or np.any(hi < lo) or np.any(hi >= [n1, n2]):
        raise InputError(f"rectangle corners must satisfy 0 <= lo <= hi < {(n1, n2)}")
    rows = hi[:, 0] - lo[:, 0] + 1
    cols = hi[:, 1] - lo[:, 1] + 1
    # one run of cols[q] consecutive cells per (query, grid row)
    q = np.repeat(np.arange(lo.shape[0]), rows)
    r = np.arange(q.size) - np.repeat(np.cumsum(rows) - rows, rows) + lo[q, 0]
    run_len = cols[q]
    run_start = r * n2 + lo[q, 1]
    idx = np.arange(run_len.sum()) - np.repeat(np.cumsum(run_len) - run_len, run_len) + np.repeat(run_start, run_len)
    per_query = rows * cols
    indptr = np.concatenate([[0], np.cumsum(per_query)])
    M = sp.csr_matrix((np.ones(idx.size), idx, indptr), shape=(lo.shape[0], n1 * n2))
    return ExplicitWorkload(M, spec, (n1, n2))


def random_rectangles(shape, m: int, seed: int = 0) -> ExplicitWorkload:
    """m random rectangles: per axis two uniform cells, sorted (the 2-D analogue of ``random-range``).

    Parameters
    ----------
    shape : (int, int)
        The grid.
    m : int
        Number of rectangles.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Examples
    --------
    >>> W = random_rectangles((4, 4), 3, seed=0)
    >>> W.shape, W.domain, W.spec
    ((3, 16), (4, 4), 'random-rectangles:4x4:3:0')
    """
    n1, n2 = (int(d) for d in shape)
    rng = np.random.default_rng(seed)
    a = np.sort(rng.integers(0, n1, size=(m, 2)), axis=1)
    b = np.sort(rng.integers(0, n2, size=(m, 2)), axis=1)
    return rectangle_workload((n1, n2), np.column_stack([a[:, 0], b[:, 0]]), np.column_stack([a[:, 1], b[:, 1]]), f"random-rectangles:{n1}x{n2}:{m}:{seed}")
