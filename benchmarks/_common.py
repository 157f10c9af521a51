"""Helpers shared by the benchmark scripts: thread settings, timing, Markdown output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

from threadpoolctl import threadpool_info

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model() -> str | None:
    """The first 'model name' of /proc/cpuinfo (None where it is not readable)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def thread_settings() -> str:
    """One line describing the machine: CPU model, Python, the BLAS/OpenMP thread pools in use (with the
    kernel architecture threadpoolctl reports, e.g. ``openblas:1 (SkylakeX)``) and the load average."""
    pools = []
    for p in threadpool_info():
        arch = p.get("architecture")
        pools.append(f"{p.get('internal_api')}:{p.get('num_threads')}" + (f" ({arch})" if arch else ""))
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    cpu = cpu_model()
    return (f"{platform.machine()}" + (f" {cpu}" if cpu else "") + f"; Python {platform.python_version()}; thread pools "
            + (", ".join(pools) or "none") + f"; load average {load}")


RENDER_FALLBACK = " (machine line at render time; the measurement's was not recorded)"


def stored_machine(data: dict | None, key: str = "machine") -> str:
    """The measurement-time machine line stored under ``key`` in ``data``; for old JSON files without one, the
    current line, marked as taken at render time."""
    line = (data or {}).get(key)
    return line if line else thread_settings() + RENDER_FALLBACK


def stored_commit(data: dict | None, key: str = "commit") -> str:
    """The measurement-time git commit stored under ``key`` in ``data``; otherwise the current one, marked."""
    commit = (data or {}).get(key)
    return commit if commit else git_commit() + " (at render time; the measurement's was not recorded)"


def median_time(func, repeats: int = 3):
    """Median wall time of ``func()`` over ``repeats`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def write_result(name: str, title: str, body: str, data: dict | None = None, machine: str | None = None,
                 commit: str | None = None) -> Path:
    """Write ``results/<name>.md`` (and ``.json`` with the raw numbers).

    The Markdown ends with the machine line and the git commit. ``machine`` (and ``commit``) are the ones
    recorded at measurement time, for modes that only re-render stored numbers; by default the current
    ones (call it under the measurement's thread limits)."""
    RESULTS.mkdir(exist_ok=True)
    md = RESULTS / f"{name}.md"
    machine = machine if machine is not None else thread_settings()
    commit = commit if commit is not None else git_commit()
    md.write_text(f"# {title}\n\n{body}\n\nMachine: {machine}\n\nCommit: {commit}\n")
    if data is not None:
        (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True))
    return md


def git_commit() -> str:
    """Short git commit of this checkout, with '+changes' if strategy_opt/ is modified ('unknown' outside git)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "strategy_opt"], cwd=root, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")
