"""Files: strategies (.npz / .mtx / .csv + .json), workload matrices, data, answers.

Strategy file layouts (CLI.md):

* ``.npz`` -- a dense array under key ``A``, or the layout of
  ``scipy.sparse.save_npz`` (keys ``data``, ``indices``, ``indptr``, ``shape``,
  ``format``); in both cases a key ``meta`` holding a JSON string. Readable
  with plain NumPy / SciPy (``np.load(f, allow_pickle=False)``).
* ``.mtx`` -- Matrix Market; the metadata JSON is the first comment line.
* ``.csv`` -- dense, one strategy row per line, no header; metadata in a
  ``.json`` file beside it (same stem).

Every write is atomic (temporary file in the target directory, then
``os.replace``): a failed run leaves no partial file. Every file carries a
SHA-256 content hash of the matrix in ``meta['content_sha256']``; loading
recomputes it and refuses a corrupted file. Nothing is ever unpickled.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io as _io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from .error import KroneckerMatrix
from .exceptions import InputError
from .strategy import Strategy

__all__ = [
    "write_strategy",
    "read_strategy",
    "content_hash",
    "read_workload_file",
    "read_histogram",
    "histogram_from_records",
    "write_answers",
    "atomic_path",
    "STRATEGY_FORMATS",
]

STRATEGY_FORMATS = (".npz", ".mtx", ".csv")


def content_hash(A) -> str:
    """SHA-256 of a matrix's canonical content (shape + CSR with sorted indices, float64).

    Dense and sparse storage of the same matrix give the same hash.
    """
    M = A.tocsr() if isinstance(A, KroneckerMatrix) else sp.csr_matrix(A, dtype=np.float64)
    M = M.copy()
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    h = hashlib.sha256()
    h.update(np.asarray(M.shape, dtype=np.int64).tobytes())
    h.update(M.indptr.astype(np.int64).tobytes())
    h.update(M.indices.astype(np.int64).tobytes())
    h.update(M.data.astype(np.float64).tobytes())
    return h.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    On any exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"output directory does not exist: {directory}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _check_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in STRATEGY_FORMATS:
        raise InputError(f"unknown strategy file format {path.suffix!r} for {path}; use one of {', '.join(STRATEGY_FORMATS)}")
    return suffix


def _meta_for_write(strategy: Strategy) -> dict:
    meta = dict(strategy.meta)
    meta["content_sha256"] = content_hash(strategy.matrix)
    meta.setdefault("shape", list(strategy.shape))
    from . import __version__

    meta.setdefault("strategy_opt_version", __version__)
    return meta


def write_strategy(strategy: Strategy, path: str | os.PathLike) -> Path:
    """Write a strategy file (format from the suffix); atomic.

    Parameters
    ----------
    strategy : Strategy
    path : path-like
        ``*.npz``, ``*.mtx`` or ``*.csv`` (the latter also writes ``*.json``).

    Returns
    -------
    Path
        The path written.
    """
    path = Path(path)
    suffix = _check_format(path)
    meta = _meta_for_write(strategy)
    meta_json = json.dumps(meta, sort_keys=True, allow_nan=False)
    if suffix == ".npz":
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                if strategy.is_sparse:
                    M = strategy.sparse()
                    M.sort_indices()
                    np.savez_compressed(
                        fh,
                        data=M.data,
                        indices=M.indices,
                        indptr=M.indptr,
                        shape=np.asarray(M.shape),
                        format=np.asarray(b"csr"),
                        meta=np.asarray(meta_json),
                    )
                else:
                    np.savez_compressed(fh, A=np.asarray(strategy.matrix, dtype=float), meta=np.asarray(meta_json))
    elif suffix == ".mtx":
        M = strategy.sparse() if strategy.is_sparse else np.asarray(strategy.matrix, dtype=float)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                scipy.io.mmwrite(fh, M, comment=meta_json, precision=17)
    else:
        A = strategy.dense()
        json_path = path.with_suffix(".json")
        with atomic_path(json_path) as tmp_json, atomic_path(path) as tmp_csv:
            np.savetxt(tmp_csv, A, delimiter=",", fmt="%.17g")
            tmp_json.write_text(meta_json + "\n")
    return path


def _parse_meta(text: str, path: Path) -> dict:
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"strategy file {path}: metadata is not valid JSON ({exc.msg})") from None
    if not isinstance(meta, dict):
        raise InputError(f"strategy file {path}: metadata must be a JSON object")
    return meta


def _np_load(path: Path):
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"cannot read {path}: {exc} (corrupted, truncated, or an object/pickled array)") from None


def _sparse_from_npz(z, path: Path) -> sp.csr_matrix:
    try:
        fmt = z["format"].item()
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        shape = tuple(int(s) for s in z["shape"])
        if fmt == "csr":
            return sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)
        if fmt == "csc":
            return sp.csc_matrix((z["data"], z["indices"], z["indptr"]), shape=shape).tocsr()
        if fmt == "coo":
            return sp.coo_matrix((z["data"], (z["row"], z["col"])), shape=shape).tocsr()
    except (KeyError, ValueError, IndexError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise InputError(f"{path}: malformed sparse matrix ({exc})") from None
    raise InputError(f"{path}: unsupported sparse format {fmt!r} (use csr, csc or coo)")


def _validate_matrix(M, path: Path, what: str):
    if sp.issparse(M):
        data = M.data
    else:
        M = np.asarray(M)
        if M.dtype == object or not np.issubdtype(M.dtype, np.number):
            raise InputError(f"{path}: {what} must be numeric, got dtype {M.dtype}")
        if M.ndim != 2:
            raise InputError(f"{path}: {what} must be a 2-D matrix, got shape {M.shape}")
        data = M
    if M.shape[0] == 0 or M.shape[1] == 0:
        raise InputError(f"{path}: {what} is empty (shape {M.shape})")
    if not np.all(np.isfinite(data)):
        raise InputError(f"{path}: {what} contains NaN or infinite values")
    return M.astype(float) if not sp.issparse(M) else sp.csr_matrix(M, dtype=float)


def read_strategy(path: str | os.PathLike, verify: bool = True) -> Strategy:
    """Read a strategy file written by `write_strategy` (or by hand in the same layout).

    Parameters
    ----------
    path : path-like
    verify : bool
        Recompute the content hash and refuse the file if it does not match
        ``meta['content_sha256']`` (files without a hash are accepted).

    Raises
    ------
    InputError
        Missing, malformed, corrupted or pickled files.
    """
    path = Path(path)
    suffix = _check_format(path)
    if not path.is_file():
        raise InputError(f"strategy file not found: {path}")
    if suffix == ".npz":
        with _np_load(path) as z:
            keys = set(z.files)
            try:
                meta = _parse_meta(str(z["meta"]), path) if "meta" in keys else {}
                if "A" in keys:
                    A = z["A"]
                elif {"data", "indices", "indptr", "shape", "format"} <= keys:
                    A = _sparse_from_npz(z, path)
                else:
                    raise InputError(f"{path}: no strategy matrix (expected key 'A' or the scipy.sparse layout)")
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                raise InputError(f"cannot read {path}: {exc} (corrupted or truncated file)") from None
    elif suffix == ".mtx":
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from None
        lines = text.splitlines()
        meta = {}
        if len(lines) > 1 and lines[1].startswith("%"):
            body = lines[1].lstrip("%").strip()
            if body.startswith("{"):
                meta = _parse_meta(body, path)
        try:
            A = scipy.io.mmread(_io.StringIO(text))
        except (ValueError, IndexError, TypeError, OSError) as exc:
            raise InputError(f"cannot read {path}: malformed Matrix Market file ({exc})") from None
        A = sp.csr_matrix(A) if sp.issparse(A) else np.asarray(A)
    else:
        try:
            A = np.loadtxt(path, delimiter=",", ndmin=2)
        except (ValueError, OSError) as exc:
            raise InputError(f"cannot read {path}: malformed CSV ({exc})") from None
        json_path = path.with_suffix(".json")
        meta = _parse_meta(json_path.read_text(), json_path) if json_path.is_file() else {}
    A = _validate_matrix(A, path, "strategy")
    if verify and "content_sha256" in meta and content_hash(A) != meta["content_sha256"]:
        raise InputError(f"strategy file {path} is corrupted: its content hash does not match the one recorded when it was written")
    return Strategy(A, meta)


def read_workload_file(path: str | os.PathLike):
    """Read a workload matrix: ``.npy``, ``.npz`` (dense ``W`` or scipy sparse), ``.mtx``, ``.csv``."""
    from .workload import ExplicitWorkload

    path = Path(path)
    if not path.is_file():
        raise InputError(f"workload file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        W = _np_load(path)
    elif suffix == ".npz":
        with _np_load(path) as z:
            if "W" in z.files:
                W = z["W"]
            elif {"data", "indices", "indptr", "shape", "format"} <= set(z.files):
                W = _sparse_from_npz(z, path)
            else:
                raise InputError(f"{path}: expected a dense array under key 'W' or a scipy.sparse matrix")
    elif suffix == ".mtx":
        try:
            W = scipy.io.mmread(str(path))
        except (ValueError, IndexError, TypeError, OSError) as exc:
            raise InputError(f"cannot read {path}: malformed Matrix Market file ({exc})") from None
    elif suffix == ".csv":
        try:
            W = np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError as exc:
            raise InputError(f"cannot read {path}: malformed CSV ({exc})") from None
    else:
        raise InputError(f"unknown workload file format {path.suffix!r}; use .npy, .npz, .mtx or .csv")
    W = _validate_matrix(W, path, "workload matrix")
    return ExplicitWorkload(W, spec=f"file:{path}")


def read_histogram(path: str | os.PathLike, n: int | None = None, domain=None) -> np.ndarray:
    """Read a histogram (``.npy`` of any shape, flattened C-order, or ``.csv`` one count per line).

    Parameters
    ----------
    path : path-like
    n : int, optional
        Expected number of cells; a mismatch raises `InputError`.
    domain : tuple of int, optional
        Expected domain shape (checked when the array is multi-dimensional).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        x = _np_load(path)
        if x.dtype == object or not np.issubdtype(x.dtype, np.number):
            raise InputError(f"{path}: histogram must be numeric, got dtype {x.dtype}")
        if domain is not None and x.ndim > 1 and tuple(x.shape) != tuple(domain):
            raise InputError(f"{path}: histogram shape {x.shape} does not match the workload domain {tuple(domain)}")
    elif suffix == ".csv":
        try:
            x = np.loadtxt(path, delimiter=",", ndmin=1)
        except ValueError as exc:
            raise InputError(f"cannot read {path}: malformed CSV histogram ({exc}); raw records need --column/--bins") from None
    else:
        raise InputError(f"unknown data file format {path.suffix!r}; use .npy or .csv (or raw records with --column/--bins)")
    x = np.asarray(x, dtype=float).ravel()
    if not np.all(np.isfinite(x)):
        raise InputError(f"{path}: histogram contains NaN or infinite values")
    if n is not None and x.size != n:
        raise InputError(f"{path}: histogram has {x.size} cells but the workload has {n}")
    return x


def _parse_bins(text: str) -> np.ndarray:
    parts = text.split(":")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise InputError(f"--bins must be LO:HI[:WIDTH] numbers, got {text!r}") from None
    if len(vals) not in (2, 3) or not all(np.isfinite(vals)):
        raise InputError(f"--bins must be LO:HI[:WIDTH], got {text!r}")
    lo, hi = vals[0], vals[1]
    width = vals[2] if len(vals) == 3 else 1.0
    if hi <= lo or width <= 0:
        raise InputError(f"--bins {text!r}: need LO < HI and WIDTH > 0")
    k = int(np.ceil((hi - lo) / width - 1e-9))
    if k > 10**8:
        raise InputError(f"--bins {text!r} gives {k} bins; too many")
    return lo + width * np.arange(k + 1)


def histogram_from_records(path: str | os.PathLike, columns: list[str], bins: list[str]) -> np.ndarray:
    """Histogram of raw CSV records (with a header) over one or more numeric columns.

    ``bins`` are ``LO:HI[:WIDTH]`` per column (width 1 by default): bins
    ``[LO, LO+WIDTH), ...``; values outside ``[LO, HI)`` are dropped (the count
    of dropped records is data-dependent and is not reported). Returns the
    counts flattened in C order.
    """
    path = Path(path)
    if len(columns) != len(bins) or not columns:
        raise InputError("give one --bins LO:HI[:WIDTH] per --column")
    edges = [_parse_bins(b) for b in bins]
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in columns if c not in header]
            if missing:
                raise InputError(f"{path}: no column(s) {missing}; columns are {header}")
            rows = [[r[c] for c in columns] for r in reader]
    except FileNotFoundError:
        raise InputError(f"data file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    try:
        vals = np.array(rows, dtype=float).reshape(-1, len(columns))
    except ValueError:
        raise InputError(f"{path}: non-numeric values in column(s) {columns}") from None
    counts, _ = np.histogramdd(vals, bins=edges)
    return counts.ravel()


def _num(v) -> str:
    v = float(v)
    return "" if np.isnan(v) else repr(v)


def write_answers(path: str | os.PathLike, answers: np.ndarray, lower=None, upper=None) -> Path:
    """Write workload answers: ``.npy`` (vector) or ``.csv`` (query,answer,lower,upper); atomic."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".csv"):
        raise InputError(f"answers must be written to .npy or .csv, got {path.suffix!r}")
    with atomic_path(path) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as fh:
                np.save(fh, np.asarray(answers, dtype=float))
        else:
            m = len(answers)
            lo = np.full(m, np.nan) if lower is None else lower
            hi = np.full(m, np.nan) if upper is None else upper
            with open(tmp, "w", newline="") as fh:
                fh.write("query,answer,lower,upper\n")
                for i in range(m):
                    fh.write(f"{i},{_num(answers[i])},{_num(lo[i])},{_num(hi[i])}\n")
    return path
