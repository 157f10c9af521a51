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


def thread_settings() -> str:
    """One line describing the BLAS/OpenMP thread pools in use."""
    pools = [f"{p.get('internal_api')}:{p.get('num_threads')}" for p in threadpool_info()]
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{platform.machine()} {platform.python_version()}; thread pools " + (", ".join(pools) or "none") + f"; load average {load}"


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


def write_result(name: str, title: str, body: str, data: dict | None = None) -> Path:
    """Write ``results/<name>.md`` (and ``.json`` with the raw numbers)."""
    RESULTS.mkdir(exist_ok=True)
    md = RESULTS / f"{name}.md"
    md.write_text(f"# {title}\n\n{body}\n\nMachine: {thread_settings()}\n")
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
