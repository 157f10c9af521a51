"""Shared fixtures: paths to ../shared data (tests skip cleanly without it); Hypothesis profiles.

Property tests draw the same examples on every run (profile ``deterministic``,
the default), so a test run is reproducible; ``HYPOTHESIS_PROFILE=explore``
draws new ones each run, to look for counterexamples (as it found seed 621 of
`test_representation.test_splitting_merging_and_zero_cells`).
"""

import logging
import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
DPBENCH = SHARED / "data" / "dpbench"


@pytest.fixture
def dpbench_1d():
    """Path of the DPBench 1-D histograms (skip if ../shared is absent)."""
    d = DPBENCH / "1D"
    if not d.is_dir():
        pytest.skip(f"DPBench data not found at {d}")
    return d


@pytest.fixture
def package_log(caplog):
    """caplog that sees the package logger even after a CLI call (in any earlier test) stopped its
    propagation and pointed it at that call's stderr; the logger is put back afterwards."""
    log = logging.getLogger("strategy_opt")
    saved = log.handlers[:], log.level, log.propagate
    log.handlers[:], log.propagate = [caplog.handler], False  # one record per message
    yield caplog
    log.handlers[:], log.level, log.propagate = saved[0], saved[1], saved[2]


@pytest.fixture(autouse=True)
def fresh_bound_cache():
    """Each test starts without the (eps, delta) bounds earlier tests left in `strategy_opt.pure_bound`'s cache
    (a test may patch the solver or ask for a stopped solve on a workload another test solved to optimality)."""
    from strategy_opt import pure_bound

    saved, pure_bound._bound_cache = pure_bound._bound_cache, {}
    yield
    pure_bound._bound_cache = saved
