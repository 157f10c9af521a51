"""Reading numeric matrix files safely: ``.npy``, ``.npz`` (dense or scipy sparse), ``.mtx``, ``.csv``.

Used for workload matrices (`read_workload_file`), strategy files (`strategy_opt.io`),
histograms (`strategy_opt.histograms`) and option files. Nothing is ever unpickled
(``allow_pickle=False``); object, string, complex and date arrays are refused; NaN
and infinities are refused (`validate_matrix`); sizes are read from file headers
first, and files that would need more memory than is available are refused before
loading (`strategy_opt.resources.require_memory`). Every parser failure becomes a
one-line `InputError` naming the file.

Workload matrices may have all-zero columns (cells no query touches: harmless
for the error, and a strategy need not measure them), but not be all zero.
"""

from __future__ import annotations

import io as _io
import math
import os
import re
import struct
import tokenize
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .exceptions import InputError
from .resources import require_memory

__all__ = ["read_workload_file", "read_npy", "npy_shape", "npy_header", "missing_file", "open_npz", "npz_array", "sparse_from_npz", "read_mtx", "read_csv_matrix", "validate_matrix", "require_array_memory", "unreadable", "READ_ERRORS", "SPARSE_KEYS", "COO_KEYS", "DIA_KEYS"]


#: Exceptions that parsing a malformed or corrupted file can raise (NumPy, zipfile,
#: zlib, SciPy's Matrix Market reader); all are turned into `InputError`.
READ_ERRORS = (
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


def unreadable(path: Path, exc: BaseException) -> InputError:
    """The one-line error for a file whose parser failed (never an object repr such as NumPy's header ``<ast.Name ...>``).

    Parameters
    ----------
    path : Path
        The file being read (named in the message).
    exc : BaseException
        What the parser raised; its text is kept (whitespace collapsed, at most 200 characters) unless it is empty
        or holds an object repr (``" at 0x"``), which becomes "damaged array header (<exception type>)".

    Returns
    -------
    InputError
        The error to raise (it is returned, not raised).

    Examples
    --------
    >>> print(unreadable(Path("w.npz"), KeyError("W")))
    cannot read w.npz: 'W' (corrupted or truncated file)
    >>> print(unreadable(Path("w.npz"), ValueError("<ast.Name object at 0x7f00>")))
    cannot read w.npz: damaged array header (ValueError) (corrupted or truncated file)
    """
    text = " ".join(str(exc).split())
    if not text or " at 0x" in text:
        text = f"damaged array header ({type(exc).__name__})"
    return InputError(f"cannot read {path}: {text[:200]} (corrupted or truncated file)")


#: Members of a ``scipy.sparse.save_npz`` file: CSR/CSC/BSR layout, and those of the COO and DIA layouts.
SPARSE_KEYS = {"data", "indices", "indptr", "shape", "format"}
COO_KEYS = {"data", "row", "col", "shape", "format"}
DIA_KEYS = {"data", "offsets", "shape", "format"}


#: dtype kinds accepted for matrices and histograms: bool, signed and unsigned int, float.
_NUMERIC_KINDS = "biuf"


def require_array_memory(shape, itemsize: int, path: Path, what: str) -> None:
    """Refuse an array whose header promises more bytes than are available (before loading it).

    Parameters
    ----------
    shape : sequence of int
        The array's shape, as read from its header.
    itemsize : int
        Bytes per entry of its stored dtype; the estimate is ``entries * (itemsize + 16)`` bytes (the array,
        its float64 copy and one working copy).
    path : Path
        The file (named in the message).
    what : str
        What the file holds, e.g. ``"workload matrix"``.

    Returns
    -------
    None

    Raises
    ------
    InputError
        When the estimate exceeds the available memory (`strategy_opt.resources.require_memory`).

    Examples
    --------
    >>> require_array_memory((4, 4), 8, Path("w.npy"), "workload matrix")  # 384 bytes: fine
    >>> require_array_memory((10**9, 10**9), 8, Path("w.npy"), "workload matrix")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: workload matrix w.npy (shape (1000000000, 1000000000)) needs about 24 EB of memory but only ... is available; it is too large to load
    """
    entries = math.prod(int(s) for s in shape)
    # the array itself, its float64 copy, and one sparse/working copy
    require_memory(float(entries) * (itemsize + 16), f"{what} {path} (shape {tuple(shape)})", "it is too large to load")


def npy_header(fh) -> tuple[tuple, np.dtype]:
    """``(shape, dtype)`` from the header of the ``.npy`` stream ``fh`` (format 1.0 or 2.0), read without its data.

    Parameters
    ----------
    fh : binary file object
        Positioned at the start of a ``.npy`` stream (a file, or a member of a ``.npz`` archive); it is left just
        after the header.

    Returns
    -------
    (tuple of int, numpy.dtype)

    Raises
    ------
    ValueError
        When the stream is not a ``.npy`` file (NumPy's error; callers turn it into `InputError`).

    Examples
    --------
    >>> buf = _io.BytesIO()
    >>> np.save(buf, np.eye(3, dtype=np.int32))
    >>> _ = buf.seek(0)
    >>> npy_header(buf)
    ((3, 3), dtype('int32'))
    """
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    return shape, dtype


def npy_shape(path: str | os.PathLike) -> tuple[int, ...] | None:
    """The array shape a ``.npy`` file's header records; None for another format or an unreadable header.

    Parameters
    ----------
    path : str or os.PathLike
        Any file; only a ``.npy`` suffix (any case) is opened.

    Returns
    -------
    tuple of int or None

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> np.save(Path(tmp.name) / "w.npy", np.ones((2, 5)))
    >>> npy_shape(Path(tmp.name) / "w.npy"), npy_shape(Path(tmp.name) / "w.csv"), npy_shape(Path(tmp.name) / "gone.npy")
    ((2, 5), None, None)
    >>> tmp.cleanup()
    """
    path = Path(path)
    if path.suffix.lower() != ".npy":
        return None
    try:
        with open(path, "rb") as fh:
            return tuple(int(d) for d in npy_header(fh)[0])
    except READ_ERRORS:
        return None


def read_npy(path: Path, what: str) -> np.ndarray:
    """A plain numeric .npy array, its header checked (dtype, size) before loading; never unpickled.

    Parameters
    ----------
    path : Path
        The ``.npy`` file.
    what : str
        What it should hold (``"workload matrix"``, ``"histogram"``, ...), named in errors.

    Returns
    -------
    ndarray
        The array as stored (its dtype and shape are not changed; see `validate_matrix`).

    Raises
    ------
    InputError
        Naming the file and ``what`` it was meant to hold: a missing file, a bad header, an object, string,
        complex or date dtype, too little memory, or corrupted data.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> np.save(Path(tmp.name) / "w.npy", np.eye(2, dtype=np.int64))
    >>> read_npy(Path(tmp.name) / "w.npy", "workload matrix")
    array([[1, 0],
           [0, 1]])
    >>> np.save(Path(tmp.name) / "s.npy", np.array([["a", "b"]]))
    >>> read_npy(Path(tmp.name) / "s.npy", "workload matrix")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: .../s.npy: workload matrix must hold real numbers (bool, int or float), got dtype <U1
    >>> tmp.cleanup()
    """
    try:
        with open(path, "rb") as fh:
            shape, dtype = npy_header(fh)
    except FileNotFoundError:
        raise InputError(f"file not found: {path}") from None
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: not a valid .npy file ({exc})") from None
    _check_dtype(dtype, path, what)
    require_array_memory(shape, dtype.itemsize, path, what)
    try:
        return np.load(path, allow_pickle=False)
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: {exc} (corrupted, truncated, or an object/pickled array)") from None


def missing_file(path: Path, what: str) -> InputError:
    """The error for a ``what`` file (workload, data, ...) that is not a regular file: missing, or a directory.

    Parameters
    ----------
    path : Path
        The path that is not a regular file.
    what : str
        The kind of file, e.g. ``"workload"``.

    Returns
    -------
    InputError
        The error to raise (it is returned, not raised).

    Examples
    --------
    >>> print(missing_file(Path("no/such/w.npy"), "workload"))
    workload file not found: no/such/w.npy
    >>> print(missing_file(Path("."), "data"))
    . is a directory, not a data file
    """
    if path.is_dir():
        return InputError(f"{path} is a directory, not a {what} file")
    return InputError(f"{what} file not found: {path}")


def open_npz(path: Path):
    """``np.load`` of a ``.npz`` archive with pickles off; an `InputError` naming what the file is instead
    (a ``.npy`` array, a pickle, a missing or unreadable file) where it is not a zip archive.

    Parameters
    ----------
    path : Path
        The ``.npz`` file.

    Returns
    -------
    numpy.lib.npyio.NpzFile
        The open archive (use it as a context manager).

    Raises
    ------
    InputError
        For a missing or unreadable file, a file that is not a zip archive, or a corrupted archive.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> np.savez(Path(tmp.name) / "w.npz", W=np.eye(2))
    >>> with open_npz(Path(tmp.name) / "w.npz") as z:
    ...     z.files
    ['W']
    >>> np.save(Path(tmp.name) / "w.npy", np.eye(2))
    >>> open_npz(Path(tmp.name) / "w.npy")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: cannot read .../w.npy: a .npy array saved under a .npz name; rename it to .npy
    >>> tmp.cleanup()
    """
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
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {path}: {exc} (corrupted, truncated, or an object/pickled array)") from None


def npz_array(z, key: str, path: Path, what: str) -> np.ndarray:
    """Member ``key`` of an open .npz, its header checked for dtype and size before loading.

    Parameters
    ----------
    z : numpy.lib.npyio.NpzFile
        An archive opened with `open_npz`.
    key : str
        The member's name, with or without its ``.npy`` suffix in the archive.
    path : Path
        The archive's file (named in errors).
    what : str
        What the member holds, named in errors.

    Returns
    -------
    ndarray

    Raises
    ------
    InputError
        For a non-numeric dtype or too little memory.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "w.npz"
    >>> np.savez(path, W=[[1, 1], [0, 1]])
    >>> with open_npz(path) as z:
    ...     npz_array(z, "W", path, "workload matrix")
    array([[1, 1],
           [0, 1]])
    >>> tmp.cleanup()
    """
    name = key + ".npy" if key + ".npy" in z.zip.namelist() else key
    with z.zip.open(name) as fh:
        shape, dtype = npy_header(fh)
    _check_dtype(dtype, path, f"{what} (key {key!r})")
    require_array_memory(shape, dtype.itemsize, path, what)
    return z[key]


def sparse_from_npz(z, path: Path, what: str) -> sp.csr_matrix:
    """The CSR matrix stored in the open archive ``z`` in `scipy.sparse.save_npz`'s layout (csr, csc, coo, bsr or dia),
    its shape, format and index arrays checked (`InputError` naming ``path`` and ``what``).

    Parameters
    ----------
    z : numpy.lib.npyio.NpzFile
        An archive opened with `open_npz`, with members ``format``, ``shape``, ``data`` and
        ``indices``/``indptr`` (csr, csc, bsr), ``row``/``col`` (coo) or ``offsets`` (dia).
    path : Path
        The archive's file (named in errors).
    what : str
        What the matrix holds, named in errors.

    Returns
    -------
    scipy.sparse.csr_matrix
        With the stored dtype (`validate_matrix` converts it to float).

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "w.npz"
    >>> sp.save_npz(path, sp.csc_matrix(np.array([[1.0, 0.0], [0.0, 2.0]])))
    >>> with open_npz(path) as z:
    ...     sparse_from_npz(z, path, "workload matrix").toarray()
    array([[1., 0.],
           [0., 2.]])
    >>> tmp.cleanup()
    """
    fmt = z["format"].item()
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    shape = tuple(int(s) for s in np.asarray(z["shape"]).ravel())
    if len(shape) != 2 or min(shape) < 0:
        raise InputError(f"{path}: malformed sparse matrix shape {shape}")
    if fmt not in ("csr", "csc", "coo", "bsr", "dia"):
        raise InputError(f"{path}: unsupported sparse format {fmt!r} (use csr, csc, coo, bsr or dia)")
    # CSR index pointers of the larger dimension, plus data/index copies
    require_memory(16.0 * (max(shape) + 1), f"{what} {path} (shape {shape})", "it is too large to load")
    if fmt == "coo":
        data, row, col = (npz_array(z, k, path, what) for k in ("data", "row", "col"))
        return sp.coo_matrix((data, (row, col)), shape=shape).tocsr()
    if fmt == "dia":
        return _dia_to_csr(npz_array(z, "data", path, what), npz_array(z, "offsets", path, what), shape, path, what)
    data, indices, indptr = (npz_array(z, k, path, what) for k in ("data", "indices", "indptr"))
    if fmt == "bsr":
        return _bsr_to_csr(data, indices, indptr, shape, path, what)
    major, minor = shape if fmt == "csr" else shape[::-1]
    _check_compressed(data, indices, indptr, major, minor, path, f"{what} ({fmt})")
    cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    return cls((data, indices, indptr), shape=shape).tocsr()


def _dia_to_csr(data, offsets, shape: tuple[int, int], path: Path, what: str) -> sp.csr_matrix:
    """A DIA matrix's arrays (``data`` k x L, ``offsets`` of k distinct integers) checked and converted to CSR."""
    if data.ndim != 2 or offsets.ndim != 1 or data.shape[0] != offsets.size:
        raise InputError(f"{path}: {what} (dia): 'data' must be k x L for k 'offsets', got shapes {data.shape} and {offsets.shape}")
    if offsets.dtype.kind not in "iu" or np.unique(offsets).size != offsets.size:
        raise InputError(f"{path}: {what} (dia): 'offsets' must be distinct integers")
    if offsets.size and (offsets.min() <= -shape[0] or offsets.max() >= shape[1]):  # SciPy would wrap them to 32 bits or drop them
        raise InputError(f"{path}: {what} (dia): an offset lies outside ({-shape[0]}, {shape[1]}) (found {offsets.min()}..{offsets.max()})")
    if data.shape[1] > shape[1]:
        raise InputError(f"{path}: {what} (dia): 'data' has {data.shape[1]} columns, the shape has {shape[1]}")
    return sp.dia_matrix((data, offsets), shape=shape).tocsr()


def _bsr_to_csr(data, indices, indptr, shape: tuple[int, int], path: Path, what: str) -> sp.csr_matrix:
    """A BSR matrix's arrays (``data`` of R x C blocks, block ``indices``/``indptr``) checked and converted to CSR."""
    if data.ndim != 3 or min(data.shape[1:]) < 1 or shape[0] % data.shape[1] or shape[1] % data.shape[2]:
        raise InputError(f"{path}: {what} (bsr): 'data' must hold R x C blocks that tile the shape {shape}, got shape {data.shape}")
    R, C = data.shape[1:]
    _check_compressed(np.empty(data.shape[0]), indices, indptr, shape[0] // R, shape[1] // C, path, f"{what} (bsr)")
    return sp.bsr_matrix((data, indices, indptr), shape=shape).tocsr()


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


def validate_matrix(M, path: Path, what: str):
    """``M`` (dense or sparse) checked as a matrix read from ``path``: real numeric entries, 2-D,
    non-empty and finite; `InputError` naming the file and ``what`` otherwise.

    Parameters
    ----------
    M : array_like or scipy.sparse matrix
        The matrix as read.
    path : Path
        The file it came from (named in errors; a ``.csv`` suffix gives a clearer message for an empty file).
    what : str
        What it holds, named in errors.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix
        ``M`` as float64: a dense array for dense input, a CSR matrix for sparse input.

    Examples
    --------
    >>> validate_matrix([[1, 2], [3, 4]], Path("w.csv"), "workload matrix")
    array([[1., 2.],
           [3., 4.]])
    >>> validate_matrix([[1.0, np.nan]], Path("w.csv"), "workload matrix")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: w.csv: workload matrix contains NaN or infinite values
    """
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


def read_mtx(path: Path, what: str):
    r"""Parse a Matrix Market file with NumPy (not SciPy's C++ reader).

    SciPy's reader crashes the whole process (segmentation fault) on some
    corrupted files, e.g. one whose final newline is replaced by a space, so
    strategy_opt parses the format itself: banner, comments, size line, then
    the entries with `numpy.loadtxt`, validating counts and index ranges.
    Sizes are checked against the available memory before the entries are read.

    Parameters
    ----------
    path : Path
        The ``.mtx`` file: ``coordinate`` or ``array`` layout; ``real``, ``integer`` or ``pattern`` field
        (pattern entries are 1); ``general``, ``symmetric`` or ``skew-symmetric`` symmetry (the lower triangle
        is stored and mirrored).
    what : str
        What it holds, named in errors.

    Returns
    -------
    scipy.sparse.csr_matrix or ndarray
        A CSR matrix for the coordinate layout, a dense float array for the array layout.

    Raises
    ------
    InputError
        For any malformed, unsupported or oversized file.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "w.mtx"
    >>> _ = path.write_text("%%MatrixMarket matrix coordinate real symmetric\n% a comment\n2 2 2\n1 1 1.5\n2 1 3\n")
    >>> read_mtx(path, "workload matrix").toarray()  # entry (2, 1) is mirrored to (1, 2)
    array([[1.5, 3. ],
           [3. , 0. ]])
    >>> tmp.cleanup()
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
    # one entry per line (a symmetric array stores its lower triangle): an impossible size line is refused as such, not as too large to load
    stored = entries if layout == "coordinate" or symmetry == "general" else dims[0] * (dims[0] + (1 if symmetry != "skew-symmetric" else -1)) // 2
    if stored > len(lines) - k - 1 and stored > (available := sum(1 for line in lines[k + 1 :] if line.strip())):
        raise InputError(f"cannot read {path}: the size line declares {stored:,} entries but the file has {available:,} non-blank lines after it")
    # entries and their conversions, and index arrays (COO to CSR, int64) of the larger dimension in several copies
    require_memory(48.0 * entries + 48.0 * (max(shape) + 1), f"{what} {path} (shape {shape})", "it is too large to load")
    width = {"coordinate": 3 if field != "pattern" else 2, "array": 1}[layout]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": an empty matrix, refused later
            vals = np.loadtxt(_io.BytesIO(b"\n".join(lines[k + 1 :])), comments="%", ndmin=2, dtype=float)
    except READ_ERRORS as exc:
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


def read_csv_matrix(path: Path, what: str, ndmin: int = 2) -> np.ndarray:
    r"""The numbers of a comma-separated file (no header; a byte-order mark allowed), after a memory check;
    `InputError` for ragged or non-numeric lines.

    Parameters
    ----------
    path : Path
        The ``.csv`` file.
    what : str
        What it holds, named in the memory error.
    ndmin : int, default 2
        Passed to `numpy.loadtxt`: the minimum number of dimensions of the result.

    Returns
    -------
    ndarray of float

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "w.csv"
    >>> _ = path.write_text("1,1,0\n0,1,1\n")
    >>> read_csv_matrix(path, "workload matrix")
    array([[1., 1., 0.],
           [0., 1., 1.]])
    >>> _ = path.write_text("1,1,0\n0,1\n")
    >>> read_csv_matrix(path, "workload matrix")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: cannot read .../w.csv: malformed CSV (the number of columns changed from 3 to 2 at row 2); every line needs the same number of comma-separated numbers
    >>> tmp.cleanup()
    """
    # loadtxt holds at most one float64 per two bytes of text, plus a copy
    require_memory(8.0 * path.stat().st_size, f"{what} {path}", "it is too large to load")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": refused below as empty
            return np.loadtxt(path, delimiter=",", ndmin=ndmin, encoding="utf-8-sig")  # a byte-order mark is not a number
    except READ_ERRORS as exc:
        reason = re.sub(r"; use `usecols`.*", "", " ".join(str(exc).split()))  # numpy's advice names an argument users do not have
        raise InputError(f"cannot read {path}: malformed CSV ({reason[:200]}); every line needs the same number of comma-separated numbers") from None


def read_workload_file(path: str | os.PathLike):
    r"""Read a workload matrix: ``.npy``, ``.npz`` (dense ``W`` or scipy sparse), ``.mtx``, ``.csv``.

    All-zero columns are allowed (cells no query touches); an all-zero matrix is refused.

    Parameters
    ----------
    path : str or os.PathLike
        The file; ``~`` is expanded. Its suffix (any case) chooses the format; a ``.npz`` holds either a dense
        array under key ``W`` or a `scipy.sparse.save_npz` matrix.

    Returns
    -------
    ExplicitWorkload
        With float64 entries and the spec ``file:<path>``.

    Raises
    ------
    InputError
        For a missing file, an unknown suffix, a malformed, non-numeric, non-finite, empty or all-zero matrix,
        or one too large for the available memory.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "w.csv"
    >>> _ = path.write_text("1,1,0\n0,1,1\n")
    >>> W = read_workload_file(path)
    >>> W.shape, W.spec == f"file:{path}"
    ((2, 3), True)
    >>> _ = path.write_text("0,0\n0,0\n")
    >>> read_workload_file(path)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: .../w.csv: the workload matrix is all zeros (no query counts anything)
    >>> tmp.cleanup()
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
        with open_npz(path) as z:
            try:
                if "W" in z.files:
                    W = npz_array(z, "W", path, what)
                elif SPARSE_KEYS <= set(z.files) or COO_KEYS <= set(z.files) or DIA_KEYS <= set(z.files) or {"format", "shape"} <= set(z.files):
                    W = sparse_from_npz(z, path, what)  # it names an unsupported format (dia, bsr, ...) itself
                else:
                    raise InputError(f"{path}: expected a dense array under key 'W' or a scipy.sparse matrix")
            except InputError:
                raise
            except READ_ERRORS as exc:
                raise unreadable(path, exc) from None
    elif suffix == ".mtx":
        W = read_mtx(path, what)
    elif suffix == ".csv":
        W = read_csv_matrix(path, what)
    else:
        raise InputError(f"unknown workload file format {path.suffix!r}; use .npy, .npz, .mtx or .csv")
    W = validate_matrix(W, path, what)
    if (W.count_nonzero() if sp.issparse(W) else np.count_nonzero(W)) == 0:
        raise InputError(f"{path}: the workload matrix is all zeros (no query counts anything)")
    from .spec import file_spec

    return ExplicitWorkload(W, spec=file_spec(str(path)))
