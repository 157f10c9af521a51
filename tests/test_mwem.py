"""MWEM (strategy_opt.programs.mwem): selection law, updates, budget, edge cases."""

import json

import numpy as np
import pytest
from scipy.stats import chisquare

import strategy_opt.programs.mwem as mw
from strategy_opt.exceptions import InputError
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.programs.dawa import random_rectangles
from strategy_opt.programs.mwem import DEFAULT_SWEEPS, _max_entry, _row, mwem, mwem_estimate
from strategy_opt.registry import get_release
from strategy_opt.workload import identity, kronecker, prefix, random_range, total, union


def test_registered():
    assert get_release("mwem").privacy == ("pure",)


def test_rows_and_max_entry():
    for W in (random_range(20, 7, 1), kronecker(prefix(4), identity(5)), union(prefix(20), total(20), weights=[1.0, 2.5]),
              random_rectangles((4, 5), 6, 0)):
        M = W.matrix().toarray()
        assert _max_entry(W) == pytest.approx(np.abs(M).max())
        for i in range(W.m):
            idx, val = _row(W, i)
            row = np.zeros(W.n)
            row[idx] = val
            np.testing.assert_allclose(row, M[i])


def _noisy_max_law(score: np.ndarray, scale: float) -> np.ndarray:
    """Pr[argmax_q score_q + Exp(scale)_q = i], by numerical integration over the winner's noise."""
    from scipy.integrate import quad

    def win(i):
        others = np.delete(score, i)

        def density(t):  # winner's noisy value t = score_i + e, e ~ Exp(scale)
            return np.exp(-(t - score[i]) / scale) / scale * np.prod(np.clip(1 - np.exp(-(t - others) / scale), 0, 1))

        return quad(density, score[i], score[i] + 60 * scale, points=list(others[others > score[i]]), limit=200)[0]

    p = np.array([win(i) for i in range(score.size)])
    return p / p.sum()


def test_noisy_max_law_matches_permute_and_flip():
    """The integrated law equals permute-and-flip's (McKenna & Sheldon 2020), computed by enumeration."""
    from itertools import permutations

    score, scale = np.array([0.0, 1.0, 2.5, 2.0]), 1.3
    accept = np.exp((score - score.max()) / scale)
    pf = np.zeros(4)
    perms = list(permutations(range(4)))
    for order in perms:
        stay = 1.0
        for r in order:
            pf[r] += stay * accept[r] / len(perms)
            stay *= 1 - accept[r]
    np.testing.assert_allclose(_noisy_max_law(score, scale), pf, atol=1e-8)


def test_selection_law(monkeypatch):
    """The first selection is report-noisy-max: argmax |q(A0) - q(x)| + Exp(2 / eps') (chi-square fit)."""
    W = identity(4)
    x = np.array([0.0, 2.0, 4.0, 10.0])
    picks = []

    def record(idx_row):
        picks.append(int(idx_row))

    real_row = mw._row
    monkeypatch.setattr(mw, "_row", lambda W_, i: (record(i), real_row(W_, i))[1])
    eps = 3.0  # each of the 3 mechanisms gets eps / 3 = 1
    for seed in range(3000):
        mwem_estimate(x, W, eps, rng=seed, rounds=1, sweeps=1)
    # the uniform start A0 uses the noisy total N = 16 + Laplace(1): integrate it out over its quantiles
    sim = np.zeros(4)
    for u in (np.arange(100) + 0.5) / 100:
        N = max(x.sum() - np.sign(u - 0.5) * np.log(1 - 2 * abs(u - 0.5)), 1.0)
        sim += _noisy_max_law(np.abs(N / 4 - x), 2.0)
    expected = sim / sim.sum() * len(picks)
    counts = np.bincount(picks, minlength=4)
    assert chisquare(counts, expected).pvalue > 1e-3


def test_opendp_selection_law():
    """The vetted sampler's selection has the same law (OpenDP's make_noisy_max under max_divergence)."""
    pytest.importorskip("opendp")
    from strategy_opt.samplers import opendp_select_max

    score = np.array([0.0, 1.0, 2.5, 2.0])
    picks = [opendp_select_max(score, sensitivity=1.0, epsilon=1.5) for _ in range(3000)]
    expected = _noisy_max_law(score, 2.0 / 1.5) * len(picks)
    # OpenDP's draws cannot be seeded: at 1e-4 a true law fails one run in 10^4 (it failed at 1e-3 once,
    # p = 8.7e-4, while 300,000 draws matched the law at p = 0.70)
    assert chisquare(np.bincount(picks, minlength=4), expected).pvalue > 1e-4


def test_accuracy_improves_with_budget_and_converges():
    x = np.zeros(64)
    x[10:20] = 100.0
    x[40] = 500.0
    W = random_range(64, 100, 2)
    err = {}
    for eps in (0.05, 1000.0):
        err[eps] = np.mean([np.mean(np.abs(mwem(x, W, PureDP(eps), rng=s, rounds=30).answers - W.matvec(x))) for s in range(3)])
    assert err[1000.0] < 0.2 * err[0.05]
    assert err[1000.0] < 0.05 * np.abs(W.matvec(x)).mean()


def test_release_fields_and_reproducibility():
    x = np.arange(32, dtype=float)
    W = prefix(32)
    a = mwem(x, W, PureDP(1.0), rng=4, rounds=5)
    b = mwem(x, W, PureDP(1.0), rng=4, rounds=5)
    assert np.array_equal(a.answers, b.answers)
    assert a.noise_scale == pytest.approx(11.0)  # Laplace(1 / (eps / (2T + 1)))
    assert a.x_hat.sum() > 0 and np.all(a.x_hat >= 0)
    np.testing.assert_allclose(a.answers, W.matvec(a.x_hat))


def test_edge_cases_and_validation():
    W = random_range(16, 10, 0)
    r = mwem(np.zeros(16), W, PureDP(0.1), rng=0)
    assert np.all(np.isfinite(r.answers))
    r = mwem(np.r_[np.zeros(15), 1e6], W, PureDP(1.0), rng=0, rounds=20)
    assert r.x_hat.argmax() == 15
    assert np.isfinite(mwem(np.array([3.0]), identity(1), PureDP(1.0), rng=0).answers[0])
    with pytest.raises(InputError):
        mwem(np.r_[-1.0, np.zeros(15)], W, PureDP(1.0), rng=0)
    with pytest.raises(InputError):
        mwem(np.zeros(16), W, PureDP(1.0), rng=0, rounds=0)
    with pytest.raises(InputError, match="unknown MWEM option"):
        mwem(np.zeros(16), W, PureDP(1.0), rng=0, T=5)
    with pytest.raises(InputError):
        mwem(np.zeros(16), W, ApproxDP(1.0, 1e-6), rng=0)


def test_release_sidecar_records_the_effective_options(tmp_path):
    """`release --method mwem`: the sidecar names the rounds and sweeps actually used and the true budget split."""
    from strategy_opt.cli import main

    np.save(tmp_path / "x.npy", np.arange(16.0))
    out = tmp_path / "a.npy"
    for eps, T in ((2.0, 4), (1.0, 5)):
        args = ["--epsilon", str(eps), "--seed", "1", "--option", f"rounds={T}", "--out", str(out)]
        assert main(["-q", "release", "--method", "mwem", "--data", str(tmp_path / "x.npy"), "--workload", "prefix:16", *args]) == 0
        side = json.loads((tmp_path / "a.npy.json").read_text())
        facts = side["method_facts"]
        share = eps / (2 * T + 1)  # 2T + 1 mechanisms: the total, then a selection and a measurement per round
        assert facts == pytest.approx({
            "rounds": T, "sweeps": DEFAULT_SWEEPS, "mechanisms": 2 * T + 1, "epsilon_per_mechanism": share,
            "epsilon_per_round": 2 * share, "epsilon_total_count": share, "noise_scale_total": 1 / share,
            "selection_noise_scale": 2 / share,
        })
        assert T * facts["epsilon_per_round"] + facts["epsilon_total_count"] == pytest.approx(eps, rel=1e-12)
        assert side["noise_scale"] == pytest.approx(1 / share)  # eps 1, T 5: 11, the Laplace scale of every measurement


def test_facts_match_the_mechanisms_actually_run(monkeypatch):
    """The facts' split and scales are those of the selections and measurements the code path runs."""
    calls = {"measure": [], "select": []}
    real_measure, real_select = mw.measure, mw._select

    def measure(A, x, privacy, rng=None, sampler=None, what=""):
        y, scale = real_measure(A, x, privacy, rng=rng, sampler=sampler, what=what)
        calls["measure"].append((privacy.epsilon, scale, float(abs(A).max())))
        return y, scale

    def select(score, sensitivity, epsilon, gen, sampler):
        calls["select"].append((epsilon, 2.0 * sensitivity / epsilon))
        return real_select(score, sensitivity, epsilon, gen, sampler)

    monkeypatch.setattr(mw, "measure", measure)
    monkeypatch.setattr(mw, "_select", select)
    x = np.arange(20.0)
    for W, eps, T in ((prefix(20), 1.0, 5), (union(prefix(20), total(20), weights=[1.0, 2.5]), 0.7, 6)):
        for key in calls:
            calls[key].clear()
        r = mwem(x, W, PureDP(eps), rng=3, rounds=T)
        f = r.facts
        eps_measure = [e for e, _, _ in calls["measure"]]
        eps_select = [e for e, _ in calls["select"]]
        assert len(eps_measure) == T + 1 and len(eps_select) == T and f["mechanisms"] == 2 * T + 1
        assert sum(eps_measure) + sum(eps_select) == pytest.approx(eps, rel=1e-12)  # sequential composition
        assert all(e == pytest.approx(f["epsilon_per_mechanism"]) for e in eps_measure + eps_select)
        assert eps_measure[0] == pytest.approx(f["epsilon_total_count"])
        per_round = [m + s for m, s in zip(eps_measure[1:], eps_select)]
        assert per_round == pytest.approx([f["epsilon_per_round"]] * T)
        assert T * f["epsilon_per_round"] + f["epsilon_total_count"] == pytest.approx(eps, rel=1e-12)
        # Laplace scales used: N's is 1 / share; a query's is its largest entry / share; selections 2 Delta_W / share
        assert calls["measure"][0][1] == pytest.approx(f["noise_scale_total"]) == pytest.approx(1 / f["epsilon_per_mechanism"])
        assert all(scale == pytest.approx(top / e) for e, scale, top in calls["measure"])
        assert r.noise_scale == pytest.approx(max(scale for _, scale, _ in calls["measure"][1:]))
        assert all(s == pytest.approx(f["selection_noise_scale"]) for _, s in calls["select"])
        assert f["selection_noise_scale"] == pytest.approx(2 * _max_entry(W) / f["epsilon_per_mechanism"])


def test_seeded_measurement_noise_has_the_reported_scale():
    """Replaying the seeded generator: the first draw is N + Laplace(noise_scale_total), scale 1 / (eps / 11)."""
    r = mwem(np.array([120.0]), identity(1), PureDP(1.0), rng=7, rounds=5)
    assert r.noise_scale == pytest.approx(11.0) and r.facts["noise_scale_total"] == pytest.approx(11.0)
    # on a single cell every update renormalises to N, so the estimate is the noisy total itself
    noisy_total = 120.0 + np.random.default_rng(7).laplace(0.0, 11.0)
    assert r.x_hat[0] == pytest.approx(max(noisy_total, 1.0))


def test_rounds_whose_work_is_unbounded_are_refused_up_front():
    """An outside audit: rounds=1e11 was accepted and ran until killed (round 2222 after 170 s); the work grows with
    the square of the rounds, and more than `MAX_UPDATES` cell updates are refused before any noise is drawn."""
    from strategy_opt.exceptions import InputError
    from strategy_opt.privacy import PureDP
    from strategy_opt.programs.mwem import MAX_UPDATES, mwem
    from strategy_opt.workload import prefix

    x = np.arange(64.0)
    with pytest.raises(InputError, match="cell updates"):
        mwem(x, prefix(64), PureDP(1.0), rng=0, rounds=10**11)
    rounds = int((2 * MAX_UPDATES / (10 * 64)) ** 0.5)  # just past the limit at the default 10 sweeps
    with pytest.raises(InputError, match=f"rounds={rounds + 1} "):
        mwem(x, prefix(64), PureDP(1.0), rng=0, rounds=rounds + 1)
    assert mwem(x, prefix(64), PureDP(1.0), rng=0, rounds=20).answers.shape == (64,)


def test_one_round_is_algorithm_1_by_hand():
    # Hardt, Ligett & McSherry 2012, Algorithm 1 with T = 1 (budget in 3 equal shares: the total, one
    # selection, one measurement), written out from the seeded draws: select i = argmax |q(A) - q(x)| + Exp(2/eps'),
    # measure m = q_i(x) + Lap(1/eps'), then A_j <- A_j exp(q_ij (m - q_i(A)) / (2N)), rescaled to N
    from strategy_opt.workload import from_matrix

    W = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    x = np.array([30.0, 2.0, 5.0, 3.0])
    eps = 3.0
    got, _ = mwem_estimate(x, from_matrix(W), eps, rng=7, sampler="simulate", rounds=1, sweeps=1)
    share = eps / 3
    gen = np.random.default_rng(7)
    N = max(x.sum() + gen.laplace(0.0, 1 / share), 1.0)
    A = np.full(4, N / 4)
    i = int(np.argmax(np.abs(W @ A - W @ x) + gen.exponential(2 / share, size=3)))
    m = W[i] @ x + gen.laplace(0.0, 1 / share)
    A = A * np.exp(W[i] * (m - W[i] @ A) / (2 * N))
    A *= N / A.sum()
    np.testing.assert_allclose(got, A, rtol=1e-12)


def test_opendp_selection_memory_is_checked_up_front(monkeypatch):
    # OpenDP's selection needs about 176 bytes per query; all-range:4096 under a 1 GB cap peaked at 1.9 GB
    # (0.4 GB estimated) instead of being refused. The cap here sits just under prefix:512's 512 queries.
    from strategy_opt.workload import prefix

    x = np.arange(512.0)
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", str(mw.OPENDP_BYTES_PER_QUERY * 512 - 1))
    with pytest.raises(InputError, match=r"MWEM with OpenDP's selection over 512 queries"):
        mwem_estimate(x, prefix(512), 1.0, rounds=2)
    mwem_estimate(x, prefix(512), 1.0, rng=0, rounds=2)  # the seeded sampler has no OpenDP copy of the scores
