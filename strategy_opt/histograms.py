"""Data files: histograms (``.npy`` / ``.csv``) and raw records binned by ``--column``/``--bins``.

A histogram is a vector of counts, or an array of the workload's domain shape
flattened in row-major order; a CSV histogram has one count per line (line k is
cell k). Raw records are a CSV with a header, binned into ``[LO, HI)`` per
column (README.md, "Data files").
"""

from __future__ import annotations

import csv
import math
import os
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from .defaults import DECIMAL_PATTERN
from .exceptions import InputError
from .matrix_files import missing_file, read_csv_matrix, read_npy
from .resources import require_memory

__all__ = ["read_histogram", "histogram_from_records", "bins_count", "narrow_last_bin"]


def read_histogram(path: str | os.PathLike, n: int | None = None, domain=None, sized_by: str = "the workload") -> np.ndarray:
    """Read a histogram (``.npy``: a vector or an array of the domain's shape, flattened C-order; ``.csv``: one count per line).

    Parameters
    ----------
    path : path-like
    n : int, optional
        Expected number of cells; a mismatch raises `InputError`.
    domain : tuple of int, optional
        Expected domain shape, checked when the array is not a vector ((n,),
        (n, 1) or (1, n) are taken as vectors of n cells, flattened); None
        takes an array of any shape of n cells (`strategy_opt.workload.stated_domain`).
    sized_by : str
        What fixes ``n`` and ``domain``, for the messages (``online``: the query stream).

    Returns
    -------
    ndarray (n,)
        The counts as floats, flattened in C order.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = Path(d) / "x.csv"
    ...     _ = f.write_text("1\\n2\\n3\\n")
    ...     read_histogram(f, n=3)
    array([1., 2., 3.])
    """
    path = Path(path).expanduser()  # '~' as a shell would (a quoted flag, a problem file)
    if not path.is_file():
        raise missing_file(path, "data")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        x = read_npy(path, "histogram")
        vector = x.ndim <= 1 or sum(d != 1 for d in x.shape) <= 1  # (n,), (n, 1), (1, n)
        if domain is not None and not vector and tuple(x.shape) != tuple(domain):
            raise InputError(f"{path}: histogram shape {x.shape} does not match the domain {tuple(domain)} of {sized_by}; "
                             "give a vector of counts or an array of the domain's shape")
    elif suffix == ".csv":
        lines = _check_count_lines(path)
        x = read_csv_matrix(path, "histogram", ndmin=1)
        columns = x.shape[1] if x.ndim != 1 else (x.size if lines == 1 else 1)  # one line of several values reads as a vector
        if columns != 1:
            raise InputError(f"{path}: a CSV histogram has one count per line, got {columns} columns; raw records need --column/--bins")
    else:
        raise InputError(f"unknown data file format {path.suffix!r}; use .npy or .csv (or raw records with --column/--bins)")
    x = np.asarray(x, dtype=float).ravel()
    if not np.all(np.isfinite(x)):
        raise InputError(f"{path}: histogram contains NaN or infinite values")
    if n is not None and x.size != n:
        raise InputError(f"{path}: histogram has {x.size} cells but {sized_by} has {n}")
    return x


def _check_count_lines(path: Path) -> int:
    """Refuse a blank or comment line before the last count of a CSV histogram; return the number of count lines.

    One count per line means line k is cell k; a line skipped by the CSV reader
    would move every later count to the wrong cell. Blank and comment lines
    after the last count are harmless. The file is streamed (no list of lines).
    """
    first_gap = None  # (line number, what) of the first blank or comment line
    counts = 0
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for k, line in enumerate(fh, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                if first_gap is None:
                    first_gap = (k, "blank" if not text else "a comment")
            elif first_gap is not None:  # a count after the gap
                raise InputError(f"{path}: line {first_gap[0]} is {first_gap[1]}; a CSV histogram has one count per line "
                                 "(line k is cell k), so remove it")
            else:
                counts += 1
    return counts


def _parse_bins(text: str) -> tuple[np.ndarray, float]:
    """Bin edges ``LO, LO+WIDTH, ...`` (the last one at or beyond HI) and HI, from ``LO:HI[:WIDTH]``.

    The edges are the decimal values ``LO + i*WIDTH`` as typed, each rounded once
    to the nearest float (so ``--bins 0:1:0.1`` puts a record ``0.3`` in bin 3,
    where ``0.1 * 3 = 0.30000000000000004`` would put it in bin 2).
    """
    parts = text.split(":")
    if not all(re.fullmatch(DECIMAL_PATTERN, p.strip()) for p in parts):
        raise InputError(f"--bins must be LO:HI[:WIDTH] decimal numbers, got {text!r}")  # Decimal also reads 1_0
    try:
        dec = [Decimal(p.strip()) for p in parts]
    except InvalidOperation:
        raise InputError(f"--bins must be LO:HI[:WIDTH] numbers, got {text!r}") from None
    if len(dec) not in (2, 3) or not all(d.is_finite() and math.isfinite(float(d)) for d in dec):
        raise InputError(f"--bins must be LO:HI[:WIDTH] finite numbers, got {text!r}")
    lo, hi = dec[0], dec[1]
    width = dec[2] if len(dec) == 3 else Decimal(1)
    if hi <= lo or width <= 0:
        raise InputError(f"--bins {text!r}: need LO < HI and WIDTH > 0")
    k = int(((hi - lo) / width).to_integral_value(rounding=ROUND_CEILING))
    if k > 10**8:
        raise InputError(f"--bins {text!r} gives {k} bins; too many")
    # exact integers in units of the finest decimal digit typed, one correctly rounded division each
    digits = max(0, -min(int(d.as_tuple().exponent) for d in (lo, hi, width)))
    unit = Decimal(10) ** -digits
    first, step = int(lo / unit), int(width / unit)
    last = first + step * k
    if digits <= 22 and max(abs(first), abs(last)) < 2**53:
        edges = (first + step * np.arange(k + 1, dtype=np.int64)) / float(10**digits)
    else:  # more digits than float64 holds: plain float arithmetic
        edges = float(lo) + float(width) * np.arange(k + 1)
    edges[-1] = max(edges[-1], float(hi))  # rounding must not cut values just below HI out of the last bin
    return edges, float(hi)


def bins_count(text: str) -> int:
    """The number of bins of ``--bins LO:HI[:WIDTH]``.

    Examples
    --------
    >>> bins_count("0:95:10")
    10
    """
    return len(_parse_bins(text)[0]) - 1


def narrow_last_bin(text: str) -> str | None:
    """A note when ``--bins LO:HI:WIDTH`` ends in a bin narrower than the others (WIDTH not dividing HI - LO); else None.

    Examples
    --------
    >>> narrow_last_bin("0:95:10")
    "--bins '0:95:10': the last bin [90, 95) is narrower than the others (HI - LO is not a multiple of WIDTH)"
    """
    _parse_bins(text)  # refuses malformed bins
    lo, hi, *rest = (Decimal(p.strip()) for p in text.split(":"))
    width = rest[0] if rest else Decimal(1)
    if not (hi - lo) % width:
        return None
    last = lo + ((hi - lo) // width) * width
    return f"--bins {text!r}: the last bin [{last}, {hi}) is narrower than the others (HI - LO is not a multiple of WIDTH)"


def _csv_columns(path: Path, header: list[str], columns: list[str]) -> list[int]:
    """Positions of ``columns`` in ``header``; refuses a missing column or a requested one named twice."""
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(f"{path}: no column(s) {missing}; columns are {header}")
    for c in columns:
        if header.count(c) > 1:
            raise InputError(f"{path}: column {c!r} appears {header.count(c)} times in the header; rename the duplicates so that --column {c} is unambiguous")
    return [header.index(c) for c in columns]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def histogram_from_records(path: str | os.PathLike, columns: list[str], bins: list[str]) -> np.ndarray:
    r"""Histogram of raw CSV records (with a header) over one or more numeric columns.

    ``bins`` are ``LO:HI[:WIDTH]`` per column (width 1 by default): bins
    ``[LO, LO+WIDTH), ...``, each closed on the left and open on the right;
    records with a value outside ``[LO, HI)`` in any column (``HI`` itself
    included) are dropped (the count of dropped records is data-dependent and
    is not reported). The file is read as UTF-8, a byte-order mark before the
    header ignored; a requested column whose name appears twice in the header
    is refused as ambiguous, and so is a row whose number of fields differs from
    the header's. When ``WIDTH`` does not divide ``HI - LO`` the last bin stops
    at ``HI``, narrower than the others (`narrow_last_bin` says so).
    Non-numeric, NaN or infinite values are refused.
    Returns the counts as an array with one axis per column, in the order of
    ``columns`` (flattened in C order, the cells of a ``SPEC*SPEC`` workload
    whose attributes come in that order).

    Parameters
    ----------
    path : path-like
        The CSV file of records, with a header.
    columns : list of str
        The columns to count over, one axis each.
    bins : list of str
        ``LO:HI[:WIDTH]`` for each column.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d) / "r.csv"
    ...     _ = f.write_text("age\n0\n1\n1\n3\n")
    ...     histogram_from_records(f, ["age"], ["0:3"])  # 3 is outside [0, 3): dropped
    array([1., 2., 0.])
    """
    path = Path(path).expanduser()  # '~' as a shell would (a quoted flag, a problem file)
    if len(columns) != len(bins) or not columns:
        raise InputError("give one --bins LO:HI[:WIDTH] per --column")
    parsed = [_parse_bins(b) for b in bins]
    edges = [e for e, _ in parsed]
    require_memory(8.0 * math.prod(len(e) - 1 for e in edges), f"--bins {' '.join(bins)}", "use fewer or wider bins")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            index = _csv_columns(path, header, columns)
            rows, lines = [], []  # the values read, and the line each came from (blank lines are skipped)
            for r in reader:
                if not r:
                    continue  # blank lines are skipped
                if len(r) != len(header):
                    raise InputError(f"{path}: line {reader.line_num} has {len(r)} fields, the header {len(header)}")
                rows.append([r[i] for i in index])
                lines.append(reader.line_num)
    except FileNotFoundError:
        raise InputError(f"data file not found: {path}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {path}: records (--column/--bins) are read from a UTF-8 CSV file with a header row; this is not text") from None
    except (OSError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    text = np.array(rows, dtype=str).reshape(-1, len(columns))
    vals = np.empty(text.shape)
    for j, column in enumerate(columns):
        try:
            vals[:, j] = text[:, j].astype(float)
        except ValueError:
            i = next(i for i, v in enumerate(text[:, j]) if not _is_number(v))
            raise InputError(f"{path}: line {lines[i]}, column {column!r}: {str(text[i, j])!r} is not a number (a missing value is refused too)") from None
    bad = [c for j, c in enumerate(columns) if not np.all(np.isfinite(vals[:, j]))]
    if bad:
        raise InputError(f"{path}: NaN or infinite values in column(s) {bad}")
    lo = np.array([e[0] for e in edges])
    hi = np.array([h for _, h in parsed])
    inside = np.all((vals >= lo) & (vals < hi), axis=1)  # [LO, HI): np.histogramdd alone would count HI in the last bin
    counts, _ = np.histogramdd(vals[inside], bins=edges)
    return counts
