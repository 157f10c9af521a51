"""How far below HDMM's OPT_0 can an epsilon-DP strategy go? General signed strategies from diverse starts.

Issue 4 asks ``auto --privacy pure`` for E_1 at least 5% below the OPT_0 reference values on
all ranges and prefixes. p-Identity strategies ``[I; Theta] D`` with ``Theta >= 0`` (what
``p-identity`` optimises) are one family; this script drops every structural restriction and
optimises a general strategy ``B`` (any number of rows, entries of either sign) for

    E_1(B) = trace(diag(c) G diag(c) (B^T B)^{-1}),   c_j = ||b_j||_1,

which is ``||A||_1^2 trace(G (A^T A)^{-1})`` of ``A = B diag(1/c)`` (every column of A has L1
norm 1). Signs are handled exactly by splitting ``B = P - N`` with ``P, N >= 0`` (then
``||b_j||_1 = sum_i (P + N)_ij`` at any optimum) and running L-BFGS-B with bounds. Starts:
the ``p-identity`` method's optimum (as a general matrix, plus small noise), hierarchies of
branching 2, 4, 8 (identity included), the Haar wavelet, and Gaussian matrices.

If widely different starts end at the same E_1, and that E_1 is far above the 5% target, the
target is out of reach for the matrix mechanism on that workload (a strong indication, not a
proof: the problem is non-convex and the certified lower bound is ~4x below).

Usage: ``python benchmarks/pure_dp_families.py [--sizes 64 256] [--max-iters 20000] [--starts NAME ...]
[--time-limit S] [--name NAME] [--keep-other-sizes]``. Writes ``benchmarks/results/NAME.{md,json}`` (default
``pure_dp_families``); ``--keep-other-sizes`` keeps the stored runs of NAME.json at sizes not in ``--sizes``.
Every run records the git commit it was measured at (the table's 'commit' column). One BLAS thread throughout. At 1024 cells the polish of the p-identity
optimum alone (``--sizes 1024 --starts "p-identity optimum, exact" --time-limit 900 --name
pure_dp_families_1024``) is what fits a session.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

import numpy as np
import scipy.linalg as la
import scipy.optimize as so
from threadpoolctl import threadpool_limits

from _common import RESULTS, git_commit, markdown_table, thread_settings, write_result
from strategy_opt.bases import hierarchical_matrix, wavelet_matrix
from strategy_opt.programs.pidentity import pidentity_matrix, solve_pidentity
from strategy_opt.workload import all_range, prefix

#: The issue's OPT_0 reference values (single-threaded HDMM OPT_0 runs).
REFERENCE = {
    ("all-range", 64): 32299.68, ("all-range", 256): 1075312.0, ("all-range", 1024): 32721311.0,
    ("prefix", 64): 916.88, ("prefix", 256): 6918.30, ("prefix", 1024): 47391.48,
}
WORKLOADS = {"all-range": all_range, "prefix": prefix}


def signed_loss(x: np.ndarray, G: np.ndarray, rows: int) -> tuple[float, np.ndarray]:
    """E_1 of ``B = P - N`` (``x`` = P and N stacked, flattened) and its gradient in (P, N)."""
    n = G.shape[0]
    PN = x.reshape(2, rows, n)
    B = PN[0] - PN[1]
    c = PN.sum(axis=(0, 1))
    try:
        cf = la.cho_factor(B.T @ B, lower=True, check_finite=False)
    except la.LinAlgError:  # a line-search trial point without full column rank: reject it
        return 1e300, np.zeros_like(x)
    X = la.cho_solve(cf, np.eye(n), check_finite=False)
    Gc = G * np.outer(c, c)
    f = float(np.einsum("ij,ji->", Gc, X))
    gB = -2.0 * B @ (X @ Gc @ X)  # d trace(Gc (B^T B)^{-1}) / dB
    gc = 2.0 * (G * X) @ c  # d (c^T (G o X) c) / dc
    return f, np.concatenate([(gB + gc).ravel(), (-gB + gc).ravel()])


def check_gradient(seed: int = 0) -> float:
    """Largest relative error of `signed_loss`'s gradient against central differences (n = 6)."""
    rng = np.random.default_rng(seed)
    G = all_range(6).gram()
    x = rng.random(2 * 9 * 6)
    _, g = signed_loss(x, G, 9)
    h, worst = 1e-6, 0.0
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        fd = (signed_loss(x + e, G, 9)[0] - signed_loss(x - e, G, 9)[0]) / (2 * h)
        worst = max(worst, abs(fd - g[i]) / max(1.0, abs(fd)))
    return worst


def optimise(B0: np.ndarray, G: np.ndarray, max_iters: int, time_limit: float = np.inf) -> dict:
    """L-BFGS-B on (P, N) >= 0 from ``B0`` for at most ``max_iters`` iterations and ``time_limit`` seconds; the final E_1 and facts."""
    rows = B0.shape[0]
    x0 = np.concatenate([np.maximum(B0, 0).ravel(), np.maximum(-B0, 0).ravel()])
    start = signed_loss(x0, G, rows)[0]
    t0 = time.perf_counter()

    def stop_at_time_limit(intermediate_result) -> None:
        if time.perf_counter() - t0 > time_limit:
            raise StopIteration  # SciPy >= 1.11: ends the run, keeping the last iterate

    res = so.minimize(signed_loss, x0, args=(G, rows), jac=True, method="L-BFGS-B", bounds=so.Bounds(0.0, np.inf),
                      callback=stop_at_time_limit, options={"maxiter": max_iters, "ftol": 0.0, "gtol": 0.0})
    PN = res.x.reshape(2, rows, -1)
    return {"rows": rows, "start_E1": start, "E1": float(res.fun), "iterations": int(res.nit),
            "seconds": time.perf_counter() - t0, "negative_share": float(PN[1].sum() / PN.sum())}


#: The starts, by name; ``--starts`` picks some. "p-identity optimum, exact" is the polish of what `p-identity` returns.
START_NAMES = ("p-identity optimum", "p-identity optimum, exact", "hierarchy b=2", "hierarchy b=4", "hierarchy b=8", "Haar wavelet", "Gaussian, n rows")
#: The starts run when ``--starts`` is not given (the exact polish is asked for by name).
DEFAULT_STARTS = tuple(name for name in START_NAMES if name != "p-identity optimum, exact")


def starts(n: int, G: np.ndarray, rng: np.random.Generator, names=DEFAULT_STARTS) -> dict[str, np.ndarray]:
    """The start matrices named (general strategies, any scaling: E_1 normalises the columns)."""
    out = {}
    if any(name.startswith("p-identity") for name in names):
        res = solve_pidentity(G, p_random=max(1, n // 16), random_starts=0, seed=0, max_iters=20000, time_limit=600, ftol=1e-10)
        A = pidentity_matrix(res.theta)
        out["p-identity optimum"] = A + 1e-3 * rng.standard_normal(A.shape)
        out["p-identity optimum, exact"] = A[np.abs(A).sum(axis=1) > 0]  # without the rows the optimum left empty
    for b in (2, 4, 8):
        out[f"hierarchy b={b}"] = lambda b=b: hierarchical_matrix(n, b).toarray()
    out["Haar wavelet"] = lambda: wavelet_matrix(n).toarray()
    out["Gaussian, n rows"] = lambda: rng.standard_normal((n, n))
    return {name: (out[name]() if callable(out[name]) else out[name]) for name in names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--max-iters", type=int, default=20000)
    ap.add_argument("--starts", nargs="+", choices=START_NAMES, default=list(DEFAULT_STARTS), help="which starts to run")
    ap.add_argument("--time-limit", type=float, default=np.inf, help="seconds per run (default: none)")
    ap.add_argument("--name", default="pure_dp_families", help="results/NAME.{md,json}")
    ap.add_argument("--auto-pure", action="store_true", help="also record `auto-pure`'s E_1 on each workload (the library's answer)")
    ap.add_argument("--keep-other-sizes", action="store_true",
                    help="keep the runs (and auto-pure values) of results/NAME.json at sizes not in --sizes, each with its recorded commit")
    args = ap.parse_args()
    commit = git_commit()
    kept, kept_auto = [], {}
    if args.keep_other_sizes and (RESULTS / f"{args.name}.json").is_file():
        old = json.loads((RESULTS / f"{args.name}.json").read_text())
        size = lambda workload: int(workload.rsplit(":", 1)[1])  # noqa: E731
        kept = [r for r in old["runs"] if size(r["workload"]) not in args.sizes]
        kept_auto = {w: a for w, a in old.get("auto_pure", {}).items() if size(w) not in args.sizes}
    with threadpool_limits(1):
        worst = check_gradient()
        assert worst < 1e-5, f"signed_loss gradient check failed: {worst:.2e}"
        rows, data = [], {"gradient_check_max_rel_error": worst, "runs": []}
        for n in sorted(set(args.sizes) | {int(r["workload"].rsplit(":", 1)[1]) for r in kept}):
            old_runs = [r for r in kept if int(r["workload"].rsplit(":", 1)[1]) == n]
            if old_runs:  # kept from the stored file, not measured now
                for r in old_runs:
                    data["runs"].append(r)
                    rows.append(_row(r))
                data["auto_pure"] = {**data.get("auto_pure", {}), **{w: a for w, a in kept_auto.items() if w.endswith(f":{n}")}}
                continue
            for name, make in WORKLOADS.items():
                G = make(n).gram()
                ref = REFERENCE.get((name, n))
                if args.auto_pure:
                    from strategy_opt.api import solve

                    t0 = time.perf_counter()
                    ap_e1 = float(solve(make(n), privacy="pure", method="auto-pure").meta["unit_total_squared_error"])
                    data.setdefault("auto_pure", {})[f"{name}:{n}"] = {"E1": ap_e1, "seconds": time.perf_counter() - t0}
                    print(f"{name}:{n} auto-pure: {ap_e1:.7g} ({time.perf_counter() - t0:.1f} s)", flush=True)
                for start, B0 in starts(n, G, np.random.default_rng(n), args.starts).items():
                    r = optimise(B0, G, args.max_iters, args.time_limit)
                    r.update(workload=f"{name}:{n}", start=start, reference=ref, commit=commit)
                    data["runs"].append(r)
                    print(f"{name}:{n} {start}: {r['start_E1']:.7g} -> {r['E1']:.7g} ({r['iterations']} its, {r['seconds']:.1f} s)", flush=True)
                    rows.append(_row(r))
        body = (
            "General strategies B (any sign, any rows; columns L1-normalised inside E_1) optimised by L-BFGS-B on B = P - N, "
            f"P, N >= 0, from each start until {args.max_iters} iterations"
            + (f", {args.time_limit:g} s" if np.isfinite(args.time_limit) else "")
            + f" or no progress (`python benchmarks/pure_dp_families.py {shlex.join(sys.argv[1:])}`). "
            f"Gradient checked against central differences first (max relative error {worst:.1e}). "
            "All runs under one BLAS thread (threadpoolctl; the machine line below is written inside that limit)."
            + (f" Rows at {', '.join(sorted({r['workload'].rsplit(':', 1)[1] for r in kept}, key=int))} cells are kept from the stored "
               f"results/{args.name}.json (`--keep-other-sizes`), not measured in this run; 'commit' says where each row was measured."
               if kept else "")
            + "\n\n"
            + markdown_table(["workload", "start", "rows", "E_1 at start", "E_1 after", "iterations", "seconds", "negative mass share",
                              "÷ issue's OPT_0 reference", "5% target (0.95 × reference)", "commit"], rows)
        )
        if data.get("auto_pure"):
            best = {w: min(r["E1"] for r in data["runs"] if r["workload"] == w) for w in data["auto_pure"]}
            body += "\n\n`auto-pure` (default options) on the same workloads, and the best E_1 above against it:\n\n" + markdown_table(
                ["workload", "auto-pure E_1", "seconds", "best E_1 above", "best / auto-pure - 1"],
                [[w, f"{a['E1']:.7g}", f"{a['seconds']:.1f}", f"{best[w]:.7g}", f"{best[w] / a['E1'] - 1:+.4%}"] for w, a in data["auto_pure"].items()])
        data.update(machine=thread_settings(), commit=commit, command="python benchmarks/pure_dp_families.py " + shlex.join(sys.argv[1:]))
        write_result(args.name, "epsilon-DP: general signed strategies from diverse starts (is 5% below OPT_0 reachable?)", body, data,
                     machine=data["machine"], commit=commit)


def _row(r: dict) -> list:
    """A table row of one run (``commit``: where it was measured; runs from before commits were recorded say so)."""
    ref = r.get("reference")
    return [r["workload"], r["start"], r["rows"], f"{r['start_E1']:.7g}", f"{r['E1']:.7g}", r["iterations"], f"{r['seconds']:.1f}",
            f"{r['negative_share']:.3f}", f"{r['E1'] / ref:.4f}" if ref else "-", f"{0.95 * ref:.7g}" if ref else "-",
            r.get("commit", "not recorded")]


if __name__ == "__main__":
    main()
