"""Fingerprints of matrices, metadata and files: what strategy files are checked against.

Strategy metadata carries ``content_sha256`` (`content_hash`: the matrix's shape
and CSR content, so dense and sparse storage agree) and ``meta_sha256``
(`meta_hash`: the metadata as canonical JSON); format version 3 also seals the
whole file (`seal`, `sealed_npz`, `sealed_mtx`: ``SEAL_PREFIX`` and the SHA-256
of the bytes before the seal). `matrix_fingerprint` and `meta_fingerprint`
identify, in memory, the matrix and metadata a strategy's facts were computed
for; `workload_file_hashes` the workload files a strategy was solved on.
"""

from __future__ import annotations

import hashlib
import io as _io
import json
import math
import os
import zipfile

import numpy as np
import scipy.sparse as sp

from .error import STRUCTURED, KroneckerMatrix
from .marginals import MarginalsMatrix

__all__ = ["content_hash", "matrix_fingerprint", "meta_fingerprint", "meta_hash", "workload_file_hashes", "file_sha256", "seal", "sealed_npz", "sealed_mtx", "SEAL_PREFIX", "SEAL_LENGTH"]


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

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix, KroneckerMatrix or MarginalsMatrix
    digest : str, optional
        A's `content_hash`, returned as is for a plain matrix.

    Returns
    -------
    str
        A hex digest; ``"kronecker:<hash>,<hash>,..."`` (one per factor) or ``"marginals:<hash>"``.

    Examples
    --------
    >>> matrix_fingerprint(np.eye(2)) == content_hash(np.eye(2))
    True
    >>> fp = matrix_fingerprint(KroneckerMatrix([np.eye(2), np.ones((1, 3))]))
    >>> fp.startswith("kronecker:"), fp[len("kronecker:"):].split(",") == [content_hash(np.eye(2)), content_hash(np.ones((1, 3)))]
    (True, True)
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
    """SHA-256 of ``meta`` in memory (any values; see `_plain`): tells metadata edited since it was computed or read.

    Parameters
    ----------
    meta : dict
        Metadata; NumPy values count as the numbers or lists they hold, other non-JSON values by ``repr``.

    Returns
    -------
    str
        Hex digest of the canonical JSON (sorted keys).

    Examples
    --------
    >>> meta_fingerprint({"a": np.float64(1.5), "b": np.arange(2)}) == meta_fingerprint({"b": [0, 1], "a": 1.5})
    True
    """
    return _json_sha256(meta, default=_plain)


def meta_hash(meta: dict) -> str:
    """SHA-256 of a file's metadata without its own hash (JSON values only; NaN and infinities refused).

    Parameters
    ----------
    meta : dict
        Metadata; its ``meta_sha256`` key, if any, is left out.

    Returns
    -------
    str
        Hex digest of the canonical JSON (sorted keys, no blanks).

    Raises
    ------
    ValueError
        For NaN or an infinity; TypeError for a value JSON cannot write.

    Examples
    --------
    >>> meta_hash({"b": 2, "a": 1, "meta_sha256": "old"}) == hashlib.sha256(b'{"a":1,"b":2}').hexdigest()
    True
    """
    return _json_sha256({k: v for k, v in meta.items() if k != "meta_sha256"}, allow_nan=False)


def workload_file_hashes(spec: str) -> dict[str, str]:
    r"""SHA-256 of every ``file:`` atom's file in ``spec``, by path as written there (empty for none).

    A strategy records them (``meta.workload_files``) so that a workload file
    changed after the solve is told from the one the strategy was made for, and
    the same file under another path is recognised.

    Parameters
    ----------
    spec : str
        A workload SPEC.

    Returns
    -------
    dict of str to str

    Raises
    ------
    OSError
        When a file cannot be read.

    Examples
    --------
    >>> workload_file_hashes("prefix:4")
    {}
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "w.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("1,1\n0,1\n")
    >>> workload_file_hashes(f"file:{path}*prefix:2") == {path: file_sha256(path)}
    True
    >>> tmp.cleanup()
    """
    from .spec import file_paths

    if "file:" not in spec:
        return {}
    return {path: file_sha256(path) for path in file_paths(spec)}


def file_sha256(path: str | os.PathLike, length: int | None = None) -> str:
    """SHA-256 of a file's bytes (of its first ``length`` bytes, if given).

    Parameters
    ----------
    path : str or os.PathLike
    length : int, optional
        Hash only this many leading bytes (all of a shorter file).

    Returns
    -------
    str
        Hex digest.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "f.txt")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"abc")
    >>> file_sha256(path) == hashlib.sha256(b"abc").hexdigest(), file_sha256(path, length=1) == hashlib.sha256(b"a").hexdigest()
    (True, True)
    >>> tmp.cleanup()
    """
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


SEAL_LENGTH = len(SEAL_PREFIX) + 64


def seal(digest_of: bytes) -> bytes:
    """The seal of ``digest_of``: `SEAL_PREFIX` and the hex SHA-256 of the bytes (`SEAL_LENGTH` bytes in all).

    Parameters
    ----------
    digest_of : bytes

    Returns
    -------
    bytes

    Examples
    --------
    >>> seal(b"abc")
    b'strategy_opt-sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'
    >>> len(seal(b"abc")) == SEAL_LENGTH == 84
    True
    """
    return SEAL_PREFIX + hashlib.sha256(digest_of).hexdigest().encode()


def sealed_npz(raw: bytes) -> bytes:
    """The npz archive ``raw`` with the seal as its zip comment (hash of every byte before the comment).

    Parameters
    ----------
    raw : bytes
        A ``.npz`` archive without a comment.

    Returns
    -------
    bytes
        The archive; it still loads with `numpy.load`.

    Examples
    --------
    >>> buf = _io.BytesIO()
    >>> np.savez(buf, W=np.eye(2))
    >>> data = sealed_npz(buf.getvalue())
    >>> zipfile.ZipFile(_io.BytesIO(data)).comment == seal(data[:-SEAL_LENGTH]), np.load(_io.BytesIO(data))["W"].tolist()
    (True, [[1.0, 0.0], [0.0, 1.0]])
    """
    buf = _io.BytesIO(raw)
    with zipfile.ZipFile(buf, "a") as z:
        z.comment = b"0" * SEAL_LENGTH
    data = buf.getvalue()
    return data[:-SEAL_LENGTH] + seal(data[:-SEAL_LENGTH])


def sealed_mtx(raw: bytes) -> bytes:
    r"""The Matrix Market text ``raw`` (banner, metadata comment, ...) with the seal as its third line.

    Parameters
    ----------
    raw : bytes
        Matrix Market text whose first two lines are the banner and the metadata comment.

    Returns
    -------
    bytes
        ``raw`` with ``%`` + ``seal(raw)`` inserted as line 3 (the seal hashes the text without it).

    Examples
    --------
    >>> raw = b"%%MatrixMarket matrix coordinate real general\n%{}\n1 1 1\n1 1 2\n"
    >>> sealed_mtx(raw).split(b"\n")[2] == b"%" + seal(raw)
    True
    """
    banner_end = raw.index(b"\n") + 1
    meta_end = raw.index(b"\n", banner_end) + 1
    return raw[:meta_end] + b"%" + seal(raw) + b"\n" + raw[meta_end:]
