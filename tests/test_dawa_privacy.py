"""Empirical privacy of DAWA stage 1 (Thm 6.1): Pr[P | x] <= e^eps1 Pr[P | x'] for neighbours.

On domains small enough to enumerate every partition into power-of-two
buckets, the partition released by `private_partition` is sampled many times
on x and on a neighbour x' (one count +1). For every partition P both
``Pr[P|x] <= e^eps1 Pr[P|x']`` and the reverse must hold; with Clopper-Pearson
intervals at a Bonferroni-corrected level, a violation is declared only if the
lower bound of one side exceeds e^eps1 times the upper bound of the other.
The same check applied to a mechanism with a quarter of the noise finds a
violation, so the test has the power to catch a mis-calibrated scale.
"""

from collections import Counter

import numpy as np
import pytest
from scipy.stats import beta

import strategy_opt.partition as pt

ALPHA = 1e-3


def power_of_two_partitions(n):
    """Edge tuples of all partitions of 0..n-1 into buckets of power-of-two length."""
    if n == 0:
        return [(0,)]
    return [e + (n,) for L in (1 << p for p in range(n.bit_length())) for e in power_of_two_partitions(n - L)]


def sample(x, eps1, eps2, draws, seed):
    gen = np.random.default_rng(seed)
    x = np.asarray(x, dtype=float)
    return Counter(tuple(pt.private_partition(x, eps1, eps2, gen).tolist()) for _ in range(draws))


def clopper_pearson(k, n, level):
    a = level / 2
    lo = beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return lo, hi


def violations(x, x_prime, eps1, eps2, draws):
    """Partitions whose sampled frequencies prove a breach of the eps1 bound, and the partitions seen."""
    n = len(x)
    parts = power_of_two_partitions(n)
    a = sample(x, eps1, eps2, draws, seed=1)
    b = sample(x_prime, eps1, eps2, draws, seed=2)
    level = ALPHA / (2 * len(parts))
    bad = []
    for P in parts:
        pa, pb = clopper_pearson(a[P], draws, level), clopper_pearson(b[P], draws, level)
        if pa[0] > np.exp(eps1) * pb[1] or pb[0] > np.exp(eps1) * pa[1]:
            bad.append(P)
    return bad, set(a) | set(b), parts


def test_enumeration():
    assert sorted(power_of_two_partitions(4)) == sorted([(0, 1, 2, 3, 4), (0, 2, 3, 4), (0, 1, 3, 4), (0, 1, 2, 4), (0, 2, 4), (0, 4)])
    assert len(power_of_two_partitions(8)) == 56


@pytest.mark.parametrize(
    "x, x_prime, eps1, eps2, draws",
    [
        ((0, 0, 0, 0), (0, 1, 0, 0), 1.0, 1.0, 12000),
        ((3, 0, 0, 0), (4, 0, 0, 0), 1.0, 0.5, 6000),
        ((0, 0, 5, 0, 0, 0, 0, 0), (0, 0, 5, 1, 0, 0, 0, 0), 0.5, 0.5, 6000),
    ],
)
def test_stage_one_respects_eps1(x, x_prime, eps1, eps2, draws):
    bad, seen, parts = violations(x, x_prime, eps1, eps2, draws)
    assert seen <= set(parts)  # every output is a power-of-two partition
    assert len(seen) >= len(parts) // 2  # the noise spreads mass over many partitions
    assert bad == []


def test_check_detects_too_little_noise(monkeypatch):
    real = pt.cost_noise_scales
    monkeypatch.setattr(pt, "cost_noise_scales", lambda *a, **k: 0.25 * real(*a, **k))
    bad, _, _ = violations((0, 0, 0, 0), (0, 1, 0, 0), 1.0, 1.0, 4000)
    assert bad


def test_opendp_stage_one_has_the_same_partition_law_as_the_simulation():
    """Stage-1 noise from OpenDP (the release default) gives the partitions the seeded NumPy path gives."""
    from scipy.stats import chi2_contingency

    x, eps1, eps2, draws = np.array([0.0, 3.0, 1.0, 4.0]), 1.0, 0.5, 3000
    sim = sample(x, eps1, eps2, draws, seed=3)
    odp = Counter(tuple(pt.private_partition(x, eps1, eps2, sampler="opendp").tolist()) for _ in range(draws))
    parts = sorted(set(sim) | set(odp))
    table = np.array([[sim[P] for P in parts], [odp[P] for P in parts]])
    assert len(parts) >= 3  # the law is spread over several partitions, so the test has power
    assert chi2_contingency(table).pvalue > 1e-4  # unseeded OpenDP draws: a true law fails one run in 10^4


@pytest.mark.parametrize("release", ["dawa", "mwem"])
def test_the_python_api_releases_with_opendp_unless_seeded(release, monkeypatch):
    """dawa()/mwem() called without a seed drew NumPy noise (their default sampler was 'simulate')."""
    import strategy_opt.samplers as samplers
    from strategy_opt.exceptions import InputError
    from strategy_opt.privacy import PureDP
    from strategy_opt.programs.dawa import dawa
    from strategy_opt.programs.mwem import mwem
    from strategy_opt.workload import prefix

    func = {"dawa": dawa, "mwem": mwem}[release]
    calls = []
    for name in ("opendp_release", "opendp_perturb", "opendp_select_max"):
        real = getattr(samplers, name)
        monkeypatch.setattr(samplers, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    numpy_noise = []
    real_generator = np.random.default_rng

    class Spy(np.random.Generator):
        def laplace(self, *a, **k):
            numpy_noise.append("laplace")
            return super().laplace(*a, **k)

        def exponential(self, *a, **k):
            numpy_noise.append("exponential")
            return super().exponential(*a, **k)

    monkeypatch.setattr(np.random, "default_rng", lambda seed=None: Spy(real_generator(seed).bit_generator))
    x = np.arange(16.0)
    func(x, prefix(16), PureDP(1.0))
    assert calls and not numpy_noise
    calls.clear()
    func(x, prefix(16), PureDP(1.0), rng=3)  # a seed means a simulation
    assert numpy_noise and not calls
    with pytest.raises(InputError, match="rng cannot be used with sampler='opendp'"):
        func(x, prefix(16), PureDP(1.0), rng=3, sampler="opendp")


@pytest.mark.parametrize("epsilon, rho", [(0.8, 0.25), (0.1, 0.25), (0.7, 0.1), (1.3, 0.25), (1.0, 0.2), (0.3, 1 / 3)])
def test_dawa_and_mwem_budget_shares_sum_to_at_most_epsilon(epsilon, rho):
    """0.2 + 0.6000000000000001 exceeded 0.8 by an ulp; an outside audit then found math.fsum's rounded check let
    0.025 + 0.07500000000000001 through at 0.1 (6.9e-18 over). The exact sum, in rationals, is at most epsilon."""
    from fractions import Fraction

    from strategy_opt.privacy import PureDP
    from strategy_opt.programs.dawa import dawa
    from strategy_opt.programs.mwem import mwem
    from strategy_opt.workload import prefix

    x = np.arange(16.0)
    facts = dawa(x, prefix(16), PureDP(epsilon), rng=0, rho=rho).facts
    assert Fraction(facts["epsilon_partition"]) + Fraction(facts["epsilon_measurement"]) <= Fraction(epsilon)
    for rounds in (2, 4, 7):
        facts = mwem(x, prefix(16), PureDP(epsilon), rng=0, rounds=rounds).facts
        assert Fraction(facts["epsilon_per_mechanism"]) * facts["mechanisms"] <= Fraction(epsilon)


@pytest.mark.parametrize("rho", [0.25, 0.0])
def test_precision_refusal_depends_only_on_the_total(rho):
    """An outside audit: at epsilon = 4 * 2^30, (0, 0, 0, 699050) was refused by stage 2 and its neighbour
    (0, 0, 0, 699051) by stage 1, with different messages. One check before any noise, on the total, refuses both
    alike, and data whose total fits is released."""
    from strategy_opt.exceptions import PrecisionError
    from strategy_opt.programs.dawa import dawa_estimate
    from strategy_opt.workload import identity

    messages = set()
    for last in (699050.0, 699051.0, 2_000_000.0):
        with pytest.raises(PrecisionError, match="DAWA's input") as exc:
            dawa_estimate(np.array([0.0, 0.0, 0.0, last]), identity(4), 4 * 2**30, rng=1, rho=rho)
        messages.add(str(exc.value))
    assert len(messages) == 1
    dawa_estimate(np.array([0.0, 0.0, 0.0, 10.0]), identity(4), 4 * 2**30, rng=1, rho=rho)  # a small total passes


@pytest.mark.parametrize("x, epsilon", [(np.array([0.0] * 15 + [2.0**48]), 1.0), (np.full(64, 5e6), 1e6), (np.array([0.0] * 15 + [5e14]), 1.0), (np.full(16, 5e14 / 16), 1.0)])
def test_totals_the_per_stage_checks_accepted_are_still_released(x, epsilon):
    """A regression audit: the first up-front check (2 t + 1/eps2 at the smaller stage's scale) refused these two,
    which the per-stage checks had released; the threshold is now each stage's own, and the per-stage checks pass."""
    from strategy_opt.programs.dawa import dawa_estimate
    from strategy_opt.workload import prefix

    res = dawa_estimate(x, prefix(x.size), epsilon, rng=1)
    assert res.x_hat.shape == x.shape


def test_resolution_limit_is_not_halved_and_blames_epsilon_when_no_count_fits():
    """A third regression audit: where 1/eps2 is a power of two the limit was halved (a 3e14 spike at epsilon 1 with
    rho 0, released at the session start, was refused), and at epsilon 1e16 a single count was refused as "data too
    large". Released now, and the refusal names the epsilon."""
    from strategy_opt.exceptions import PrecisionError
    from strategy_opt.programs.dawa import dawa_estimate
    from strategy_opt.workload import all_range

    x = np.zeros(16)
    x[0] = 3e14
    assert dawa_estimate(x, all_range(16), 1.0, rng=1, rho=0.0).x_hat.shape == (16,)
    assert dawa_estimate(x, all_range(16), 2.0, rng=1, rho=0.5).x_hat.shape == (16,)
    with pytest.raises(PrecisionError, match="use a smaller epsilon"):
        dawa_estimate(np.eye(16)[0], all_range(16), 1e16, rng=1)
