"""DAWA stage 1 (strategy_opt.partition): costs, sensitivity, dynamic program, Hilbert order."""

from itertools import product

import numpy as np
import pytest

from strategy_opt.exceptions import InputError
from strategy_opt.partition import (
    MAX_ALL_INTERVALS_N,
    bucket_counts,
    bucket_deviations,
    bucket_sensitivity,
    candidate_buckets,
    cost_noise_scales,
    expand,
    hilbert_order,
    least_cost_partition,
    optimal_partition,
    partition_cost,
    private_partition,
)

EXAMPLE_X = np.array([2.0, 3, 8, 1, 0, 2, 0, 4, 2, 4])  # Li 2013, Example 6.1
EXAMPLE_EDGES = np.array([0, 2, 3, 7, 10])


def brute_dev(x, lo, hi):
    b = x[lo:hi]
    return np.abs(b - b.mean()).sum()


def compositions(n, allowed):
    """All partitions of 0..n-1 into contiguous buckets with lengths in `allowed`, as edge tuples."""
    if n == 0:
        return [(0,)]
    out = []
    for L in allowed:
        if L <= n:
            out += [e + (e[-1] + L,) for e in compositions(n - L, allowed)]
    return out


def test_example_6_2_deviations_and_costs():
    devs = bucket_deviations(EXAMPLE_X, EXAMPLE_EDGES[:-1], EXAMPLE_EDGES[1:])
    np.testing.assert_allclose(devs, [1.0, 0.0, 3.0, 8.0 / 3.0])
    assert bucket_deviations(EXAMPLE_X, np.array([0]), np.array([10]))[0] == pytest.approx(17.2)
    assert partition_cost(EXAMPLE_X, EXAMPLE_EDGES, eps2=1.0) == pytest.approx(10 + 2 / 3)
    assert partition_cost(EXAMPLE_X, np.array([0, 10]), eps2=1.0) == pytest.approx(18.2)
    # at eps2 = 0.1 the single bucket is cheaper (noise ~ +-10 swamps the deviations)
    assert partition_cost(EXAMPLE_X, np.array([0, 10]), 0.1) < partition_cost(EXAMPLE_X, EXAMPLE_EDGES, 0.1)
    np.testing.assert_allclose(bucket_counts(EXAMPLE_X, EXAMPLE_EDGES), [5, 8, 3, 10])


@pytest.mark.parametrize("kind", ["integers", "ties", "floats", "zeros"])
def test_deviations_match_brute_force(kind):
    rng = np.random.default_rng(1)
    n = 77
    x = {
        "integers": rng.integers(0, 1000, n).astype(float),
        "ties": rng.integers(0, 3, n).astype(float),
        "floats": rng.exponential(5.0, n),
        "zeros": np.zeros(n),
    }[kind]
    lo, length = candidate_buckets(n, all_intervals=True)
    got = bucket_deviations(x, lo, lo + length)
    want = np.array([brute_dev(x, a, a + L) for a, L in zip(lo, length)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


def test_candidates():
    lo, length = candidate_buckets(10)
    assert sorted(set(length.tolist())) == [1, 2, 4, 8]
    assert lo.size == 10 + 9 + 7 + 3
    assert np.all(lo + length <= 10)
    lo, length = candidate_buckets(6, all_intervals=True)
    assert lo.size == 21
    assert {(int(a), int(a + L)) for a, L in zip(lo, length)} == {(i, j) for i in range(6) for j in range(i + 1, 7)}


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_bucket_sensitivity_is_exact(L):
    """sup over x in {0..3}^L and one added record of |dev(x') - dev(x)| equals 2 - 2/L."""
    worst = 0.0
    for x in product(range(4), repeat=L):
        x = np.array(x, dtype=float)
        d0 = brute_dev(x, 0, L)
        for j in range(L):
            y = x.copy()
            y[j] += 1
            worst = max(worst, abs(brute_dev(y, 0, L) - d0))
    assert worst == pytest.approx(float(bucket_sensitivity(L)))
    assert bucket_sensitivity(L) <= 2.0  # the dissertation's bound Delta_bcost <= 2


def test_noise_scales():
    length = np.array([1, 2, 4, 8])
    delta = 2 - 2 / 8
    np.testing.assert_allclose(cost_noise_scales(length, 0.5, "bucket"), (delta + 2 - 2 / length) / 0.5)
    np.testing.assert_allclose(cost_noise_scales(length, 0.5, "uniform"), 2 * delta / 0.5)
    assert np.all(cost_noise_scales(length, 0.5, "bucket") > 0)  # unit buckets are noised too
    with pytest.raises(InputError):
        cost_noise_scales(length, 0.5, "none")


@pytest.mark.parametrize("all_intervals", [False, True])
def test_dynamic_program_matches_enumeration(all_intervals):
    rng = np.random.default_rng(7)
    n = 9
    lo, length = candidate_buckets(n, all_intervals)
    allowed = sorted(set(length.tolist()))
    index = {(int(a), int(L)): i for i, (a, L) in enumerate(zip(lo, length))}
    for _ in range(20):
        cost = rng.normal(0, 3, lo.size)
        best = min(compositions(n, allowed), key=lambda e: sum(cost[index[(a, b - a)]] for a, b in zip(e[:-1], e[1:])))
        assert tuple(least_cost_partition(n, lo, length, cost).tolist()) == best


def test_private_partition_without_noise_limit_is_optimal():
    """With eps1 huge the noise vanishes and the least-cost (all-intervals) partition is found."""
    rng = np.random.default_rng(3)
    x = np.repeat(rng.integers(0, 50, 5), rng.integers(1, 5, 5)).astype(float)
    n = x.size
    eps2 = 0.5
    best = min(compositions(n, range(1, n + 1)), key=lambda e: partition_cost(x, np.array(e), eps2))
    got = private_partition(x, 1e9, eps2, rng=0, all_intervals=True)
    assert partition_cost(x, got, eps2) == pytest.approx(partition_cost(x, np.array(best), eps2))
    exact = optimal_partition(x, eps2, all_intervals=True)
    assert partition_cost(x, exact, eps2) == pytest.approx(partition_cost(x, np.array(best), eps2))
    pow2 = optimal_partition(x, eps2)
    assert set(np.diff(pow2).tolist()) <= {1, 2, 4, 8, 16}
    assert partition_cost(x, pow2, eps2) >= partition_cost(x, exact, eps2) - 1e-9


def test_private_partition_edge_cases():
    assert private_partition(np.zeros(1), 1.0, 1.0, rng=0).tolist() == [0, 1]
    for x in (np.zeros(50), np.r_[np.zeros(20), 7.0, np.zeros(29)]):
        e = private_partition(x, 1.0, 1.0, rng=0)
        assert e[0] == 0 and e[-1] == 50 and np.all(np.diff(e) > 0)
    with pytest.raises(InputError, match="negative"):
        private_partition(np.array([1.0, -1.0, 2.0]), 1.0, 1.0, rng=0)
    with pytest.raises(InputError):
        private_partition(np.ones(4), 0.0, 1.0)
    with pytest.raises(InputError, match="all_intervals"):
        private_partition(np.ones(MAX_ALL_INTERVALS_N + 1), 1.0, 1.0, all_intervals=True)


def test_private_partition_reproducible_and_finds_structure():
    x = np.r_[np.zeros(512), np.full(512, 1000.0)]
    a = private_partition(x, 1.0, 0.05, rng=5)
    assert np.array_equal(a, private_partition(x, 1.0, 0.05, rng=5))
    assert 512 in a.tolist()  # the step is a bucket boundary


def test_expand_example_6_1():
    s = np.array([6.3, 7.1, 3.6, 8.4])
    np.testing.assert_allclose(expand(s, EXAMPLE_EDGES), [3.15, 3.15, 7.1, 0.9, 0.9, 0.9, 0.9, 2.8, 2.8, 2.8])


@pytest.mark.parametrize("shape", [(1, 9), (3, 5), (7, 2), (8, 8), (13, 11), (16, 16)])
def test_hilbert_order_is_a_permutation(shape):
    order = hilbert_order(shape)
    assert sorted(order.tolist()) == list(range(shape[0] * shape[1]))


@pytest.mark.parametrize("side", [2, 4, 8, 32])
def test_hilbert_order_steps_to_neighbours_on_square_grids(side):
    r, c = np.divmod(hilbert_order((side, side)), side)
    assert np.all(np.abs(np.diff(r)) + np.abs(np.diff(c)) == 1)


def test_hilbert_order_keeps_buckets_compact_on_odd_grids():
    """Consecutive runs of 16 cells on a 13 x 11 grid stay inside small boxes (locality)."""
    r, c = np.divmod(hilbert_order((13, 11)), 11)
    spans = [(np.ptp(r[i : i + 16]) + 1) * (np.ptp(c[i : i + 16]) + 1) for i in range(0, 143 - 16, 16)]
    assert np.median(spans) <= 32


def test_a_stage_one_budget_whose_noise_scale_overflows_is_refused():
    for sampler in ("simulate", "opendp"):
        with pytest.raises(InputError, match="noise scale overflows"):
            private_partition(np.ones(16), 1e-320, 1.0, rng=0 if sampler == "simulate" else None, sampler=sampler)


def test_stage_one_costs_too_large_to_carry_their_noise_are_refused():
    # bucket deviations of 1e17 (alternating 0 and 1e17 counts) are 16 apart in float64,
    # the stage-1 noise scale here is about 2/eps1 = 8: the noise would be rounded away
    from strategy_opt.exceptions import PrecisionError
    from strategy_opt.partition import cost_noise_scales

    x = np.tile([0.0, 1e17], 8)
    assert np.spacing(1e17) * 16 > cost_noise_scales(np.array([2, 16]), 0.25, "bucket").max()
    for sampler in ("simulate", "opendp"):
        with pytest.raises(PrecisionError, match="stage-1 bucket costs .* reach"):
            private_partition(x, 0.25, 0.75, rng=0 if sampler == "simulate" else None, sampler=sampler)
    private_partition(np.tile([0.0, 1e6], 8), 0.25, 0.75, rng=0)  # ordinary counts pass


def test_stage_one_opendp_noise_is_drawn_on_a_grid_with_scales_that_account_for_it(monkeypatch):
    """OpenDP rounds each cost to a multiple of g = 2^-30 before its noise: one bucket's cost then moves by up
    to Delta_b + g between neighbours, so each Thm 6.1 scale (Delta + Delta_b)/eps1 must grow by 2 g / eps1
    (recomputed here from the sensitivities, not from the function under test)."""
    import strategy_opt.partition as partition
    from strategy_opt.partition import bucket_sensitivity, candidate_buckets

    seen = {}
    real = partition.opendp_perturb

    def spy(values, scales, **kw):
        seen.update(scales=np.array(scales), **kw)
        return real(values, scales, **kw)

    monkeypatch.setattr(partition, "opendp_perturb", spy)
    x = np.r_[np.zeros(40), np.full(24, 7.0)]
    eps1 = 0.3
    private_partition(x, eps1=eps1, eps2=0.9, sampler="opendp")
    assert seen["granularity_exponent"] == -30
    _, length = candidate_buckets(x.size, False)
    delta = bucket_sensitivity(length.max())
    g = 2.0**-30
    assert np.allclose(seen["scales"], (delta + g + bucket_sensitivity(length) + g) / eps1, rtol=1e-14, atol=0)
    # the growth itself (6.2e-9 here, far above the rounding of the scales)
    assert np.allclose(seen["scales"] - (delta + bucket_sensitivity(length)) / eps1, 2 * g / eps1, rtol=1e-6, atol=0)


def test_least_cost_partition_refuses_candidates_it_cannot_read():
    # the dynamic program reads candidates by position (candidate_buckets' layout) and ignored lo: any other
    # order gave a wrong partition without a word
    from strategy_opt.partition import candidate_buckets, least_cost_partition

    lo, length = candidate_buckets(8)
    cost = np.random.default_rng(0).random(lo.size)
    assert least_cost_partition(8, lo, length, cost)[-1] == 8
    with pytest.raises(InputError, match="laid out as candidate_buckets returns them"):
        least_cost_partition(8, lo[::-1], length[::-1], cost[::-1])
    with pytest.raises(InputError, match="laid out as candidate_buckets returns them"):
        least_cost_partition(8, lo[8:], length[8:], cost[8:])  # no unit buckets: no partition exists
