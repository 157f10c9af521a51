"""DPBench protocol: DAWA against the data-dependent and data-independent field.

Histograms: ../shared/data/dpbench (1-D: 12 histograms of n = 4096 cells; 2-D:
7 grids of 256 x 256). Workloads: identity, 2000 random ranges (2-D: 2000
random rectangles, two uniform corners per axis), prefix (2-D: all
``[0, i] x [0, j]``). eps in {0.01, 0.1, 1}. Metrics: mean absolute and mean
squared error per query of the released answers, averaged over seeds (noise
seeds 0..S-1, ``sampler='simulate'``; the random workloads are fixed, seed 0),
and the wall time of one release.

Methods

* data-dependent: ``dawa`` (rho = 0.25, branching 2, power-of-two buckets,
  paper's stage-1 noise) and ``mwem`` with T tuned per histogram, as in Li 2013
  Sec. 6.5.1, on a separate random workload at eps = 0.1 (1-D: T in
  {10, 20, 50, 100}; 2-D: T in {5, 10, 20}); the tuning spends no budget of the
  reported runs but does look at the data (it favours MWEM, as in the paper).
* data-independent (strategy + Laplace + least squares): identity, H_b (best
  branching for the workload by predicted error, from the ``hierarchical``
  method, per workload; 2-D rectangles, whose Gram is too large for that
  search, take the branching chosen for 2-D prefix),
  Haar wavelet (Privelet), GreedyH on single cells, and ``auto-pure`` when
  another module registers it. Their error ``W A^+ z`` does not depend on the
  data, so each is measured once per (workload, eps, seed) and shared by all
  histograms. 1-D: `executor.measure` + `executor.reconstruct` (LSMR); 2-D
  Kronecker strategies: the exact separable least squares ``(A1^+ (x) A2^+) y``;
  2-D GreedyH: DAWA with rho = 0 (every cell its own bucket, Hilbert order).
  "best DI" is the data-independent method with the lowest mean error per
  (workload, eps).

Also reported: Li 2013 Table 6.1 (buckets of the optimal partition) against the
noise-free optimal partitions of the DPBench versions of those histograms and
the buckets DAWA actually released; Table 6.2 (ratios of competitors' error to
DAWA's on random ranges, smallest and largest over the seven histograms); and
the acceptance check of issue 6 (1-D, random ranges, eps = 0.1, 10 seeds:
DAWA's MSE against identity's).

Usage: ``python benchmarks/dpbench.py [--quick] [--seeds 5] [--seeds-2d 5]
[--cache FILE]``. Runs are cached (JSON lines) so an interrupted run resumes.
Writes ``benchmarks/results/dpbench.md``, ``dpbench.json`` and
``dpbench_{1d,2d}_<workload>.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, markdown_table, thread_settings, write_result  # noqa: E402

from strategy_opt.api import solve  # noqa: E402
from strategy_opt.bases import hierarchical_matrix, wavelet_matrix  # noqa: E402
from strategy_opt.error import sensitivity  # noqa: E402
from strategy_opt.executor import measure, reconstruct  # noqa: E402
from strategy_opt.partition import optimal_partition  # noqa: E402
from strategy_opt.privacy import PureDP  # noqa: E402
from strategy_opt.programs.dawa import dawa_estimate, random_rectangles  # noqa: E402
from strategy_opt.programs.greedy_h import MappedWorkload, greedy_hierarchy  # noqa: E402
from strategy_opt.programs.mwem import mwem_estimate  # noqa: E402
from strategy_opt.registry import methods  # noqa: E402
from strategy_opt.workload import identity, kronecker, prefix, random_range  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dpbench"
EPSILONS = (0.01, 0.1, 1.0)

#: Li 2013 Table 6.1 (Fig. 6.3 order) and the DPBench file of each histogram.
PAPER_DATASETS = {
    "Nettrace": "NETTRACE.n4096",
    "Adult": "ADULTFRANK.n4096",
    "Medical Cost": "MEDCOST.n4096",
    "Search Logs": "SEARCHLOGS.n4096",
    "Income": "INCOME.n4096",
    "Patents": "PATENT.n4096",
    "HepPh (DPBench: HEPTH)": "HEPTH.n4096",
}
TABLE_6_1 = [22, 29, 20, 500, 1537, 1870, 2168]
#: Li 2013 Table 6.2, uniform intervals: (smallest, largest) ratio of each competitor's error to DAWA's.
TABLE_6_2 = {
    0.01: {"identity": (2.04, 26.42), "wavelet": (1.00, 12.93), "mwem": (2.65, 17.00)},
    0.1: {"identity": (2.00, 20.85), "wavelet": (0.98, 10.20), "mwem": (2.54, 22.54)},
}
DI_METHODS = ["identity", "hierarchical", "wavelet", "greedy-h"]
DD_METHODS = ["dawa", "mwem"]
#: Diagnostic variant (benchmark only; see `dawa_reference_noise`).
DIAGNOSTIC = ["dawa-refnoise"]
LABEL = {"identity": "Identity", "hierarchical": "H_b", "wavelet": "Privelet", "greedy-h": "GreedyH",
         "auto-pure": "auto-pure", "dawa": "DAWA", "mwem": "MWEM", "best-di": "best DI",
         "dawa-refnoise": "DAWA ref-noise (diag.)"}
#: Plot colour and marker of each method (the same in every figure).
STYLE = {"dawa": ("tab:blue", "o"), "mwem": ("tab:orange", "s"), "dawa-refnoise": ("tab:green", "^"), "identity": ("tab:red", "v"),
         "hierarchical": ("tab:purple", "D"), "wavelet": ("tab:brown", "x"), "greedy-h": ("tab:pink", "*"), "auto-pure": ("tab:gray", "P")}
MWEM_T = {"1d": (10, 20, 50, 100), "2d": (5, 10, 20)}

log = logging.getLogger("dpbench")


# ----------------------------------------------------------------------------- data and workloads
def datasets(dim: str, quick: bool) -> dict[str, np.ndarray]:
    files = sorted((DATA / ("1D" if dim == "1d" else "2D")).glob("*.npy"))
    if quick:
        files = files[:2]
    return {f.stem: np.load(f).astype(float).ravel() for f in files}


def workloads(dim: str) -> dict:
    if dim == "1d":
        return {"identity": identity(4096), "random-range": random_range(4096, 2000, 0), "prefix": prefix(4096)}
    return {
        "identity": kronecker(identity(256), identity(256)),
        "rectangles": random_rectangles((256, 256), 2000, 0),
        "prefix": kronecker(prefix(256), prefix(256)),
    }


# ----------------------------------------------------------------------------- cache
class Cache:
    """JSON-lines record store keyed by (dim, dataset, workload, eps, seed, method)."""

    def __init__(self, path: Path):
        self.path = path
        self.records: dict[tuple, dict] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                self.records[self.key(r)] = r

    @staticmethod
    def key(r):
        return (r["dim"], r["dataset"], r["workload"], r["eps"], r["seed"], r["method"])

    def get(self, **k):
        return self.records.get(self.key(k))

    def put(self, r: dict):
        self.records[self.key(r)] = r
        with self.path.open("a") as f:
            f.write(json.dumps(r) + "\n")


def errors(W, x_hat, truth) -> tuple[float, float]:
    d = W.matvec(x_hat) - truth
    return float(np.mean(np.abs(d))), float(np.mean(d * d))


# ----------------------------------------------------------------------------- data-independent strategies
def best_branching(W, dim: str, cache: Cache, name: str) -> int:
    rec = cache.get(dim=dim, dataset="-", workload=name, eps=0, seed=0, method="hb-branching")
    if rec is None:
        t0 = time.perf_counter()
        b = int(solve(W, privacy="pure", method="hierarchical").meta["branching"])
        rec = {"dim": dim, "dataset": "-", "workload": name, "eps": 0, "seed": 0, "method": "hb-branching", "value": b,
               "seconds": time.perf_counter() - t0}
        cache.put(rec)
        log.info("%s %s: best H_b branching %d (%.0f s)", dim, name, b, rec["seconds"])
    return rec["value"]


def di_strategies_1d(W, name: str, cache: Cache, quick: bool = False) -> dict:
    """Strategy matrices (sparse) over 4096 cells, built directly (no compile step); ``auto-pure`` (minutes) unless ``quick``."""
    import scipy.sparse as sp

    n = W.n
    out = {
        "identity": sp.identity(n, format="csr"),
        "hierarchical": sp.csr_matrix(hierarchical_matrix(n, best_branching(W, "1d", cache, name))),
        "wavelet": sp.csr_matrix(wavelet_matrix(n)),
    }
    tree = greedy_hierarchy(MappedWorkload(W, np.arange(n), np.arange(n + 1)), 2)
    out["greedy-h"] = tree.strategy()
    if "auto-pure" in methods() and not quick:
        out["auto-pure"] = solve(W, privacy="pure", method="auto-pure").sparse()
    return out


def run_di_1d(A, W, eps, seed):
    t0 = time.perf_counter()
    x0 = np.zeros(W.n)
    y, _ = measure(A, x0, PureDP(eps), rng=seed, sampler="simulate")
    x_hat = reconstruct(A, y, "ls")
    return x_hat, time.perf_counter() - t0


def kron_ls_2d(factors, eps, seed):
    """Exact LS release error for a Kronecker strategy A1 (x) A2 on zero data: (A1^+ (x) A2^+) (A1 (x) A2 0 + z)."""
    t0 = time.perf_counter()
    A1, A2 = factors
    delta = sensitivity(A1, 1) * sensitivity(A2, 1)
    z = np.random.default_rng(seed).laplace(0.0, delta / eps, (A1.shape[0], A2.shape[0]))
    X = np.linalg.pinv(A1) @ z @ np.linalg.pinv(A2).T
    return X.ravel(), time.perf_counter() - t0


def di_factors_2d(b: int) -> dict:
    """Kronecker factors of the 2-D data-independent strategies (256 x 256)."""
    return {
        "identity": (np.eye(256), np.eye(256)),
        "hierarchical": (hierarchical_matrix(256, b).toarray(), hierarchical_matrix(256, b).toarray()),
        "wavelet": (wavelet_matrix(256).toarray(), wavelet_matrix(256).toarray()),
    }


# ----------------------------------------------------------------------------- diagnostic variant
def dawa_reference_noise(x, W, eps, seed, rho=0.25):
    """DAWA with the stage-1 noise of the later reference code, as summarised in ../shared/notes/dawa.md Sec. 6.3.

    Laplace((2 - 1/|b| - 1/n)/eps1) on buckets longer than 1, none on unit buckets, noisy
    ``dev`` clamped at 0 (DPComp variant: cost >= 1/eps2). NOT covered by Thm 6.1: a
    diagnostic for the gap to the paper's reported numbers, never a release method.
    """
    from strategy_opt.partition import bucket_counts, bucket_deviations, candidate_buckets, expand, least_cost_partition

    n = x.size
    eps1, eps2 = rho * eps, (1 - rho) * eps
    gen = np.random.default_rng(seed)
    lo, length = candidate_buckets(n)
    dev = bucket_deviations(x, lo, lo + length)
    scale = np.where(length > 1, (2.0 - 1.0 / length - 1.0 / n) / eps1, 0.0)
    cost = np.maximum(dev + gen.laplace(0.0, 1.0, dev.size) * scale, 0.0) + 1.0 / eps2
    edges = least_cost_partition(n, lo, length, cost)
    tree = greedy_hierarchy(MappedWorkload(W, np.arange(n), edges), 2)
    y, _ = measure(tree.strategy(), bucket_counts(x, edges), PureDP(eps2), rng=gen, sampler="simulate")
    return expand(tree.least_squares(y), edges), edges.size - 1


# ----------------------------------------------------------------------------- runs
def record(cache, **kw):
    cache.put(kw)
    return kw


def tune_mwem(dim, name, x, cache, quick):
    rec = cache.get(dim=dim, dataset=name, workload="tuning", eps=0.1, seed=0, method="mwem-T")
    if rec is not None:
        return rec["value"]
    W = random_range(4096, 2000, 1) if dim == "1d" else random_rectangles((256, 256), 2000, 1)
    truth = W.matvec(x)
    grid = MWEM_T[dim][:2] if quick else MWEM_T[dim]
    seeds = (100,) if dim == "2d" or quick else (100, 101)
    scores = {}
    for T in grid:
        scores[T] = np.mean([errors(W, mwem_estimate(x, W, 0.1, rng=s, rounds=T)[0], truth)[0] for s in seeds])
    best = min(scores, key=scores.get)
    cache.put({"dim": dim, "dataset": name, "workload": "tuning", "eps": 0.1, "seed": 0, "method": "mwem-T", "value": best,
               "scores": {str(k): v for k, v in scores.items()}})
    log.info("%s %s: MWEM T = %d (%s)", dim, name, best, scores)
    return best


def run_all(dim: str, seeds: int, cache: Cache, quick: bool, extra_seeds: int = 0):
    data = datasets(dim, quick)
    W_all = workloads(dim)
    eps_list = (0.1,) if quick else EPSILONS
    b2d = best_branching(W_all["prefix"], "2d", cache, "prefix") if dim == "2d" else None
    # data-independent: once per (workload, eps, seed)
    for wname, W in W_all.items():
        if dim == "1d":
            strategies = di_strategies_1d(W, wname, cache, quick)
        else:  # Kronecker workloads choose their own branching; rectangles take 2-D prefix's
            strategies = di_factors_2d(b2d if wname == "rectangles" else best_branching(W, "2d", cache, wname))
        names = list(strategies) + ([] if dim == "1d" else ["greedy-h"])
        for eps in eps_list:
            for seed in range(seeds):
                for m in names:
                    if cache.get(dim=dim, dataset="*", workload=wname, eps=eps, seed=seed, method=m):
                        continue
                    if dim == "1d":
                        x_hat, sec = run_di_1d(strategies[m], W, eps, seed)
                    elif m == "greedy-h":
                        t0 = time.perf_counter()
                        x_hat = dawa_estimate(np.zeros(W.n), W, eps, rng=seed, rho=0.0).x_hat
                        sec = time.perf_counter() - t0
                    else:
                        x_hat, sec = kron_ls_2d(strategies[m], eps, seed)
                    mae, mse = errors(W, x_hat, np.zeros(W.m))
                    record(cache, dim=dim, dataset="*", workload=wname, eps=eps, seed=seed, method=m, mae=mae, mse=mse, seconds=sec)
                    log.info("%s %s eps=%g seed=%d %s: MAE %.4g (%.2f s)", dim, wname, eps, seed, m, mae, sec)
    # data-dependent: per histogram
    for dname, x in data.items():
        T = tune_mwem(dim, dname, x, cache, quick)
        for wname, W in W_all.items():
            truth = W.matvec(x)
            for eps in eps_list:
                n_seeds = seeds + (extra_seeds if (wname == "random-range" and eps == 0.1) else 0)
                for seed in range(n_seeds):
                    if not cache.get(dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="dawa"):
                        t0 = time.perf_counter()
                        res = dawa_estimate(x, W, eps, rng=seed)
                        sec = time.perf_counter() - t0
                        mae, mse = errors(W, res.x_hat, truth)
                        record(cache, dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="dawa", mae=mae, mse=mse,
                               seconds=sec, buckets=res.buckets)
                        log.info("%s %s %s eps=%g seed=%d dawa: MAE %.4g, k=%d (%.2f s)", dim, dname, wname, eps, seed, mae, res.buckets, sec)
                    if seed < seeds and not cache.get(dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="mwem"):
                        t0 = time.perf_counter()
                        x_hat, _ = mwem_estimate(x, W, eps, rng=seed, rounds=T)
                        sec = time.perf_counter() - t0
                        mae, mse = errors(W, x_hat, truth)
                        record(cache, dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="mwem", mae=mae, mse=mse,
                               seconds=sec, rounds=T)
                        log.info("%s %s %s eps=%g seed=%d mwem: MAE %.4g (%.2f s)", dim, dname, wname, eps, seed, mae, sec)
                    if dim == "1d" and wname == "random-range" and seed < seeds and not cache.get(
                        dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="dawa-refnoise"
                    ):
                        t0 = time.perf_counter()
                        x_hat, k = dawa_reference_noise(x, W, eps, seed)
                        mae, mse = errors(W, x_hat, truth)
                        record(cache, dim=dim, dataset=dname, workload=wname, eps=eps, seed=seed, method="dawa-refnoise", mae=mae,
                               mse=mse, seconds=time.perf_counter() - t0, buckets=k)
    return list(data), list(W_all), eps_list


# ----------------------------------------------------------------------------- summaries
def mean_of(cache, dim, dataset, wname, eps, method, field, seeds):
    vals = [cache.get(dim=dim, dataset=dataset, workload=wname, eps=eps, seed=s, method=method) for s in range(seeds)]
    vals = [v[field] for v in vals if v is not None]
    return float(np.mean(vals)) if vals else float("nan")


def summary(cache, dim, dnames, wnames, eps_list, seeds):
    """table[wname][eps][dataset][method] = (mae, mse)."""
    di = sorted({r["method"] for r in cache.records.values() if r["dim"] == dim and r["dataset"] == "*"}, key=lambda m: (m not in DI_METHODS, DI_METHODS.index(m) if m in DI_METHODS else 0))
    table = {}
    for w in wnames:
        table[w] = {}
        for eps in eps_list:
            di_err = {m: (mean_of(cache, dim, "*", w, eps, m, "mae", seeds), mean_of(cache, dim, "*", w, eps, m, "mse", seeds)) for m in di}
            best = min(di_err, key=lambda m: di_err[m][0])
            table[w][eps] = {}
            for d in dnames:
                row = {m: (mean_of(cache, dim, d, w, eps, m, "mae", seeds), mean_of(cache, dim, d, w, eps, m, "mse", seeds)) for m in DD_METHODS + DIAGNOSTIC}
                row.update(di_err)
                row["best-di"] = di_err[best] + (best,)
                table[w][eps][d] = row
    return table, di


def fmt(v):
    return "n/a" if not np.isfinite(v) else (f"{v:.3g}" if abs(v) < 1e5 else f"{v:.2e}")


def present(by_eps, methods_):
    return [m for m in methods_ if any(np.isfinite(row[m][0]) for by_d in by_eps.values() for row in by_d.values())]


def error_tables(table, di, dim, which):
    out = []
    idx = 0 if which == "mae" else 1
    for w, by_eps in table.items():
        cols = present(by_eps, DD_METHODS + DIAGNOSTIC + di) + ["best-di"]
        rows = []
        for eps, by_d in by_eps.items():
            for d, row in by_d.items():
                cells = [fmt(row[m][idx]) for m in cols[:-1]] + [f"{fmt(row['best-di'][idx])} ({LABEL.get(row['best-di'][2], row['best-di'][2])})"]
                rows.append([d, eps] + cells)
        title = "mean absolute error per query" if which == "mae" else "mean squared error per query"
        out.append(f"### {dim.upper()} {w}: {title}\n\n" + markdown_table(["dataset", "eps"] + [LABEL.get(c, c) for c in cols], rows))
    return "\n\n".join(out)


def time_table(cache, dim):
    rows = []
    by = {}
    for r in cache.records.values():
        if r["dim"] == dim and "seconds" in r and r["method"] in DD_METHODS + DI_METHODS + ["auto-pure"]:
            by.setdefault((r["workload"], r["method"]), []).append(r["seconds"])
    for (w, m), secs in sorted(by.items()):
        rows.append([w, LABEL.get(m, m), len(secs), statistics.median(secs), max(secs)])
    return markdown_table(["workload", "method", "releases", "median s", "max s"], rows)


def plot(table, di, dim, stem: str = "dpbench"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for w, by_eps in table.items():
        fig, axes = plt.subplots(1, len(by_eps), figsize=(5.2 * len(by_eps), 4.6), squeeze=False)
        for ax, (eps, by_d) in zip(axes[0], by_eps.items()):
            names = list(by_d)
            pos = np.arange(len(names))
            for m in present(by_eps, DD_METHODS + DIAGNOSTIC + di):
                vals = [by_d[d][m][0] for d in names]
                color, marker = STYLE.get(m, ("black", "P"))
                ax.plot(pos, vals, color=color, marker=marker, linestyle="-" if m in DD_METHODS else "--" if m in DIAGNOSTIC else ":",
                        label=LABEL.get(m, m))
            ax.set_yscale("log")
            ax.set_xticks(pos)
            ax.set_xticklabels([n.split(".")[0][:14] for n in names], rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{dim.upper()} {w}, eps = {eps}")
            ax.set_ylabel("mean absolute error per query")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        path = RESULTS / f"{stem}_{dim}_{w}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path.name)
    return paths


def table_6_1(cache, seeds):
    rows = []
    for (label, stem), paper in zip(PAPER_DATASETS.items(), TABLE_6_1):
        x = np.load(DATA / "1D" / f"{stem}.npy").astype(float)
        k = {}
        for eps2 in (0.1, 0.075):
            k[("pow2", eps2)] = optimal_partition(x, eps2).size - 1
            k[("all", eps2)] = optimal_partition(x, eps2, all_intervals=True).size - 1
        released = []
        for m in ("dawa", "dawa-refnoise"):
            ks = [cache.get(dim="1d", dataset=stem, workload="random-range", eps=0.1, seed=s, method=m) for s in range(seeds)]
            ks = [r["buckets"] for r in ks if r]
            released.append(fmt(float(np.mean(ks))) if ks else "n/a")
        rows.append([label, paper, k[("all", 0.1)], k[("all", 0.075)], k[("pow2", 0.1)], k[("pow2", 0.075)], *released,
                     int(x.sum()), f"{np.mean(x == 0):.2f}"])
    return markdown_table(["dataset", "paper (Table 6.1)", "optimal, all intervals, eps2=0.1", "all, eps2=0.075",
                           "power-of-two, eps2=0.1", "power-of-two, eps2=0.075", "DAWA released (eps=0.1)",
                           "DAWA ref-noise released (diag.)", "total count", "zero share"], rows)


def table_6_2(table):
    rows = []
    w = table.get("random-range", {})
    for eps, ref in TABLE_6_2.items():
        if eps not in w:
            continue
        for m, (lo, hi) in ref.items():
            cells = []
            for base in ("dawa", "dawa-refnoise"):
                ratios = [w[eps][stem][m][0] / w[eps][stem][base][0] for stem in PAPER_DATASETS.values() if stem in w[eps]]
                ratios = [r for r in ratios if np.isfinite(r)]
                cells += [fmt(min(ratios)), fmt(max(ratios))] if ratios else ["n/a", "n/a"]
            rows.append([eps, LABEL[m], lo, hi, *cells])
    return markdown_table(["eps", "competitor", "paper smallest", "paper largest", "ours smallest", "ours largest",
                           "ref-noise smallest (diag.)", "ref-noise largest (diag.)"], rows)


def discussion(cache, tables) -> str:
    """Key numbers behind the differences from Li 2013 (computed from the runs)."""
    from strategy_opt.partition import private_partition

    table, _, dnames, seeds = tables["1d"]
    rr = table["random-range"][0.1]
    net, hep = PAPER_DATASETS["Nettrace"], PAPER_DATASETS["HepPh (DPBench: HEPTH)"]
    k_zero = np.mean([private_partition(np.zeros(4096), 0.025, 0.075, s).size - 1 for s in range(3)])
    released = [cache.get(dim="1d", dataset=d, workload="random-range", eps=0.1, seed=s, method=m) for d in PAPER_DATASETS.values()
                for s in range(seeds) for m in ("dawa",)]
    ratio_gh = [table[w][e][d]["dawa"][0] / table[w][e][d]["greedy-h"][0] for w in table for e in table[w] for d in dnames]
    ratio_hb = [rr[d]["dawa"][0] / rr[d]["best-di"][0] for d in dnames]
    ratio_id = [rr[d]["dawa"][1] / rr[d]["identity"][1] for d in dnames]
    lines = [
        "## Findings and differences from Li 2013",
        "",
        f"1. **The competitors reproduce the paper.** Privelet (Haar wavelet) on 2000 random ranges at eps = 0.1: MAE "
        f"{fmt(rr[net]['wavelet'][0])} (paper: 196.6). MWEM: {fmt(rr[net]['mwem'][0])} on Nettrace (paper: 60.12) and "
        f"{fmt(rr[hep]['mwem'][0])} on DPBench's HEPTH (paper's HepPh: 722.3).",
        "2. **DAWA as specified over-fragments.** Program 6.3.1 with the Remark puts Laplace((Delta + Delta_b)/eps1), about "
        "4/eps1, on every candidate cost, while a bucket's cost penalty is 1/eps2: the noise is 4(1 - rho)/rho = 12 times the "
        "penalty at rho = 0.25, for every eps. The dynamic program minimises over exponentially many partitions and collects "
        f"negative noise: {k_zero:.0f} buckets on an all-zero 4096-cell histogram at eps = 0.1, and "
        f"{np.mean([r['buckets'] for r in released if r]):.0f} on average on the paper's seven histograms, where the "
        "optimal partitions have 31 to 2570 (Table 6.1 above). Stage 2 then works on nearly single cells, so DAWA behaves like "
        f"GreedyH on single cells with 75% of the budget: DAWA / GreedyH MAE has median {np.median(ratio_gh):.2f} over all 1-D "
        f"histograms, workloads and eps (range {min(ratio_gh):.2f} to {max(ratio_gh):.2f}); on random ranges at eps = 0.1 DAWA / "
        f"best data-independent is {min(ratio_hb):.2f} to {max(ratio_hb):.2f}. It still beats identity on random ranges on "
        f"every 1-D histogram: MSE ratio {min(ratio_id):.2f} to {max(ratio_id):.2f} over {seeds} seeds (acceptance table: 10 seeds).",
        "3. **The paper's numbers need the reference code's stage-1 rule.** The diagnostic column \"DAWA ref-noise\" uses the rule of "
        "the later reference code as summarised in the notes (half the scale, no noise on unit buckets, noisy deviation "
        "clamped at 0; not covered by Thm 6.1, so it is not offered as a release method). It releases partitions close to the "
        "optimal ones (Table 6.1) and reproduces Table 6.2's spread (identity / DAWA up to about 20x, Privelet / DAWA up to "
        "about 10x at eps = 0.1). With the provable rule the spread collapses to about 2x and 1x.",
        "4. **Table 6.1.** The DPBench copies are not the paper's histograms (HEPTH is hep-th, not HepPh; totals and "
        "aggregation may differ), the caption leaves eps2 = 0.1 or 0.075 open (both shown), and the paper does not say whether "
        "the counts are for all intervals or power-of-two buckets. Income and Patents agree within about 10%; the sparse "
        "histograms give 27 to 52 buckets instead of 20 to 29, Search Logs 680 to 920 instead of 500.",
        "5. **Table 6.2.** MWEM / DAWA spans 0.3 to 51 here against 2.5 to 22.5 in the paper: with the provable stage 1 "
        "DAWA loses to MWEM on the sparsest, small-total histograms (Adult, Medical Cost, Nettrace), and MWEM fails badly on "
        "large totals (Income, Patents), where T <= 100 rounds cannot describe thousands of non-uniform regions.",
        "6. **2-D** (Hilbert order, 65536 cells): the same over-fragmentation (about 32000 buckets); on rectangles DAWA is "
        "close to GreedyH on single cells and below identity and H_b; on 2-D prefix H_b and GreedyH are best.",
        "7. **Time.** Releases ran one at a time with one BLAS thread on a 2-core machine shared with other jobs (load "
        "average 10 to 18 during the run), so times are inflated and noisy; medians are quoted. 1-D DAWA on random ranges: "
        "median well below 2 s. Workloads whose matrix is dense (prefix) use the Gram route, O(n^2) = 16.7 M entries. 2-D "
        "releases stay below 30 s.",
    ]
    return "\n".join(lines)


def acceptance(cache, dnames, seeds_total):
    rows = []
    for d in dnames:
        dawa = [cache.get(dim="1d", dataset=d, workload="random-range", eps=0.1, seed=s, method="dawa") for s in range(seeds_total)]
        ident = [cache.get(dim="1d", dataset="*", workload="random-range", eps=0.1, seed=s, method="identity") for s in range(seeds_total)]
        dawa = [r for r in dawa if r]
        ident = [r for r in ident if r]
        if not dawa or not ident:
            continue
        ratio = np.mean([r["mse"] for r in dawa]) / np.mean([r["mse"] for r in ident])
        rows.append([d, len(dawa), fmt(np.mean([r["mse"] for r in dawa])), fmt(np.mean([r["mse"] for r in ident])), f"{ratio:.3f}",
                     f"{max(r['seconds'] for r in dawa):.2f}"])
    return markdown_table(["dataset", "seeds", "DAWA MSE", "identity MSE", "ratio", "max DAWA release s"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 histograms per dimension, eps = 0.1, 1 seed, no auto-pure and no Li 2013 tables (smoke test; writes results/dpbench_quick.md)")
    ap.add_argument("--seeds", type=int, default=5, help="noise seeds for 1-D (default 5)")
    ap.add_argument("--seeds-2d", type=int, default=5, help="noise seeds for 2-D (default 5)")
    ap.add_argument("--acceptance-seeds", type=int, default=10, help="DAWA/identity seeds at eps = 0.1, random ranges (1-D)")
    ap.add_argument("--dims", default="1d,2d")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/dpbench_cache.jsonl"))
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1: the machine is shared)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.quick:
        args.seeds = args.seeds_2d = 1
        args.acceptance_seeds = 1
    cache = Cache(args.cache)
    t_start = time.perf_counter()
    sections = []
    tables = {}
    with threadpool_limits(args.threads):
        settings = thread_settings()
        for dim in args.dims.split(","):
            seeds = args.seeds if dim == "1d" else args.seeds_2d
            extra = max(0, args.acceptance_seeds - seeds) if dim == "1d" else 0
            if extra:
                # identity needs the extra seeds too for the acceptance check
                W = workloads("1d")["random-range"]
                import scipy.sparse as sp

                for s in range(seeds, seeds + extra):
                    if not cache.get(dim="1d", dataset="*", workload="random-range", eps=0.1, seed=s, method="identity"):
                        x_hat, sec = run_di_1d(sp.identity(4096, format="csr"), W, 0.1, s)
                        mae, mse = errors(W, x_hat, np.zeros(W.m))
                        record(cache, dim="1d", dataset="*", workload="random-range", eps=0.1, seed=s, method="identity", mae=mae, mse=mse, seconds=sec)
            dnames, wnames, eps_list = run_all(dim, seeds, cache, args.quick, extra)
            table, di = summary(cache, dim, dnames, wnames, eps_list, seeds)
            tables[dim] = (table, di, dnames, seeds)
            pngs = plot(table, di, dim, "dpbench_quick" if args.quick else "dpbench")
            sections.append(f"## {dim.upper()}\n\nPlots: " + ", ".join(f"`{p}`" for p in pngs) + "\n\n" + error_tables(table, di, dim, "mae")
                            + "\n\n" + error_tables(table, di, dim, "mse") + "\n\n### Time per release (s)\n\n" + time_table(cache, dim))
            mwem_T = {r["dataset"]: r["value"] for r in cache.records.values() if r["dim"] == dim and r["method"] == "mwem-T"}
            sections.append(f"MWEM rounds T chosen per histogram ({dim}): " + ", ".join(f"{k} {v}" for k, v in sorted(mwem_T.items())))
            if dim == "1d":
                sections.append("## Acceptance (issue 6): 1-D random ranges, eps = 0.1, DAWA MSE / identity MSE\n\n"
                                + acceptance(cache, dnames, seeds + extra))
                if not args.quick:  # these read the seven paper histograms, which a quick run does not release on
                    sections.append("## Li 2013 Table 6.1: buckets of the optimal partition\n\n" + table_6_1(cache, seeds))
                    sections.append("## Li 2013 Table 6.2: competitor error / DAWA error, random ranges (7 paper histograms)\n\n" + table_6_2(table))
                    sections.append(discussion(cache, tables))
    spent = sum(r.get("seconds", 0.0) for r in cache.records.values())
    body = "\n\n".join(sections) + (
        f"\n\nRuns: {len(cache.records)} cached records, {spent:.0f} s of measured run time in total; this invocation "
        f"took {time.perf_counter() - t_start:.0f} s. Runs executed under: {settings}"
    )
    raw = [r for r in cache.records.values()]
    # a smoke test never replaces the committed full run
    write_result("dpbench_quick" if args.quick else "dpbench", "DPBench: DAWA, MWEM and data-independent strategies", body, {"records": raw})


if __name__ == "__main__":
    main()
