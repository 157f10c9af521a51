"""Shared fixtures: paths to ../shared data (tests skip cleanly without it)."""

from pathlib import Path

import pytest

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
