"""Strategy files: writing and reading ``.npz`` / ``.mtx`` / ``.csv`` + ``.json``.

Strategy file layouts (README.md, "Strategy files"):

* ``.npz`` -- a dense array under key ``A``, or the layout of
  ``scipy.sparse.save_npz`` (keys ``data``, ``indices``, ``indptr``, ``shape``,
  ``format``); in both cases a key ``meta`` holding a JSON string. Readable
  with plain NumPy / SciPy (``np.load(f, allow_pickle=False)``).
* ``.mtx`` -- Matrix Market; the metadata JSON is the first comment line.
* ``.csv`` -- dense, one strategy row per line, no header; metadata in a
  ``.json`` file beside it (same stem).

The pieces it builds on have their own modules: `strategy_opt.atomic` (atomic
writes, output-path checks), `strategy_opt.fingerprints` (hashes and seals) and
`strategy_opt.matrix_files` (safe readers of numeric matrix files, workload
matrices). Histograms and raw records are read by `strategy_opt.histograms`,
answer files written and read by `strategy_opt.answers`.

Integrity:

* Every write is atomic (`strategy_opt.atomic.atomic_path`): a failed or
  interrupted run leaves no partial file.
* Strategy metadata carries ``content_sha256`` (the matrix: shape and CSR
  content, so dense and sparse storage agree) and ``meta_sha256`` (the
  metadata itself, canonical JSON), the library version and the file format
  version. Loading recomputes both and refuses a corrupted file; a file
  written by strategy_opt (it has ``format_version``) must carry its hashes,
  so a flipped byte cannot silently drop them. Hand-written files without
  ``format_version`` and hashes are accepted.
* Format version 3 also seals the whole file, so that a flipped byte anywhere
  (zip headers, timestamps, number formatting) is refused, not only one that
  changes the matrix or the metadata: ``.npz`` files end in a zip archive
  comment ``strategy_opt-sha256:<hex>`` (the SHA-256 of every byte before
  it); ``.mtx`` files carry a third header line ``%strategy_opt-sha256:<hex>``
  (of the file without that line); the ``.json`` beside a ``.csv`` records
  ``csv_sha256``. NumPy, SciPy and any zip reader ignore the seals.
* Matrices are read as `strategy_opt.matrix_files` reads them: never unpickled,
  numeric dtypes only, NaN and infinities refused, sizes checked against the
  memory available before loading.
"""

from __future__ import annotations

import io as _io
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from .atomic import answers_sidecar, atomic_path, atomic_paths
from .defaults import FILE_FORMAT_VERSION, FLAT_MAX_NONZEROS
from .error import KroneckerMatrix, factored, flat_nonzeros, kronecker_factors
from .exceptions import InputError
from .fingerprints import SEAL_LENGTH, SEAL_PREFIX, content_hash, file_sha256, matrix_fingerprint, meta_fingerprint, meta_hash, seal, sealed_mtx, sealed_npz, workload_file_hashes
from .marginals import MarginalsMatrix
from .matrix_files import (
    COO_KEYS,
    DIA_KEYS,
    READ_ERRORS,
    SPARSE_KEYS,
    missing_file,
    npy_header,
    npz_array,
    open_npz,
    read_csv_matrix,
    read_mtx,
    read_workload_file,
    require_array_memory,
    sparse_from_npz,
    unreadable,
    validate_matrix,
)
from .resources import require_memory
from .strategy import Strategy

__all__ = [
    "write_strategy",
    "read_strategy",
    "STRATEGY_FORMATS",
    # re-exported from the modules they moved to (strategy_opt.fingerprints, .matrix_files, .atomic)
    "content_hash",
    "matrix_fingerprint",
    "meta_fingerprint",
    "workload_file_hashes",
    "file_sha256",
    "read_workload_file",
    "atomic_path",
]

STRATEGY_FORMATS = (".npz", ".mtx", ".csv")


#: Metadata keys that describe one file, not the strategy (dropped when it is written again).
_FILE_KEYS = ("csv_sha256",)


def _check_seal(path: Path, suffix: str, meta: dict, json_text: str | None = None) -> None:
    """Refuse a file whose whole-file seal is wrong, or missing where its format version requires one.

    For a ``.csv`` the ``.json`` beside it (``json_text``) must also be exactly
    the canonical JSON it was written as: a flipped last digit can parse to the
    same float, which the metadata hash cannot see.
    """
    version = meta.get("format_version")
    required = isinstance(version, int) and not isinstance(version, bool) and version >= 3
    if suffix == ".npz":
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - SEAL_LENGTH))
            tail = fh.read()
        found = tail.startswith(SEAL_PREFIX) and len(tail) == SEAL_LENGTH
        if found:
            ok = tail[len(SEAL_PREFIX):] == file_sha256(path, size - SEAL_LENGTH).encode()
    elif suffix == ".mtx":
        raw = path.read_bytes()
        lines = raw.split(b"\n", 3)
        found = len(lines) > 3 and lines[2].startswith(b"%" + SEAL_PREFIX)
        if found:
            unsealed = b"\n".join(lines[:2] + lines[3:])
            ok = lines[2][1:] == seal(unsealed)
    else:
        found = "csv_sha256" in meta
        ok = found and meta["csv_sha256"] == file_sha256(path) and json_text == json.dumps(meta, sort_keys=True, allow_nan=False) + "\n"
    if found and not ok:
        raise InputError(f"strategy file {path} is corrupted: its bytes do not match the seal recorded when it was written")
    if required and not found:
        raise InputError(f"strategy file {path} is corrupted: format version {version} requires a whole-file seal and it has none")


def _check_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in STRATEGY_FORMATS:
        raise InputError(f"unknown strategy file format {path.suffix!r} for {path}; use one of {', '.join(STRATEGY_FORMATS)}")
    return suffix


def _version() -> str:
    from . import __version__

    return __version__


def _checked_for_write(strategy: Strategy, path: Path, digest: str) -> Strategy:
    """Refuse metadata that no longer describes the matrix; check and mark metadata strategy_opt did not compute.

    Metadata computed by strategy_opt identifies its matrix: a solved
    strategy's ``fingerprint``, a read file's ``content_sha256``; a matrix
    changed since is refused, as its recorded error would be stale. Other
    metadata goes through `strategy_opt.api.checked_hand_written`: built by hand
    (even with a ``format_version``), copied into a new `Strategy`, or edited
    after it was computed or read (its ``meta_fingerprint`` no longer matches).
    ``digest`` is the matrix's `content_hash`.
    """
    meta = strategy.meta
    _check_claims(strategy.matrix, meta, path)
    if strategy.fingerprint is not None or "content_sha256" in meta:
        current = matrix_fingerprint(strategy.matrix, digest) if strategy.fingerprint is not None else digest
        if current != (strategy.fingerprint or meta["content_sha256"]):
            raise InputError(
                f"cannot write {path}: the strategy's matrix changed after its metadata was computed (its recorded error "
                "and bound would be stale); build a new Strategy with metadata of your own, or solve again"
            )
        if strategy.meta_fingerprint is not None and meta_fingerprint(meta) == strategy.meta_fingerprint:
            return strategy
    if meta:  # edited since it was computed or read, copied into a new Strategy, or written by hand: checked alike
        from .api import checked_hand_written

        return checked_hand_written(strategy, f"cannot write {path}")
    return strategy


def _json_ready(value, key: str):
    """``value`` as JSON-native data (numpy scalars and arrays as numbers and lists); `InputError` naming ``key`` otherwise."""
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        return {str(k): _json_ready(v, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"strategy metadata {key!r} is {value!r}: JSON has no NaN or infinity; store a finite number or a string")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise InputError(f"strategy metadata {key!r} holds a value of type {type(value).__name__}, which JSON cannot store; use numbers, strings, lists or dicts")


#: The ``meta`` fields CLI.md promises in every strategy file; those not known (a bare or hand-written matrix) are null.
CONTRACT_META_FIELDS = (
    "format_version", "workload", "shape", "privacy", "sensitivity_norm", "method", "objective", "unit_total_squared_error",
    "lower_bound", "lower_bound_kind", "solver", "solve_seconds", "strategy_opt_version", "created",
)


def _meta_for_write(strategy: Strategy, digest: str, layout: str | None = None) -> dict:
    meta = {k: _json_ready(v, k) for k, v in strategy.meta.items() if k not in _FILE_KEYS}
    meta["format_version"] = FILE_FORMAT_VERSION
    meta["content_sha256"] = digest
    if layout is not None:
        meta["layout"] = layout
    else:
        meta.pop("layout", None)
    meta.setdefault("shape", list(strategy.shape))
    meta.setdefault("strategy_opt_version", _version())
    if meta.get("sensitivity_norm") is None and meta.get("privacy") in ("pure", "approx"):
        meta["sensitivity_norm"] = "l1" if meta["privacy"] == "pure" else "l2"
    if meta.get("created") is None:  # a matrix from elsewhere: created as a strategy file now
        meta["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for key in CONTRACT_META_FIELDS:
        meta.setdefault(key, None)
    meta["written_by_version"] = _version()
    meta["meta_sha256"] = meta_hash(meta)
    return meta


def _require_write_memory(strategy: Strategy, path: Path, suffix: str) -> None:
    """Refuse up front a strategy whose flat matrix (the files store no Kronecker factors) does not fit.

    A Kronecker strategy or a stack of marginals is expanded to CSR for its
    content hash and the file (about 3 copies of 16 bytes per non-zero); a
    ``.csv`` holds it dense.
    """
    A = strategy.matrix
    if factored(A):
        if suffix != ".npz":
            raise InputError(
                f"cannot write {path}: the {strategy.shape[0]}x{strategy.shape[1]} Kronecker strategy has {flat_nonzeros(A):.3g} non-zeros "
                f"in its flat matrix (more than {FLAT_MAX_NONZEROS:.0e}); write .npz, which stores its factors"
            )
        return
    if isinstance(A, KroneckerMatrix):
        nnz = flat_nonzeros(A)
    elif isinstance(A, MarginalsMatrix):
        nnz = float(len(A.marginals()) * A.shape[1])  # one entry per cell in each marginal
    elif sp.issparse(A):
        nnz = float(A.nnz)
    else:
        return  # already in memory as a dense array
    p, n = strategy.shape
    nbytes = 8.0 * p * n * 2 if suffix == ".csv" else 48.0 * nnz + 8.0 * p
    hint = ("a .csv file is dense: write .npz or .mtx, which hold the non-zeros only; or " if suffix == ".csv" else
            "the strategy files hold the flat matrix; use a smaller domain, a sparser method (identity, hierarchical) or ")
    require_memory(nbytes, f"writing the {p}x{n} strategy ({nnz:.3g} non-zeros in its flat matrix) to {path}",
                   hint + "the Python API, which keeps a Kronecker product's factors or a stack of marginals' weights")


def _as_path(path, what: str) -> Path:
    """``path`` as a Path: a str, a bytes path (decoded as the filesystem does) or an os.PathLike; else `InputError`."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"{what} must be a file path (str or os.PathLike), got {type(path).__name__}")
    return Path(path)


def write_strategy(strategy: Strategy, path: str | os.PathLike) -> Path:
    """Write a strategy file (format from the suffix); atomic.

    Parameters
    ----------
    strategy : Strategy or matrix
        A bare matrix (ndarray, scipy.sparse, nested lists) is written as
        ``Strategy(matrix)``: with hashes but no provenance, so ``error`` and
        ``run`` treat it as unverified.
    path : path-like
        ``*.npz``, ``*.mtx`` or ``*.csv`` (the latter also writes ``*.json``).

    Returns
    -------
    Path
        The path written.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> import numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_strategy(np.eye(3), pathlib.Path(d) / "i.npz")  # a bare matrix: hashes, no provenance
    ...     meta = json.loads(str(np.load(path)["meta"]))
    >>> meta["shape"], meta["workload"], len(meta["content_sha256"])
    ([3, 3], None, 64)
    """
    if not isinstance(strategy, Strategy):
        strategy = Strategy(strategy)
    path = _as_path(path, "the strategy file's path")
    suffix = _check_format(path)
    if suffix == ".csv":
        _check_sidecar_owner(path)
    _require_write_memory(strategy, path, suffix)
    as_factors = factored(strategy.matrix)
    # once: the check of the metadata and the file's record (per factor for a factored file: the product can hold 1e9 entries)
    digest = matrix_fingerprint(strategy.matrix) if as_factors else content_hash(strategy.matrix)
    strategy = _checked_for_write(strategy, path, digest)
    meta = _meta_for_write(strategy, digest, layout="kronecker-factors" if as_factors else None)
    meta_json = json.dumps(meta, sort_keys=True, allow_nan=False)
    if suffix == ".npz":
        buf = _io.BytesIO()
        if as_factors:
            factors = {f"factor_{i}": (f.toarray() if sp.issparse(f) else np.asarray(f, dtype=float)) for i, f in enumerate(strategy.matrix.factors)}
            np.savez_compressed(buf, **factors, meta=np.asarray(meta_json))
        elif strategy.is_sparse:
            M = strategy.sparse()
            M.sort_indices()
            np.savez_compressed(buf, data=M.data, indices=M.indices, indptr=M.indptr, shape=np.asarray(M.shape), format=np.asarray(b"csr"), meta=np.asarray(meta_json))
        else:
            np.savez_compressed(buf, A=np.asarray(strategy.matrix, dtype=float), meta=np.asarray(meta_json))
        with atomic_path(path) as tmp:
            tmp.write_bytes(sealed_npz(buf.getvalue()))
    elif suffix == ".mtx":
        M = strategy.sparse() if strategy.is_sparse else np.asarray(strategy.matrix, dtype=float)
        buf = _io.BytesIO()
        scipy.io.mmwrite(buf, M, comment=meta_json, precision=17)
        with atomic_path(path) as tmp:
            tmp.write_bytes(sealed_mtx(buf.getvalue()))
    else:
        A = strategy.dense()
        json_path = path.with_suffix(".json")
        with atomic_paths(path, json_path) as (tmp_csv, tmp_json):
            np.savetxt(tmp_csv, A, delimiter=",", fmt="%.17g")
            meta["csv_sha256"] = file_sha256(tmp_csv)
            meta["meta_sha256"] = meta_hash(meta)
            tmp_json.write_text(json.dumps(meta, sort_keys=True, allow_nan=False) + "\n")
    return path


def _check_sidecar_owner(path: Path) -> None:
    """Refuse a ``.csv`` strategy whose ``.json`` sidecar is another CSV's (``s.CSV`` beside ``s.csv``) or not a strategy's.

    The sidecar is the name with ``.json`` for its suffix, whatever the case of
    ``.csv``: on a case-sensitive file system two CSV files would share it,
    and writing one would make the other's seal fail. An existing ``.json``
    that is not a strategy CSV's metadata (a user's own file) is not replaced.
    """
    sidecar = path.with_suffix(".json")
    if sidecar.is_file() and not _is_csv_metadata(sidecar):
        raise InputError(f"cannot write {path}: its metadata file {sidecar} exists and is not a strategy's metadata (writing would replace it); move it or choose another name")
    record = answers_sidecar(path)
    if path.is_file() and record.is_file() and _is_answers_record(record, path.name):
        # its record would stay beside the strategy, describing answers that are gone
        raise InputError(f"cannot write a strategy to {path}: it is an answers file (its record is {record.name}); choose another name")
    folder = path.parent if str(path.parent) else Path(".")
    try:
        names = os.listdir(folder)
    except OSError:
        return  # the write itself names an unusable folder
    for name in names:
        other = folder / name
        if name != path.name and Path(name).stem == path.stem and Path(name).suffix.lower() == ".csv":
            if path.exists() and os.path.samefile(other, path):
                continue  # the same file under another case (case-insensitive file system)
            raise InputError(f"cannot write {path}: its metadata file {path.with_suffix('.json').name} is also that of {name}; choose another name")


def _is_answers_record(path: Path, name: str) -> bool:
    """Whether the file is the ``.json`` record `strategy_opt.answers` writes beside the answers file ``name``."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False
    return isinstance(meta, dict) and meta.get("file") == name and "sha256" in meta and "m" in meta


def _is_csv_metadata(path: Path) -> bool:
    """Whether the file is a strategy CSV's ``.json`` metadata (one this library wrote, judged by its fields)."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False
    return isinstance(meta, dict) and "csv_sha256" in meta and "strategy_opt_version" in meta


def _parse_meta(text: str, path: Path) -> dict:
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"strategy file {path}: metadata is not valid JSON ({getattr(exc, 'msg', exc)}); the file is corrupted") from None
    if not isinstance(meta, dict):
        raise InputError(f"strategy file {path}: metadata must be a JSON object; the file is corrupted")
    return meta




def _verify_hashes(A, meta: dict, path: Path) -> None:
    """Refuse a strategy file whose metadata or matrix does not match its recorded hashes."""
    version = meta.get("format_version")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InputError(f"strategy file {path} is corrupted: format_version {version!r} is not a positive integer")
        if version > FILE_FORMAT_VERSION:
            raise InputError(
                f"strategy file {path} has format version {version}, newer than this strategy_opt ({_version()}, "
                f"version {FILE_FORMAT_VERSION}); upgrade strategy_opt"
            )
        missing = [k for k in ("content_sha256", "meta_sha256")[: 1 if version == 1 else 2] if k not in meta]
        if missing:
            raise InputError(f"strategy file {path} is corrupted: its metadata lacks {', '.join(missing)}")
    if "meta_sha256" in meta:
        try:
            ok = meta_hash(meta) == meta["meta_sha256"]
        except ValueError:  # a number corrupted into one that overflows to infinity
            ok = False
        if not ok:
            raise InputError(f"strategy file {path} is corrupted: its metadata does not match the hash recorded when it was written")
    if "content_sha256" in meta and (matrix_fingerprint(A) if isinstance(A, KroneckerMatrix) else content_hash(A)) != meta["content_sha256"]:
        raise InputError(f"strategy file {path} is corrupted: its matrix does not match the hash recorded when it was written")


def read_strategy(path: str | os.PathLike, verify: bool = True) -> Strategy:
    """Read a strategy file written by `write_strategy` (or by hand in the same layout).

    Parameters
    ----------
    path : path-like
    verify : bool
        Recompute the content and metadata hashes and refuse the file if they
        do not match ``meta['content_sha256']`` / ``meta['meta_sha256']``.

    Raises
    ------
    InputError
        Missing, malformed, corrupted, pickled or oversized files.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from strategy_opt import solve
    >>> s = solve("prefix:8", privacy="pure", method="hierarchical", branching=2)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = write_strategy(s, pathlib.Path(d) / "h.mtx")
    ...     back = read_strategy(path)
    >>> back.shape, back.meta["method"], back.meta["unit_total_squared_error"] == s.meta["unit_total_squared_error"]
    ((15, 8), 'hierarchical', True)
    """
    path = _as_path(path, "the strategy file's path")
    suffix = _check_format(path)
    if not path.is_file():
        raise missing_file(path, "strategy")
    what = "strategy"
    if suffix == ".npz":
        with open_npz(path) as z:
            try:
                keys = set(z.files)
                if any(info.comment for info in z.zip.infolist()):  # numpy never writes entry comments
                    raise InputError(f"strategy file {path} is corrupted: its zip directory is damaged")
                factor_keys = [f"factor_{i}" for i in range(len(keys))]
                factor_keys = factor_keys[: next((i for i, k in enumerate(factor_keys) if k not in keys), len(factor_keys))]
                extra = keys - {"A", "meta"} - SPARSE_KEYS - COO_KEYS - DIA_KEYS - set(factor_keys)
                if factor_keys and keys - {"meta"} - set(factor_keys):
                    raise InputError(f"strategy file {path} has unexpected members {sorted(keys)}; it is corrupted or not a strategy file")
                if extra and "A" not in keys and {"format", "shape"} <= keys:
                    sparse_from_npz(z, path, what)  # names an unsupported format (dia, bsr, ...)
                if extra or ("A" in keys and keys & (SPARSE_KEYS | COO_KEYS | DIA_KEYS)):
                    raise InputError(f"strategy file {path} has unexpected members {sorted(keys)}; it is corrupted or not a strategy file")
                meta = _parse_meta(_npz_meta_text(z, path), path) if "meta" in keys else {}
                if factor_keys:  # a Kronecker strategy too large to store flat (`FLAT_MAX_NONZEROS`)
                    A = KroneckerMatrix([validate_matrix(npz_array(z, k, path, f"{what} factor"), path, f"{what} factor") for k in factor_keys])
                elif "A" in keys:
                    A = npz_array(z, "A", path, what)
                elif SPARSE_KEYS <= keys or COO_KEYS <= keys or DIA_KEYS <= keys:
                    A = sparse_from_npz(z, path, what)
                else:
                    raise InputError(f"{path}: no strategy matrix (expected key 'A' or the scipy.sparse layout)")
            except InputError:
                raise
            except READ_ERRORS as exc:
                raise unreadable(path, exc) from None
    elif suffix == ".mtx":
        meta = {}
        try:
            with open(path, "rb") as fh:
                fh.readline()
                second = fh.readline().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {path}: {exc} (corrupted, or not a strategy file)") from None
        body = second.lstrip("%").strip() if second.startswith("%") else ""
        if body.startswith("{") or any(f'"{k}"' in body for k in ("format_version", "content_sha256", "meta_sha256")):
            meta = _parse_meta(body, path)
        if verify:  # before parsing, so that a damaged file is named as such rather than as malformed text
            _check_seal(path, suffix, meta)
        A = read_mtx(path, what)
    else:
        json_path = path.with_suffix(".json")
        meta = {}
        if json_path.is_file():
            try:
                json_text = json_path.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read {json_path}: {exc} (corrupted, or not a strategy file)") from None
            meta = _parse_meta(json_text, json_path)
            if verify:
                _check_seal(path, suffix, meta, json_text)
        A = read_csv_matrix(path, what)
    if not isinstance(A, KroneckerMatrix):
        A = validate_matrix(A, path, what)
    if verify:
        if suffix == ".npz":
            _check_seal(path, suffix, meta)
        _verify_hashes(A, meta, path)
    _check_claims(A, meta, path)
    if meta and "format_version" not in meta:
        meta = _marked_hand_written(meta)
    if isinstance(A, KroneckerMatrix):  # stored as its factors
        pass
    elif "kronecker_factor_shapes" in meta:  # its error analysis per factor, as when it was solved
        A = kronecker_factors(A, meta["kronecker_factor_shapes"]) or A
    elif "marginal_weights" in meta:  # per eigenspace of the marginal algebra, as when it was solved
        A = MarginalsMatrix.from_meta(A, meta) or A
    return Strategy(A, meta, meta_fingerprint=meta_fingerprint(meta))


_NORM_OF = {"pure": "l1", "approx": "l2"}


def _marked_hand_written(meta: dict) -> dict:
    """Metadata of a file strategy_opt did not write (no ``format_version``), marked as such.

    Its shape, domain, privacy and sensitivity are checked (`_check_claims`);
    its error and bound claims are not (that needs the workload's analysis,
    which `error` does, and `export` before it seals them), so they are listed
    in ``unchecked_fields`` beside ``metadata_origin: 'hand-written'``.
    """
    from .api import DERIVED_FIELDS, OBJECTIVE_FIELDS

    claims = sorted(k for k in ("unit_total_squared_error", "lower_bound", *DERIVED_FIELDS, *OBJECTIVE_FIELDS) if meta.get(k) is not None)
    return {**meta, "metadata_origin": "hand-written", "unchecked_fields": claims}


def _check_claims(A, meta: dict, path: Path) -> None:
    """Refuse metadata that contradicts the matrix (its shape, domain, privacy's norm, sensitivity) or names an unknown privacy.

    Files strategy_opt writes always agree; a hand-written ``meta`` may not, and
    an external reader of the file would trust it (a stated sensitivity below
    the matrix's means too little noise).
    """
    from .error import sensitivity

    shape = meta.get("shape")
    if shape is not None and (not isinstance(shape, list) or [s for s in shape if isinstance(s, bool)] or shape != list(A.shape)):
        raise InputError(f"{path}: metadata states shape {shape!r} but the matrix is {A.shape[0]} x {A.shape[1]}")
    domain = meta.get("domain")
    if domain is not None and (
        not isinstance(domain, list) or not domain or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in domain) or math.prod(domain) != A.shape[1]
    ):
        raise InputError(f"{path}: metadata states domain {domain!r:.80}; it must be a list of positive integers whose product is the matrix's {A.shape[1]} columns")
    privacy, norm = meta.get("privacy"), meta.get("sensitivity_norm")
    if privacy is not None and (not isinstance(privacy, str) or privacy not in _NORM_OF):
        raise InputError(f"{path}: metadata states privacy {privacy!r}; strategy files record 'pure' or 'approx'")
    if privacy is not None and norm is not None and _NORM_OF.get(privacy, norm) != norm:
        raise InputError(f"{path}: metadata states privacy {privacy!r} with sensitivity_norm {norm!r} (it is {_NORM_OF[privacy]!r})")
    stated = meta.get("sensitivity")
    norm = norm or _NORM_OF.get(privacy)
    if stated is None:
        return
    if isinstance(stated, bool) or not isinstance(stated, (int, float)):
        raise InputError(f"{path}: metadata field 'sensitivity' must be a number, got {stated!r}")
    norms = [norm] if norm in ("l1", "l2") else ["l1", "l2"]  # no norm recorded: it must be one of the two
    actual = {k: sensitivity(A, 1 if k == "l1" else 2) for k in norms}
    if not any(math.isclose(stated, v, rel_tol=1e-9, abs_tol=0.0) for v in actual.values()):
        which = " or ".join(f"{k} norm is {v:.10g}" for k, v in actual.items())
        raise InputError(f"{path}: metadata states sensitivity {stated!r} but the matrix's largest column {which}")


def _npz_meta_text(z, path: Path) -> str:
    """The JSON text of the ``meta`` member (a 0-d unicode or bytes array), header checked first."""
    name = "meta.npy" if "meta.npy" in z.zip.namelist() else "meta"
    with z.zip.open(name) as fh:
        shape, dtype = npy_header(fh)
    if dtype.kind not in "US" or shape != ():
        raise InputError(f"{path}: 'meta' must be a JSON string, got dtype {dtype} shape {shape}")
    require_array_memory((1,), dtype.itemsize, path, "strategy metadata")
    value = z["meta"].item()
    return value.decode("utf-8") if isinstance(value, bytes) else value


