"""Answer files: ``.npy`` (the m answers) or ``.csv`` (``query,answer,lower,upper``), each with a sidecar ``<out>.json``.

The sidecar records the SHA-256 of the answer file, the library version, and
how the answers were made (workload, privacy, sampler, estimator, strategy
hash); reading checks the hash.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .defaults import FILE_FORMAT_VERSION
from .exceptions import InputError
from .atomic import answers_sidecar, atomic_paths, check_not_input, check_writable
from .fingerprints import file_sha256
from .io import _is_answers_record, _is_csv_metadata, _version
from .matrix_files import missing_file, READ_ERRORS, read_npy

__all__ = ["write_answers", "write_answer_file", "check_answers_path", "csv_number", "read_answers"]


def write_answers(path: str | os.PathLike, answers: np.ndarray, lower=None, upper=None, meta: dict | None = None) -> Path:
    """Write workload answers and their sidecar ``<path>.json``; both atomic.

    Parameters
    ----------
    path : path-like
        ``.npy`` (vector of answers) or ``.csv`` (``query,answer,lower,upper``;
        empty fields where no interval exists).
    answers, lower, upper : ndarray (m,)
    meta : dict, optional
        Provenance for the sidecar (workload, privacy, sampler, estimator, ...).
        The sidecar always records ``sha256`` (of the answer file),
        ``strategy_opt_version``, ``format_version``, ``created`` and ``m``.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_answers(Path(d) / "a.csv", np.array([10.0, 20.5]), [8.0, 18.0], [12.0, 23.0], {"workload": "identity:2"})
    ...     print(p.read_text(), end="")
    ...     print(sorted(f.name for f in Path(d).iterdir()))
    query,answer,lower,upper
    0,10.0,8.0,12.0
    1,20.5,18.0,23.0
    ['a.csv', 'a.csv.json']
    """
    path = Path(path)
    answers = np.asarray(answers, dtype=float)
    m = answers.size
    if path.suffix.lower() != ".csv":
        return write_answer_file(path, lambda fh: np.save(fh, answers), m, meta)
    columns = [answers] + [np.full(m, np.nan) if b is None else np.asarray(b, dtype=float) for b in (lower, upper)]

    def write_csv(fh) -> None:
        fh.write(b"query,answer,lower,upper\n")
        fh.writelines(f"{i},{csv_number(a)},{csv_number(lo)},{csv_number(hi)}\n".encode() for i, (a, lo, hi) in enumerate(zip(*(c.tolist() for c in columns))))

    return write_answer_file(path, write_csv, m, meta)


def _check_answers_target(path: str | os.PathLike) -> None:
    """Refuse answer-file names whose writing would replace a strategy's files or a ``.json`` that is not their record.

    A ``.csv`` strategy keeps its metadata beside it (``s.csv`` and ``s.json``);
    answers keep theirs in ``OUT.json``. Answers to ``s.csv`` would leave a
    strategy's metadata describing a file that is gone, and answers to
    ``z.csv`` beside the strategy ``z.csv.csv`` would replace that strategy's
    metadata ``z.csv.json`` (an outside audit: exit 0, and the strategy could
    no longer be read).

    Parameters
    ----------
    path : path-like
        The answers file.

    Raises
    ------
    InputError

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "z.csv.json").write_text("{}")  # a file of the user's own
    ...     _check_answers_target(Path(d) / "z.csv")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: cannot write answers to z.csv: its record z.csv.json exists and is not an answers record (writing would replace it); move it or choose another name
    """
    path = Path(path)
    if path.suffix.lower() == ".csv" and path.is_file() and _is_csv_metadata(path.with_suffix(".json")):
        # the strategy's metadata would stay beside the answers, describing a file that is gone
        raise InputError(f"cannot write answers to {path}: it is a strategy file (its metadata is {path.with_suffix('.json').name}); choose another name")
    record = answers_sidecar(path)
    if record.is_file() and not _is_answers_record(record, path.name):  # (a directory: the write names it)
        whose = " (the metadata of a strategy file)" if _is_csv_metadata(record) else ""
        raise InputError(
            f"cannot write answers to {path.name}: its record {record.name} exists and is not an answers record{whose} "
            "(writing would replace it); move it or choose another name"
        )


def check_answers_path(path: str | os.PathLike, inputs=(), strategies=()) -> None:
    """Refuse an answers file name (``.npy``/``.csv``) that cannot be written, whose files (it and its
    ``.json`` record) name one of ``inputs`` or of ``strategies`` (with the metadata a ``.csv`` strategy keeps beside it),
    or whose writing would replace a strategy's files or a ``.json`` that is not its record (`_check_answers_target`).
    Commands call it before any work, so that nothing is released for a name that cannot be written.

    Parameters
    ----------
    path : str or os.PathLike
        The answers file.
    inputs : iterable of path or None
        Input files of the command (None entries ignored).
    strategies : iterable of path or None
        Strategy files read by the command.

    Returns
    -------
    None

    Raises
    ------
    InputError

    Examples
    --------
    >>> check_answers_path("answers.csv", inputs=["data.npy"])
    >>> check_answers_path("answers.txt")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: --out must end in .npy or .csv, got 'answers.txt'
    >>> check_answers_path("o.csv", strategies=["o.csv.csv"])  # its record o.csv.json is the strategy's metadata
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: --out 'o.csv' would write 'o.csv.json', the metadata of the input 'o.csv.csv'; choose another name
    """
    if Path(path).suffix.lower() not in (".npy", ".csv"):
        raise InputError(f"--out must end in .npy or .csv, got {str(path)!r}")
    check_writable(path)
    check_not_input(path, inputs, writes=[Path(path), answers_sidecar(path)], strategies=strategies)
    _check_answers_target(path)


def write_answer_file(path: str | os.PathLike, write, m: int, meta: dict | None = None) -> Path:
    """Write an answer file (``.npy`` or ``.csv``) by ``write(binary file)`` and its sidecar ``<path>.json``, both atomic.

    The sidecar holds ``meta`` (provenance) and always ``file``, ``sha256`` (of
    the answer file), ``m`` (answers), ``format_version``,
    ``strategy_opt_version`` and ``created``.

    Parameters
    ----------
    path : path-like
        ``.npy`` or ``.csv``; a ``.csv`` that is a strategy file (with strategy metadata beside it) is refused.
    write : callable
        ``write(fh)`` writes the file's bytes to the binary file object ``fh``.
    m : int
        Number of answers, recorded in the sidecar.
    meta : dict, optional
        Provenance for the sidecar.

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_answer_file(Path(d) / "a.npy", lambda fh: np.save(fh, np.arange(3.0)), 3)
    ...     answers, lower, upper, meta = read_answers(p)
    >>> answers.tolist(), lower, meta["m"]
    ([0.0, 1.0, 2.0], None, 3)
    """
    path = Path(path)
    if path.suffix.lower() not in (".npy", ".csv"):
        raise InputError(f"answers must be written to .npy or .csv, got {path.suffix!r}")
    _check_answers_target(path)
    with atomic_paths(path, answers_sidecar(path)) as (tmp, tmp_json):
        with open(tmp, "wb") as fh:
            write(fh)
        side = dict(meta or {})
        side.update(
            {
                "file": path.name,
                "sha256": file_sha256(tmp),
                "m": int(m),
                "format_version": FILE_FORMAT_VERSION,
                "strategy_opt_version": _version(),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
        )
        tmp_json.write_text(json.dumps(side, sort_keys=True, allow_nan=False, indent=1) + "\n")
    return path


def csv_number(v: float) -> str:
    """A CSV field for an answer: ``repr`` of the float (round-trips exactly), empty for NaN.

    Examples
    --------
    >>> csv_number(0.1), csv_number(float("nan"))
    ('0.1', '')
    """
    return "" if math.isnan(v) else repr(float(v))


def read_answers(path: str | os.PathLike, verify: bool = True):
    """Read an answer file written by `write_answers`, checking it against its sidecar.

    Parameters
    ----------
    path : path-like
        The ``.npy`` or ``.csv`` answer file.
    verify : bool
        Check the file's SHA-256 against the sidecar.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = write_answers(Path(d) / "a.csv", np.array([10.0, 20.5]), [8.0, 18.0], [12.0, 23.0], {"workload": "identity:2"})
    ...     answers, lower, upper, meta = read_answers(p)
    >>> answers.tolist(), upper.tolist(), meta["workload"], meta["m"]
    ([10.0, 20.5], [12.0, 23.0], 'identity:2', 2)

    Returns
    -------
    answers, lower, upper : ndarray (m,); lower/upper are None for ``.npy``
    meta : dict
        The sidecar.

    Raises
    ------
    InputError
        Missing sidecar, or a file whose SHA-256 differs from the recorded one.
    """
    path = Path(path)
    side = answers_sidecar(path)
    if not path.is_file():
        raise missing_file(path, "answer")
    if not side.is_file():
        raise InputError(f"{path}: no sidecar {side.name}; cannot verify the answers")
    try:
        meta = json.loads(side.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {side}: {exc}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{side}: must be a JSON object")
    if verify and file_sha256(path) != meta.get("sha256"):
        raise InputError(f"answer file {path} is corrupted: its SHA-256 does not match {side.name}")
    if path.suffix.lower() == ".npy":
        return read_npy(path, "answers"), None, None, meta
    try:
        table = np.genfromtxt(path, delimiter=",", skip_header=1, ndmin=2, filling_values=np.nan)
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: malformed answers CSV ({exc})") from None
    if table.shape[1] != 4:
        raise InputError(f"{path}: expected columns query,answer,lower,upper")
    return table[:, 1], table[:, 2], table[:, 3], meta
