"""Benchmark the largest per-query variance under epsilon-DP: ``auto --privacy pure --objective max``.

For each workload it reports the largest unit variance (``||A||_1^2 max_i w_i (A^T A)^+ w_i^T``) of
the best closed-form construction (identity, hierarchical, wavelet), of auto-pure's strategy for the
total error (what ``auto`` returned for ``max`` before p-identity's min-max search), and of ``auto``
now (its choice: p-identity's annealed search on the flat domain, or the product of the attributes'
on product workloads), beside its certified lower bound (the (epsilon, delta) min-max dual, or the
product of the attributes' on product workloads), the gap, and auto's seconds. The values are
recomputed with numpy from the returned matrix where it has at most `RECOMPUTE_MAX_N` cells.

Usage: ``python benchmarks/pure_max.py``; writes ``benchmarks/results/pure_max.{md,json,png}``.
Everything runs in this process under one BLAS thread (threadpoolctl), one workload after another.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, git_commit, markdown_table, write_result  # noqa: E402

# imported before the thread limit is set: a BLAS library loaded after it (SciPy's) keeps its default threads
import scipy.linalg  # noqa: E402, F401
from strategy_opt import solve  # noqa: E402
from strategy_opt.error import KroneckerMatrix  # noqa: E402
from strategy_opt.spec import parse_spec  # noqa: E402

NAME = "pure_max"
TITLE = "epsilon-DP, objective max: auto's min-max search against the strategy for the total"
WORKLOADS = ("prefix:64", "all-range:64", "random-range:64:64:0", "all-range:128", "prefix:256", "prefix:16*prefix:16", "prefix:64*prefix:64")
#: The value is recomputed with numpy (pinv) from the dense matrix up to this many cells.
RECOMPUTE_MAX_N = 1024
CONSTRUCTIONS = ("identity", "hierarchical", "wavelet")


def _numpy_largest_variance(matrix, spec: str) -> float:
    A = np.kron(*(np.asarray(f) for f in matrix.factors)) if isinstance(matrix, KroneckerMatrix) else np.asarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix)
    W = parse_spec(spec).matrix().toarray()
    return float(np.abs(A).sum(axis=0).max() ** 2 * np.einsum("ij,jk,ik->i", W, np.linalg.pinv(A.T @ A), W).max())


def measure(spec: str) -> dict:
    """auto under (pure, max) on one workload, with the values of its candidates."""
    t0 = time.perf_counter()
    s = solve(spec, privacy="pure", method="auto", objective="max")
    seconds = time.perf_counter() - t0
    meta = s.meta
    candidates = meta["auto_candidates"]
    n = parse_spec(spec).n
    return {
        "workload": spec,
        "cells": n,
        "best_construction": min(CONSTRUCTIONS, key=lambda k: candidates[k]),
        "best_construction_value": min(candidates[k] for k in CONSTRUCTIONS),
        "total_strategy_value": candidates["auto-pure"],
        "auto_value": meta["objective_value"],
        "auto_choice": meta["auto_choice"],
        "numpy_value": _numpy_largest_variance(s.matrix, spec) if n <= RECOMPUTE_MAX_N else None,
        "lower_bound": meta["objective_lower_bound"],
        "lower_bound_kind": meta["objective_lower_bound_kind"],
        "gap": meta["objective_relative_gap"],
        "improvement": candidates["auto-pure"] / meta["objective_value"],
        "seconds": seconds,
    }


def plot(rows: list[dict], path: Path) -> None:
    """Bars per workload: each strategy's largest variance over the certified bound (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 4))
    for k, (key, label) in enumerate((("best_construction_value", "best construction"), ("total_strategy_value", "auto-pure (strategy for the total)"), ("auto_value", "auto --objective max"))):
        ax.bar(x + (k - 1) * 0.27, [r[key] / r["lower_bound"] for r in rows], 0.27, label=label)
    ax.set_xticks(x, [r["workload"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("largest variance / certified bound")
    ax.set_title("epsilon-DP, objective max (one BLAS thread)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(data: dict) -> str:
    """The Markdown body: findings, then the table."""
    rows = data["rows"]
    findings = [
        f"- {r['workload']}: auto {r['auto_value']:.5g} ({r['auto_choice']}) against {r['total_strategy_value']:.5g} for auto-pure's "
        f"strategy for the total ({r['improvement']:.3g}x lower) and {r['best_construction_value']:.5g} for the best construction "
        f"({r['best_construction']}); certified bound {r['lower_bound']:.5g} ({r['lower_bound_kind']}), in {r['seconds']:.3g} s."
        for r in rows
    ]
    header = [
        "workload", "cells", "best construction", "auto-pure (total's strategy)", "auto max", "auto choice", "numpy recomputed",
        "lower bound", "bound kind", "gap", "total's / auto", "auto seconds",
    ]
    table = [
        [r["workload"], r["cells"], f"{r['best_construction_value']:.5g} ({r['best_construction']})", r["total_strategy_value"], r["auto_value"],
         r["auto_choice"], r["numpy_value"] if r["numpy_value"] is not None else "skip", r["lower_bound"], r["lower_bound_kind"], r["gap"],
         r["improvement"], r["seconds"]]
        for r in rows
    ]
    notes = (
        f"Commit {data['commit']}; one run per workload, in one process under one BLAS thread ({data['threads']}); load average at the "
        f"start {data['load']}. The local search is time-budgeted (60 s inside auto), so on a loaded machine it can end a little higher. "
        "The bound bounds every epsilon-DP strategy (||A||_1 >= ||A||_2, so the largest variance is at least gamma_2(W)^2, whose "
        "certified dual the (epsilon, delta) min-max solver gives; gamma_2 is multiplicative over Kronecker products). "
        "Plot: benchmarks/results/pure_max.png."
    )
    return "\n".join(findings) + "\n\n" + markdown_table(header, table) + "\n\n" + notes


def main() -> None:
    import os

    from _common import thread_settings

    with threadpool_limits(limits=1, user_api="blas"):
        rows = []
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        for spec in WORKLOADS:
            print(f"{spec} ...", flush=True)
            rows.append(measure(spec))
        data = {"commit": git_commit(), "threads": thread_settings(), "load": load, "rows": rows}
        plot(rows, RESULTS / f"{NAME}.png")
        print(write_result(NAME, TITLE, render(data), data))


if __name__ == "__main__":
    main()
