"""Eigen-Design benchmark: error ratio to the SVD bound (and to the exact optimum) and time.

Workloads (Li 2013 Table 4.1 / Sec. 5.3): all 1-D ranges on 256 ... 8192 cells, all 2-D ranges
on 64 x 32, 2-way marginals on 8 x 16 x 16 (2048 cells, the US Census shape of Table 5.1),
prefix ranges (CDF) on 2048 cells and all predicates on 1024 cells; methods: Eigen-Design
(full up to 4096 cells, eigen-query separation and principal vectors from 1024 cells) beside
identity, hierarchical (best branching up to 2048 cells, binary above) and wavelet. The exact optimum comes from ``minerror-l2`` (another program of
this library) where it is registered and finishes within its budget; otherwise "-".

Errors are unit total squared errors under (epsilon, delta)-DP (L2 sensitivity); the
ratio to the SVD bound is independent of epsilon and delta. Times are wall-clock medians
over ``--repeats`` runs (runs longer than 20 s are timed once) on a shared 2-core
machine: other jobs run beside this one, so times are noisy; the load average is recorded.

Usage::

    python benchmarks/eigen_design.py            # full run (about 10 minutes at 9d7a913; 30-60 at earlier commits)
    python benchmarks/eigen_design.py --quick    # small sizes only
    python benchmarks/eigen_design.py --replot   # rewrite .md/.png from results/eigen_design.json (keeps its machine line)
    python benchmarks/eigen_design.py --workloads marginals:8x16x16:2 prefix:2048
        # re-run only these workloads' rows; the other rows are kept from results/eigen_design.json

BLAS pools are pinned to ``--threads`` (default 1) with threadpoolctl. Every row records the run it
comes from (finish time, commit, load average, thread pools), and the report lists the runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
import time
from pathlib import Path

from threadpoolctl import threadpool_info, threadpool_limits

from strategy_opt import threads
from strategy_opt.api import solve
from strategy_opt.error import log_svd_bound
from strategy_opt.exceptions import InputError, SolverError
from strategy_opt.registry import methods
from strategy_opt.spec import parse_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RENDER_FALLBACK, git_commit, thread_settings, write_result  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"
LN10 = math.log(10)

#: (workload SPEC, label)
FULL_WORKLOADS = [
    ("all-range:256", "1-D ranges"),
    ("all-range:512", "1-D ranges"),
    ("all-range:1024", "1-D ranges"),
    ("all-range:2048", "1-D ranges"),
    ("all-range:4096", "1-D ranges"),
    ("all-range:8192", "1-D ranges"),
    ("all-range:64*all-range:32", "2-D ranges"),
    ("marginals:8x16x16:2", "2-way marginals"),
    ("prefix:2048", "CDF (prefix)"),
    ("all-predicate:1024", "all predicates"),
]
QUICK_WORKLOADS = [
    ("all-range:256", "1-D ranges"),
    ("all-range:512", "1-D ranges"),
    ("all-range:16*all-range:16", "2-D ranges"),
    ("marginals:4x8x8:2", "2-way marginals"),
    ("prefix:256", "CDF (prefix)"),
    ("all-predicate:256", "all predicates"),
]
#: Largest domain for the full Eigen-Design (one dense n x n Newton system per iteration)
FULL_MAX_N = 4096
#: Largest domain for the exact optimum (minerror-l2)
OPTIMUM_MAX_N = 2048
#: Largest domain on which hierarchical searches its branching factor (15 error evaluations)
HIERARCHICAL_SEARCH_MAX_N = 2048
#: Runs slower than this many seconds are timed once
REPEAT_BELOW_SECONDS = 20.0


def _variants(n: int) -> list[tuple[str, str, dict]]:
    """(row label, method, options) for a workload of n cells."""
    rows = []
    if n <= FULL_MAX_N:
        rows.append(("eigen-design", "eigen-design", {}))
    if n >= 1024:
        rows.append(("eigen-design (separation, n^(1/3))", "eigen-design", {"separation": True}))
        rows.append(("eigen-design (principal 10%)", "eigen-design", {"principal": True}))
    if n <= HIERARCHICAL_SEARCH_MAX_N:
        rows.append(("hierarchical (best b)", "hierarchical", {}))
    else:
        rows.append(("hierarchical (b=2)", "hierarchical", {"branching": 2}))
    rows += [("identity", "identity", {}), ("wavelet", "wavelet", {})]
    return rows


def _run(spec: str, method: str, options: dict, repeats: int):
    times, strategy = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        strategy = solve(spec, privacy="approx", method=method, **options)
        times.append(time.perf_counter() - t0)
        if times[-1] > REPEAT_BELOW_SECONDS:
            break
    return strategy, statistics.median(times), len(times)


def _optimum(spec: str) -> tuple[float | None, str]:
    """log10 of the exact optimum from minerror-l2 (None when unavailable), and a note."""
    if "minerror-l2" not in methods():
        return None, "minerror-l2 not registered"
    try:
        s = solve(spec, privacy="approx", method="minerror-l2")
    except (InputError, SolverError, AttributeError, TypeError, ValueError) as exc:
        return None, f"minerror-l2 failed: {type(exc).__name__}: {exc}"
    m = s.meta
    return m["unit_total_squared_error_log10"], f"minerror-l2 {m.get('solver_status')} gap {m.get('relative_gap')}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-optimum", action="store_true", help="skip minerror-l2")
    ap.add_argument("--replot", action="store_true", help="rewrite the .md and .png from the saved .json")
    ap.add_argument("--workloads", nargs="+", metavar="SPEC",
                    help="re-run only these workloads (of the full or --quick list); the other rows are kept from the saved .json")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl; default 1: the machine is shared)")
    ap.add_argument("--compare-with", type=Path, metavar="OLD_JSON",
                    help="with --replot: list the rows whose ratios or bound kind differ from those of an older results JSON")
    args = ap.parse_args(argv)
    name = "eigen_design_quick" if args.quick else "eigen_design"
    if args.replot:
        result = json.loads((OUT / f"{name}.json").read_text())
        if args.compare_with:
            result["changes"] = _changes(json.loads(args.compare_with.read_text()), result)
            (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
        _report(result, name)
        return
    logging.basicConfig(level=logging.WARNING)
    workloads = QUICK_WORKLOADS if args.quick else FULL_WORKLOADS
    if args.workloads:
        unknown = set(args.workloads) - {w for w, _ in workloads}
        if unknown:
            ap.error(f"not in the workload list: {', '.join(sorted(unknown))}")
        workloads = [(w, lbl) for w, lbl in workloads if w in args.workloads]
    with threadpool_limits(args.threads):
        _measure(args, name, workloads)



def _pools() -> str:
    return ", ".join(f"{p.get('internal_api')}:{p.get('num_threads')}" for p in threadpool_info())


def _measure(args, name: str, workloads):
    rows, notes = [], []
    commit = git_commit()
    command = "python benchmarks/eigen_design.py" + (" --quick" if args.quick else "") + (
        " --workloads " + " ".join(w for w, _ in workloads) if args.workloads else "")
    for spec, label in workloads:
        W = parse_spec(spec)
        log_svdb = log_svd_bound(W) / LN10
        opt_log, note = (None, "skipped")
        if not args.no_optimum and W.n <= OPTIMUM_MAX_N:
            opt_log, note = _optimum(spec)
        notes.append(f"{spec}: exact optimum: {note}")
        for label_m, method, options in _variants(W.n):
            s, secs, runs = _run(spec, method, options, args.repeats)
            m = s.meta
            e_log = m["unit_total_squared_error_log10"]
            row = {
                "workload": spec,
                "label": label,
                "n": W.n,
                "method": label_m,
                "ratio_svd": 10 ** (e_log - log_svdb),
                "ratio_opt": 10 ** (e_log - opt_log) if opt_log is not None else None,
                "lower_bound_ratio": 10 ** (m["lower_bound_log10"] - log_svdb),
                "lower_bound_kind": m["lower_bound_kind"],
                "seconds": secs,
                "runs": runs,
                "svd_bound_log10": log_svdb,
            }
            row["run"] = {"command": command, "commit": commit, "pools": _pools(), "load_average": list(os.getloadavg())}
            if method == "eigen-design":
                row["pre_completion_ratio"] = 10 ** (math.log10(m["eigen_design"]["pre_completion_error"]) + W.log_scale / LN10 - log_svdb)
                program = m["eigen_design"].get("program_5_1_1") or m["eigen_design"]["reduced_program"]  # separation, principal
                row["program_gap"] = program["relative_gap"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    finished = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in rows:
        r["run"]["finished"] = finished
    if args.workloads and (OUT / f"{name}.json").exists():  # keep the other workloads' rows, in the list's order
        old = json.loads((OUT / f"{name}.json").read_text())
        legacy = {"command": old["command"], "finished": old["finished"], "commit": "unrecorded", "load_average": old["load_average"],
                  "pools": ", ".join(f"{p.get('internal_api')}:{p.get('num_threads')}" for p in old["threadpool_info"])
                  + " (not pinned by the script)"}
        redone = {w for w, _ in workloads}
        kept = [{**r, "run": r.get("run", legacy)} for r in old["rows"] if r["workload"] not in redone]
        order = [w for w, _ in (QUICK_WORKLOADS if args.quick else FULL_WORKLOADS)]
        rows = sorted(kept + rows, key=lambda r: order.index(r["workload"]) if r["workload"] in order else len(order))
        spec_of = lambda note: note.split(": exact optimum")[0]  # noqa: E731
        notes = sorted([n for n in old["notes"] if spec_of(n) not in redone] + notes,
                       key=lambda n: order.index(spec_of(n)) if spec_of(n) in order else len(order))
    result = {
        "command": command,
        "finished": finished,
        "load_average": list(os.getloadavg()),
        "cores": os.cpu_count(),
        "threadpool_info": threadpool_info(),
        "machine": thread_settings(),  # inside the run's thread limit; --replot writes this line, never its own
        "commit": commit,
        "factorization_threads": threads.FACTORIZATION_THREADS,
        "notes": notes,
        "rows": rows,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
    _report(result, name)


def _changes(old: dict, new: dict) -> dict:
    """Rows of ``new`` re-run since ``old`` whose E / SVD bound, lower bound or bound kind moved (4 decimals)."""
    before = {(r["workload"], r["method"]): r for r in old["rows"]}
    out = []
    for r in new["rows"]:
        o = before.get((r["workload"], r["method"]))
        if o is None or r.get("run", {}).get("finished") == old["finished"]:
            continue
        moved = [f"{key} {_fmt(o[key])} -> {_fmt(r[key])}" for key in ("ratio_svd", "ratio_opt", "lower_bound_ratio")
                 if o.get(key) is not None and r.get(key) is not None and round(o[key], 4) != round(r[key], 4)]
        if o["lower_bound_kind"] != r["lower_bound_kind"]:
            moved.append(f"bound kind {o['lower_bound_kind']} -> {r['lower_bound_kind']}")
        if moved:
            out.append(f"{r['workload']} {r['method']}: " + ", ".join(moved))
    return {"against": f"the run finished {old['finished']} (`{old['command']}`)", "rows": out}


def _fmt(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


def _report(result: dict, name: str):
    """Write ``<name>.md`` and ``<name>.png`` from a results dict (a measurement's, or the saved JSON with --replot)."""
    rows, load = result["rows"], result["load_average"]
    runs = list(dict.fromkeys(json.dumps({k: v for k, v in r["run"].items() if k != "load_average"}, sort_keys=True) for r in rows if "run" in r))
    run_lines = []
    for i, key in enumerate(runs):
        run = json.loads(key)
        ws = list(dict.fromkeys(r["workload"] for r in rows if "run" in r and json.dumps({k: v for k, v in r["run"].items() if k != "load_average"}, sort_keys=True) == key))
        loads = [r["run"]["load_average"][0] for r in rows if "run" in r and json.dumps({k: v for k, v in r["run"].items() if k != "load_average"}, sort_keys=True) == key]
        run_lines.append(f"- Run {i + 1}: `{run['command']}`, finished {run['finished']}, commit {run['commit']}, BLAS pools {run['pools']}, "
                         f"1-minute load average {min(loads):.1f}-{max(loads):.1f} over its rows; rows: {', '.join(ws)}.")
    lines = [
        f"Last run: `{result['command']}`, finished {result['finished']}. (epsilon, delta)-DP unit total squared error; "
        "ratios to the SVD bound (Li 2013 Thm 4.1) and to the exact optimum (minerror-l2, where available). "
        "Lower bound = the strategy's certified bound (`meta.lower_bound`) over the SVD bound. "
        "Seconds = median wall-clock of the `solve` call over the runs shown (runs longer than 20 s timed once).",
        "",
        f"Cores: {result['cores']}, shared with other jobs (load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}): times are noisy, compare methods within a row group only. "
        f"Eigen-Design runs its dense factorizations (Cholesky, eigh, the compiler's A^T A factorization) on "
        f"{result['factorization_threads']} BLAS thread(s) (`strategy_opt.threads.FACTORIZATION_THREADS`); "
        "matrix products use the thread settings below.",
        "",
        *(["Rows come from these runs (times of different runs were measured under different loads and thread settings; "
           "compare times within a run only):", "", *run_lines, ""] if run_lines else []),
        "| workload | n | method | E / SVD bound | E / optimum | lower bound / SVD bound | pre-completion / SVD bound | seconds (runs) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['n']} | {r['method']} | {_fmt(r['ratio_svd'])} | {_fmt(r['ratio_opt'])} | "
            f"{_fmt(r['lower_bound_ratio'])} ({r['lower_bound_kind']}) | {_fmt(r.get('pre_completion_ratio'))} | "
            f"{r['seconds']:.2f} ({r['runs']}) |"
        )
    if "changes" in result:
        ch = result["changes"]
        lines += ["", f"Changed against {ch['against']} (rows re-run since whose E / SVD bound, E / optimum, lower bound or its kind "
                  "moved at 4 decimals; times not compared):", ""] + ([f"- {c}" for c in ch["rows"]] or ["- none"])
    lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    lines += ["", "Thread settings of the last run (threadpoolctl.threadpool_info()):", "", "```", json.dumps(result["threadpool_info"], indent=1), "```"]
    lines += ["", f"![Eigen-Design on all 1-D ranges: error ratio to the SVD bound and time versus n]({name}.png)"]
    # the machine line and commit of the last measurement run (older JSON files: the line at replot time, marked, and the rows' commits)
    machine = result.get("machine") or thread_settings() + RENDER_FALLBACK
    commits = list(dict.fromkeys(r["run"]["commit"] for r in rows if "run" in r))
    if result.get("commit"):
        commit = result["commit"] + (" (the last run; every run's commit is listed above)" if len(commits) > 1 else "")
    else:
        commit = ", ".join(commits) + " (the rows' runs, listed above)" if commits else git_commit() + " (at replot time)"
    write_result(name, "Eigen-Design benchmark", "\n".join(lines), machine=machine, commit=commit)
    _plot(rows, OUT / f"{name}.png")


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ranges = [r for r in rows if r["label"] == "1-D ranges"]
    ns = sorted({r["n"] for r in ranges})
    names = [m for m in dict.fromkeys(r["method"] for r in ranges) if m != "identity"]
    for i, method in enumerate(names):
        x, ratios, secs = zip(*sorted((r["n"], r["ratio_svd"], r["seconds"]) for r in ranges if r["method"] == method))
        ax1.plot(x, ratios, marker="o", color=f"C{i}", label=method)
        if method.startswith("eigen-design"):
            ax2.plot(x, secs, marker="o", color=f"C{i}", label=method)
    ax1.set(xscale="log", xlabel="cells n", ylabel="E / SVD bound", title="All 1-D ranges: error ratio (identity off-scale: 10-140)")
    ax2.set(xscale="log", yscale="log", xlabel="cells n", ylabel="seconds (median, shared machine)", title="All 1-D ranges: Eigen-Design time")
    for ax in (ax1, ax2):
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
