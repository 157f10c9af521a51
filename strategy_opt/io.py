"""Files: strategies (.npz / .mtx / .csv + .json) and workload matrices.

Strategy file layouts (README.md, "Strategy files"):

* ``.npz`` -- a dense array under key ``A``, or the layout of
  ``scipy.sparse.save_npz`` (keys ``data``, ``indices``, ``indptr``, ``shape``,
  ``format``); in both cases a key ``meta`` holding a JSON string. Readable
  with plain NumPy / SciPy (``np.load(f, allow_pickle=False)``).
* ``.mtx`` -- Matrix Market; the metadata JSON is the first comment line.
* ``.csv`` -- dense, one strategy row per line, no header; metadata in a
  ``.json`` file beside it (same stem).

Histograms and raw records are read by `strategy_opt.histograms`, answer files
written and read by `strategy_opt.answers`; both use this module's readers,
hashes and atomic writes.

Integrity:

* Every write is atomic (temporary file in the target directory, then
  ``os.replace``): a failed or interrupted run leaves no partial file.
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
* Nothing is ever unpickled (``allow_pickle=False``); object, string,
  complex and date arrays are refused; NaN and infinities are refused.
* Sizes are read from file headers first and files that would need more
  memory than is available are refused before loading
  (`strategy_opt.resources.require_memory`).

Workload matrices may have all-zero columns (cells no query touches: harmless
for the error, and a strategy need not measure them), but not be all zero.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as _io
import json
import math
import os
import re
import struct
import tempfile
import tokenize
import warnings
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from .defaults import FILE_FORMAT_VERSION
from .error import STRUCTURED, KroneckerMatrix, kronecker_factors
from .marginals import MarginalsMatrix
from .exceptions import InputError
from .resources import require_memory
from .strategy import Strategy

__all__ = [
    "write_strategy",
    "read_strategy",
    "content_hash",
    "read_workload_file",
    "file_sha256",
    "atomic_path",
    "workload_file_hashes",
    "meta_fingerprint",
    "STRATEGY_FORMATS",
]

STRATEGY_FORMATS = (".npz", ".mtx", ".csv")

#: Exceptions that parsing a malformed or corrupted file can raise (NumPy, zipfile,
#: zlib, SciPy's Matrix Market reader); all are turned into `InputError`.
_READ_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    OverflowError,
    NotImplementedError,
    RuntimeError,
    SyntaxError,
    struct.error,
    tokenize.TokenError,
    zlib.error,
    zipfile.BadZipFile,
)

def _unreadable(path: Path, exc: BaseException) -> InputError:
    """The one-line error for a file whose parser failed (never an object repr such as NumPy's header ``<ast.Name ...>``)."""
    text = " ".join(str(exc).split())
    if not text or " at 0x" in text:
        text = f"damaged array header ({type(exc).__name__})"
    return InputError(f"cannot read {path}: {text[:200]} (corrupted or truncated file)")


#: Members of a ``scipy.sparse.save_npz`` file: CSR/CSC layout, and the extra COO members.
_SPARSE_KEYS = {"data", "indices", "indptr", "shape", "format"}
_COO_KEYS = {"data", "row", "col", "shape", "format"}

#: dtype kinds accepted for matrices and histograms: bool, signed and unsigned int, float.
_NUMERIC_KINDS = "biuf"


def content_hash(A) -> str:
    """SHA-256 of a matrix's canonical content (shape + CSR with sorted indices, float64).

    Dense and sparse storage of the same matrix give the same hash.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> content_hash(np.eye(3)) == content_hash(sp.identity(3, format="coo"))
    True
    """
    M = A.tocsr() if isinstance(A, STRUCTURED) else sp.csr_matrix(A, dtype=np.float64)
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


def matrix_fingerprint(A, digest: str | None = None) -> str:
    """`content_hash` of A (``digest``, if already computed); of each factor for a Kronecker strategy.

    Identifies the matrix a strategy's metadata was computed for without
    expanding a Kronecker product (whose flat hash took 11 s for H_2 x H_2 on
    1024 x 1024 cells, against 1.7 s for the solve) or a stack of marginals
    (by its domain and weights).
    """
    if isinstance(A, KroneckerMatrix):
        return "kronecker:" + ",".join(content_hash(f) for f in A.factors)
    if isinstance(A, MarginalsMatrix):  # its domain and weights (the stack can hold 1e8 entries)
        return "marginals:" + _json_sha256({"domain": list(A.domain), "theta": A.theta.tolist()})
    return digest or content_hash(A)


def _json_sha256(obj, **dump_options) -> str:
    """SHA-256 of ``obj`` as canonical JSON (sorted keys, no blanks)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), **dump_options)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value):
    """A JSON stand-in for a value ``json`` cannot write: NumPy values as numbers or lists, anything else by ``repr``."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


def meta_fingerprint(meta: dict) -> str:
    """SHA-256 of ``meta`` in memory (any values; see `_plain`): tells metadata edited since it was computed or read."""
    return _json_sha256(meta, default=_plain)


def _meta_hash(meta: dict) -> str:
    """SHA-256 of a file's metadata without its own hash (JSON values only; NaN and infinities refused)."""
    return _json_sha256({k: v for k, v in meta.items() if k != "meta_sha256"}, allow_nan=False)


def workload_file_hashes(spec: str) -> dict[str, str]:
    """SHA-256 of every ``file:`` atom's file in ``spec``, by path as written there (empty for none).

    A strategy records them (``meta.workload_files``) so that a workload file
    changed after the solve is told from the one the strategy was made for, and
    the same file under another path is recognised.
    """
    from .spec import file_paths

    if "file:" not in spec:
        return {}
    return {path: file_sha256(path) for path in file_paths(spec)}


def file_sha256(path: str | os.PathLike, length: int | None = None) -> str:
    """SHA-256 of a file's bytes (of its first ``length`` bytes, if given)."""
    h = hashlib.sha256()
    left = math.inf if length is None else length
    with open(path, "rb") as fh:
        while left > 0:
            block = fh.read(int(min(1 << 20, left)))
            if not block:
                break
            h.update(block)
            left -= len(block)
    return h.hexdigest()


#: Start of the whole-file seal (npz archive comment, mtx header line).
SEAL_PREFIX = b"strategy_opt-sha256:"
_SEAL_LENGTH = len(SEAL_PREFIX) + 64
#: Metadata keys that describe one file, not the strategy (dropped when it is written again).
_FILE_KEYS = ("csv_sha256",)


def _seal(digest_of: bytes) -> bytes:
    return SEAL_PREFIX + hashlib.sha256(digest_of).hexdigest().encode()


def _sealed_npz(raw: bytes) -> bytes:
    """The npz archive ``raw`` with the seal as its zip comment (hash of every byte before the comment)."""
    buf = _io.BytesIO(raw)
    with zipfile.ZipFile(buf, "a") as z:
        z.comment = b"0" * _SEAL_LENGTH
    data = buf.getvalue()
    return data[:-_SEAL_LENGTH] + _seal(data[:-_SEAL_LENGTH])


def _sealed_mtx(raw: bytes) -> bytes:
    """The Matrix Market text ``raw`` (banner, metadata comment, ...) with the seal as its third line."""
    banner_end = raw.index(b"\n") + 1
    meta_end = raw.index(b"\n", banner_end) + 1
    return raw[:meta_end] + b"%" + _seal(raw) + b"\n" + raw[meta_end:]


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
            fh.seek(max(0, size - _SEAL_LENGTH))
            tail = fh.read()
        found = tail.startswith(SEAL_PREFIX) and len(tail) == _SEAL_LENGTH
        if found:
            ok = tail[len(SEAL_PREFIX):] == file_sha256(path, size - _SEAL_LENGTH).encode()
    elif suffix == ".mtx":
        raw = path.read_bytes()
        lines = raw.split(b"\n", 3)
        found = len(lines) > 3 and lines[2].startswith(b"%" + SEAL_PREFIX)
        if found:
            unsealed = b"\n".join(lines[:2] + lines[3:])
            ok = lines[2][1:] == _seal(unsealed)
    else:
        found = "csv_sha256" in meta
        ok = found and meta["csv_sha256"] == file_sha256(path) and json_text == json.dumps(meta, sort_keys=True, allow_nan=False) + "\n"
    if found and not ok:
        raise InputError(f"strategy file {path} is corrupted: its bytes do not match the seal recorded when it was written")
    if required and not found:
        raise InputError(f"strategy file {path} is corrupted: format version {version} requires a whole-file seal and it has none")


def _anonymous_file(directory: Path) -> int | None:
    """An unnamed file in ``directory`` (Linux ``O_TMPFILE``), or None where the OS or filesystem has none.

    It has no name until `_publish` links it in, so a process killed at any
    point of the write (SIGKILL included) leaves nothing behind.
    """
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not Path("/proc/self/fd").is_dir():
        return None
    try:
        return os.open(directory, flag | os.O_RDWR, 0o666)  # open(2) applies the umask
    except OSError:  # EOPNOTSUPP, EISDIR, EINVAL ... : fall back to a named temporary file
        return None


def _publish(fd: int, directory: Path, path: Path) -> None:
    """Give the unnamed file ``fd`` the name ``path`` (replacing it): link under a fresh hidden name, then rename."""
    staged = directory / f".{path.name}.{os.urandom(8).hex()}.tmp"  # fresh: linkat refuses an existing name
    fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:  # src_dir_fd makes os.link call linkat(AT_SYMLINK_FOLLOW), which links the file the /proc entry stands for
        os.link(str(fd), staged, src_dir_fd=fds, follow_symlinks=True)
    except OSError:  # a filesystem that makes unnamed files but cannot link them: copy into a named one
        _copy_to_named(fd, staged)
    finally:
        os.close(fds)
    try:
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def _copy_to_named(fd: int, staged: Path) -> None:
    """Copy the unnamed file ``fd`` into the new file ``staged`` (removed again if the copy fails)."""
    out = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        offset = 0
        while block := os.pread(fd, 1 << 20, offset):
            offset += len(block)
            view = memoryview(block)
            while view:  # os.write may take part of a block
                view = view[os.write(out, view):]
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise
    os.close(out)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    Where the filesystem allows (Linux ``O_TMPFILE``) the temporary file has
    no name until it is complete, so even a process killed outright (SIGKILL)
    leaves no file behind; elsewhere it is a hidden ``.NAME.*.tmp`` file, which
    any exception (``KeyboardInterrupt`` and the CLI's SIGTERM handler
    included) removes, and which only SIGKILL can leave. Either way ``path`` is
    never partial: it is untouched or complete.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"output directory does not exist: {directory}")
    if path.is_dir():  # refused before anything is written: a file and its sidecar are written together or not at all
        raise InputError(f"cannot write {path}: Is a directory")
    fd = _anonymous_file(directory)
    if fd is None:
        try:
            named, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise InputError(f"cannot write in {directory}: {exc.strerror}") from None
        os.close(named)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private (0600); the output gets the usual permissions
    else:
        tmp = f"/proc/self/fd/{fd}"
    try:
        yield Path(tmp)
        try:
            if fd is None:
                os.replace(tmp, path)
            else:
                _publish(fd, directory, path)
        except OSError as exc:  # e.g. the target is a directory
            raise InputError(f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        if fd is None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    finally:
        if fd is not None:
            os.close(fd)


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
    metadata (built by hand) goes through `strategy_opt.api.checked_hand_written`.
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
        if strategy.meta_fingerprint is not None and meta_fingerprint(meta) != strategy.meta_fingerprint:
            from .api import checked_hand_written  # edited after it was computed or read: checked like metadata written by hand

            return checked_hand_written(strategy, f"cannot write {path}")
        return strategy
    if meta and "format_version" not in meta:
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


def _meta_for_write(strategy: Strategy, digest: str) -> dict:
    meta = {k: _json_ready(v, k) for k, v in strategy.meta.items() if k not in _FILE_KEYS}
    meta["format_version"] = FILE_FORMAT_VERSION
    meta["content_sha256"] = digest
    meta.setdefault("shape", list(strategy.shape))
    meta.setdefault("strategy_opt_version", _version())
    if meta.get("sensitivity_norm") is None and meta.get("privacy") in ("pure", "approx"):
        meta["sensitivity_norm"] = "l1" if meta["privacy"] == "pure" else "l2"
    if meta.get("created") is None:  # a matrix from elsewhere: created as a strategy file now
        meta["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for key in CONTRACT_META_FIELDS:
        meta.setdefault(key, None)
    meta["written_by_version"] = _version()
    meta["meta_sha256"] = _meta_hash(meta)
    return meta


def _require_write_memory(strategy: Strategy, path: Path, suffix: str) -> None:
    """Refuse up front a strategy whose flat matrix (the files store no Kronecker factors) does not fit.

    A Kronecker strategy or a stack of marginals is expanded to CSR for its
    content hash and the file (about 3 copies of 16 bytes per non-zero); a
    ``.csv`` holds it dense.
    """
    A = strategy.matrix
    if isinstance(A, KroneckerMatrix):
        nnz = math.prod(float(f.nnz if sp.issparse(f) else np.count_nonzero(f)) for f in A.factors)
    elif isinstance(A, MarginalsMatrix):
        nnz = float(len(A.marginals()) * A.shape[1])  # one entry per cell in each marginal
    elif sp.issparse(A):
        nnz = float(A.nnz)
    else:
        return  # already in memory as a dense array
    p, n = strategy.shape
    nbytes = 8.0 * p * n * 2 if suffix == ".csv" else 48.0 * nnz + 8.0 * p
    require_memory(nbytes, f"writing the {p}x{n} strategy ({nnz:.3g} non-zeros in its flat matrix) to {path}",
                   "the strategy files hold the flat matrix; use a smaller domain, a sparser method (identity, hierarchical) or the Python API, "
                   "which keeps a Kronecker product's factors or a stack of marginals' weights")


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
    path = Path(path)
    suffix = _check_format(path)
    if suffix == ".csv":
        _check_sidecar_owner(path)
    _require_write_memory(strategy, path, suffix)
    digest = content_hash(strategy.matrix)  # once: the check of the metadata and the file's record
    strategy = _checked_for_write(strategy, path, digest)
    meta = _meta_for_write(strategy, digest)
    meta_json = json.dumps(meta, sort_keys=True, allow_nan=False)
    if suffix == ".npz":
        buf = _io.BytesIO()
        if strategy.is_sparse:
            M = strategy.sparse()
            M.sort_indices()
            np.savez_compressed(buf, data=M.data, indices=M.indices, indptr=M.indptr, shape=np.asarray(M.shape), format=np.asarray(b"csr"), meta=np.asarray(meta_json))
        else:
            np.savez_compressed(buf, A=np.asarray(strategy.matrix, dtype=float), meta=np.asarray(meta_json))
        with atomic_path(path) as tmp:
            tmp.write_bytes(_sealed_npz(buf.getvalue()))
    elif suffix == ".mtx":
        M = strategy.sparse() if strategy.is_sparse else np.asarray(strategy.matrix, dtype=float)
        buf = _io.BytesIO()
        scipy.io.mmwrite(buf, M, comment=meta_json, precision=17)
        with atomic_path(path) as tmp:
            tmp.write_bytes(_sealed_mtx(buf.getvalue()))
    else:
        A = strategy.dense()
        json_path = path.with_suffix(".json")
        with atomic_path(json_path) as tmp_json, atomic_path(path) as tmp_csv:
            np.savetxt(tmp_csv, A, delimiter=",", fmt="%.17g")
            meta["csv_sha256"] = file_sha256(tmp_csv)
            meta["meta_sha256"] = _meta_hash(meta)
            tmp_json.write_text(json.dumps(meta, sort_keys=True, allow_nan=False) + "\n")
    return path


def _check_sidecar_owner(path: Path) -> None:
    """Refuse a ``.csv`` strategy whose ``.json`` sidecar is another CSV's (``s.CSV`` beside ``s.csv``).

    The sidecar is the name with ``.json`` for its suffix, whatever the case of
    ``.csv``: on a case-sensitive file system two CSV files would share it,
    and writing one would make the other's seal fail.
    """
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


def _parse_meta(text: str, path: Path) -> dict:
    try:
        meta = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"strategy file {path}: metadata is not valid JSON ({getattr(exc, 'msg', exc)}); the file is corrupted") from None
    if not isinstance(meta, dict):
        raise InputError(f"strategy file {path}: metadata must be a JSON object; the file is corrupted")
    return meta


def _require_array_memory(shape, itemsize: int, path: Path, what: str) -> None:
    """Refuse an array whose header promises more bytes than are available (before loading it)."""
    entries = math.prod(int(s) for s in shape)
    # the array itself, its float64 copy, and one sparse/working copy
    require_memory(float(entries) * (itemsize + 16), f"{what} {path} (shape {tuple(shape)})", "it is too large to load")


def _npy_header(fh) -> tuple[tuple, np.dtype]:
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    return shape, dtype


def npy_shape(path: str | os.PathLike) -> tuple[int, ...] | None:
    """The array shape a ``.npy`` file's header records; None for another format or an unreadable header."""
    path = Path(path)
    if path.suffix.lower() != ".npy":
        return None
    try:
        with open(path, "rb") as fh:
            return tuple(int(d) for d in _npy_header(fh)[0])
    except _READ_ERRORS:
        return None


def read_npy(path: Path, what: str) -> np.ndarray:
    """A plain numeric .npy array, its header checked (dtype, size) before loading; never unpickled.

    Raises `InputError` naming the file and ``what`` it was meant to hold.
    """
    try:
        with open(path, "rb") as fh:
            shape, dtype = _npy_header(fh)
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: not a valid .npy file ({exc})") from None
    _check_dtype(dtype, path, what)
    _require_array_memory(shape, dtype.itemsize, path, what)
    try:
        return np.load(path, allow_pickle=False)
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: {exc} (corrupted, truncated, or an object/pickled array)") from None


def missing_file(path: Path, what: str) -> InputError:
    """The error for a ``what`` file (workload, data, ...) that is not a regular file: missing, or a directory."""
    if path.is_dir():
        return InputError(f"{path} is a directory, not a {what} file")
    return InputError(f"{what} file not found: {path}")


def _open_npz(path: Path):
    try:
        is_zip = zipfile.is_zipfile(path)
        if not is_zip:  # np.load would take any other file for a pickle and say so: look at its first bytes
            with open(path, "rb") as fh:
                head = fh.read(len(np.lib.format.MAGIC_PREFIX))
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not is_zip:
        if head == np.lib.format.MAGIC_PREFIX:
            why = "a .npy array saved under a .npz name; rename it to .npy"
        elif head[:1] == b"\x80":  # pickle protocol 2+
            why = "a pickled file; strategy_opt never unpickles files, save plain numbers with np.savez"
        else:
            why = "not a .npz archive (not a zip file)"
        raise InputError(f"cannot read {path}: {why}")
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: {exc} (corrupted, truncated, or an object/pickled array)") from None


def _npz_array(z, key: str, path: Path, what: str) -> np.ndarray:
    """Member ``key`` of an open .npz, its header checked for dtype and size before loading."""
    name = key + ".npy" if key + ".npy" in z.zip.namelist() else key
    with z.zip.open(name) as fh:
        shape, dtype = _npy_header(fh)
    _check_dtype(dtype, path, f"{what} (key {key!r})")
    _require_array_memory(shape, dtype.itemsize, path, what)
    return z[key]


def _sparse_from_npz(z, path: Path, what: str) -> sp.csr_matrix:
    fmt = z["format"].item()
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    shape = tuple(int(s) for s in np.asarray(z["shape"]).ravel())
    if len(shape) != 2 or min(shape) < 0:
        raise InputError(f"{path}: malformed sparse matrix shape {shape}")
    if fmt not in ("csr", "csc", "coo"):
        raise InputError(f"{path}: unsupported sparse format {fmt!r} (use csr, csc or coo)")
    # CSR index pointers of the larger dimension, plus data/index copies
    require_memory(16.0 * (max(shape) + 1), f"{what} {path} (shape {shape})", "it is too large to load")
    if fmt == "coo":
        data, row, col = (_npz_array(z, k, path, what) for k in ("data", "row", "col"))
        return sp.coo_matrix((data, (row, col)), shape=shape).tocsr()
    data, indices, indptr = (_npz_array(z, k, path, what) for k in ("data", "indices", "indptr"))
    major, minor = shape if fmt == "csr" else shape[::-1]
    _check_compressed(data, indices, indptr, major, minor, path, f"{what} ({fmt})")
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((data, indices, indptr), shape=shape).tocsr()


def _check_compressed(data, indices, indptr, major: int, minor: int, path: Path, what: str) -> None:
    """Refuse compressed sparse arrays that do not describe a matrix of this shape.

    SciPy checks these lazily or not at all: an index outside the shape was
    read out of bounds (garbage answers, or a crash of the process).
    """
    for key, a in (("data", data), ("indices", indices), ("indptr", indptr)):
        if a.ndim != 1:
            raise InputError(f"{path}: {what}: {key!r} must be 1-D, got shape {a.shape}")
    for key, a in (("indices", indices), ("indptr", indptr)):
        if a.dtype.kind not in "iu":
            raise InputError(f"{path}: {what}: {key!r} must hold integers, got dtype {a.dtype}")
    if indptr.size != major + 1:
        raise InputError(f"{path}: {what}: 'indptr' has {indptr.size} entries, the shape needs {major + 1}")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise InputError(f"{path}: {what}: 'indptr' must start at 0 and never decrease")
    if not indptr[-1] == indices.size == data.size:
        raise InputError(
            f"{path}: {what}: 'indptr' ends at {indptr[-1]} but there are {indices.size} indices and {data.size} values"
        )
    if indices.size and (indices.min() < 0 or indices.max() >= minor):
        raise InputError(f"{path}: {what}: an index lies outside [0, {minor}) (found {indices.min()}..{indices.max()})")


def _check_dtype(dtype: np.dtype, path: Path, what: str) -> None:
    if dtype.hasobject:
        raise InputError(f"{path}: {what} is an object (pickled) array; strategy_opt never unpickles files, save plain numbers")
    if dtype.kind not in _NUMERIC_KINDS:
        raise InputError(f"{path}: {what} must hold real numbers (bool, int or float), got dtype {dtype}")


def _validate_matrix(M, path: Path, what: str):
    if sp.issparse(M):
        _check_dtype(M.dtype, path, what)
        data = M.data
    else:
        M = np.asarray(M)
        _check_dtype(M.dtype, path, what)
        if M.ndim != 2:
            raise InputError(f"{path}: {what} must be a 2-D matrix, got shape {M.shape}")
        data = M
    if M.shape[0] == 0 or M.shape[1] == 0:
        if path.suffix.lower() == ".csv" and M.size == 0:
            raise InputError(f"{path}: {what} is empty (the file holds no numbers)")
        raise InputError(f"{path}: {what} is empty (shape {M.shape})")
    if not np.all(np.isfinite(data)):
        raise InputError(f"{path}: {what} contains NaN or infinite values")
    return M.astype(float) if not sp.issparse(M) else sp.csr_matrix(M, dtype=float)


_MTX_SYMMETRY = ("general", "symmetric", "skew-symmetric")


def _mtx_banner(path: Path, first: bytes) -> tuple[str, str, str]:
    tokens = first.decode("ascii", "replace").lower().split()
    if len(tokens) != 5 or tokens[:2] != ["%%matrixmarket", "matrix"]:
        raise InputError(f"cannot read {path}: not a Matrix Market matrix file (banner {first[:60]!r})")
    layout, field, symmetry = tokens[2:]
    if layout not in ("coordinate", "array") or field not in ("real", "integer", "pattern") or symmetry not in _MTX_SYMMETRY:
        raise InputError(
            f"cannot read {path}: unsupported Matrix Market type {layout} {field} {symmetry} "
            "(use coordinate or array; real, integer or pattern; general, symmetric or skew-symmetric)"
        )
    if layout == "array" and field == "pattern":
        raise InputError(f"cannot read {path}: a Matrix Market array cannot be 'pattern'")
    return layout, field, symmetry


def _mtx_coordinate(vals: np.ndarray, shape, nnz: int, symmetry: str, path: Path) -> sp.csr_matrix:
    if vals.shape[0] != nnz:
        raise InputError(f"cannot read {path}: the size line declares {nnz} entries but the file has {vals.shape[0]}")
    ij = vals[:, :2]
    if not np.all(ij == np.round(ij)) or ij.size and (ij.min() < 1 or ij[:, 0].max() > shape[0] or ij[:, 1].max() > shape[1]):
        raise InputError(f"cannot read {path}: Matrix Market indices must be integers within the shape {shape}")
    i, j = ij[:, 0].astype(np.int64) - 1, ij[:, 1].astype(np.int64) - 1
    v = vals[:, 2] if vals.shape[1] == 3 else np.ones(nnz)
    if symmetry != "general":
        if np.any(i < j) or (symmetry == "skew-symmetric" and np.any(i == j)):
            raise InputError(f"cannot read {path}: a {symmetry} Matrix Market file lists only the lower triangle")
        off = i != j
        sign = -1.0 if symmetry == "skew-symmetric" else 1.0
        i, j, v = np.concatenate([i, j[off]]), np.concatenate([j, i[off]]), np.concatenate([v, sign * v[off]])
    return sp.coo_matrix((v, (i, j)), shape=shape).tocsr()


def _mtx_array(vals: np.ndarray, shape, symmetry: str, path: Path) -> np.ndarray:
    rows, cols = shape
    values = vals.ravel()
    if symmetry == "general":
        if values.size != rows * cols:
            raise InputError(f"cannot read {path}: a {rows}x{cols} Matrix Market array needs {rows * cols} values, got {values.size}")
        return values.reshape(cols, rows).T.copy()
    if rows != cols:
        raise InputError(f"cannot read {path}: a {symmetry} Matrix Market array must be square, got {shape}")
    # the lower triangle in column-major order = the upper triangle of the transpose in row-major order
    c, r = np.triu_indices(rows, 0 if symmetry == "symmetric" else 1)
    if values.size != r.size:
        raise InputError(f"cannot read {path}: a {rows}x{rows} {symmetry} Matrix Market array needs {r.size} values, got {values.size}")
    A = np.zeros(shape)
    A[r, c] = values
    A[c, r] = values if symmetry == "symmetric" else -values
    return A


def _read_mtx(path: Path, what: str):
    """Parse a Matrix Market file with NumPy (not SciPy's C++ reader).

    SciPy's reader crashes the whole process (segmentation fault) on some
    corrupted files, e.g. one whose final newline is replaced by a space, so
    strategy_opt parses the format itself: banner, comments, size line, then
    the entries with `numpy.loadtxt`, validating counts and index ranges.
    Sizes are checked against the available memory before the entries are read.
    """
    require_memory(4.0 * path.stat().st_size, f"{what} {path}", "it is too large to load")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    bad = re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", data)
    if bad:
        raise InputError(f"cannot read {path}: control byte {bad.group()!r} at offset {bad.start()}; not a Matrix Market text file")
    lines = data.split(b"\n")
    layout, field, symmetry = _mtx_banner(path, lines[0])
    k = next((n for n in range(1, len(lines)) if lines[n].strip() and not lines[n].startswith(b"%")), None)
    if k is None:
        raise InputError(f"cannot read {path}: Matrix Market file without a size line")
    try:
        dims = [int(t) for t in lines[k].split()]
    except ValueError:
        raise InputError(f"cannot read {path}: malformed Matrix Market size line {lines[k][:80]!r}") from None
    if len(dims) != (3 if layout == "coordinate" else 2) or min(dims) < 0:
        raise InputError(f"cannot read {path}: malformed Matrix Market size line {lines[k][:80]!r}")
    shape = (dims[0], dims[1])
    entries = dims[2] if layout == "coordinate" else dims[0] * dims[1]
    require_memory(48.0 * entries + 16.0 * (max(shape) + 1), f"{what} {path} (shape {shape})", "it is too large to load")
    width = {"coordinate": 3 if field != "pattern" else 2, "array": 1}[layout]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": an empty matrix, refused later
            vals = np.loadtxt(_io.BytesIO(b"\n".join(lines[k + 1 :])), comments="%", ndmin=2, dtype=float)
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: malformed Matrix Market entries ({' '.join(str(exc).split())[:200]})") from None
    if vals.size == 0:
        vals = vals.reshape(0, width)
    if vals.shape[1] != width:
        raise InputError(f"cannot read {path}: Matrix Market {layout} {field} entries have {width} fields per line, got {vals.shape[1]}")
    if not np.all(np.isfinite(vals)):
        raise InputError(f"{path}: {what} contains NaN or infinite values")
    if layout == "coordinate":
        return _mtx_coordinate(vals, shape, dims[2], symmetry, path)
    return _mtx_array(vals, shape, symmetry, path)


def _read_csv_matrix(path: Path, what: str, ndmin: int = 2) -> np.ndarray:
    # loadtxt holds at most one float64 per two bytes of text, plus a copy
    require_memory(8.0 * path.stat().st_size, f"{what} {path}", "it is too large to load")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": refused below as empty
            return np.loadtxt(path, delimiter=",", ndmin=ndmin, encoding="utf-8-sig")  # a byte-order mark is not a number
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: malformed CSV ({' '.join(str(exc).split())[:200]})") from None


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
            ok = _meta_hash(meta) == meta["meta_sha256"]
        except ValueError:  # a number corrupted into one that overflows to infinity
            ok = False
        if not ok:
            raise InputError(f"strategy file {path} is corrupted: its metadata does not match the hash recorded when it was written")
    if "content_sha256" in meta and content_hash(A) != meta["content_sha256"]:
        raise InputError(f"strategy file {path} is corrupted: its matrix does not match the hash recorded when it was written")


def check_writable(path: str | os.PathLike) -> None:
    """Refuse an output path that cannot be written (missing directory, a directory), before any work is done.

    The path is checked as typed: ``o.npy/`` or ``o.npy/.`` names a directory,
    not a file, although `pathlib.Path` drops the trailing separator.
    """
    text = os.fspath(path)
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    last = text
    for sep in seps:
        last = last.rsplit(sep, 1)[-1]
    if text.endswith(seps) or last in (".", ".."):
        raise InputError(f"--out {text!r} names a directory (it ends in {text[-1] if text.endswith(seps) else last!r}), not a file; give a file name")
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"output directory does not exist: {parent}")
    if out.is_dir():
        raise InputError(f"--out {str(path)!r} is a directory; give a file name")


def check_answers_path(path: str | os.PathLike, inputs=()) -> None:
    """Refuse an answers file name (``.npy``/``.csv``) that cannot be written or that names one of ``inputs``."""
    if Path(path).suffix.lower() not in (".npy", ".csv"):
        raise InputError(f"--out must end in .npy or .csv, got {str(path)!r}")
    check_writable(path)
    check_not_input(path, inputs)


def check_not_input(path: str | os.PathLike, inputs=()) -> None:
    """Refuse an output path that names one of the command's input files (``None`` entries ignored)."""
    out = Path(path).resolve()
    if any(p is not None and Path(p).resolve() == out for p in inputs):
        raise InputError(f"--out {str(path)!r} is one of the input files; choose another name")


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
    path = Path(path)
    suffix = _check_format(path)
    if not path.is_file():
        raise missing_file(path, "strategy")
    what = "strategy"
    if suffix == ".npz":
        with _open_npz(path) as z:
            try:
                keys = set(z.files)
                if any(info.comment for info in z.zip.infolist()):  # numpy never writes entry comments
                    raise InputError(f"strategy file {path} is corrupted: its zip directory is damaged")
                extra = keys - {"A", "meta"} - _SPARSE_KEYS - _COO_KEYS
                if extra and "A" not in keys and {"format", "shape"} <= keys:
                    _sparse_from_npz(z, path, what)  # names an unsupported format (dia, bsr, ...)
                if extra or ("A" in keys and keys & (_SPARSE_KEYS | _COO_KEYS)):
                    raise InputError(f"strategy file {path} has unexpected members {sorted(keys)}; it is corrupted or not a strategy file")
                meta = _parse_meta(_npz_meta_text(z, path), path) if "meta" in keys else {}
                if "A" in keys:
                    A = _npz_array(z, "A", path, what)
                elif _SPARSE_KEYS <= keys or _COO_KEYS <= keys:
                    A = _sparse_from_npz(z, path, what)
                else:
                    raise InputError(f"{path}: no strategy matrix (expected key 'A' or the scipy.sparse layout)")
            except InputError:
                raise
            except _READ_ERRORS as exc:
                raise _unreadable(path, exc) from None
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
        A = _read_mtx(path, what)
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
        A = _read_csv_matrix(path, what)
    A = _validate_matrix(A, path, what)
    if verify:
        if suffix == ".npz":
            _check_seal(path, suffix, meta)
        _verify_hashes(A, meta, path)
    _check_claims(A, meta, path)
    if "kronecker_factor_shapes" in meta:  # its error analysis per factor, as when it was solved
        A = kronecker_factors(A, meta["kronecker_factor_shapes"]) or A
    elif "marginal_weights" in meta:  # per eigenspace of the marginal algebra, as when it was solved
        A = MarginalsMatrix.from_meta(A, meta) or A
    return Strategy(A, meta, meta_fingerprint=meta_fingerprint(meta))


_NORM_OF = {"pure": "l1", "approx": "l2"}


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
        shape, dtype = _npy_header(fh)
    if dtype.kind not in "US" or shape != ():
        raise InputError(f"{path}: 'meta' must be a JSON string, got dtype {dtype} shape {shape}")
    _require_array_memory((1,), dtype.itemsize, path, "strategy metadata")
    value = z["meta"].item()
    return value.decode("utf-8") if isinstance(value, bytes) else value


def read_workload_file(path: str | os.PathLike):
    """Read a workload matrix: ``.npy``, ``.npz`` (dense ``W`` or scipy sparse), ``.mtx``, ``.csv``.

    All-zero columns are allowed (cells no query touches); an all-zero matrix is refused.
    """
    from .workload import ExplicitWorkload

    path = Path(path).expanduser()  # '~' as a shell would (a quoted flag, a problem file)
    try:
        found = path.is_file()
    except (OSError, ValueError) as exc:  # e.g. a NUL byte or an over-long name
        raise InputError(f"bad workload file name {str(path)!r}: {exc}") from None
    if not found:
        raise missing_file(path, "workload")
    what = "workload matrix"
    suffix = path.suffix.lower()
    if suffix == ".npy":
        W = read_npy(path, what)
    elif suffix == ".npz":
        with _open_npz(path) as z:
            try:
                if "W" in z.files:
                    W = _npz_array(z, "W", path, what)
                elif _SPARSE_KEYS <= set(z.files) or _COO_KEYS <= set(z.files) or {"format", "shape"} <= set(z.files):
                    W = _sparse_from_npz(z, path, what)  # it names an unsupported format (dia, bsr, ...) itself
                else:
                    raise InputError(f"{path}: expected a dense array under key 'W' or a scipy.sparse matrix")
            except InputError:
                raise
            except _READ_ERRORS as exc:
                raise _unreadable(path, exc) from None
    elif suffix == ".mtx":
        W = _read_mtx(path, what)
    elif suffix == ".csv":
        W = _read_csv_matrix(path, what)
    else:
        raise InputError(f"unknown workload file format {path.suffix!r}; use .npy, .npz, .mtx or .csv")
    W = _validate_matrix(W, path, what)
    if (W.count_nonzero() if sp.issparse(W) else np.count_nonzero(W)) == 0:
        raise InputError(f"{path}: the workload matrix is all zeros (no query counts anything)")
    from .spec import file_spec

    return ExplicitWorkload(W, spec=file_spec(str(path)))
