"""Multi-start random search for epsilon-DP strategies on small domains: does anything beat auto-pure?

Issue 4's 5% target (below HDMM's OPT_0) is missed by every local method we have, and the
certified lower bound (the (eps, delta) optimum) is 1.5-4x below the best strategy found, so
it cannot decide whether better strategies exist. On small domains a brute-force look is
affordable: general strategies B (``rows`` of them, entries of either sign, columns
L1-normalised inside the objective) are optimised by L-BFGS from many random starts,

    E_1(B) = trace(G (A^T A)^{-1}),   A = B diag(1 / ||b_j||_1),

(``||A||_1 = 1``), with ``rows`` from n to 3n and starts that are dense or sparse Gaussian.
The objective and its gradient are the library's (`strategy_opt.programs.signed_search.normalised_error`,
exact where no entry of B is zero), which auto-pure's own signed search uses on up to 32 cells. The best E_1 over
all starts is compared with ``auto --privacy pure``, the identity and the lower bound.

Usage: ``python benchmarks/pure_dp_small_global.py [--starts 40] [--render]``. Writes
``benchmarks/results/pure_dp_small_global.{md,json}`` (``--render`` rewrites the Markdown from the JSON, keeping the
measurement's machine line and commit). One BLAS thread throughout. Run time with the default 40 starts: 281 s wall at
commit 3b45437 on the shared 2-core machine at load average 3.7-4.1 (the searches alone 247 s; about 80 s at load 1.5).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.optimize as so
from threadpoolctl import threadpool_limits

from _common import RENDER_FALLBACK, RESULTS, git_commit, markdown_table, stored_commit, stored_machine, thread_settings, write_result
from strategy_opt.api import solve
from strategy_opt.programs.signed_search import normalised_error
from strategy_opt.spec import parse_spec

CASES = ("all-range:4", "all-range:8", "all-range:16", "prefix:8", "prefix:16")


def search(G: np.ndarray, starts: int, seed: int) -> dict:
    """Best E_1 over ``starts`` random starts for each row count n, n+1, n+2, 2n, 3n."""
    n = G.shape[0]
    rng = np.random.default_rng(seed)
    best, where, runs = np.inf, None, 0
    for rows in (n, n + 1, n + 2, 2 * n, 3 * n):
        for s in range(starts):
            density = rng.uniform(0.3, 1.0)
            x0 = rng.standard_normal(rows * n) * (rng.random(rows * n) < density) + 1e-3 * rng.standard_normal(rows * n)
            res = so.minimize(normalised_error, x0, args=(G, rows), jac=True, method="L-BFGS-B", options={"maxiter": 3000})
            runs += 1
            if res.fun < best:
                best, where = float(res.fun), {"rows": rows, "start": s}
    return {"best_E1": best, "found_at": where, "runs": runs}


def render(out: dict, starts: int, machine: str | None = None, commit: str | None = None) -> None:
    """Write the Markdown table and finding (and the JSON) from the results.

    ``machine`` and ``commit``: the ones recorded at measurement time (None: the current ones)."""
    rows = []
    for spec, r in out.items():
        rows.append([spec, f"{r['identity_E1']:.6g}", f"{r['auto_E1']:.6g}", f"{r['best_E1']:.6g}", f"{r['best_E1'] / r['auto_E1']:.4f}",
                     f"{r['lower_bound']:.6g} ({r['lower_bound_kind']})", r["runs"], f"{r['seconds']:.0f}"])
    table = markdown_table(["workload", "identity E_1", "auto-pure E_1", "best random-start E_1", "best / auto", "lower bound", "starts", "seconds"], rows)
    ratios = {spec: r["best_E1"] / r["auto_E1"] for spec, r in out.items()}
    gaps = [r["auto_E1"] / r["lower_bound"] for r in out.values()]
    total = sum(r["runs"] for r in out.values())
    better = [spec for spec, q in ratios.items() if q < 1.0 - 1e-6]
    others = [q for spec, q in ratios.items() if spec not in better]
    finding = f"of {total} random starts, none ends below auto-pure's E_1 on {len(others)} of the {len(ratios)} workloads (best / auto >= {min(others):.4f})" if others else ""
    if better:
        finding += (
            f"{'; ' if finding else ''}on {', '.join(better)} the best ends below auto-pure's E_1 (ratio {min(ratios[b] for b in better):.4f}): "
            "a better strategy exists there, which auto-pure (and p-identity) misses"
        )
    finding += (
        f". The certified lower bound stays {min(gaps):.2f}-{max(gaps):.2f}x below auto-pure, while random search gains at most "
        f"{100 * (1 - min(ratios.values())):.1f}%: on these domains most of the gap is the bound's, not the optimiser's "
        "(evidence, not a proof: each search is local)."
    )
    body = (
        "General signed strategies (n to 3n rows) optimised by L-BFGS from random dense or sparse Gaussian starts "
        f"({starts} per row count; `python benchmarks/pure_dp_small_global.py`), against `auto --privacy pure`. "
        "'seconds': wall time of the search on one BLAS thread, on a machine shared with other jobs (load average below).\n\n"
        + table
        + f"\n\nFinding: {finding}\n"
    )
    data = {"data": out, "starts": starts}
    if machine is None:  # a measurement (under its thread limit): its own line and commit, stored for --render
        machine, commit = thread_settings(), commit or git_commit()
        data.update(machine=machine, commit=commit)
    elif not machine.endswith(RENDER_FALLBACK):  # re-rendering: keep the stored measurement line (never store a render-time one)
        data.update(machine=machine, commit=commit)
    write_result("pure_dp_small_global", "epsilon-DP on small domains: multi-start random search against auto-pure", body, data,
                 machine=machine, commit=commit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=40, help="random starts per row count")
    ap.add_argument("--render", action="store_true", help="only rewrite the Markdown from the stored JSON")
    args = ap.parse_args()
    if args.render:
        stored = json.loads((RESULTS / "pure_dp_small_global.json").read_text())
        wrapped = "data" in stored  # old files hold the per-workload results alone
        render(stored["data"] if wrapped else stored, stored.get("starts", args.starts),
               machine=stored_machine(stored if wrapped else None), commit=stored_commit(stored if wrapped else None))
        return
    out, commit = {}, git_commit()  # the commit of the code this process loads
    with threadpool_limits(1):
        for spec in CASES:
            W = parse_spec(spec)
            G = W.gram()
            auto = solve(spec, privacy="pure", method="auto").meta
            t0 = time.perf_counter()
            found = search(G, args.starts, seed=0)
            seconds = time.perf_counter() - t0
            out[spec] = {**found, "seconds": seconds, "auto_E1": auto["unit_total_squared_error"], "identity_E1": float(np.trace(G)),
                         "lower_bound": auto["lower_bound"], "lower_bound_kind": auto["lower_bound_kind"], "threads": thread_settings()}
            print(spec, out[spec], flush=True)
        render(out, args.starts, commit=commit)  # inside the thread limit: the machine line records the pools the runs used


if __name__ == "__main__":
    main()
