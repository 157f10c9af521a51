"""The ``strategy-opt online`` sub-command: answer a query stream with `OnlineAnswerer`.

Contract (also in ``strategy-opt online --help``)::

    strategy-opt online --data FILE --queries SPEC|FILE --budget EPS
                        (--half-width H [--confidence C] | --requirements REQ.csv)
                        [--inference bayes|wls|none] [--fuse] [--seed S] [--sampler opendp|simulate]
                        --out ANSWERS.csv|.npy

* ``--queries``: the stream, one query per row, answered in row order: a
  workload SPEC (``file:Q.npy``, ``random-range:4096:1000:7``, ...) or a matrix
  file (.npy, .npz, .mtx, .csv: one query per line, n coefficients).
* ``--data``: histogram (.npy, a vector or the domain's shape flattened C-order, or .csv one count
  per line) with as many cells as the queries have columns.
* Requirement of query i: ``P(|answer - true| <= half_width) >= confidence``;
  one pair for all (``--half-width``, ``--confidence``, default 0.95) or one
  per query from ``--requirements`` (CSV with header
  ``half_width,confidence``, one row per query).
* ``--budget``: overall pure epsilon-DP budget (Xiao & Xiong's alpha-bar bound).
* ``--inference``: bayes (the paper), wls (weighted least squares over the
  whole history), none (every query answered fresh). ``--fuse`` (wls only):
  fresh answers are combined with the history and spend only the budget the
  combination needs.
* ``--out``: ``.csv`` with header ``query,answer,lower,upper,source,alpha,spent``
  (source: history | fresh | refused; alpha: budget of the fresh measurement,
  or the one a refused query needed; spent: total privacy cost after the
  query; answer/lower/upper empty when refused), or ``.npy`` (answers, NaN
  when refused); beside it ``<out>.json`` with the file's SHA-256 and how the
  answers were made (queries, budget and spent, counts, inference, sampler).
* stdout: one summary line (answered, from history, fresh, refused, spent).
  Exit status 0 even when queries are refused; 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import re
import time
from pathlib import Path

import numpy as np

from .defaults import CONFIDENCE, DECIMAL_PATTERN
from .exceptions import InputError
from .progress import Progress
from .registry import register_subcommand

__all__ = ["register"]

log = logging.getLogger("strategy_opt")

_MATRIX_SUFFIXES = (".npy", ".npz", ".mtx", ".csv")

EPILOG = """
output (.csv): query,answer,lower,upper,source,alpha,spent -- source is history (free), fresh
(budget alpha spent) or refused (budget exhausted; answer empty); spent = total privacy cost
max_j B_j after the query. (.npy): the answers, NaN where refused. Sidecar <out>.json: SHA-256
of the answer file and provenance (queries, budget, spent, counts, inference, sampler).

examples:
  strategy-opt online --data hist.npy --queries Q.npy --budget 1 --half-width 50 --confidence 0.8 \\
      --inference bayes --seed 1 --out answers.csv
  strategy-opt online --data hist.csv --queries random-range:256:500:3 --budget 2 \\
      --requirements req.csv --inference wls --fuse --out answers.npy
"""


def _is_matrix_path(text: str) -> bool:
    """Whether ``--queries`` names a matrix file directly (else it is a SPEC)."""
    return Path(text).suffix.lower() in _MATRIX_SUFFIXES and not text.startswith("file:")


def _load_queries(text: str):
    from .matrix_files import read_workload_file
    from .spec import parse_spec

    return read_workload_file(text) if _is_matrix_path(text) else parse_spec(text)


def _float(text):
    """argparse type of the numeric options: a number (ranges are checked where the value is used).

    An ArgumentTypeError, not a ValueError: argparse would print "invalid _float value".
    """
    from .cli import number  # cli imports this module

    return number(text)


def _requirement_rows(path: Path, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(half_width, confidence, line)`` per query from a CSV with header ``half_width,confidence``, one row per query."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # a byte-order mark is not part of the header
            rows = list(csv.reader(fh))
    except FileNotFoundError:
        raise InputError(f"requirements file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    numbered = [(line, r) for line, r in enumerate(rows, start=1) if r]  # blank lines skipped, line numbers kept
    header = [c.strip() for c in numbered[0][1]] if numbered else []
    if sorted(header) != ["confidence", "half_width"]:
        raise InputError(f"{path}: expected the header 'half_width,confidence', got {','.join(numbered[0][1]) if numbered else 'an empty file'!r:.80}")
    if len(numbered) - 1 != m:
        raise InputError(f"{path}: {len(numbered) - 1} requirement rows for {m} queries; give one row per query")
    values, lines = np.empty((m, 2)), np.array([line for line, _ in numbered[1:]], dtype=int)
    for i, (line, row) in enumerate(numbered[1:]):
        if len(row) != 2:
            raise InputError(f"{path}: line {line} has {len(row)} fields, not 2 ({','.join(header)})")
        for j, text in enumerate(row):
            if not re.fullmatch(DECIMAL_PATTERN, text.strip()):  # ASCII decimals (float also reads 1_0 as 10)
                raise InputError(f"{path}: line {line}: {header[j]} must be a decimal number, got {text.strip()!r:.40}")
            values[i, j] = float(text)
    return values[:, header.index("half_width")], values[:, header.index("confidence")], lines


def _requirements(args, m: int, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-query half-widths and confidences from ``--half-width``/``--confidence`` or ``--requirements``.

    ``scales`` are the queries' largest absolute coefficients (S_Q): a
    requirement whose stand-alone budget ``S_Q ln(1/(1 - confidence)) /
    half_width`` (Theorem 3.7) is zero, infinite or so small that its noise
    variance overflows cannot be met by any release, and is refused naming
    the flag or the file row that asks for it.
    """
    if args.requirements and args.half_width is not None:
        raise InputError("give either --half-width (with --confidence) or --requirements, not both")
    if args.requirements and args.confidence is not None:
        raise InputError("--confidence goes with --half-width; with --requirements each row gives its confidence")
    if args.requirements:
        hw, conf, lines = _requirement_rows(Path(args.requirements), m)

        def where(i: int) -> str:
            return f"{args.requirements}: line {lines[i]}:"
    elif args.half_width is not None:
        confidence = CONFIDENCE if args.confidence is None else args.confidence
        if not (math.isfinite(args.half_width) and args.half_width > 0):
            raise InputError(f"--half-width must be a positive finite number, got {args.half_width!r}")
        if not 0 < confidence < 1:
            raise InputError(f"--confidence must be in (0, 1), got {confidence!r}")
        hw, conf = np.full(m, args.half_width), np.full(m, confidence)

        def where(i: int) -> str:
            return f"--half-width {args.half_width:g} with --confidence {confidence:g}:"
    else:
        raise InputError("no accuracy requirement: give --half-width H [--confidence C] or --requirements REQ.csv")
    bad = np.flatnonzero(~(np.isfinite(hw) & (hw > 0)))
    if bad.size:
        raise InputError(f"{where(bad[0])} half_width must be a positive finite number, got {float(hw[bad[0]])!r}")
    bad = np.flatnonzero(~((conf > 0) & (conf < 1)))
    if bad.size:
        raise InputError(f"{where(bad[0])} confidence must be in (0, 1), got {float(conf[bad[0]])!r}")
    with np.errstate(over="ignore", divide="ignore"):
        alpha = scales * -np.log1p(-conf) / hw
        variance = 2.0 / alpha**2
    bad = np.flatnonzero(~(np.isfinite(alpha) & (alpha > 0) & np.isfinite(variance)))
    if bad.size:
        i = int(bad[0])
        raise InputError(
            f"{where(i)} query {i} needs a stand-alone budget of {float(alpha[i]):.3g} (S_Q ln(1/(1 - confidence)) / half_width), "
            "whose Laplace noise is beyond floating point; ask for a half-width within a few hundred orders of magnitude of the answers"
        )
    return hw, conf


def _write(path: Path, results, provenance: dict) -> None:
    """The answers (.npy, or .csv with sources and budgets) and their sidecar ``<out>.json``."""
    from .answers import csv_number as fmt, write_answer_file

    def write(fh) -> None:
        if path.suffix.lower() == ".npy":
            np.save(fh, np.array([r.value for r in results], dtype=float))
            return
        fh.write(b"query,answer,lower,upper,source,alpha,spent\n")
        fh.writelines(f"{i},{fmt(r.value)},{fmt(r.lower)},{fmt(r.upper)},{r.source},{r.alpha!r},{r.spent!r}\n".encode() for i, r in enumerate(results))

    write_answer_file(path, write, len(results), provenance)


def _cmd_online(args) -> int:
    from .cli import _sampler, naming_data
    from .histograms import read_histogram
    from .answers import check_answers_path
    from .workload import stated_domain
    from .online import OnlineAnswerer
    from .spec import file_paths

    out = Path(args.out)
    queries_files = [args.queries] if _is_matrix_path(args.queries) else file_paths(args.queries)
    check_answers_path(args.out, [args.data, *queries_files])  # as typed (Path drops a trailing '/'); before any work or warning
    if not (math.isfinite(args.budget) and args.budget > 0):
        raise InputError(f"--budget must be a positive number, got {args.budget!r}")
    queries = _load_queries(args.queries)
    x = read_histogram(args.data, queries.n, stated_domain(queries), sized_by="the --queries stream")
    if np.any(x < 0):
        raise InputError(f"{args.data}: histogram has negative counts; counts must be >= 0")
    Q = queries.matrix()
    empty = np.flatnonzero(np.asarray(abs(Q).sum(axis=1)).ravel() == 0)
    if empty.size:
        raise InputError(f"{args.queries}: query {int(empty[0])} (row {int(empty[0]) + 1}) is all zeros{f' ({empty.size} such rows)' if empty.size > 1 else ''}; every query needs a non-zero coefficient")
    if args.fuse and args.inference != "wls":
        raise InputError(f"--fuse needs --inference wls (got --inference {args.inference})")
    hw, conf = _requirements(args, Q.shape[0], np.asarray(abs(Q).max(axis=1).todense()).ravel())
    sampler, _ = _sampler(args)
    answerer = OnlineAnswerer(x, args.budget, inference=args.inference, fuse=args.fuse, rng=args.seed, sampler=sampler)
    results = []
    t0 = time.perf_counter()
    progress = Progress()
    with naming_data(args.data):
        for i in range(Q.shape[0]):
            results.append(answerer.answer(Q[i].toarray().ravel(), hw[i], conf[i]))
            progress("query %d/%d: spent %.6g of %.6g; %s", i + 1, Q.shape[0], answerer.spent, answerer.budget, answerer.counts)
    c = answerer.counts
    provenance = {
        "command": "online",
        "queries": args.queries,
        "n": int(queries.n),
        "privacy": {"notion": "pure", "epsilon": float(args.budget), "delta": None},
        "budget": float(args.budget),
        "spent": float(answerer.spent),
        "counts": {k: int(v) for k, v in c.items()},
        "inference": args.inference,
        "fuse": bool(args.fuse),
        "requirements": args.requirements if args.requirements else {"half_width": args.half_width, "confidence": float(conf[0])},
        "sampler": sampler,
        "seed": args.seed,
    }
    if sampler == "simulate":  # here, not before answering: a refused input is one line on stderr
        log.warning("answers drawn with the seeded NumPy noise sampler ('simulate'): for simulations only, not for real releases")
    _write(out, results, provenance)
    print(
        f"answered {c['history'] + c['fresh']} of {Q.shape[0]} queries (history {c['history']}, fresh {c['fresh']}, "
        f"refused {c['refused']}); privacy spent {answerer.spent:.6g} of budget {answerer.budget:.6g}; "
        f"inference={args.inference}{' fuse' if args.fuse else ''} seconds={time.perf_counter() - t0:.3g}"
    )
    log.info("wrote %d answers to %s (sidecar %s.json)", len(results), out, out)
    return 0


@register_subcommand
def register(subparsers, common) -> None:
    """Add the ``online`` sub-command to the ``strategy-opt`` parser (``common``: the shared -q/-v options).

    Parameters
    ----------
    subparsers : argparse sub-parsers action
        What ``ArgumentParser.add_subparsers`` returned.
    common : argparse.ArgumentParser
        A parent parser (``add_help=False``) with the options every command shares.

    Returns
    -------
    None

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> register(parser.add_subparsers(dest="command"), argparse.ArgumentParser(add_help=False))
    >>> args = parser.parse_args(["online", "--data", "x.npy", "--queries", "prefix:4", "--budget", "1", "--half-width", "5", "--out", "a.csv"])
    >>> args.command, args.budget, args.half_width, args.inference, args.sampler
    ('online', 1.0, 5.0, 'bayes', None)
    """
    from .cli import _nonneg_int  # the main commands' --seed type (cli imports this module)

    p = subparsers.add_parser(
        "online",
        parents=[common],
        help="answer a query stream online under an overall budget (Bayesian inference from history)",
        description=(
            "Answer queries one by one (Xiao & Xiong's online system): from the history of earlier noisy "
            "answers for free when its interval meets the requirement, else with fresh Laplace noise at the "
            "minimal budget S_Q ln(1/(1-confidence))/half_width, refusing once the overall budget (max over "
            "cells of the reweighted history's column sums) would be exceeded."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="histogram: .npy (a vector, or an array of the query domain's shape, flattened C-order) or .csv (one count per line)")
    p.add_argument("--queries", required=True, metavar="SPEC|FILE", help="query stream, one query per row: workload SPEC or matrix file (.npy .npz .mtx .csv)")
    p.add_argument("--budget", required=True, type=_float, help="overall privacy budget (pure epsilon-DP) of this invocation: nothing is kept between runs, so two runs on the same data spend twice it")
    p.add_argument("--half-width", type=_float, help="required interval half-width (count units) for every query")
    p.add_argument("--confidence", type=_float, help="required probability that the interval holds the true answer (default 0.95; with --half-width only)")
    p.add_argument("--requirements", metavar="REQ.csv", help="per-query requirements: CSV with header half_width,confidence, one row per query")
    p.add_argument("--inference", choices=["bayes", "wls", "none"], default="bayes", help="answer from history by Bayesian posterior (default; the paper's method, whose intervals from an adaptively built history can cover less often than the confidence), weighted least squares (intervals that keep the confidence), or never")
    p.add_argument("--fuse", action="store_true", help="with --inference wls: combine each fresh answer with the history and spend only the budget the combination needs")
    p.add_argument("--seed", type=_nonneg_int, help="seed for reproducible noise (implies --sampler simulate)")
    p.add_argument("--sampler", choices=["opendp", "simulate"], help="noise sampler: opendp (vetted, default) or simulate (seeded NumPy, for simulations)")
    p.add_argument("--out", required=True, help="answers: .csv (query,answer,lower,upper,source,alpha,spent) or .npy")
    p.set_defaults(func=_cmd_online)
