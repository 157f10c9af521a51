"""The executor on a real DPBench histogram (n = 4096) with 2000 random ranges."""

import numpy as np
import pytest

import strategy_opt as so
from strategy_opt.executor import run
from strategy_opt.privacy import PureDP
from strategy_opt.workload import random_range


@pytest.fixture
def nettrace(dpbench_1d):
    return np.load(dpbench_1d / "NETTRACE.n4096.npy", allow_pickle=False).astype(float)


@pytest.mark.parametrize("method", ["identity", "hierarchical"])
def test_huge_epsilon_recovers_true_answers(nettrace, method):
    W = random_range(4096, 2000, seed=11)
    s = so.solve(W, privacy="pure", method=method)
    rel = run(s, nettrace, W, PureDP(1e6), rng=0, intervals=False)
    truth = W.matvec(nettrace)
    np.testing.assert_allclose(rel.answers, truth, rtol=1e-3, atol=1e-3 * max(1.0, np.abs(truth).max()))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["identity", "hierarchical"])
def test_empirical_mse_over_50_seeds_matches_prediction(nettrace, method):
    W = random_range(4096, 2000, seed=11)
    s = so.solve(W, privacy="pure", method=method)
    truth = W.matvec(nettrace)
    mse = [np.mean((run(s, nettrace, W, PureDP(1.0), rng=seed, intervals=False).answers - truth) ** 2) for seed in range(50)]
    predicted = s.meta["unit_total_squared_error"] * PureDP(1.0).noise_variance_factor() / W.m
    assert np.mean(mse) == pytest.approx(predicted, rel=0.2)
