"""The ``strategy-opt`` command line (the contract of the design's CLI.md; usage in README.md).

Exit status: 0 on success, 2 on a usage or input error (one line on stderr
naming the bad value), 1 when a solver fails, 130 on Ctrl-C, 143 on SIGTERM
and 141 when the reader of stdout went away. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import decimal
import json
import logging
import math
import os
import re
import secrets
import shlex
import signal
import sys
import threading
import time
import tomllib
from pathlib import Path

import numpy as np

from . import __version__
from .defaults import CONFIDENCE, DECIMAL_PATTERN, DEFAULT_DELTA, DIAGONAL_METHODS
from .exceptions import InputError, NoiseScaleError, PrecisionError, SolverError
from .progress import set_aside_during_solves
from .threads import command_threads

log = logging.getLogger("strategy_opt")

#: Reconstruction of `run` and of strategy methods under `release` when --estimator is not given.
DEFAULT_ESTIMATOR = "ls"


EPILOG_SOLVE = """
methods (strategy-opt list methods) and how far they go on one core (cells n of the workload's domain):
  identity, hierarchical, wavelet, fourier   closed forms, any n (dense error analysis below 20000 cells)
  marginals        marginal workloads, any domain size (per eigenspace of the marginal algebra)
  minerror-l2      native profile: n = 1024 in seconds, 4096 in minutes; SDPs: clarabel n = 64 (4 GB), scs n = 128 (minutes)
  eigen-design     n = 2048 in ~10 s, 8192 in ~2 min (dense eigendecomposition); Kronecker products: per factor
  minerror-l1      small n only: an SDP on (m'+n)^2 variables per iteration; n <= ~16 in practice (32 max)
  svd-approx       any n; its Program 3.4.3 refinement up to 512 cells
  l1-weighting     any n; its completion-aware local search up to 512 cells (2048 for <= 512 design queries)
  p-identity       n up to ~4096 (minutes); Kronecker products per factor
  greedy-h         up to 20000 cells (dense Gram)
  orthogonal, workload-division   explicit query matrices (auto-pure runs OM when m n <= 1e6)
  auto-pure, auto  the best of the above that fit (under --privacy pure auto runs auto-pure: 4096 cells in 3.5-7 min)

examples:
  strategy-opt solve --workload all-range:256 --privacy approx --method eigen-design --out s.npz
  strategy-opt solve table41_allrange_2048 --method wavelet --out y.mtx   (a bundled problem, or any PROBLEM.toml)
  strategy-opt solve --workload prefix:64 --privacy pure --method hierarchical --branching 4 --out h.csv
"""

SAMPLERS_HELP = """
noise samplers:
  opendp    OpenDP's vetted Laplace (pure) / Gaussian (approx) measurements on float vectors,
            safe against floating-point attacks on textbook samplers (Mironov, CCS 2012); the
            noise scale is the calibration OpenDP's own privacy map certifies. Not seedable.
            The default whenever --seed is not given: use it for answers you release.
  simulate  NumPy's seeded generator (fast, reproducible: without --seed it draws a seed,
            which the sidecar records). For simulations and benchmarks only, never for
            real releases; the default when --seed is given.
  Both add noise of the same scale, so their error statistics agree.

every answer file OUT gets a sidecar OUT.json: its SHA-256, the strategy_opt version, the
workload, privacy parameters, sampler and estimator (under run also the strategy file and its hash;
under release the method and its options; for dawa and mwem also method_facts: the effective
options, the budget split and, for dawa, the number of buckets of its private partition).
"""

EPILOG_RUN = SAMPLERS_HELP + """
example:
  strategy-opt run s.npz --data x.npy --workload all-range:256 --epsilon 1 --out answers.csv
"""

EPILOG_RELEASE = SAMPLERS_HELP + """
example:
  strategy-opt release --method dawa --data x.npy --workload prefix:1024 --epsilon 1 --out a.npy
"""

# Input-validation notes: NaN/inf anywhere, empty or all-zero workload matrices, object
# (pickled) arrays, malformed files and TOML are refused with exit status 2. Zero columns
# of a workload are allowed (cells no query touches); a strategy may leave such cells
# unmeasured, but a strategy with a zero column under a queried cell is refused.


class _Terminated(BaseException):
    """Raised by the SIGTERM handler so that pending atomic writes clean up."""


def _on_sigterm(signum, frame):
    raise _Terminated()


set_aside_during_solves(_on_sigterm)  # SIGTERM during an SCS/Clarabel solve ends the CLI at once (nothing is being written)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line and exit status 2."""

    def _print_message(self, message, file=None):
        # argparse swallows OSError here, so --help into a closed pipe or a full device would exit 0
        # having written nothing; on standard output the error reaches main() instead (141, or 1)
        if message:
            target = file or sys.stderr
            try:
                target.write(message)
            except BrokenPipeError:
                raise
            except OSError:
                if target is sys.stdout:
                    raise
            except AttributeError:  # no stream at all (started with it closed)
                pass

    def error(self, message):  # noqa: D401
        # main() prefixes "strategy-opt: error: "; the sub-command is named as typed, quoted, so that
        # the one called "error" does not read "error: error:"
        command = self.prog.removeprefix("strategy-opt").strip()
        raise InputError(f"in 'strategy-opt {command}': {message}" if command else message)


def _option_value(text: str, key: str):
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:  # nesting Python's parser cannot follow (arrays 600 deep): a traceback before
        raise InputError(f"--option {key}: the value is nested too deeply") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"--option {key}={text}: the value must be a finite number")
    return value


def _parse_options(pairs) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--option must be KEY=VALUE, got {pair!r}")
        name, parsed = key.strip().replace("-", "_"), _option_value(value.strip(), key.strip())
        if name in out and (out[name] != parsed or type(out[name]) is not type(parsed)):  # one value per option (true and 1 differ)
            raise InputError(f"--option {name}={out[name]} and --option {name}={parsed} conflict; give {name} once")
        out[name] = parsed
    return out


#: Arguments of `strategy_opt.solve` that solve's own flags set: never method options.
_SOLVE_ARGUMENTS = {"workload": "--workload", "privacy": "--privacy", "method": "--method", "objective": "--objective", "solver": "--solver"}

#: Method options with a dedicated flag of solve: the flag and ``--option KEY=...`` may not disagree.
_SOLVE_FLAG_OPTIONS = {"branching": "--branching", "basis": "--basis"}

#: Arguments of a release that release's own flags set: never method options.
_RELEASE_ARGUMENTS = {
    "x": "--data",
    "data": "--data",
    "workload": "--workload",
    "privacy": "--privacy",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "method": "--method",
    "rng": "--seed",
    "seed": "--seed",
    "sampler": "--sampler",
    "estimator": "--estimator",
}


def _refuse_reserved(options: dict, reserved: dict, where: str = "--option") -> None:
    """Refuse a method option that names an argument a dedicated flag (or key) sets."""
    for key in options:
        if key in reserved:
            flag = reserved[key]
            how = f"the key {flag.removeprefix('--')} outside [options]" if where != "--option" else flag
            raise InputError(f"{where} {key}=... is not a method option: give it with {how}")


def _add_flag_options(p: argparse.ArgumentParser) -> None:
    """The method options with flags of their own (solve, release): `_SOLVE_FLAG_OPTIONS`."""
    p.add_argument("--basis", help="design basis: for l1-weighting eigen|wavelet|fourier|hierarchical (default wavelet), for eigen-design eigen|wavelet|fourier|identity (default eigen)")
    p.add_argument("--branching", type=int, help="branching factor of hierarchical strategies (default: the best of 2, 3, 4, 5, 6, 8, 10, 12 and 16 for the workload; auto-pure tries 2 to 16); of dawa's and greedy-h's trees (default 2)")


def _merge_flag_options(args, options: dict, reserved: dict = _SOLVE_ARGUMENTS) -> dict:
    """Add the values of --branching/--basis to ``options``; refuse an --option for the same key that disagrees."""
    given = _parse_options(args.option)
    for key, flag in _SOLVE_FLAG_OPTIONS.items():
        value = getattr(args, key)
        if value is None:
            continue
        if key in given and given[key] != value:
            raise InputError(f"{flag} {value} and --option {key}={given[key]} conflict; give the {key} once")
        options[key] = value
    _refuse_reserved(given, reserved)
    options.update(given)
    return options


_NUMBER = re.compile(rf"{DECIMAL_PATTERN}|[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def number(text: str) -> float:
    """A command-line number: ASCII decimal or exponent notation (or inf / nan, refused later by range checks).

    ``float`` alone also takes ``1_0`` (10) and other scripts' digits; a value a
    user may have mistyped is refused instead (`argparse.ArgumentTypeError`).

    Parameters
    ----------
    text : str
        The flag's value (surrounding blanks allowed).

    Returns
    -------
    float

    Examples
    --------
    >>> number(" 1e-3 "), number("2"), number("inf")
    (0.001, 2.0, inf)
    >>> number("1_0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a number, got '1_0'
    """
    if not _NUMBER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"must be a number, got {text.strip()!r}")
    return float(text)


def _positive_float(below: float | None = None):
    """argparse type of ``--epsilon`` (> 0) or ``--delta`` (in (0, ``below``)): a finite number in range.

    Messages quote the value as typed, and say so when a value in range rounds
    out of it in double precision (``--delta 1e-400`` is 0.0 as a float).
    """
    rule = "> 0" if below is None else f"in (0, {below:g})"

    def in_range(v) -> bool:
        return v > 0 and (below is None or v < below)

    def conv(text):
        shown = text.strip()
        v = number(text)
        if math.isfinite(v) and in_range(v):
            return v
        try:
            exact = decimal.Decimal(shown)
        except decimal.InvalidOperation:
            exact = decimal.Decimal("nan")
        rounded = f" (it rounds to {v!r} in double precision)" if exact.is_finite() and in_range(exact) else ""
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {shown}{rounded}")
        raise argparse.ArgumentTypeError(f"must be {rule}, got {shown}{rounded}")

    return conv


def _nonneg_int(text):
    """argparse type of ``--seed``: an integer >= 0.

    argparse turns a ValueError (an `InputError` too) raised by a type function into
    "invalid _nonneg_int value"; an ArgumentTypeError keeps its message.
    """
    if not re.fullmatch(r"\+?[0-9]+", text.strip()):  # int() also takes 1_0 and other scripts' digits
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text.strip()}")
    return int(text)


def _summary(meta: dict) -> str:
    def fmt(v, log10):
        if v is not None:
            return f"{v:.10g}"
        return f"10^{log10:.4f}" if log10 is not None else "n/a"

    E = fmt(meta.get("unit_total_squared_error"), meta.get("unit_total_squared_error_log10"))
    lb = fmt(meta.get("lower_bound"), meta.get("lower_bound_log10"))
    ratio = meta.get("ratio_to_lower_bound")
    objective = ""
    if meta.get("objective") not in (None, "total"):  # the value the method minimised, beside the total error
        objective = (f"objective={meta['objective']} value={fmt(meta.get('objective_value'), meta.get('objective_value_log10'))} "
                     f"objective_lower_bound={fmt(meta.get('objective_lower_bound'), meta.get('objective_lower_bound_log10'))} "
                     f"objective_gap={'n/a' if meta.get('objective_relative_gap') is None else format(meta['objective_relative_gap'], '.3g')} ")
        # lower_bound and ratio below are the total error's (E_p against its bound), not the objective's
    return (
        f"method={meta.get('method')} workload={_summary_value(meta.get('workload'))} privacy={meta.get('privacy')} {objective}"
        f"shape={meta.get('shape')} E_{meta.get('sensitivity_norm', 'l?')[1:]}={E} lower_bound={lb} "
        f"({meta.get('lower_bound_kind') or 'unavailable'}) ratio={'n/a' if ratio is None else f'{ratio:.6g}'} "
        f"solver={meta.get('solver')} status={meta.get('solver_status')} seconds={meta.get('solve_seconds', 0):.3g}"
    )


def _summary_value(value) -> str:
    """A summary-line value, shell-quoted when it holds blanks (a SPEC as typed, a file path), so that the line splits on spaces."""
    text = str(value)
    return shlex.quote(text) if any(c.isspace() for c in text) else text


# ----------------------------------------------------------------------------------------- solve
def _cmd_solve(args) -> int:
    from .api import solve
    from .atomic import check_not_input, check_writable, strategy_files
    from .io import STRATEGY_FORMATS, write_strategy
    from .problem import absolute_file_paths, read_problem_file
    from .spec import file_paths, parse_spec

    for flag in ("workload", "method", "objective", "out", "basis"):  # an empty value ("$OUT" unset) is not the default
        if getattr(args, flag, None) == "":
            raise InputError(f"--{flag} is empty; give a value or leave the flag out")
    data = read_problem_file(args.problem) if args.problem else {}
    workload = args.workload or data.get("workload")
    if not workload:
        raise InputError("no workload: give --workload SPEC or a PROBLEM.toml with a 'workload'")
    spec = absolute_file_paths(workload)  # recorded: valid from any directory
    method = args.method or data.get("method", "auto")
    workload = parse_spec(spec, operation="solve-diagonal" if method in DIAGONAL_METHODS else "solve")
    options = dict(data.get("options", {}))
    _refuse_reserved(options, _SOLVE_ARGUMENTS, f"problem file {args.problem}: [options]")
    unused = _options_overridden(args, data, options)
    options = _merge_flag_options(args, options)
    if args.out and Path(args.out).suffix.lower() not in STRATEGY_FORMATS:
        raise InputError(f"--out must end in one of {', '.join(STRATEGY_FORMATS)}, got {args.out!r}")
    if args.out:
        check_writable(args.out)
        check_not_input(args.out, [*file_paths(spec), args.problem if args.problem and Path(args.problem).is_file() else None], writes=strategy_files(args.out))
    strategy = solve(
        workload,
        privacy=args.privacy or data.get("privacy", "approx"),
        method=method,
        objective=args.objective or data.get("objective", "total"),
        solver=args.solver if args.solver is not None else data.get("solver"),  # "" is refused, not the default
        **options,
    )
    if unused:  # after the solve, so that an error stays one line
        log.info("%s", unused)
    if any(k in data for k in ("data", "epsilon", "delta")):
        log.info("%s", _run_hint(args, data, spec))
    if args.out:
        write_strategy(strategy, args.out)
        log.info("wrote %s", args.out)
    if args.json:
        print(json.dumps(strategy.meta, sort_keys=True))
    else:
        print(_summary(strategy.meta))
    return 0


def _run_hint(args, data: dict, spec: str) -> str:
    """The ``run`` command that answers the problem file's data at its budget (solve computes the strategy only)."""
    parts = ["strategy-opt run", shlex.quote(args.out or "STRATEGY"), "--data", shlex.quote(os.path.normpath(data["data"]) if "data" in data else "DATA"), "--workload", shlex.quote(spec)]
    parts += ["--epsilon", repr(float(data["epsilon"])) if "epsilon" in data else "EPSILON"]  # every digit: the file's budget, not a rounded one
    if "delta" in data and (args.privacy or data.get("privacy", "approx")) == "approx":  # --privacy pure drops the file's delta
        parts += ["--delta", repr(float(data["delta"]))]
    missing = f" (its data file {data['data']} does not exist)" if "data" in data and not Path(data["data"]).is_file() else ""
    return f"problem file {args.problem}: its data/epsilon/delta are for answering{missing}; run: {' '.join(parts)} --out ANSWERS.csv"


def _options_overridden(args, data: dict, options: dict) -> str | None:
    """Drop the problem file's options that belong to a method or objective a flag replaced.

    Flags override the file (CLI.md); the file's ``[options]`` were written for
    its own method (``branching`` for ``hierarchical``) and objective
    (``weights``), and would otherwise turn an override into an error. Those
    the replacing method also takes are given to it, and the note says so.
    Returns the note to log once the solve has succeeded, or None.
    """
    from .registry import methods

    replaced = [k for k in ("method", "objective", "workload") if getattr(args, k) and data.get(k) and getattr(args, k) != data[k]]
    if not replaced or not options:
        return None
    info = methods().get(args.method or data.get("method", "auto"))
    dropped = []
    if "method" in replaced and info is not None and info.options is not None:
        dropped += [k for k in options if k not in info.options]
    if "objective" in replaced and "weights" in options and "weights" not in dropped:
        dropped.append("weights")  # a new workload keeps them: its size check names the option
    for key in dropped:
        del options[key]
    # options the replacing method also takes are handed to it (flags override only what they name): said, not silent
    flagged = set(_parse_options(args.option)) | {k for k in _SOLVE_FLAG_OPTIONS if getattr(args, k) is not None}
    kept = [k for k in options if k != "weights" and k not in flagged] if "method" in replaced else []
    if not dropped and not kept:
        return None
    flags = " and ".join(f"--{k} {getattr(args, k)!r} (the file says {data[k]!r})" for k in replaced)
    notes = [f"option(s) {', '.join(dropped)} not used, written for what {flags} replaced"] if dropped else []
    if kept:
        given = ", ".join(f"{k}={options[k]!r}" for k in kept)
        notes.append(f"option(s) {given}, written for method {data['method']!r}, given to --method {args.method!r} (pass the flag or --option to change)")
    return f"problem file {args.problem}: {'; '.join(notes)}"


# ----------------------------------------------------------------------------------------- error
def _same_workload(recorded: str, given: str) -> bool:
    """Whether two SPECs name the same workload; ``file:`` atoms compared as absolute paths (solve records them so)."""
    from .problem import absolute_file_paths
    from .spec import canonical_spec

    try:
        return canonical_spec(recorded) == canonical_spec(absolute_file_paths(given))
    except InputError:
        return recorded.strip() == given.strip()


def _same_workload_files(recorded: str, files: dict, given: str) -> bool:
    """Whether ``given`` reads the recorded workload's files (by content, under any path); refuses a recorded file changed since.

    ``files`` maps the recorded SPEC's paths to their SHA-256 (``meta.workload_files``).
    """
    from .fingerprints import workload_file_hashes
    from .problem import absolute_file_paths
    from .spec import canonical_spec

    spec = absolute_file_paths(given)
    try:
        given_files = workload_file_hashes(spec)
        same = canonical_spec(recorded, lambda p: files.get(p, p)) == canonical_spec(spec, lambda p: given_files.get(p, p))
    except (InputError, OSError):
        return False
    changed = next((p for p, h in given_files.items() if files.get(p, h) != h), None)
    if not same and changed is not None and _same_workload(recorded, given):
        raise InputError(
            f"workload file {changed} has changed since the strategy was computed for it (its SHA-256 is not the recorded one); "
            "pass --force to use it anyway"
        )
    return same


def _is_spec(recorded: str) -> bool:
    """Whether a recorded workload is SPEC syntax (it may still name a file that is gone), not a label such as 'matrix'."""
    from .spec import canonical_spec

    try:
        canonical_spec(recorded)
    except InputError:
        return False
    return True


def _files_unchanged(files: dict) -> bool:
    """Whether every recorded workload file still has its recorded SHA-256 (so reading the recorded SPEC gives that workload)."""
    from .fingerprints import file_sha256

    try:
        return all(file_sha256(path) == digest for path, digest in files.items())
    except OSError:
        return False


def _same_gram(recorded: str, workload) -> bool:
    """Whether the recorded SPEC's workload has the given workload's Gram matrix (`strategy_opt.workload.same_gram`);
    a recorded SPEC that no longer parses (a moved file), or one past its size limit, never matches."""
    from .spec import parse_spec
    from .workload import same_gram

    try:
        other = parse_spec(recorded, operation=None)
    except InputError:
        return False
    return bool(same_gram(other, workload))


#: Workloads of at most this many (m x n) entries are compared with a recorded matrix by content (`_same_matrix`).
SAME_MATRIX_MAX_ENTRIES = 10**8


def _same_matrix(recorded_sha256, workload) -> bool | None:
    """Whether the workload's matrix is the one a strategy solved in Python recorded (``meta.workload_sha256``);
    None when nothing was recorded or the workload is too large to compare."""
    from .fingerprints import content_hash

    if not isinstance(recorded_sha256, str) or workload.m * workload.n > SAME_MATRIX_MAX_ENTRIES:
        return None
    return content_hash(workload.matrix()) == recorded_sha256


def _check_recorded_workload(strategy, workload, given: str, force: bool) -> str | None:
    """Refuse a strategy made for another workload or domain unless ``--force``.

    Returns
    -------
    str or None
        A note to log once the command has succeeded (so that an error stays one
        line) when the workload was accepted as equivalent: another SPEC with the
        recorded workload's Gram matrix.
    """
    rec = strategy.meta.get("workload")
    if strategy.shape[1] != workload.n:
        raise InputError(f"strategy has {strategy.shape[1]} columns but workload {given!r} has {workload.n} cells")
    if force:
        return None
    note = None
    if rec is not None:
        if not isinstance(rec, str):
            raise InputError(f"strategy was computed for workload {rec!r}, not {given!r}; pass --force to use it anyway")
        files = strategy.meta.get("workload_files")
        if isinstance(files, dict) and files:
            same = _same_workload_files(rec, files, given)
        else:  # no file contents recorded (a SPEC without files, or a file written before they were)
            same = _same_workload(rec, given)
            files = {}
        matrix = None if same or _is_spec(rec) else _same_matrix(strategy.meta.get("workload_sha256"), workload)
        if matrix:
            note = f"workload {given!r} is the matrix the strategy was computed for (recorded as {rec!r}, by its content hash)"
        elif not same:
            if not (_files_unchanged(files) and _same_gram(rec, workload)):
                if matrix is False:
                    raise InputError(
                        f"strategy was computed for another matrix (recorded as {rec!r}; {given!r} has other content); "
                        "pass --force to use it anyway"
                    )
                if not _is_spec(rec):  # a matrix or weighted union built in Python: nothing to read and compare
                    raise InputError(
                        f"strategy was computed for a workload built in Python (recorded as {rec!r}, not a SPEC), which cannot be "
                        f"compared with {given!r}; pass --force to use it anyway (or solve from a SPEC or a file: workload)"
                    )
                raise InputError(f"strategy was computed for workload {rec!r}, not {given!r}; pass --force to use it anyway")
            note = f"workload {given!r} has the Gram matrix of the strategy's recorded workload {rec!r} (equivalent workloads)"
    domain = strategy.meta.get("domain")
    if note is None and domain is not None and domain != [int(d) for d in workload.domain]:
        raise InputError(
            f"strategy was computed for domain {domain}, not {list(workload.domain)}; pass --force to use it anyway"
        )
    return note


def _privacy_notion(strategy, args) -> str:
    """Privacy of ``error``/``run``: --privacy, else the strategy's recorded one, else as ``release`` does.

    A strategy without a recorded privacy (no metadata: a bare matrix, a .csv
    without its .json) gets the same default under both commands: approx when
    --delta is given, else pure (an --epsilon alone asks for epsilon-DP). Its
    support is checked and its sensitivity computed from the matrix, as always.
    """
    delta = getattr(args, "delta", None)
    return args.privacy or strategy.meta.get("privacy") or ("approx" if delta is not None else "pure")


def _warn_unverified(strategy, args, notion: str) -> None:
    """One warning line for a strategy without provenance (`Strategy.unverified`); after success, so that errors stay one line."""
    path = Path(args.strategy)
    sidecar = path.with_suffix(".json")
    if path.suffix.lower() != ".csv":
        what = "no metadata"
    else:  # a .json that exists but holds no metadata ({}) is named as such, not as missing
        what = f"empty metadata in {sidecar.name}" if sidecar.is_file() else f"no {sidecar.name} beside it"
    missing = strategy.unverified(what)
    if missing is None:
        return
    if args.privacy:
        how = "from --privacy"
    elif hasattr(args, "delta"):
        how = "the default, approx if --delta is given; choose with --privacy"
    else:
        how = "the default, as for run without --delta; choose with --privacy"
    log.warning("%s has %s; privacy %s (%s); sensitivity from the matrix", args.strategy, missing, notion, how)


def _diagonal(strategy) -> bool:
    """Whether the strategy's ``A^T A`` is diagonal (the identity): analysed and run from ``diag(W^T W)``, no n x n matrix."""
    from .error import KroneckerMatrix, diagonal_gram

    return not isinstance(strategy.matrix, KroneckerMatrix) and diagonal_gram(strategy.matrix)


def _cmd_error(args) -> int:
    from .api import error_report
    from .error import KroneckerMatrix
    from .io import read_strategy
    from .spec import parse_spec

    strategy = read_strategy(args.strategy)
    if isinstance(strategy.matrix, KroneckerMatrix):  # analysed factor by factor on a Kronecker workload
        operation = "error-factors"
    else:  # the identity's analysis needs no n x n matrix
        operation = "error-diagonal" if _diagonal(strategy) else "error"
    workload = parse_spec(args.workload, operation=operation)
    equivalent = _check_recorded_workload(strategy, workload, args.workload, args.force)
    privacy = _privacy_notion(strategy, args)
    t0 = time.perf_counter()
    report = error_report(strategy, workload, privacy)
    report["seconds"] = time.perf_counter() - t0
    if equivalent:
        log.info(equivalent)
    _warn_unverified(strategy, args, privacy)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for k in sorted(report):
            print(f"{k}: {_report_value(report, k)}")
    return 0


def _report_value(report: dict, key: str) -> str:
    """One value of an error report as text: past float64, ``10^x`` from its ``_log10`` companion; absent, why."""
    value = report[key]
    if value is not None:
        return str(value)
    log10 = report.get(f"{key}_log10")
    if log10 is not None:
        return f"10^{log10:.6f}"
    if key == "unit_max_query_variance":
        return "not computed (too many queries to enumerate; the total is exact)"
    return "n/a"


# ----------------------------------------------------------------------------------------- run
def _load_data(args, workload):
    from .histograms import histogram_from_records, read_histogram
    from .workload import stated_domain

    if args.column or args.bins:
        x = histogram_from_records(args.data, args.column or [], args.bins or [])
        if x.size != workload.n:
            raise InputError(f"--bins give {x.size} cells but the workload has {workload.n}")
        domain = stated_domain(workload)
        if x.ndim > 1 and domain is not None and len(domain) > 1 and x.shape != tuple(domain):  # one column: cells in row-major order, as a flat histogram
            pairs = ", ".join(f"{c} ({k} bins)" for c, k in zip(args.column, x.shape))
            raise InputError(
                f"--column/--bins give a {'x'.join(map(str, x.shape))} grid ({pairs}) but the workload's domain is "
                f"{'x'.join(map(str, domain))}; give the --column/--bins pairs in the order of the workload's attributes"
            )
        x = x.ravel()
    else:
        x = read_histogram(args.data, workload.n, stated_domain(workload))
    if np.any(x < 0):
        raise InputError(f"{args.data}: histogram has negative counts; counts must be >= 0")
    return x


@contextlib.contextmanager
def naming_data(path):
    """Prefix the data file's name to a `PrecisionError` (values too large to carry the noise).

    Parameters
    ----------
    path : str or os.PathLike
        The data file, as the user gave it.

    Examples
    --------
    >>> with naming_data("data.npy"):
    ...     raise PrecisionError("a value reaches 2^49")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.PrecisionError: data.npy: a value reaches 2^49
    """
    try:
        yield
    except PrecisionError as exc:
        raise PrecisionError(f"{path}: {exc}") from None


def _sampler(args) -> tuple[str, object]:
    sampler = args.sampler
    if sampler is None:
        sampler = "simulate" if args.seed is not None else "opendp"
    if sampler == "opendp" and args.seed is not None:
        raise InputError("--seed cannot be used with --sampler opendp (its noise is not seedable); use --sampler simulate")
    if sampler == "simulate" and args.seed is None:  # a simulation is reproducible: draw its seed and record it
        args.seed = secrets.randbits(63)
        log.info("--sampler simulate without --seed: drew seed %d (recorded in the answers' sidecar; --seed %d reproduces the answers)", args.seed, args.seed)
    return sampler, args.seed


def _provenance(args, workload, privacy, sampler, release, estimator: str) -> dict:
    """What the answer sidecar records about how the answers were made."""
    return {
        "command": args.command,
        "workload": args.workload,
        "domain": [int(d) for d in workload.domain],
        "n": int(workload.n),
        "privacy": {"notion": privacy.notion, "epsilon": privacy.epsilon, "delta": getattr(privacy, "delta", None)},
        "sampler": sampler,
        "seed": args.seed,
        "estimator": estimator,
        "noise_scale": float(release.noise_scale),
        "confidence": CONFIDENCE if release.lower is not None else None,
    }


def _write_release(args, release, provenance: dict) -> None:
    from .answers import write_answers
    from .histograms import narrow_last_bin

    for bins in getattr(args, "bins", None) or []:  # after success, so that an error stays one line
        note = narrow_last_bin(bins)
        if note:
            log.warning(note)
    if provenance["sampler"] == "simulate":
        log.warning("answers drawn with the seeded NumPy noise sampler ('simulate'): for simulations only, not for real releases")
    write_answers(args.out, release.answers, release.lower, release.upper, meta=provenance)
    log.info("wrote %d answers to %s (sidecar %s.json)", len(release.answers), args.out, args.out)


def _check_out(args) -> None:
    from .answers import check_answers_path
    from .spec import file_paths

    inputs = [getattr(args, "data", None), *file_paths(args.workload)]
    check_answers_path(args.out, inputs, strategies=[getattr(args, "strategy", None)])


def _cmd_run(args) -> int:
    from .executor import run
    from .io import read_strategy
    from .privacy import privacy_from_args
    from .spec import parse_spec

    _check_out(args)
    strategy = read_strategy(args.strategy)
    workload = parse_spec(args.workload, operation="release-diagonal" if _diagonal(strategy) else "run")  # as release sizes it
    equivalent = _check_recorded_workload(strategy, workload, args.workload, args.force)
    notion = _privacy_notion(strategy, args)
    if notion == "pure" and args.delta is not None and args.privacy is None:
        raise InputError(f"{args.strategy} is an epsilon-DP (pure) strategy: --delta does not apply (add --privacy approx to run it under Gaussian noise)")
    privacy = privacy_from_args(notion, args.epsilon, args.delta)
    x = _load_data(args, workload)
    sampler, seed = _sampler(args)
    t0 = time.perf_counter()
    intervals = Path(args.out).suffix.lower() == ".csv"  # only the CSV answer format has intervals
    estimator = args.estimator or DEFAULT_ESTIMATOR
    with naming_data(args.data):
        release = run(strategy, x, workload, privacy, estimator=estimator, rng=seed, sampler=sampler, intervals=intervals, allow_undecided_support=args.force)
    if equivalent:
        log.info(equivalent)
    log.info("answered %d queries in %.3g s (noise scale %.6g)", len(release.answers), time.perf_counter() - t0, release.noise_scale)
    if notion == "approx" and args.delta is None:
        log.info("--delta not given: (epsilon, delta)-DP with the default delta = %g", DEFAULT_DELTA)
    _warn_unverified(strategy, args, notion)
    provenance = _provenance(args, workload, privacy, sampler, release, estimator)
    provenance["strategy"] = {
        "file": str(args.strategy),
        "content_sha256": strategy.meta.get("content_sha256"),
        "method": strategy.meta.get("method"),
        "workload": strategy.meta.get("workload"),
    }
    _write_release(args, release, provenance)
    return 0


def _grid_from_data(args, workload):
    """A workload read from a file (one flat domain) takes the grid of the data of as many cells: a
    multi-dimensional ``.npy``, or the bins of several ``--column``/``--bins`` pairs.

    A file cannot state its grid; DAWA orders a 2-D domain along a Hilbert
    curve, so a 256 x 256 histogram with a 65536-column rectangle workload is
    released as 2-D, as with ``SPEC*SPEC`` workloads, whichever form the data take.
    """
    from .histograms import bins_count
    from .matrix_files import npy_shape
    from .workload import ExplicitWorkload

    if not isinstance(workload, ExplicitWorkload) or len(workload.domain) != 1:
        return workload
    if args.column or args.bins:
        shape = tuple(bins_count(b) for b in args.bins or ()) if len(args.bins or ()) == len(args.column or ()) else None
    else:
        shape = npy_shape(args.data)
    if shape is None or len(shape) < 2 or math.prod(shape) != workload.n:
        return workload
    workload.domain = shape
    log.info("workload %s takes the data's grid %s (cells in row-major order)", args.workload, "x".join(map(str, shape)))
    return workload


def _cmd_release(args) -> int:
    from .api import solve
    from .executor import run
    from .privacy import privacy_from_args
    from .registry import get_release, methods
    from .spec import parse_spec

    _check_out(args)
    info = get_release(args.method)
    strategy_method = args.method in methods() and info.func is methods()[args.method].func
    # a strategy method solves (dense n x n work); a data-dependent one needs the workload and its queries
    operation = "release-data" if not strategy_method else "release-diagonal" if args.method in DIAGONAL_METHODS else "release"
    workload = parse_spec(args.workload, operation=operation)
    if not strategy_method:
        workload = _grid_from_data(args, workload)
    notion = args.privacy or ("approx" if args.delta is not None else "pure")
    privacy = privacy_from_args(notion, args.epsilon, args.delta)
    x = _load_data(args, workload)
    sampler, seed = _sampler(args)
    options = _merge_flag_options(args, {}, _RELEASE_ARGUMENTS)
    if privacy.notion not in info.privacy:
        raise InputError(f"method {args.method!r} supports privacy {'/'.join(info.privacy)}, not {privacy.notion!r}")
    t0 = time.perf_counter()
    if strategy_method:
        estimator = args.estimator or DEFAULT_ESTIMATOR
        strategy = solve(workload, privacy=privacy.notion, method=args.method, **options)
        with naming_data(args.data):
            release = run(strategy, x, workload, privacy, estimator=estimator, rng=seed, sampler=sampler, intervals=Path(args.out).suffix.lower() == ".csv")
    else:
        if args.estimator is not None:
            raise InputError(f"--estimator applies to strategy methods; {args.method} reconstructs the answers its own way")
        estimator = args.method
        with naming_data(args.data):
            try:
                release = info.func(x, workload, privacy, rng=seed, sampler=sampler, **options)
            except NoiseScaleError as exc:  # the method spends a share of the budget: name the user's epsilon too
                raise NoiseScaleError(f"--epsilon {args.epsilon:g} is too small for {args.method}, which spends it in parts: {exc}") from None
    log.info("released %d answers in %.3g s", len(release.answers), time.perf_counter() - t0)
    provenance = _provenance(args, workload, privacy, sampler, release, estimator)
    provenance["method"] = args.method
    provenance["options"] = options
    if release.facts:
        provenance["method_facts"] = release.facts  # effective options and what the method decided
    _write_release(args, release, provenance)
    return 0


# ----------------------------------------------------------------------------------------- export / list
def _cmd_export(args) -> int:
    from .atomic import check_not_input, check_writable, strategy_files
    from .io import read_strategy, write_strategy

    strategy = read_strategy(args.strategy)
    check_not_input(args.out, writes=strategy_files(args.out), strategies=[args.strategy])
    check_writable(args.out)
    write_strategy(strategy, args.out)  # checks and marks metadata written by hand (`strategy_opt.api.checked_hand_written`)
    if strategy.unverified() is not None:
        log.warning("%s records no workload or privacy: %s is sealed against changes but stays unverified (error and run will say so)", args.strategy, args.out)
    log.info("wrote %s", args.out)
    return 0


LISTINGS = ("methods", "objectives", "solvers", "problems")


def _cmd_list(args) -> int:
    if args.what is not None:
        _print_listing(args.what)
        return 0
    for i, what in enumerate(LISTINGS):  # no argument: every listing, each under a heading
        if i:
            print()
        print(f"{what}:")
        _print_listing(what)
    return 0


def _print_listing(what: str) -> None:
    if what == "methods":
        from .registry import methods, releases

        for name, info in sorted(methods().items()):
            objs = "any" if info.objectives is None else "/".join(info.objectives)
            opts = "given to its candidates" if info.options is None else (", ".join(sorted(info.options)) or "none")
            print(f"{name:20s} {'/'.join(info.privacy):12s} {objs:24s} {info.summary}; options (--option KEY=VALUE): {opts}  [{info.source}]")
        for name, info in sorted(releases().items()):
            print(f"{name:20s} {'/'.join(info.privacy):12s} {'-':24s} (release only) {info.summary}  [{info.source}]")
    elif what == "objectives":
        from .objectives import objectives
        from .registry import methods

        table = methods()
        for name, obj in sorted(objectives().items()):
            able = ", ".join(k for k, v in sorted(table.items()) if v.objectives is None or name in v.objectives)
            print(f"{name:20s} {obj.description} (methods: {able})")
    elif what == "solvers":
        from .solvers import list_profiles, load_profile

        for name, path in sorted(list_profiles().items()):
            try:
                prof = load_profile(str(path))
            except InputError as exc:  # one broken file does not hide the others
                print(f"{name:20s} unreadable: {_without_path(exc, path)}  ({path})")
                continue
            print(f"{name:20s} backend={prof.backend:7s} {prof.description}  ({path})")
    elif what == "problems":
        from .problem import list_problems, read_problem_file

        for name, path in sorted(list_problems().items()):
            try:
                data = read_problem_file(path)
            except InputError as exc:
                print(f"{name:28s} unreadable: {_without_path(exc, path)}  ({path})")
                continue
            print(f"{name:28s} {data.get('workload', ''):36s} {data.get('description', '')}")


def _without_path(exc: InputError, path) -> str:
    """An error message about ``path`` without the leading ``... {path}: `` (the listing names the file)."""
    text = str(exc)
    head, sep, rest = text.partition(f"{path}: ")
    return rest if sep and len(head) < 40 else text


# ----------------------------------------------------------------------------------------- parser
def _add_data_args(p, privacy_default: str) -> None:
    p.add_argument("--data", required=True, help="histogram (.npy: a vector, or an array of the workload's domain shape, flattened C-order; .csv: one count per line), or raw CSV records with --column/--bins")
    p.add_argument("--column", action="append", help="column of raw CSV records to histogram (repeat for product domains)")
    p.add_argument(
        "--bins",
        action="append",
        help="LO:HI[:WIDTH] bins [LO, LO+WIDTH), ... for the matching --column (width 1 by default); records outside [LO, HI), HI itself "
        "included, are dropped silently (their number depends on the data, so it is not reported). The CSV is read as UTF-8 (a byte-order "
        "mark is ignored); a --column whose name the header holds twice is refused",
    )
    p.add_argument("--workload", required=True, metavar="SPEC", help="workload SPEC (see 'strategy-opt --help')")
    p.add_argument("--epsilon", required=True, type=_positive_float(), help="privacy budget epsilon > 0")
    p.add_argument("--delta", type=_positive_float(below=1.0), help=f"delta in (0, 1): (epsilon, delta)-DP with Gaussian noise (default {DEFAULT_DELTA:g} under approx)")
    p.add_argument("--privacy", choices=["pure", "approx"], help=f"default: {privacy_default}")
    p.add_argument("--seed", type=_nonneg_int, help="seed for reproducible noise (implies --sampler simulate: not for real releases)")
    p.add_argument("--sampler", choices=["opendp", "simulate"], help="noise sampler: opendp (vetted; the default without --seed) or simulate (seeded NumPy, for simulations only); see below")
    p.add_argument(
        "--estimator",
        choices=["ls", "nnls", "hybrid"],
        help="reconstruction through the strategy: least squares (the default; 95%% intervals in .csv output), NNLS, or hybrid (Li 2013 Sec. 3.5.2). "
        "dawa and mwem reconstruct their own way and give no intervals",
    )
    p.add_argument("--out", required=True, help="answers file: .npy (vector) or .csv (query,answer,lower,upper); plus OUT.json (hash, version, provenance)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``strategy-opt``.

    Returns
    -------
    argparse.ArgumentParser
        With one sub-command per command (``solve``, ``error``, ``run``, ``release``, ``export``, ``list``,
        and those registered by other modules, such as ``online``); ``args.func`` runs the chosen one.

    Examples
    --------
    >>> args = build_parser().parse_args(["solve", "--workload", "prefix:4", "--method", "identity", "--out", "s.npz"])
    >>> args.command, args.workload, args.method, args.out, args.privacy
    ('solve', 'prefix:4', 'identity', 's.npz', None)
    """
    parser = _Parser(
        prog="strategy-opt",
        description="Optimal query strategies for linear counting queries under differential privacy.",
        epilog="Workload SPECs: identity:N total:N prefix:N all-range:N all-predicate:N random-range:N:M[:SEED] "
        "marginals:D1xD2x..:K SPEC*SPEC (Kronecker) SPEC+SPEC (union) file:PATH (.npy .npz .mtx .csv; quote a PATH "
        "holding the operators + * ( ) or blanks at its ends: file:'a+b.npz' or file:\"a*b.npz\", e.g. --workload \"file:'d+x/W.npz'\"). Exit status: 0 on success, 2 on a usage or input "
        "error (one line on stderr naming the bad value, no output file written), 1 when a solver fails, 130 on Ctrl-C, 143 on SIGTERM "
        "(no partial file either way). See README.md.",
    )
    parser.add_argument("--version", action="version", version=f"strategy-opt {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress output on stderr")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug lines on stderr as well (few outside the online command)")
    common = _Parser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress output on stderr")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug lines on stderr as well (few outside the online command)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("solve", parents=[common], help="compute a strategy", description="Compute a strategy for a workload and write it to a file.", epilog=EPILOG_SOLVE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("problem", nargs="?", metavar="PROBLEM.toml", help="problem file (or bundled problem name); flags override it")
    p.add_argument("--workload", metavar="SPEC", help="workload SPEC")
    p.add_argument("--privacy", choices=["pure", "approx"], help="pure: epsilon-DP, L1 sensitivity; approx: (epsilon,delta)-DP, L2 (default)")
    p.add_argument("--method", help="strategy method (default auto; see 'strategy-opt list methods')")
    p.add_argument("--objective", help="objective over per-query variances (default total; see 'list objectives')")
    _add_flag_options(p)
    p.add_argument("--solver", metavar="PROFILE", help="solver profile name (scs, clarabel, native) or path to a .toml (default native; minerror-l2 under max: clarabel where its program fits, else native; under a user objective: clarabel or scs); see 'list solvers'")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="method option (repeatable), e.g. --option group_size=16; each method's options: 'list methods'")
    p.add_argument("--out", help="strategy file: .npz, .mtx or .csv (+ .json)")
    p.add_argument("--json", action="store_true", help="print the full metadata as JSON on stdout")
    p.set_defaults(func=_cmd_solve)

    p = sub.add_parser("error", parents=[common], help="error of a strategy on a workload", description="Unit total squared error E_p, SVD bound and per-query statistics of a strategy file.")
    p.add_argument("strategy", metavar="STRATEGY", help="strategy file (.npz, .mtx, .csv)")
    p.add_argument("--workload", required=True, metavar="SPEC", help="workload SPEC (as for solve)")
    p.add_argument("--privacy", choices=["pure", "approx"], help="default: the strategy's own (pure for a strategy without metadata, as under run without --delta; a warning says it is unverified)")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("--force", action="store_true", help="evaluate even if the strategy was computed for another workload")
    p.set_defaults(func=_cmd_error)

    p = sub.add_parser("run", parents=[common], help="answer a workload on data through a strategy", description="Add calibrated noise to the strategy answers, reconstruct, and write the workload answers.", epilog=EPILOG_RUN, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("strategy", metavar="STRATEGY", help="strategy file (.npz, .mtx, .csv)")
    _add_data_args(p, "the strategy file's privacy; without metadata (warned as unverified) approx if --delta is given, else pure")
    p.add_argument("--force", action="store_true", help="run even if the strategy was computed for another workload, or (past 20000 cells) its support cannot be decided")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("release", parents=[common], help="data-dependent release (dawa, mwem, or any strategy method)", description="Release workload answers with a data-dependent method or a strategy method.", epilog=EPILOG_RELEASE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", required=True, help="dawa, mwem, identity, hierarchical, ... (see 'list methods')")
    _add_data_args(p, "approx if --delta is given, else pure")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="method option (repeatable), e.g. --option rounds=20")
    _add_flag_options(p)
    p.set_defaults(func=_cmd_release)

    p = sub.add_parser(
        "export",
        parents=[common],
        help="convert a strategy file between .npz/.mtx/.csv",
        description="Convert a strategy file; the matrix is kept exactly and the metadata is kept. Metadata written by hand "
        "(not by strategy_opt) is checked against the matrix, marked metadata_origin: hand-written, and sealed.",
    )
    p.add_argument("strategy", metavar="STRATEGY", help="strategy file (.npz, .mtx or .csv with its .json)")
    p.add_argument("--out", required=True, help="output file: .npz (dense A or scipy sparse), .mtx (Matrix Market, metadata in the header) or .csv (metadata in a .json beside it)")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("list", parents=[common], help="list methods, objectives, solver profiles or problems", description="List methods, objectives, solver profiles or bundled problems (all four without an argument).")
    p.add_argument("what", nargs="?", choices=LISTINGS, help="what to list (default: everything)")
    p.set_defaults(func=_cmd_list)

    from . import cli_online  # noqa: F401  (registers the online sub-command)
    from .registry import subcommands

    for register in subcommands():
        register(sub, common)
    return parser


def _setup_logging(quiet: bool, verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("strategy-opt: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


#: Options whose value may start with "-" without being a plain number (argparse would take
#: ``--bins -5:5`` for an option named ``-5:5``).
#: Options whose value may start with '-' (a negative number, a negative bin edge): read as the value, so
#: that the range check names it instead of argparse's "expected one argument".
_DASH_VALUES = ("--bins", "--epsilon", "--delta", "--seed", "--branching", "--budget", "--half-width", "--confidence")


def _attach_dash_values(argv: list[str]) -> list[str]:
    """Rewrite ``--bins -5:5`` as ``--bins=-5:5`` so that a negative LO is read as the value."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in _DASH_VALUES and arg[:1] == "-" and (arg[1:2] in tuple("0123456789.") or arg[1:].lower() in ("inf", "infinity", "nan")):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the flush at interpreter shutdown cannot fail again."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv=None) -> int:
    """Entry point of the ``strategy-opt`` console script.

    SIGTERM is turned into an exception while a command runs, so that atomic
    writes remove their temporary files and no partial output is left.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 on success, 2 for a usage or input error, 1 when a solver fails (or out of memory,
        or stdout cannot be written), 130 on Ctrl-C, 143 on SIGTERM, 141 when the reader of stdout went away.
        Errors are printed as one line on stderr.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> out = os.path.join(tmp.name, "s.npz")
    >>> saved = log.handlers[:], log.level, log.propagate  # main() points the package logger at stderr
    >>> main(["-q", "solve", "--workload", "prefix:4", "--method", "identity", "--privacy", "approx", "--out", out])
    method=identity workload=prefix:4 privacy=approx shape=[4, 4] E_2=10 lower_bound=6.411474128 (svd-bound) ratio=1.5597 ...
    0
    >>> main(["-q", "solve", "--workload", "prefix:0", "--out", out])  # the one-line error goes to stderr
    2
    >>> log.handlers[:], log.level, log.propagate = saved  # (put back, for this example)
    >>> tmp.cleanup()
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if in_main_thread else None
    try:
        parser = build_parser()
        try:
            args, unknown = parser.parse_known_args(_attach_dash_values([str(a) for a in (sys.argv[1:] if argv is None else argv)]))
        except SystemExit as exc:  # --help/--version printed: flushed here so that a closed pipe exits 141, not 0
            if sys.stdout is not None:
                sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else 0
        if unknown:  # argparse's own message would not name the sub-command they were given to
            where = f"in 'strategy-opt {args.command}': " if getattr(args, "command", None) else ""
            raise InputError(f"{where}unrecognized arguments: {' '.join(unknown)}")
        _setup_logging(args.quiet, args.verbose)
        # NumPy's floating-point RuntimeWarnings (overflow on 1e308 counts, division at epsilon
        # 1e-320) would print source paths ahead of the one-line error: the commands check
        # finiteness themselves and name the cause
        with np.errstate(all="ignore"), command_threads():  # one BLAS thread unless STRATEGY_OPT_BLAS_THREADS says otherwise
            code = args.func(args)
        # flushed here, not at interpreter shutdown: a reader that went away (| head) then raises
        # BrokenPipeError below (exit 141) instead of CPython's exit 120 for a failed final flush;
        # with stdout closed at start (>&-) Python has no sys.stdout at all
        if sys.stdout is not None:
            sys.stdout.flush()
        return code
    except InputError as exc:
        print(f"strategy-opt: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except SolverError as exc:
        print(f"strategy-opt: solver failed: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except MemoryError:
        print("strategy-opt: error: out of memory; try a smaller workload or a structured method", file=sys.stderr)
        return 1
    except np.linalg.LinAlgError as exc:
        print(
            f"strategy-opt: solver failed: a linear-algebra routine did not converge ({exc}); "
            "the workload may be too badly scaled for this method: rescale its rows or try another --method",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("strategy-opt: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print("strategy-opt: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:
        # the reader of stdout went away (strategy-opt error ... | head): stop quietly, as
        # a process killed by SIGPIPE would; stdout goes to /dev/null so the final flush cannot raise
        _silence_stdout()
        return 141
    except OSError as exc:
        # the commands turn their own file errors into InputErrors: what reaches here is writing
        # standard output (> /dev/full, a full disk)
        _silence_stdout()
        print(f"strategy-opt: error: cannot write to standard output: {exc.strerror or exc} (files the command wrote are complete and kept)", file=sys.stderr)
        return 1
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
