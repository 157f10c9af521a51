"""DAWA stage 1: private partitioning of an ordered domain into near-uniform buckets.

Li 2013 (dissertation), Sec. 6.3, Program 6.3.1; Li, Hay, Miklau, Wang (PVLDB
2014), Sec. 3, Algorithm 1. A partition ``B = {b_1, ..., b_k}`` of the cells
``0..n-1`` into contiguous buckets is chosen to minimise

    pcost(x, B) = sum_b bcost(x, b),   bcost(x, b) = dev(x, b) + 1/eps2      (Def. 6.2, 6.3)
    dev(x, b)   = sum_{j in b} |x_j - b(x)/|b||                                (Eq. 6.2)

privately: every candidate bucket's cost gets independent Laplace noise, and
only the partition with the least *noisy* cost is released (Thm 6.1).

Candidates (Sec. 6.3.2.3): buckets whose length is a power of two, at every
start position (not only aligned, dyadic ones), ``O(n log n)`` of them -- the
default -- or all ``n(n+1)/2`` intervals (``all_intervals=True``).

Costs. The deviation of every candidate is computed exactly with
``dev = 2 (S+ - c+ m)`` (Sec. 6.3.2.3; the dissertation's last line drops the
factor 2 on the second term), where ``c+``/``S+`` are the count/sum of the
bucket's values ``>= m`` (its mean). The dissertation keeps a balanced search
tree per sliding window; we answer the same "count and sum of values >= a
threshold in a position range" queries for all candidates at once with a
wavelet matrix over the value ranks (Claude, Navarro, Ordonez, SPIRE 2012):
``O(log n)`` array gathers per candidate, vectorised over candidates, so
``O(n log^2 n)`` for the power-of-two candidates and ``O(n^2 log n)`` for all
intervals -- the dissertation's bounds.

Noise (Thm 6.1 and the Remark after its proof). The cost of bucket b changes
by at most ``Delta_b = 2 - 2/|b|`` when one record is added or removed: the
changed cell moves by at most ``1 - 1/|b|`` relative to the mean and each of
the other ``|b| - 1`` cells by ``1/|b|`` (triangle inequality); the bound is
attained at ``x|_b = (0, ..., 0, c)``. It is at most the dissertation's
``Delta_bcost <= 2``. With ``Delta = max_b Delta_b`` over the candidates:

* ``noise="bucket"`` (default; the Remark, "used in the experiments"): bucket b
  gets ``Laplace((Delta + Delta_b) / eps1)``. In the proof of Thm 6.1 the
  threshold ``C(I, z^-i)`` on the noise of the bucket holding the changed
  record moves by at most ``Delta_b`` (cost of H) plus ``Delta`` (the best
  competitor), so Lemma 4 gives the factor ``e^eps1``.
* ``noise="uniform"`` (Program 6.3.1 as printed): every bucket gets
  ``Laplace(2 Delta / eps1)``.

Every candidate, unit buckets included, is noised: the proof needs noise on
whichever bucket holds the changed record. (Later reference code uses about
half this scale and leaves unit buckets un-noised; its guarantee is not covered
by Thm 6.1 -- see the notes.) The noise is drawn by the caller's sampler:
OpenDP's vetted Laplace (``sampler="opendp"``, the default without a seed, about
17 us per candidate) or NumPy's seeded generator (``"simulate"``, for
simulations). Only the argmin partition is released, never a noisy cost.

The least-cost partition is found by dynamic programming over bucket end
points (v-optimal style, Jagadish et al. 1998): ``O(n log n)`` for the
power-of-two candidates, ``O(n^2)`` for all intervals.

2-D domains are linearised along a Hilbert curve (`hilbert_order`, Sec. 6.5.5).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from .exceptions import InputError
from .executor import check_histogram, check_noise_resolution, resolve_sampler
from .samplers import opendp_perturb

log = logging.getLogger("strategy_opt")

__all__ = [
    "NOISE_RULES",
    "MAX_ALL_INTERVALS_N",
    "bucket_deviations",
    "candidate_buckets",
    "candidate_lengths",
    "bucket_sensitivity",
    "cost_noise_scales",
    "least_cost_partition",
    "private_partition",
    "optimal_partition",
    "partition_cost",
    "bucket_counts",
    "expand",
    "hilbert_order",
]

#: Stage-1 noise rules (see the module docstring).
NOISE_RULES = ("bucket", "uniform")

#: Largest domain for the all-intervals candidates (their costs take O(n^2) memory).
MAX_ALL_INTERVALS_N = 8192

#: Candidate count above which drawing their OpenDP noise is announced (about 3 s).
_SLOW_OPENDP_CANDIDATES = 300_000

#: OpenDP draws the stage-1 noise on the grid of multiples of 2^this (`opendp_stage1_scales`
#: accounts for the rounding): about 4x faster than its default, finest grid.
STAGE1_GRANULARITY_EXPONENT = -30

#: Candidates per batch when computing all-interval costs (bounds temporary memory).
_BATCH = 1 << 20


class _RangeThresholdSums:
    """Count and sum of the values ranked ``>= t`` among positions ``[lo, hi)``.

    A wavelet matrix (Claude, Navarro, Ordonez 2012) over the ranks of the
    values (a permutation of ``0..n-1``; ties broken by position). Level by
    level from the most significant bit, it stores the prefix count of zero
    bits and the prefix sum of the values whose bit is one, in that level's
    order. A query descends the bits of t; where t has a 0 bit, every element
    of the range with a 1 bit is ranked above t and is added in one step.
    """

    def __init__(self, x: np.ndarray):
        n = x.size
        order = np.argsort(x, kind="stable")
        self.sorted_values = x[order]
        ranks = np.empty(n, dtype=np.int64)
        ranks[order] = np.arange(n)
        self.levels = []
        cur = ranks
        for b in reversed(range(max(1, int(n).bit_length()))):
            bit = (cur >> b) & 1
            zeros = np.concatenate([[0], np.cumsum(1 - bit)])
            ones_sum = np.concatenate([[0.0], np.cumsum(self.sorted_values[cur] * bit)])
            self.levels.append((b, zeros, ones_sum, int(zeros[-1])))
            cur = np.concatenate([cur[bit == 0], cur[bit == 1]])

    def at_least(self, lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(count, sum)`` of the values ranked ``>= t[i]`` among positions ``[lo[i], hi[i])``."""
        count = np.zeros(lo.size, dtype=np.int64)
        total = np.zeros(lo.size)
        left, right = lo.copy(), hi.copy()
        for b, zeros, ones_sum, n_zeros in self.levels:
            above = ((t >> b) & 1) == 0
            zl, zr = zeros[left], zeros[right]
            count += np.where(above, (right - left) - (zr - zl), 0)
            total += np.where(above, ones_sum[right] - ones_sum[left], 0.0)
            left = np.where(above, zl, n_zeros + left - zl)
            right = np.where(above, zr, n_zeros + right - zr)
        equal = right - left
        count += equal
        total += equal * self.sorted_values[np.minimum(t, self.sorted_values.size - 1)]
        return count, total


def bucket_deviations(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, _tree: _RangeThresholdSums | None = None) -> np.ndarray:
    """``dev(x, [lo, hi))`` for every bucket (Eq. 6.2), exactly, in O(log n) each.

    Parameters
    ----------
    x : ndarray (n,)
        The (ordered) histogram.
    lo, hi : ndarray of int
        Bucket bounds, ``0 <= lo < hi <= n`` (hi exclusive).

    Examples
    --------
    >>> x = np.array([2., 3, 8, 1, 0, 2, 0, 4, 2, 4])       # Li 2013, Example 6.2
    >>> bucket_deviations(x, np.array([0, 2, 3, 7, 0]), np.array([2, 3, 7, 10, 10])).round(4).tolist()
    [1.0, 0.0, 3.0, 2.6667, 17.2]
    """
    x = np.asarray(x, dtype=float)
    tree = _tree or _RangeThresholdSums(x)
    csum = np.concatenate([[0.0], np.cumsum(x)])
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    size = (hi - lo).astype(float)
    s = csum[hi] - csum[lo]
    t = np.searchsorted(tree.sorted_values, s / size, side="left")
    c_plus, s_plus = tree.at_least(lo, hi, t)
    # dev = 2 (S+ - c+ s/|b|), written over the common denominator |b| so that
    # integer data stay exact until the final division
    return np.maximum(2.0 * (s_plus * size - c_plus * s) / size, 0.0)


def candidate_lengths(n: int, all_intervals: bool = False) -> np.ndarray:
    """The candidate bucket lengths: powers of two ``1, 2, 4, ... <= n`` (default), or every length ``1..n``.

    Examples
    --------
    >>> candidate_lengths(6).tolist(), candidate_lengths(3, all_intervals=True).tolist()
    ([1, 2, 4], [1, 2, 3])
    """
    lengths = np.arange(1, n + 1) if all_intervals else 1 << np.arange(int(n).bit_length())
    return lengths[lengths <= n]


def candidate_buckets(n: int, all_intervals: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Candidate buckets ``[lo, lo + length)``, grouped by increasing length.

    Power-of-two lengths ``1, 2, 4, ... <= n`` at every start (default), or
    every length ``1..n`` at every start.

    Parameters
    ----------
    n : int
        Number of cells (>= 1).
    all_intervals : bool, default False
        Every length ``1..n`` instead of the powers of two.

    Returns
    -------
    lo, length : ndarray of int
        Start and length of each candidate, by increasing length, then start.

    Examples
    --------
    >>> lo, length = candidate_buckets(4)
    >>> lo.tolist(), length.tolist()
    ([0, 1, 2, 3, 0, 1, 2, 0], [1, 1, 1, 1, 2, 2, 2, 4])
    """
    lengths = candidate_lengths(n, all_intervals)
    counts = n - lengths + 1
    length = np.repeat(lengths, counts)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    lo = np.arange(length.size) - np.repeat(offsets[:-1], counts)
    return lo.astype(np.int64), length.astype(np.int64)


def bucket_sensitivity(length) -> np.ndarray:
    """Largest change of ``dev(x, b)`` when one record is added or removed: ``2 - 2/|b|``.

    Parameters
    ----------
    length : int or array_like of int
        Bucket lengths (>= 1).

    Returns
    -------
    ndarray of float
        Same shape as ``length`` (a 0-d array for a scalar).

    Examples
    --------
    >>> bucket_sensitivity([1, 2, 4]).tolist()  # a unit bucket's deviation is always 0
    [0.0, 1.0, 1.5]
    """
    return 2.0 - 2.0 / np.asarray(length, dtype=float)


def cost_noise_scales(length: np.ndarray, eps1: float, rule: str = "bucket") -> np.ndarray:
    """Laplace scale of the noise on each candidate's cost (Thm 6.1 and its Remark).

    Parameters
    ----------
    length : ndarray of int
        Lengths of all candidate buckets (the largest one sets ``Delta``).
    eps1 : float
        Stage-1 budget.
    rule : {'bucket', 'uniform'}
        ``(Delta + Delta_b)/eps1`` per bucket, or ``2 Delta/eps1`` for all.

    Returns
    -------
    ndarray of float
        One scale per entry of ``length``.

    Raises
    ------
    InputError
        For an unknown rule.

    Examples
    --------
    The longest candidate (4 cells) has ``Delta = 2 - 2/4 = 1.5``:

    >>> cost_noise_scales(np.array([1, 2, 4]), eps1=1.0).tolist()
    [1.5, 2.5, 3.0]
    >>> cost_noise_scales(np.array([1, 2, 4]), eps1=0.5, rule="uniform").tolist()
    [6.0, 6.0, 6.0]
    """
    delta_max = float(bucket_sensitivity(length.max()))
    if rule == "bucket":
        return (delta_max + bucket_sensitivity(length)) / eps1
    if rule == "uniform":
        return np.full(length.size, 2.0 * delta_max / eps1)
    raise InputError(f"unknown stage-1 noise rule {rule!r}; use one of {', '.join(NOISE_RULES)}")


def opendp_stage1_scales(scales: np.ndarray, eps1: float) -> np.ndarray:
    """Thm 6.1's scales for costs that OpenDP first rounds to multiples of ``g = 2^STAGE1_GRANULARITY_EXPONENT``.

    The proof of Thm 6.1 uses only how far one bucket's cost moves between
    neighbouring histograms (``Delta_b``, at most ``Delta``; Lemma 5) and a
    shift property of the noise law (Lemma 4, which discrete Laplace noise on
    the grid also has for shifts on the grid). Rounding adds at most ``g`` to
    each move, so both sensitivities in a scale ``(Delta + Delta_b)/eps1``
    (or ``2 Delta/eps1``) grow by g: the scale grows by ``2 g / eps1``.

    Examples
    --------
    >>> float(opendp_stage1_scales(np.array([4.0]), 1.0)[0] - 4.0) == 2.0 ** (STAGE1_GRANULARITY_EXPONENT + 1)
    True
    """
    return scales + 2.0 * 2.0**STAGE1_GRANULARITY_EXPONENT / eps1


def _candidate_costs(x: np.ndarray, lo: np.ndarray, length: np.ndarray, eps2: float) -> np.ndarray:
    tree = _RangeThresholdSums(x)
    out = np.empty(lo.size)
    for s in range(0, lo.size, _BATCH):
        sl = slice(s, s + _BATCH)
        out[sl] = bucket_deviations(x, lo[sl], lo[sl] + length[sl], tree)
    return out + 1.0 / eps2


def least_cost_partition(n: int, lo: np.ndarray, length: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Partition of ``0..n-1`` into candidate buckets with the least total cost.

    Dynamic program over end points: ``C[j] = min_{[i, j) candidate} C[i] + cost([i, j))``.
    Ties (probability zero under continuous noise) go to the longest bucket.

    Parameters
    ----------
    n : int
    lo, length, cost : ndarray
        Candidates as returned by `candidate_buckets` (every unit bucket
        included, so a partition always exists) and their (noisy) costs.

    Returns
    -------
    edges : ndarray of int, shape (k + 1,)
        Bucket boundaries ``0 = e_0 < e_1 < ... < e_k = n``.

    Raises
    ------
    InputError
        When the candidates are not laid out as `candidate_buckets` returns them.

    Examples
    --------
    Unit buckets cost 1 each, ``[0, 2)`` and ``[2, 4)`` cost 0.5, the rest 5: two pairs (total 1) win:

    >>> lo, length = candidate_buckets(4)
    >>> cost = np.array([1, 1, 1, 1, 0.5, 5, 0.5, 5])
    >>> least_cost_partition(4, lo, length, cost).tolist()
    [0, 2, 4]
    """
    lo, length, cost = np.asarray(lo), np.asarray(length), np.asarray(cost)
    lengths, first = np.unique(length, return_index=True)
    counts = n - lengths + 1
    if not (
        lo.shape == length.shape == cost.shape
        and lengths.size and lengths[0] == 1 and lengths[-1] <= n
        and np.array_equal(length, np.repeat(lengths, counts))
        and np.array_equal(lo, np.arange(lo.size) - np.repeat(first, counts))
    ):
        raise InputError(
            "candidates must be laid out as candidate_buckets returns them: grouped by increasing length, from "
            "length 1, each length at every start 0..n - length (the dynamic program reads them by position)"
        )
    if lengths.size == n and n > 2:
        start = _dp_all_intervals(n, first, cost)
    else:
        start = _dp_lengths(n, lengths, first, cost)
    edges = [n]
    while edges[-1] > 0:
        edges.append(start[edges[-1]])
    return np.array(edges[::-1], dtype=np.int64)


def _dp_lengths(n: int, lengths: np.ndarray, first: np.ndarray, cost: np.ndarray) -> list[int]:
    by_length = [cost[f : f + n - L + 1].tolist() for L, f in zip(lengths.tolist(), first.tolist())]
    pairs = list(zip(lengths.tolist(), by_length))[::-1]
    best = [0.0] * (n + 1)
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        b, s = math.inf, j - 1
        for L, c in pairs:
            if L <= j:
                v = best[j - L] + c[j - L]
                if v < b:
                    b, s = v, j - L
        best[j], start[j] = b, s
    return start


def _dp_all_intervals(n: int, first: np.ndarray, cost: np.ndarray) -> list[int]:
    best = np.zeros(n + 1)
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        i = np.arange(j)
        v = best[:j] + cost[first[j - i - 1] + i]
        s = int(np.argmin(v))
        best[j], start[j] = v[s], s
    return start


def private_partition(
    x,
    eps1: float,
    eps2: float,
    rng=None,
    *,
    all_intervals: bool = False,
    noise: str = "bucket",
    sampler: str | None = None,
) -> np.ndarray:
    """Stage 1 of DAWA: an eps1-DP partition of the ordered histogram x (Program 6.3.1).

    Parameters
    ----------
    x : array_like (n,)
        Non-negative counts in domain order.
    eps1 : float
        Budget of this stage (> 0).
    eps2 : float
        Budget of stage 2; enters the bucket cost ``dev + 1/eps2`` (public).
    rng : numpy Generator or int, optional
        Source of the cost noise under the ``simulate`` sampler.
    all_intervals : bool
        All intervals as candidates (O(n^2) memory; n <= `MAX_ALL_INTERVALS_N`)
        instead of the power-of-two lengths.
    noise : {'bucket', 'uniform'}
        Noise rule (module docstring).
    sampler : {'opendp', 'simulate'}, optional
        Sampler of the cost noise; default ``'simulate'`` if ``rng`` is given,
        else the vetted ``'opendp'`` (as in `strategy_opt.executor.measure`).

    Returns
    -------
    edges : ndarray of int
        Bucket boundaries ``0 = e_0 < ... < e_k = n``; the only output.

    Examples
    --------
    >>> x = np.r_[np.zeros(64), np.full(64, 50.0)]
    >>> private_partition(x, eps1=1.0, eps2=0.1, rng=0).tolist()
    [0, 64, 128]
    """
    x = check_histogram(x)
    if not (eps1 > 0 and math.isfinite(eps1)) or not (eps2 > 0 and math.isfinite(eps2)):
        raise InputError(f"stage budgets must be positive and finite, got eps1={eps1!r}, eps2={eps2!r}")
    sampler = resolve_sampler(sampler, rng)
    n = x.size
    if all_intervals and n > MAX_ALL_INTERVALS_N:
        raise InputError(
            f"all_intervals needs O(n^2) memory; n = {n} exceeds {MAX_ALL_INTERVALS_N}: use the power-of-two candidates"
        )
    lo, length = candidate_buckets(n, all_intervals)
    cost = _candidate_costs(x, lo, length, eps2)
    with np.errstate(over="ignore"):  # checked just below
        scales = cost_noise_scales(length, eps1, noise)
    if not np.all(np.isfinite(scales)):
        raise InputError(f"stage-1 budget eps1 = {eps1:g} is too small: its noise scale overflows float64 (raise rho or epsilon)")
    check_noise_resolution(cost, scales, "DAWA's stage-1 bucket costs (deviations from the bucket means)")
    if sampler == "opendp":
        if cost.size > _SLOW_OPENDP_CANDIDATES:
            log.info("DAWA stage 1: drawing OpenDP noise for %d candidate costs (about %.0f s)", cost.size, cost.size * 1.0e-5)
        cost = opendp_perturb(cost, opendp_stage1_scales(scales, eps1), granularity_exponent=STAGE1_GRANULARITY_EXPONENT)
    else:
        cost += np.random.default_rng(rng).laplace(0.0, 1.0, cost.size) * scales
    return least_cost_partition(n, lo, length, cost)


def optimal_partition(x, eps2: float, *, all_intervals: bool = False) -> np.ndarray:
    """The least-cost partition without noise (Problem 6.1) -- NOT private.

    For analysis only (the "optimal partition" of Li 2013, Table 6.1 and
    Fig. 6.4): the same candidates and dynamic program as `private_partition`
    on the exact costs.

    Parameters
    ----------
    x : array_like (n,)
        Non-negative counts in domain order.
    eps2 : float
        Stage-2 budget; each bucket costs ``dev + 1/eps2``.
    all_intervals : bool, default False
        All intervals as candidates (n <= `MAX_ALL_INTERVALS_N`) instead of the power-of-two lengths.

    Returns
    -------
    edges : ndarray of int
        Bucket boundaries ``0 = e_0 < ... < e_k = n``.

    Examples
    --------
    Two flat halves: the pairs cost ``0 + 1`` each (total 2); four unit buckets cost 4; one bucket costs
    ``dev = 4 * 2.5`` plus 1:

    >>> optimal_partition([0, 0, 5, 5], eps2=1.0).tolist()
    [0, 2, 4]
    """
    x = check_histogram(x)
    if all_intervals and x.size > MAX_ALL_INTERVALS_N:
        raise InputError(f"all_intervals needs O(n^2) memory; n = {x.size} exceeds {MAX_ALL_INTERVALS_N}")
    lo, length = candidate_buckets(x.size, all_intervals)
    return least_cost_partition(x.size, lo, length, _candidate_costs(x, lo, length, eps2))


def partition_cost(x, edges: np.ndarray, eps2: float) -> float:
    """``pcost(x, B) = sum_b dev(x, b) + k/eps2`` (Def. 6.2), without noise.

    Parameters
    ----------
    x : array_like (n,)
        The histogram.
    edges : ndarray of int
        Bucket boundaries ``0 = e_0 < ... < e_k = n``.
    eps2 : float
        Stage-2 budget.

    Returns
    -------
    float

    Examples
    --------
    Buckets ``{1, 3}`` and ``{5, 7}`` each deviate by 2 from their means; two buckets add ``2/eps2``:

    >>> partition_cost([1, 3, 5, 7], np.array([0, 2, 4]), eps2=1.0)
    6.0
    >>> partition_cost([1, 3, 5, 7], np.array([0, 4]), eps2=1.0)  # |1-4| + |3-4| + |5-4| + |7-4| + 1
    9.0
    """
    x = np.asarray(x, dtype=float).ravel()
    return float(bucket_deviations(x, edges[:-1], edges[1:]).sum() + (edges.size - 1) / eps2)


def bucket_counts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bucket totals ``b_i(x)``.

    Parameters
    ----------
    x : ndarray (n,)
        The histogram.
    edges : ndarray of int
        Bucket boundaries ``0 = e_0 < ... < e_k = n``.

    Returns
    -------
    ndarray of float, shape (k,)

    Examples
    --------
    >>> bucket_counts(np.array([1, 3, 5, 7]), np.array([0, 2, 4])).tolist()
    [4.0, 12.0]
    """
    return np.add.reduceat(np.asarray(x, dtype=float), edges[:-1])


def expand(s: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Uniform expansion (Def. 6.1): cell j of bucket i gets ``s_i / |b_i|``.

    Parameters
    ----------
    s : ndarray (k,)
        One (estimated) total per bucket.
    edges : ndarray of int
        Bucket boundaries ``0 = e_0 < ... < e_k = n``.

    Returns
    -------
    ndarray of float, shape (n,)

    Examples
    --------
    >>> expand(np.array([4.0, 12.0]), np.array([0, 2, 4])).tolist()
    [2.0, 2.0, 6.0, 6.0]
    """
    sizes = np.diff(edges)
    return np.repeat(np.asarray(s, dtype=float) / sizes, sizes)


def _hilbert_index(side: int, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Position of cell (r, c) along the Hilbert curve of a ``side x side`` grid (side a power of 2)."""
    r, c = r.copy(), c.copy()
    d = np.zeros(r.shape, dtype=np.int64)
    s = side // 2
    while s > 0:
        rx = (r & s) > 0
        ry = (c & s) > 0
        d += s * s * ((3 * rx.astype(np.int64)) ^ ry.astype(np.int64))
        flip = ~ry & rx
        r = np.where(flip, side - 1 - r, r)
        c = np.where(flip, side - 1 - c, c)
        swap = ~ry
        r, c = np.where(swap, c, r), np.where(swap, r, c)
        s //= 2
    return d


def hilbert_order(shape) -> np.ndarray:
    """Cells of an ``n1 x n2`` grid (row-major ids) in Hilbert-curve order.

    The grid is placed in the smallest ``2^p x 2^p`` square holding it and its
    cells are sorted by their position along that square's Hilbert curve
    (Li 2013, Sec. 6.5.5); cells of the padding are skipped, so the order
    covers exactly the ``n1 * n2`` cells for any n1, n2. A 1-D domain keeps its
    order.

    Returns
    -------
    order : ndarray of int
        ``order[k]`` is the row-major id of the k-th cell along the curve.

    Examples
    --------
    >>> hilbert_order((2, 2)).tolist()
    [0, 1, 3, 2]
    """
    shape = tuple(int(d) for d in shape)
    if len(shape) == 1:
        return np.arange(shape[0])
    if len(shape) != 2:
        raise InputError(f"Hilbert ordering needs a 1-D or 2-D domain, got shape {shape}")
    n1, n2 = shape
    side = 1 << max(0, (max(n1, n2) - 1).bit_length())
    r, c = np.divmod(np.arange(n1 * n2, dtype=np.int64), n2)
    return np.argsort(_hilbert_index(side, r, c), kind="stable")
