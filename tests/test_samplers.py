"""Noise samplers of released answers: OpenDP by default, seeded NumPy only for simulations.

Acceptance (issue 8): ``run`` writes released answers through the vetted sampler by default;
the ``simulate`` path gives the same error statistics within sampling error; every answer file
carries a sidecar with its hash, the library version and its provenance.
"""

import json

import numpy as np
import pytest

import strategy_opt.samplers as samplers
from strategy_opt import answers as answer_files
from strategy_opt import io as sio
from strategy_opt.cli import build_parser, main
from strategy_opt.exceptions import InputError
from strategy_opt.executor import measure, run
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.workload import identity

N = 1500


def cli(*args):
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def identity_strategy(tmp_path_factory):
    d = tmp_path_factory.mktemp("samplers")
    assert cli("-q", "solve", "--workload", f"identity:{N}", "--method", "identity", "--privacy", "pure", "--out", d / "s.npz") == 0
    np.save(d / "x.npy", np.zeros(N))
    return d


def _run(d, out, *extra):
    assert cli("-q", "run", d / "s.npz", "--data", d / "x.npy", "--workload", f"identity:{N}", "--epsilon", 1, "--out", d / out, *extra) == 0
    answers, _, _, meta = answer_files.read_answers(d / out)
    return answers, meta


@pytest.fixture(scope="module")
def releases(identity_strategy, tmp_path_factory):
    """Answers (all errors, as x = 0) of five runs: two default, two with seed 11, one with seed 12."""
    d = identity_strategy
    calls = []
    real = samplers.opendp_release
    samplers.opendp_release = lambda *a: calls.append(a) or real(*a)
    try:
        out = {name: _run(d, f"{name}.npy", *extra) for name, extra in [
            ("opendp1", ()), ("opendp2", ()), ("seed11", ("--seed", 11)), ("seed11b", ("--sampler", "simulate", "--seed", 11)), ("seed12", ("--seed", 12))
        ]}
    finally:
        samplers.opendp_release = real
    return out, len(calls)


def test_default_release_uses_opendp_and_is_not_reproducible(releases):
    out, opendp_calls = releases
    (a, meta_a), (b, meta_b) = out["opendp1"], out["opendp2"]
    assert opendp_calls == 2 and meta_a["sampler"] == meta_b["sampler"] == "opendp" and meta_a["seed"] is None
    assert not np.array_equal(a, b)


def test_simulate_with_seed_is_reproducible(releases):
    out, _ = releases
    np.testing.assert_array_equal(out["seed11"][0], out["seed11b"][0])
    assert not np.array_equal(out["seed11"][0], out["seed12"][0])
    assert out["seed11"][1]["sampler"] == "simulate" and out["seed11"][1]["seed"] == 11


def test_simulate_without_a_seed_draws_and_records_one(identity_strategy):
    """An outside audit: --sampler simulate without --seed wrote different answers each time and "seed": null, though
    the help calls the sampler reproducible. The drawn seed is recorded and reproduces the answers."""
    d = identity_strategy
    a, meta_a = _run(d, "drawn1.npy", "--sampler", "simulate")
    b, meta_b = _run(d, "drawn2.npy", "--sampler", "simulate")
    assert isinstance(meta_a["seed"], int) and meta_a["seed"] != meta_b["seed"]
    again, meta_again = _run(d, "again.npy", "--seed", meta_a["seed"])
    np.testing.assert_array_equal(a, again)
    assert meta_again["seed"] == meta_a["seed"] and meta_again["sampler"] == "simulate"


def test_both_samplers_give_the_calibrated_error_statistics(releases):
    out, _ = releases
    # Laplace noise of scale b = 1 (sensitivity 1, epsilon 1): E e^2 = 2 b^2 = 2, E|e| = b = 1.
    # Over 1500 answers the relative sd is sqrt(5/1500) = 6% for the mean square, 2.6% for the
    # mean absolute error; tolerances are about 4 sd.
    mse = {k: np.mean(a**2) for k, (a, _) in out.items()}
    mae = {k: np.mean(np.abs(a)) for k, (a, _) in out.items()}
    for k in out:
        assert mse[k] == pytest.approx(2.0, rel=0.25), k
        assert mae[k] == pytest.approx(1.0, rel=0.11), k
    # the two paths agree with each other (difference of two means: sd 3.7%)
    assert mae["opendp1"] == pytest.approx(mae["seed11"], rel=0.15)
    assert mae["opendp2"] == pytest.approx(mae["seed12"], rel=0.15)


def test_gaussian_paths_agree():
    x = np.zeros(N)
    privacy = ApproxDP(1.0, 1e-6)
    sigma2 = privacy.noise_variance(1.0)
    sim = run(np.eye(N), x, identity(N), privacy, rng=3, intervals=False).answers
    odp = run(np.eye(N), x, identity(N), privacy, intervals=False).answers  # no seed: OpenDP
    # the sample variance of 1500 normal draws has a relative sd of sqrt(2/1500) = 3.7%
    assert np.var(sim) == pytest.approx(sigma2, rel=0.15)
    assert np.var(odp) == pytest.approx(sigma2, rel=0.15)


def test_api_default_is_opendp_without_a_seed(monkeypatch):
    calls = []
    monkeypatch.setattr(samplers, "opendp_release", lambda exact, privacy, sens: calls.append(sens) or (exact, privacy.noise_scale(sens)))
    measure(np.eye(3), np.ones(3), PureDP(1.0))
    run(np.eye(3), np.ones(3), identity(3), PureDP(1.0))
    assert calls == [1.0, 1.0]
    measure(np.eye(3), np.ones(3), PureDP(1.0), rng=0)  # seeded: simulate, OpenDP not called
    assert calls == [1.0, 1.0]
    with pytest.raises(InputError, match="unknown sampler"):
        measure(np.eye(3), np.ones(3), PureDP(1.0), sampler="numpy")


def test_seed_with_opendp_and_uncertifiable_epsilon_are_refused(identity_strategy, capsys):
    d = identity_strategy
    base = ("run", d / "s.npz", "--data", d / "x.npy", "--workload", f"identity:{N}", "--out", d / "r.npy")
    assert cli(*base, "--epsilon", 1, "--sampler", "opendp", "--seed", 1) == 2
    assert cli(*base, "--epsilon", 1e300, "--delta", 0.5, "--privacy", "approx") == 2  # OpenDP cannot certify: refused, not released
    err = capsys.readouterr().err
    assert "not seedable" in err and "OpenDP cannot certify" in err
    assert not (d / "r.npy").exists()


def test_help_documents_both_samplers():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("run", "release"):
        text = sub.choices[command].format_help()
        assert "opendp" in text and "simulate" in text and "Mironov" in text and "OUT.json" in text


def test_answer_sidecar_records_provenance_and_detects_corruption(identity_strategy):
    d = identity_strategy
    assert cli("-q", "run", d / "s.npz", "--data", d / "x.npy", "--workload", f"identity:{N}", "--epsilon", 0.5, "--seed", 2, "--out", d / "p.csv") == 0
    meta = json.loads((d / "p.csv.json").read_text())
    strategy_meta = sio.read_strategy(d / "s.npz").meta
    assert meta["sha256"] == sio.file_sha256(d / "p.csv")
    assert meta["workload"] == f"identity:{N}" and meta["privacy"] == {"notion": "pure", "epsilon": 0.5, "delta": None}
    assert meta["sampler"] == "simulate" and meta["estimator"] == "ls" and meta["noise_scale"] == pytest.approx(2.0)
    assert meta["strategy"]["content_sha256"] == strategy_meta["content_sha256"] and meta["strategy_opt_version"]
    # the CSV format itself is the one of CLI.md
    assert (d / "p.csv").read_text().splitlines()[0] == "query,answer,lower,upper"
    text = (d / "p.csv").read_text()
    (d / "p.csv").write_text(text.replace("1", "7", 1))
    with pytest.raises(InputError, match="corrupted"):
        answer_files.read_answers(d / "p.csv")


def test_opendp_perturb_draws_laplace_at_each_values_own_scale():
    """Values sharing a scale get Laplace noise of that scale (KS test against scipy's law)."""
    from scipy.stats import kstest, laplace

    scales = np.r_[np.full(4000, 0.5), np.full(4000, 3.0)]
    values = np.linspace(-50.0, 50.0, scales.size)
    noise = samplers.opendp_perturb(values, scales) - values
    for s in (0.5, 3.0):
        assert kstest(noise[scales == s], laplace(scale=s).cdf).pvalue > 1e-4  # unseeded OpenDP draws: 1 false alarm in 10^4
    # on OpenDP's grid of multiples of 2^-30 (DAWA's stage 1): the same law, every output on the grid
    grid = samplers.opendp_perturb(values, scales, granularity_exponent=-30)
    assert np.all(np.mod(grid * 2.0**30, 1.0) == 0)
    for s in (0.5, 3.0):
        assert kstest((grid - values)[scales == s], laplace(scale=s).cdf).pvalue > 1e-4
    with pytest.raises(InputError, match="positive finite scales"):
        samplers.opendp_perturb(np.ones(2), np.array([1.0, 0.0]))
    with pytest.raises(InputError, match="finite values"):
        samplers.opendp_perturb(np.array([np.nan, 1.0]), np.ones(2))


def test_opendp_refuses_the_analytic_sigma_beyond_its_own_calibration_as_an_input_error():
    """At epsilon = 5e4 OpenDP's search fails; the analytic Gaussian sigma is used, which its map does not certify."""
    import strategy_opt as so
    from strategy_opt.privacy import analytic_gaussian_sigma

    s = so.solve("prefix:8", privacy="approx", method="identity")
    privacy = ApproxDP(5e4, 1e-6)
    assert privacy.gaussian_sigma(1.0) == analytic_gaussian_sigma(5e4, 1e-6)
    with pytest.raises(InputError, match=r"OpenDP cannot certify epsilon=50000, delta=1e-06.*use sampler='simulate' \(--sampler simulate\)"):
        run(s, np.arange(8.0), "prefix:8", privacy)
    assert run(s, np.arange(8.0), "prefix:8", privacy, rng=0).noise_scale == privacy.gaussian_sigma(1.0)


@pytest.mark.parametrize("epsilon, sensitivity", [(0.3, 0.9999999999999999), (0.1, 1.0), (0.7, 3.0), (1 / 3, 1.0)])
def test_released_epsilon_is_at_most_the_target_exactly(epsilon, sensitivity):
    """An outside audit: epsilon 0.3 at sensitivity 0.9999999999999999 gave OpenDP's map 0.30000000000000004, accepted
    within 1e-9; the scale now grows by ulps until OpenDP's own map gives at most epsilon exactly."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    privacy = PureDP(epsilon)
    y, scale = samplers.opendp_release(np.zeros(4), privacy, sensitivity)
    assert y.shape == (4,)
    assert scale >= privacy.noise_scale(sensitivity)
    assert scale <= privacy.noise_scale(sensitivity) * (1 + samplers.SCALE_NUDGE_RTOL)
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))
    assert dp.m.make_laplace(*space, scale=scale).map(sensitivity) <= epsilon


def test_measure_reports_the_scale_it_drew():
    """The scale in the answers' sidecar is the one OpenDP drew at, ulps above the calibrated one where needed:
    20000 draws' mean absolute deviation (a Laplace(b) variable's is b) matches it to sampling error (0.7%)."""
    y, scale = measure(np.eye(3) * 0.9999999999999999, np.ones(3), PureDP(0.3))
    assert scale >= 0.9999999999999999 / 0.3
    import scipy.sparse as sp

    y, scale = measure(sp.identity(20000, format="csr"), np.zeros(20000), PureDP(0.3))
    assert scale == pytest.approx(1 / 0.3, rel=1e-9)
    assert np.mean(np.abs(y)) == pytest.approx(scale, rel=0.03)
