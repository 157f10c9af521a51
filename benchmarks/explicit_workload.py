"""Explicit (file:) workloads at n = 4096: Gram matrix, solve, DAWA route and time.

The workload is ``random-range:4096:2000:7`` (a third of its entries are non-zero)
written as a scipy sparse ``.npz`` and as a dense ``.npy`` and read back with
``read_workload_file``, as ``--workload file:PATH`` does. Measured:

* ``ExplicitWorkload.gram()``: first call and a repeated call;
* how many times ``solve`` (hierarchical at its default, the best of nine branchings, eps-DP)
  asks the workload for its Gram, and its time;
* DAWA (eps = 0.1, NETTRACE when the DPBench data are present, else a sparse
  synthetic histogram): the route `MappedWorkload` takes and the median time
  over seeds, next to the same queries given as the ``random-range`` SPEC.

Run: ``python benchmarks/explicit_workload.py [--threads N] [--skip-solve]`` (prints a
Markdown table and the thread settings; committed in benchmarks/results/explicit_workload.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, median_time, thread_settings  # noqa: E402

import strategy_opt as so  # noqa: E402
from strategy_opt.matrix_files import read_workload_file  # noqa: E402
from strategy_opt.programs.dawa import dawa_estimate  # noqa: E402
from strategy_opt.programs.greedy_h import MappedWorkload  # noqa: E402
from strategy_opt.workload import ExplicitWorkload, random_range  # noqa: E402

NETTRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "dpbench" / "1D" / "NETTRACE.n4096.npy"


def histogram(n: int) -> np.ndarray:
    if NETTRACE.is_file():
        return np.load(NETTRACE).astype(float)
    rng = np.random.default_rng(0)
    x = np.zeros(n)
    x[rng.choice(n, n // 32, replace=False)] = rng.integers(100, 2000, n // 32)
    return x


def count_gram_calls(func):
    """Run ``func()`` timing the calls of ``ExplicitWorkload.gram``; returns (seconds, calls, seconds in gram)."""
    original = ExplicitWorkload.gram
    calls, inside = [0], [0.0]

    def counted(self):
        calls[0] += 1
        t0 = time.perf_counter()
        try:
            return original(self)
        finally:
            inside[0] += time.perf_counter() - t0

    ExplicitWorkload.gram = counted
    try:
        t0 = time.perf_counter()
        func()
        return time.perf_counter() - t0, calls[0], inside[0]
    finally:
        ExplicitWorkload.gram = original


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: as configured)")
    ap.add_argument("--skip-solve", action="store_true", help="skip the solve measurement")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    limits = threadpool_limits(args.threads) if args.threads else None
    n, m = 4096, 2000
    R = random_range(n, m, 7)
    x = histogram(n)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        sp.save_npz(Path(d) / "rr.npz", R.matrix())
        np.save(Path(d) / "rr.npy", R.matrix().toarray())
        for name in ("rr.npz", "rr.npy"):
            path = Path(d) / name
            W = read_workload_file(path)
            t0 = time.perf_counter()
            G = W.gram()
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            W.gram()
            again = time.perf_counter() - t0
            err = float(np.abs(G - R.gram()).max())
            rows.append([f"file:{name} gram() first call", f"{first:.3f}", f"largest abs(G - closed form) = {err:.1e}"])
            rows.append([f"file:{name} gram() second call", f"{again:.4f}", ""])
            if not args.skip_solve:
                W = read_workload_file(path)
                t, calls, inside = count_gram_calls(lambda: so.solve(W, privacy="pure", method="hierarchical"))
                rows.append([f"file:{name} solve hierarchical, best branching (eps-DP)", f"{t:.2f}", f"gram() called {calls} times, {inside:.2f} s in it"])
        for label, make in (
            ("file:rr.npz", lambda: read_workload_file(Path(d) / "rr.npz")),
            ("file:rr.npy", lambda: read_workload_file(Path(d) / "rr.npy")),
            ("random-range:4096:2000:7", lambda: random_range(n, m, 7)),
        ):
            W = make()
            route = MappedWorkload._choose_route(W)
            seeds = iter(range(args.seeds))
            # a fresh workload object per run: the Gram cache must not hide the first call's cost
            t, _ = median_time(lambda: dawa_estimate(x, make(), 0.1, rng=next(seeds)), repeats=args.seeds)
            rows.append([f"DAWA eps=0.1 on {label} (n={n})", f"{t:.2f}", f"route {route}; median of {args.seeds} seeds, incl. reading the file"])
    print(markdown_table(["operation", "seconds", "note"], rows))
    print()
    print("histogram:", NETTRACE.name if NETTRACE.is_file() else "synthetic sparse")
    print("Machine:", thread_settings())
    if limits is not None:
        limits.restore_original_limits()


if __name__ == "__main__":
    main()
