"""Benchmark minerror-l2 with ``--objective max`` (the min-max variance program) and ``auto``.

For each workload the script solves the min-max program with the ``clarabel`` and ``scs``
profiles and reports the largest per-query variance of the returned strategy (unit
normalisation, recomputed here from the matrix), the lower bound the library states, the
active-set rounds, which candidate won (the SDP's strategy or the native optimum of the total
weighted by the SDP's multipliers), and the wall time. The reference is an independent min-max
SDP written directly on the raw rows, ``min t  s.t.  [[X, W^T], [W, P]] ⪰ 0, diag P <= t,
diag X <= 1``, solved by Clarabel (no active set, no row normalisation), and the largest
variance its X attains. Beside it: the largest variance of the
total-error optimum (minerror-l2, native) and of identity / hierarchical / wavelet, and what
``auto --objective max`` returns and how long it takes.

Workloads: all-range:8, all-range:16 (136 queries: the Schur form), prefix:32,
random-range:32:40:1 (the factorization-norm form), the same 40 ranges with rows scaled by
10^U(-2, 3) (badly scaled), and the six-row file of an outside audit (rows 1e3 ... 1e-2).

Usage: ``python benchmarks/minerror_l2_max.py [--scs-cap SECONDS]``; writes
``benchmarks/results/minerror_l2_max.{md,json}`` (``--render`` rewrites the Markdown from the
JSON). Everything runs in this process under one
BLAS thread (threadpoolctl), one case after another.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, markdown_table, thread_settings, write_result  # noqa: E402

NAME = "minerror_l2_max"
TITLE = "minerror-l2 --objective max: value against a reference min-max SDP, time"
#: Rows of the outside audit's file: scales from 1e3 to 1e-2 (the single-query floor is 1e6).
AUDIT_ROWS = np.array(
    [[1e3, 1e3, 0, 0, 0, 0], [0, 0, 1e-2, 1e-2, 1e-2, 1e-2], [1, 0, 1, 0, 1, 0], [0, 1, 0, -1, 0, 2], [5, 5, 5, 5, 5, 5], [0, 0, 0, 0, 0, 30]]
)


def workloads() -> dict[str, np.ndarray]:
    """The benchmark's workloads as dense matrices (all small enough for the reference SDP)."""
    from strategy_opt.workload import all_range, prefix, random_range

    ranges = random_range(32, 40, seed=1).matrix().toarray()
    scales = 10.0 ** np.random.default_rng(7).uniform(-2, 3, ranges.shape[0])
    return {
        "all-range:8": all_range(8).matrix().toarray(),
        "all-range:16": all_range(16).matrix().toarray(),
        "prefix:32": prefix(32).matrix().toarray(),
        "random-range:32:40:1": ranges,
        "random-range:32:40:1, rows x 10^U(-2,3)": ranges * scales[:, None],
        "audit 6x6 (rows 1e3 ... 1e-2)": AUDIT_ROWS,
    }


def largest_variance(A, M: np.ndarray) -> float:
    """max_i ||A||_2^2 m_i (A^T A)^+ m_i^T, computed here from the dense matrix."""
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A, dtype=float)
    P = np.linalg.pinv(A.T @ A)
    return float(np.einsum("ij,jk,ik->i", M, P, M).max() * (A**2).sum(axis=0).max())


def reference_minmax(M: np.ndarray) -> tuple[float, float, float]:
    """The min-max SDP on the raw rows (Clarabel): its value, the largest variance its X attains, wall time.

    ``min t  s.t.  [[X, M^T], [M, P]] ⪰ 0,  diag P <= t,  diag X <= 1`` (the factorization-norm
    form: P ⪰ M X^{-1} M^T, so t bounds every variance), with no row normalisation and no active
    set. The attained value is recomputed from X (scaled to max diag 1), since an inaccurate
    solve can report a t below what its X gives.
    """
    import cvxpy as cp

    m, n = M.shape
    X, P, t = cp.Variable((n, n), symmetric=True), cp.Variable((m, m), symmetric=True), cp.Variable()
    cons = [cp.bmat([[X, M.T], [M, P]]) >> 0, cp.diag(P) <= t, cp.diag(X) <= 1]
    t0 = time.perf_counter()
    prob = cp.Problem(cp.Minimize(t), cons)
    prob.solve(solver="CLARABEL")
    seconds = time.perf_counter() - t0
    lam, V = np.linalg.eigh((X.value + X.value.T) / 2)
    A = (V * np.sqrt(np.maximum(lam, 0))) @ V.T
    return float(prob.value), largest_variance(A, M), seconds


def timed_solve(W, **kw):
    from strategy_opt.api import solve

    t0 = time.perf_counter()
    s = solve(W, **kw)
    return s, time.perf_counter() - t0


def run_case(name: str, M: np.ndarray, scs_cap: float) -> dict:
    from strategy_opt.solvers import load_profile
    from strategy_opt.workload import from_matrix

    W = from_matrix(M, spec=name)
    ref, attained, ref_s = reference_minmax(M)
    rec: dict = {
        "workload": name, "shape": list(M.shape), "reference": ref, "reference_attained": attained, "reference_seconds": ref_s, "solvers": {},
    }
    for solver in ("clarabel", "scs"):
        profile = load_profile(solver)
        if solver == "scs":
            profile = replace(profile, time_limit=scs_cap)
        s, sec = timed_solve(W, privacy="approx", method="minerror-l2", objective="max", solver=profile)
        m = s.meta
        rec["solvers"][solver] = {
            "value": largest_variance(s.matrix, M),
            "meta_value": m["objective_value"],
            "lower_bound": m.get("objective_lower_bound"),
            "rounds": len(m["max_active_set"]["rounds"]),
            "forms": sorted({r["form"] for r in m["max_active_set"]["rounds"]}),
            "chosen": m["max_candidates"]["chosen"],
            "status": m.get("solver_status"),
            "seconds": sec,
        }
    total, _ = timed_solve(W, privacy="approx", method="minerror-l2", solver="native")
    rec["total_optimum_max"] = largest_variance(total.matrix, M)
    rec["baselines"] = {b: largest_variance(timed_solve(W, privacy="approx", method=b)[0].matrix, M) for b in ("identity", "hierarchical", "wavelet")}
    s, sec = timed_solve(W, privacy="approx", method="auto", objective="max")
    rec["auto"] = {"choice": s.meta["auto_choice"], "solver": s.meta.get("solver"), "value": largest_variance(s.matrix, M), "seconds": sec}
    return rec


def render(records: list[dict], settings: str, scs_cap: float) -> str:
    header = [
        "workload", "m x n", "reference SDP: value / attained by its X (s)", "solver", "largest variance", "/ reference value", "stated lower bound",
        "rounds (forms)", "chosen", "status", "seconds",
    ]
    rows = []
    for r in records:
        for solver, v in r["solvers"].items():
            rows.append([
                r["workload"], "x".join(map(str, r["shape"])), f"{r['reference']:.8g} / {r['reference_attained']:.8g} ({r['reference_seconds']:.2f})", solver,
                f"{v['value']:.8g}", f"{v['value'] / r['reference']:.7f}", f"{v['lower_bound']:.8g}" if v["lower_bound"] is not None else "-",
                f"{v['rounds']} ({', '.join(v['forms'])})", v["chosen"], v["status"], f"{v['seconds']:.2f}",
            ])
    other_header = ["workload", "min-max optimum (clarabel)", "total-error optimum", "identity", "hierarchical", "wavelet", "auto --objective max", "auto seconds"]
    other = []
    for r in records:
        best = r["solvers"]["clarabel"]["value"]
        cell = lambda v: f"{v:.6g} ({v / best:.3f}x)"  # noqa: E731
        b = r["baselines"]
        other.append([
            r["workload"], f"{best:.6g}", cell(r["total_optimum_max"]), cell(b["identity"]), cell(b["hierarchical"]), cell(b["wavelet"]),
            f"{r['auto']['choice']} ({r['auto']['solver']}): {cell(r['auto']['value'])}", f"{r['auto']['seconds']:.2f}",
        ])
    return "\n\n".join([
        "Largest per-query variance in unit normalisation, max_i ||A||_2^2 w_i (A^T A)^+ w_i^T, recomputed "
        "from the returned matrix. Reference: the min-max SDP written on the raw rows, min t s.t. "
        "[[X, W^T], [W, P]] ⪰ 0, diag P <= t, diag X <= 1, solved by Clarabel (no active set, no row "
        "normalisation), with the largest variance its own X attains: where the two differ the reference solve "
        f"was inaccurate (rows 1e5 apart). Each stated lower bound is at most the reference value. SCS runs are capped at {scs_cap:g} s per solve. Wall time of "
        "`strategy_opt.api.solve` (program + compiler) in one process, one case after another.",
        f"Run under: {settings}",
        "## minerror-l2 --objective max against the reference",
        markdown_table(header, rows),
        "## The largest variance of other strategies (ratio to the min-max optimum)",
        markdown_table(other_header, other),
    ])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scs-cap", type=float, default=300.0, help="time limit of each SCS solve (s)")
    ap.add_argument("--render", action="store_true", help="rewrite the Markdown from the last JSON without solving")
    args = ap.parse_args(argv)
    if args.render:
        data = json.loads((RESULTS / f"{NAME}.json").read_text())
        print(write_result(NAME, TITLE, render(data["runs"], data["settings"], data["scs_cap"]), data))
        return
    from strategy_opt.registry import methods

    methods()  # import every program (and cvxpy) before the first clock starts
    records = []
    with threadpool_limits(1):
        settings = thread_settings()
        for name, M in workloads().items():
            print(f"{name} ...", flush=True)
            records.append(run_case(name, M, args.scs_cap))
    path = write_result(NAME, TITLE, render(records, settings, args.scs_cap), {"runs": records, "settings": settings, "scs_cap": args.scs_cap})
    print(path)


if __name__ == "__main__":
    main()
