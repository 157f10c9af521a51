"""Progress lines of long loops and phases (the brief: progress output on long solves)."""

import logging

import numpy as np
import pytest

import strategy_opt.progress as progress
from strategy_opt.api import solve
from strategy_opt.executor import run
from strategy_opt.privacy import PureDP
from strategy_opt.programs.mwem import mwem
from strategy_opt.workload import prefix


@pytest.fixture
def lines(caplog, monkeypatch):
    log = logging.getLogger("strategy_opt")  # a CLI call in an earlier test may have stopped its propagation
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    monkeypatch.setattr(log, "propagate", False)
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)  # every loop step is due
    caplog.set_level(logging.INFO, logger="strategy_opt")
    return lambda: [r.getMessage() for r in caplog.records]


def test_progress_logs_only_when_due(lines):
    ticks = progress.Progress(every=3600.0)
    ticks("never %d", 1)
    progress.Progress()("now %d", 2)
    assert lines() == ["now 2"]


def test_orthogonal_and_mwem_report_their_loops(lines):
    solve("prefix:64", privacy="pure", method="orthogonal")
    mwem(np.arange(16.0), prefix(16), PureDP(1.0), rng=0, rounds=3)
    text = lines()
    assert any(line.startswith("orthogonal: choosing independent queries of the 64 x 64 workload") for line in text)
    assert any("queries visited" in line for line in text)
    assert [line for line in text if line.startswith("mwem: round")] == ["mwem: round 1 of 3", "mwem: round 2 of 3", "mwem: round 3 of 3"]


def test_compiler_and_run_name_their_phases_from_1024_cells(lines):
    s = solve("prefix:1024", privacy="pure", method="identity")
    run(s, np.ones(1024), prefix(1024), PureDP(1.0), rng=0)
    text = lines()
    assert "identity: checking the 1024 x 1024 strategy (completion, support, error, lower bound)" in text
    assert "run: checking that the 1024 x 1024 strategy supports the workload" in text
    assert "run: 1024 noisy strategy answers drawn; reconstructing 1024 cells (ls)" in text


def test_the_compiler_reports_each_long_step(lines, monkeypatch):
    """An 8192-cell Eigen-Design check was silent for 3 minutes: steps of at least STEP_LOG_SECONDS get a line each."""
    import strategy_opt.compiler as compiler

    monkeypatch.setattr(compiler, "STEP_LOG_SECONDS", 0.0)  # every step is long enough
    solve("prefix:16", privacy="pure", method="hierarchical", branching=2)
    steps = [t.split(": ", 1)[1].rsplit(" in ", 1)[0] for t in lines() if t.startswith("hierarchical: ") and t.endswith(" s")]
    assert steps == ["columns completed", "support checked", "error computed", "lower bounds computed", "ratio to the identity computed"]
    monkeypatch.setattr(compiler, "STEP_LOG_SECONDS", 1e9)
    solve("prefix:16", privacy="pure", method="wavelet")
    assert not [t for t in lines() if t.startswith("wavelet: ") and t.endswith(" s")]


def test_an_external_solver_shows_it_is_alive(lines, monkeypatch):
    # SCS and Clarabel print nothing with verbose off: a 190 s max-objective solve said nothing between its
    # first and last line; a heartbeat now logs while cvxpy runs
    import time

    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.02)
    with progress.heartbeat("solver X", limit=60.0):
        time.sleep(0.15)
    beats = [m for m in lines() if m.startswith("solver X: still running")]
    assert len(beats) >= 3 and beats[0].endswith("of its 60 s time limit)"), beats
    count = len(lines())
    time.sleep(0.1)
    assert len(lines()) == count  # it stops with the block
    with pytest.raises(ZeroDivisionError), progress.heartbeat("solver Y"):
        1 / 0  # and when the block raises
    solve("prefix:24", privacy="approx", method="minerror-l2", solver="scs")
    assert any(m.startswith("minerror-l2: SCS: still running") for m in lines())


def test_sigterm_ends_the_cli_at_once_while_an_external_solver_runs(tmp_path):
    # the CLI's SIGTERM handler could only run once SCS returned (over 120 s on all-range:256): inside a
    # heartbeat block SIGTERM takes its default action when the installed handler is the CLI's, and the
    # handler is back after the block; an application's own handler is never set aside (a library caller's
    # graceful shutdown ran its finally blocks before)
    import signal
    import subprocess
    import sys

    from strategy_opt import cli

    previous = signal.signal(signal.SIGTERM, cli._on_sigterm)
    try:
        with progress.heartbeat("solver Z"):
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is cli._on_sigterm
        own = signal.signal(signal.SIGTERM, lambda *a: None)
        mine = signal.getsignal(signal.SIGTERM)
        with progress.heartbeat("solver Z"):
            assert signal.getsignal(signal.SIGTERM) is mine
        del own
    finally:
        signal.signal(signal.SIGTERM, previous)
    script = (
        "import signal, sys, time\n"
        "from strategy_opt import progress\n"
        "from strategy_opt.cli import _on_sigterm\n"
        "signal.signal(signal.SIGTERM, _on_sigterm if sys.argv[1] == 'cli' else (lambda *a: sys.exit(7)))\n"
        "with progress.heartbeat('solver'):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
    )
    for who, code in (("cli", -signal.SIGTERM), ("application", 7)):
        proc = subprocess.Popen([sys.executable, "-c", script, who], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == code, who  # the default action for the CLI's; the application's handler ran
