"""Benchmark `run` through a Kronecker (per-attribute) strategy: per factor against the multiplied-out matrix.

For each product workload the script builds the product of the attributes' ``auto`` strategies under
(epsilon, delta)-DP (`per_attribute_optimum`, kept as its factors; what ``auto`` returns past 2048 cells) and answers the workload on a Poisson histogram through
`strategy_opt.executor.run` twice with the same seed: once with the strategy as its factors (what
``strategy-opt run`` does on a strategy file of a product workload) and once with the same matrix
multiplied out as a sparse matrix (the only route before). It reports the median seconds of each,
their ratio, and the largest difference of the answers and of the interval widths. Beside it, the
strategy's ``A^T A`` as `strategy_opt.error` forms it now (dense blocks of rows when the rows are
dense, `_gram_of`) against SciPy's sparse product, which the error profile used before (one run of
the sparse product at 4096 cells: about a minute).

Usage: ``python benchmarks/structured_run.py [--repeats N]``; writes
``benchmarks/results/structured_run.{md,json}``. Everything runs in this process under one BLAS
thread (threadpoolctl), one case after another.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import git_commit, markdown_table, median_time, write_result  # noqa: E402

# imported before the thread limit is set: a BLAS library loaded after it (SciPy's) keeps its default threads
import scipy.linalg  # noqa: E402, F401
from strategy_opt.error import _gram_of  # noqa: E402
from strategy_opt.executor import run  # noqa: E402
from strategy_opt.privacy import ApproxDP  # noqa: E402
from strategy_opt.problem import Problem  # noqa: E402
from strategy_opt.programs.auto import per_attribute_optimum  # noqa: E402
from strategy_opt.spec import parse_spec  # noqa: E402

NAME = "structured_run"
TITLE = "run through a Kronecker strategy: per factor against the multiplied-out matrix"
WORKLOADS = ("prefix:32*all-range:32", "prefix:64*all-range:64")


def _width_difference(one, other) -> float | str:
    """Largest relative difference of two releases' interval widths, or which release has none."""
    missing = [name for name, r in (("per factor", one), ("flat", other)) if r.lower is None]
    if missing:
        return f"no intervals ({', '.join(missing)})"
    return float(np.max(np.abs((one.upper - one.lower) / (other.upper - other.lower) - 1.0)))


def measure(spec: str, repeats: int) -> dict:
    """Seconds and agreement of `run` per factor and flat, and of the two ``A^T A`` routes, on one workload."""
    W = parse_spec(spec)
    strategy = per_attribute_optimum(Problem(W, privacy="approx"))
    flat = strategy.matrix.tocsr()
    x = np.random.default_rng(0).poisson(20, W.n).astype(float)
    privacy = ApproxDP(1.0, 1e-6)
    t_factors, per_factor = median_time(lambda: run(strategy, x, W, privacy, rng=1), repeats)
    t_flat, multiplied = median_time(lambda: run(flat, x, W, privacy, rng=1), repeats)
    t_blocks, G = median_time(lambda: _gram_of(flat), repeats)
    t0 = time.perf_counter()
    G_sparse = (flat.T @ flat).toarray()
    t_sparse = time.perf_counter() - t0
    return {
        "workload": spec,
        "cells": W.n,
        "strategy_nonzeros": int(flat.nnz),
        "factor_choices": strategy.meta["per_attribute_choices"],
        "run_per_factor_s": t_factors,
        "run_flat_s": t_flat,
        "run_ratio": t_flat / t_factors,
        "answers_max_abs_difference": float(np.max(np.abs(per_factor.answers - multiplied.answers))),
        "interval_width_max_rel_difference": _width_difference(per_factor, multiplied),
        "gram_dense_blocks_s": t_blocks,
        "gram_sparse_product_s": t_sparse,
        "gram_ratio": t_sparse / t_blocks,
        "gram_max_abs_difference": float(np.max(np.abs(G - G_sparse))),
    }


def render(data: dict) -> str:
    """The Markdown body: findings, then the table."""
    rows = [
        [
            r["workload"], r["cells"], r["strategy_nonzeros"], r["run_per_factor_s"], r["run_flat_s"], r["run_ratio"],
            r["answers_max_abs_difference"], r["interval_width_max_rel_difference"],
            r["gram_dense_blocks_s"], r["gram_sparse_product_s"], r["gram_ratio"], r["gram_max_abs_difference"],
        ]
        for r in data["rows"]
    ]
    findings = [
        f"- {r['workload']}: `run` per factor {r['run_per_factor_s']:.3g} s against {r['run_flat_s']:.3g} s through the "
        f"multiplied-out matrix ({r['run_ratio']:.3g}x), answers equal to {r['answers_max_abs_difference']:.1e}; "
        f"A^T A by dense row blocks {r['gram_dense_blocks_s']:.3g} s against {r['gram_sparse_product_s']:.3g} s by the sparse "
        f"product ({r['gram_ratio']:.3g}x)."
        for r in data["rows"]
    ]
    header = [
        "workload", "cells", "non-zeros of A", "run per factor (s)", "run flat (s)", "flat / per factor",
        "answers max abs diff", "interval width max rel diff", "A^T A dense blocks (s)", "A^T A sparse product (s)",
        "sparse / blocks", "A^T A max abs diff",
    ]
    notes = (
        f"Commit {data['commit']}; medians over {data['repeats']} runs (the sparse product: one run), all in one process "
        "under one BLAS thread. 'run flat' already forms A^T A by dense row blocks; before this commit range it used the "
        "sparse product (the last columns), and `strategy-opt run` on a Kronecker strategy file took the flat route below "
        "the flat limit."
    )
    return "\n".join(findings) + "\n\n" + markdown_table(header, rows) + "\n\n" + notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with threadpool_limits(limits=1, user_api="blas"):
        rows = []
        for spec in WORKLOADS:
            print(f"{spec} ...", flush=True)
            rows.append(measure(spec, args.repeats))
        data = {"commit": git_commit(), "repeats": args.repeats, "rows": rows}
        print(write_result(NAME, TITLE, render(data), data))


if __name__ == "__main__":
    main()
