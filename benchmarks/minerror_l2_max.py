"""Benchmark minerror-l2 with ``--objective max`` (the min-max variance program) and ``auto``.

For each workload the script solves the min-max program with the ``clarabel`` and ``scs``
profiles (the SDP route: an active set over the queries' Schur complements or the
factorization-norm form) and with the ``native`` profile (`strategy_opt.native_max`: exponentiated
updates of the query weights, each round a certified native total-error solve), and reports the
largest per-query variance of the returned strategy (unit normalisation, recomputed here from the
matrix), the lower bound the library states (the SDP route's and the native solver's are both the
simplex-weighted dual), the rounds (active-set rounds; native weight-update rounds), which candidate
won on the SDP route (the SDP's strategy or the native optimum of the total weighted by the SDP's
multipliers; '-' for native), and the wall time. The reference is an independent min-max
SDP written directly on the raw rows, ``min t  s.t.  [[X, W^T], [W, P]] ⪰ 0, diag P <= t,
diag X <= 1``, solved by Clarabel (no active set, no row normalisation), and the largest
variance its X attains. Beside it: the largest variance of the
total-error optimum (minerror-l2, native) and of identity / hierarchical / wavelet, and what
``auto --objective max`` picks (method and solver profile) and how long it takes.

Workloads: all-range:8, all-range:16 (136 queries: the Schur form), prefix:32,
random-range:32:40:1 (the factorization-norm form), the same 40 ranges with rows scaled by
10^U(-2, 3) (badly scaled), and the six-row file of an outside audit (rows 1e3 ... 1e-2).

A second table goes beyond the Schur form, to workloads the SDP route refuses or takes minutes
on: prefix:100, all-range:64, random-range:256:1000:3, all-range:256, prefix:512 and
all-range:512 (``--skip-512`` leaves it out; each native solve is capped at ``--native-cap``).
For each: the native solver's largest variance, certified lower bound, relative gap, rounds and
seconds; the largest variance of the total-error optimum and of the best of identity /
hierarchical / wavelet (ratios to the native min-max value); what ``auto --objective max``
picks there (it gives the native solver a 60 s share); and for prefix:100 the SCS profile too
(capped at ``--scs-cap`` per solve), for the time ratio. Findings computed from the run head
the Markdown.

Usage: ``python benchmarks/minerror_l2_max.py [--scs-cap SECONDS] [--native-cap SECONDS] [--skip-512]``;
writes ``benchmarks/results/minerror_l2_max.{md,json}`` (``--render`` rewrites the Markdown from the
JSON). Everything runs in this process under one
BLAS thread (threadpoolctl), one case after another.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, git_commit, markdown_table, stored_commit, thread_settings, write_result  # noqa: E402

NAME = "minerror_l2_max"
TITLE = "minerror-l2 --objective max: value against a reference min-max SDP, time"
#: Workloads past the SDP route's Schur form (all-range:512 last: about 100 s; ``--skip-512``).
BEYOND = ("prefix:100", "all-range:64", "random-range:256:1000:3", "all-range:256", "prefix:512", "all-range:512")
#: The one workload of the second table that SCS also runs on (the time ratio).
SCS_BEYOND = "prefix:100"
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


def largest_variance(A, M) -> float:
    """max_i ||A||_2^2 m_i (A^T A)^+ m_i^T, computed here from the matrix (M dense or sparse)."""
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A, dtype=float)
    P = np.linalg.pinv(A.T @ A)
    V = np.asarray(M @ P)
    per_query = np.asarray(M.multiply(V).sum(axis=1)).ravel() if hasattr(M, "multiply") else np.einsum("ij,ij->i", M, V)
    return float(per_query.max() * (A**2).sum(axis=0).max())


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
    s = solve(W, privacy="approx", **kw)
    return s, time.perf_counter() - t0


def profile(solver: str, scs_cap: float, native_cap: float):
    """The named solver profile, SCS capped at ``scs_cap`` s per solve and native at ``native_cap`` s."""
    from strategy_opt.solvers import load_profile

    prof = load_profile(solver)
    cap = {"scs": scs_cap, "native": native_cap}.get(solver)
    return replace(prof, time_limit=cap) if cap is not None else prof


def minmax_run(W, M, solver: str, scs_cap: float, native_cap: float) -> dict:
    """minerror-l2 --objective max on one profile: the largest variance recomputed from the matrix, and the meta's facts."""
    s, sec = timed_solve(W, method="minerror-l2", objective="max", solver=profile(solver, scs_cap, native_cap))
    m = s.meta
    rec = {
        "value": largest_variance(s.matrix, M),
        "meta_value": m["objective_value"],
        "lower_bound": m.get("objective_lower_bound"),
        "lower_bound_kind": m.get("objective_lower_bound_kind"),
        "relative_gap": m.get("objective_relative_gap"),
        "status": m.get("solver_status"),
        "seconds": sec,
    }
    if "native_max" in m:
        rec.update(rounds=m["native_max"]["rounds"], forms=["native"], chosen="-", native_bound=m["native_max"]["bound"], native_gap=m["native_max"]["gap"])
    else:
        rounds = m["max_active_set"]["rounds"]
        rec.update(rounds=len(rounds), forms=sorted({r["form"] for r in rounds}), chosen=m["max_candidates"]["chosen"])
    return rec


def comparisons(W, M) -> dict:
    """The total-error optimum's and the baselines' largest variances, and what auto --objective max picks."""
    total, _ = timed_solve(W, method="minerror-l2", solver="native")
    rec: dict = {"total_optimum_max": largest_variance(total.matrix, M)}
    rec["baselines"] = {b: largest_variance(timed_solve(W, method=b)[0].matrix, M) for b in ("identity", "hierarchical", "wavelet")}
    s, sec = timed_solve(W, method="auto", objective="max")
    m = s.meta
    rec["auto"] = {
        "choice": m["auto_choice"], "solver": m.get("solver"), "status": m.get("solver_status"), "value": largest_variance(s.matrix, M), "seconds": sec,
        "native_max": m.get("native_max"),
    }
    return rec


def run_case(name: str, M: np.ndarray, scs_cap: float, native_cap: float) -> dict:
    from strategy_opt.workload import from_matrix

    W = from_matrix(M, spec=name)
    ref, attained, ref_s = reference_minmax(M)
    rec: dict = {
        "workload": name, "shape": list(M.shape), "reference": ref, "reference_attained": attained, "reference_seconds": ref_s, "solvers": {},
    }
    for solver in ("clarabel", "scs", "native"):
        rec["solvers"][solver] = minmax_run(W, M, solver, scs_cap, native_cap)
    rec.update(comparisons(W, M))
    return rec


def run_beyond(spec: str, scs_cap: float, native_cap: float) -> dict:
    """One workload past the Schur form: the native solver, SCS on `SCS_BEYOND`, and the comparisons."""
    from strategy_opt.spec import parse_spec

    W = parse_spec(spec)
    M = W.matrix().tocsr()
    rec: dict = {"workload": spec, "shape": [W.m, W.n], "solvers": {"native": minmax_run(W, M, "native", scs_cap, native_cap)}}
    if spec == SCS_BEYOND:
        rec["solvers"]["scs"] = minmax_run(W, M, "scs", scs_cap, native_cap)
    rec.update(comparisons(W, M))
    return rec


def _best_baseline(r: dict) -> tuple[str, float]:
    return min(r["baselines"].items(), key=lambda kv: kv[1])


def findings(records: list[dict], beyond: list[dict], scs_cap: float) -> list[str]:
    """2-4 one-sentence findings computed from the run."""
    ratio = lambda r, solver: r["solvers"][solver]["value"] / r["reference"]  # noqa: E731
    seconds = lambda rs, solver: [r["solvers"][solver]["seconds"] for r in rs if solver in r["solvers"]]  # noqa: E731
    out = [
        f"On the {len(records)} workloads the reference SDP takes, the native solver's largest variance is at most "
        f"{max(ratio(r, 'native') for r in records):.7f}x the reference value (clarabel's at most {max(ratio(r, 'clarabel') for r in records):.7f}x), "
        f"in a median {statistics.median(n / c for n, c in zip(seconds(records, 'native'), seconds(records, 'clarabel'))):.3g}x clarabel's wall time "
        f"({statistics.median(seconds(records, 'native')):.2f} s against {statistics.median(seconds(records, 'clarabel')):.2f} s)"
        + "".join(
            f"; on {r['workload']} it stops '{r['solvers']['native']['status']}' after {r['solvers']['native']['rounds']} rounds at a certified gap of "
            f"{r['solvers']['native']['relative_gap']:.2g} (clarabel's {r['solvers']['clarabel']['relative_gap']:.2g})"
            for r in records
            if r["solvers"]["native"]["status"] != "optimal"
        )
        + ".",
    ]
    # every stated bound against the smallest largest variance any route attained on its workload
    over = max(v["lower_bound"] / attained_best(r) for r in records + beyond for v in r["solvers"].values() if v["lower_bound"] is not None)
    out.append(
        f"Every stated lower bound is below the smallest largest variance any route attained on its workload (by at least a relative {1 - over:.1e})."
        if over < 1
        else f"A stated lower bound exceeds the smallest largest variance attained on its workload by a relative {over - 1:.1e}: a bound is wrong."
    )
    if beyond:
        nat = [r["solvers"]["native"] for r in beyond]
        slow = max(beyond, key=lambda r: r["solvers"]["native"]["seconds"])
        total = [r["total_optimum_max"] / r["solvers"]["native"]["value"] for r in beyond]
        base = [_best_baseline(r)[1] / r["solvers"]["native"]["value"] for r in beyond]
        out.append(
            f"Beyond the Schur form the native solver certifies a relative gap of at most {max(v['relative_gap'] for v in nat):.2g} on all "
            f"{len(beyond)} workloads ({sum(v['status'] == 'optimal' for v in nat)} 'optimal') in a median {statistics.median(seconds(beyond, 'native')):.2f} s, "
            f"at most {slow['solvers']['native']['seconds']:.1f} s ({slow['workload']}, {slow['solvers']['native']['rounds']} rounds); the total-error optimum's "
            f"largest variance is {min(total):.3f}-{max(total):.3f}x its value and the best baseline's {min(base):.2f}-{max(base):.2f}x."
        )
        for r in beyond:
            if "scs" in r["solvers"]:
                sc, nv = r["solvers"]["scs"], r["solvers"]["native"]
                out.append(
                    f"On {r['workload']} SCS (capped at {scs_cap:g} s per solve) took {sc['seconds']:.1f} s ({sc['status']}, {sc['value'] / nv['value']:.6f}x the native "
                    f"value), {sc['seconds'] / nv['seconds']:.0f}x the native solver's {nv['seconds']:.2f} s."
                )
    return out


def attained_best(r: dict) -> float:
    """The smallest largest variance any route attained on the workload (the reference's X included, where it ran)."""
    vals = [v["value"] for v in r["solvers"].values()] + ([r["reference_attained"]] if "reference_attained" in r else [])
    return min(vals)


def render(records: list[dict], beyond: list[dict], settings: str, scs_cap: float, native_cap: float) -> str:
    header = [
        "workload", "m x n", "reference SDP: value / attained by its X (s)", "solver", "largest variance", "/ reference value", "stated lower bound",
        "rounds (forms)", "chosen", "status", "seconds",
    ]
    rows = []
    for r in records:
        for solver, v in r["solvers"].items():
            kind = "" if v.get("lower_bound_kind") in (None, "simplex-weighted-dual") else f" ({v['lower_bound_kind']})"
            rows.append([
                r["workload"], "x".join(map(str, r["shape"])), f"{r['reference']:.8g} / {r['reference_attained']:.8g} ({r['reference_seconds']:.2f})", solver,
                f"{v['value']:.8g}", f"{v['value'] / r['reference']:.7f}", f"{v['lower_bound']:.8g}{kind}" if v["lower_bound"] is not None else "-",
                f"{v['rounds']} ({', '.join(v['forms'])})", v["chosen"], v["status"], f"{v['seconds']:.2f}",
            ])

    def auto_cell(r, best):
        a = r["auto"]
        extra = f": {a['native_max']['rounds']} rounds, gap {a['native_max']['gap']:.1e}, {a['status']}" if a.get("native_max") else ""
        return f"{a['choice']} ({a['solver']}{extra}): {a['value']:.6g} ({a['value'] / best:.3f}x)"

    other_header = ["workload", "min-max optimum (clarabel)", "total-error optimum", "identity", "hierarchical", "wavelet", "auto --objective max picks", "auto seconds"]
    other = []
    for r in records:
        best = r["solvers"]["clarabel"]["value"]
        cell = lambda v: f"{v:.6g} ({v / best:.3f}x)"  # noqa: E731
        b = r["baselines"]
        other.append([
            r["workload"], f"{best:.6g}", cell(r["total_optimum_max"]), cell(b["identity"]), cell(b["hierarchical"]), cell(b["wavelet"]),
            auto_cell(r, best), f"{r['auto']['seconds']:.2f}",
        ])
    beyond_header = [
        "workload", "m x n", "solver", "largest variance", "certified lower bound", "relative gap", "rounds", "status", "seconds",
        "total-error optimum (ratio)", "best baseline (ratio)", "auto --objective max picks", "auto seconds",
    ]
    brows = []
    for r in beyond:
        nv = r["solvers"]["native"]["value"]
        name, bb = _best_baseline(r)
        for solver, v in r["solvers"].items():
            first = solver == "native"
            brows.append([
                r["workload"], "x".join(map(str, r["shape"])), solver, f"{v['value']:.8g}" + ("" if first else f" ({v['value'] / nv:.6f}x)"),
                f"{v['lower_bound']:.8g}" if v["lower_bound"] is not None else "-",
                f"{v['relative_gap']:.2e}" if v["relative_gap"] is not None else "-",
                v["rounds"] if first else f"{v['rounds']} ({', '.join(v['forms'])})", v["status"],
                f"{v['seconds']:.2f}" + ("" if first else f" ({v['seconds'] / r['solvers']['native']['seconds']:.0f}x)"),
                f"{r['total_optimum_max']:.6g} ({r['total_optimum_max'] / nv:.3f}x)" if first else "",
                f"{name}: {bb:.6g} ({bb / nv:.3f}x)" if first else "",
                auto_cell(r, nv) if first else "", f"{r['auto']['seconds']:.2f}" if first else "",
            ])
    parts = [
        "Findings (this run):\n\n" + "\n".join(f"- {x}" for x in findings(records, beyond, scs_cap)),
        "Largest per-query variance in unit normalisation, max_i ||A||_2^2 w_i (A^T A)^+ w_i^T, recomputed "
        "from the returned matrix. Reference: the min-max SDP written on the raw rows, min t s.t. "
        "[[X, W^T], [W, P]] ⪰ 0, diag P <= t, diag X <= 1, solved by Clarabel (no active set, no row "
        "normalisation), with the largest variance its own X attains: where the two differ the reference solve "
        "was inaccurate (rows 1e5 apart). The stated lower bound is the simplex-weighted dual on every route (another kind is named); "
        "'rounds' are active-set rounds for clarabel/scs and weight-update rounds for native (target gap 1e-5). "
        f"SCS runs are capped at {scs_cap:g} s per solve, native runs at {native_cap:g} s. Wall time of "
        "`strategy_opt.api.solve` (program + compiler) in one process, one case after another.",
        f"Run under: {settings}",
        "## minerror-l2 --objective max against the reference",
        markdown_table(header, rows),
        "## The largest variance of other strategies (ratio to the min-max optimum)",
        markdown_table(other_header, other),
    ]
    if beyond:
        parts += [
            "## Beyond the Schur form (native solver; ratios to its largest variance)",
            "Workloads where the SDP route refuses the Schur form or takes minutes; no reference SDP. The certified lower bound and "
            "relative gap are the library's (objective_lower_bound, objective_relative_gap); the best baseline is the best of "
            "identity / hierarchical / wavelet. auto gives the native solver a 60 s share.",
            markdown_table(beyond_header, brows),
        ]
    return "\n\n".join(parts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scs-cap", type=float, default=120.0, help="time limit of each SCS solve (s)")
    ap.add_argument("--native-cap", type=float, default=180.0, help="time limit of each native min-max solve (s)")
    ap.add_argument("--skip-512", action="store_true", help="leave all-range:512 out of the second table")
    ap.add_argument("--render", action="store_true", help="rewrite the Markdown from the last JSON without solving")
    args = ap.parse_args(argv)
    if args.render:
        data = json.loads((RESULTS / f"{NAME}.json").read_text())
        body = render(data["runs"], data.get("beyond", []), data["settings"], data["scs_cap"], data.get("native_cap", args.native_cap))
        # the measurement's machine line: "machine" (taken at its end), or in older files "settings" (at its start, under the
        # same one-thread limit); never the render's
        print(write_result(NAME, TITLE, body, data, machine=data.get("machine") or data["settings"], commit=stored_commit(data)))
        return
    from strategy_opt.registry import methods

    methods()  # import every program (and cvxpy) before the first clock starts
    records, beyond, commit = [], [], git_commit()  # the commit of the code this process loads
    with threadpool_limits(1):
        settings = thread_settings()
        for name, M in workloads().items():
            print(f"{name} ...", flush=True)
            records.append(run_case(name, M, args.scs_cap, args.native_cap))
        for spec in BEYOND:
            if spec == "all-range:512" and args.skip_512:
                continue
            print(f"{spec} ...", flush=True)
            beyond.append(run_beyond(spec, args.scs_cap, args.native_cap))
        machine = thread_settings()  # inside the limit: the pools the runs used
    data = {"runs": records, "beyond": beyond, "settings": settings, "scs_cap": args.scs_cap, "native_cap": args.native_cap,
            "machine": machine, "commit": commit}
    path = write_result(NAME, TITLE, render(records, beyond, settings, args.scs_cap, args.native_cap), data, machine=machine,
                        commit=data["commit"])
    print(path)


if __name__ == "__main__":
    main()
