"""The `Strategy`: a strategy matrix A plus the metadata that explains it.

Examples
--------
>>> import numpy as np
>>> from strategy_opt.strategy import Strategy
>>> s = Strategy(np.eye(3), {"method": "identity"})
>>> s.shape, s.sensitivity(1)
((3, 3), 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .error import KroneckerMatrix, sensitivity
from .exceptions import InputError

__all__ = ["Strategy"]


def _check_values(dtype, data, shape, what: str) -> None:
    """Refuse a non-real dtype, a shape that is not 2-D and non-empty, and NaN or infinite entries."""
    if dtype.kind not in "biuf":
        kind = "complex" if dtype.kind == "c" else f"dtype {dtype}"
        raise InputError(f"{what} must be a real numeric matrix, got {kind} entries")
    if len(shape) != 2:
        raise InputError(f"{what} must be a 2-D matrix, got shape {tuple(shape)}")
    if shape[0] == 0 or shape[1] == 0:
        raise InputError(f"{what} is empty (shape {tuple(shape)})")
    if dtype.kind == "f" and not np.all(np.isfinite(data)):
        raise InputError(f"{what} contains NaN or infinite values")


def _stored(M):
    """A sparse matrix in a format whose ``.data`` is the flat array of stored entries (LIL and DOK become CSR)."""
    return M if M.format in ("csr", "csc", "coo", "bsr", "dia") else M.tocsr()


def _as_matrix(M, what: str = "strategy matrix"):
    """``M`` validated: a real, finite, non-empty 2-D ndarray (float), scipy.sparse matrix or `KroneckerMatrix`.

    Array-likes (lists, ``np.matrix``) become float ndarrays; integer or boolean
    entries become floats. A sparse matrix keeps its format and only its stored
    entries (``.data``) are checked, so the cost is O(nnz). A `KroneckerMatrix`
    is kept as it is after checking each factor.
    """
    if isinstance(M, KroneckerMatrix):
        if not M.factors:
            raise InputError(f"{what} is a Kronecker product of no factors")
        for i, f in enumerate(M.factors):
            if not (sp.issparse(f) or isinstance(f, np.ndarray)):
                raise InputError(f"{what}: Kronecker factor {i} must be an ndarray or scipy.sparse matrix, got {type(f).__name__}")
            _check_values(f.dtype, _stored(f).data if sp.issparse(f) else f, f.shape, f"{what} (Kronecker factor {i})")
        return M
    if sp.issparse(M):
        M = _stored(M)
        _check_values(M.dtype, M.data, M.shape, what)
        return M if M.dtype == np.float64 else M.astype(np.float64)
    if isinstance(M, (str, bytes, Mapping)) or M is None:
        raise InputError(f"{what} must be a 2-D array, scipy.sparse matrix or KroneckerMatrix, got {type(M).__name__}")
    try:
        A = np.asarray(M)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"{what} must be a 2-D numeric matrix: {exc}") from None
    if A.dtype == object and A.ndim == 0:
        raise InputError(f"{what} must be a 2-D array, scipy.sparse matrix or KroneckerMatrix, got {type(M).__name__}")
    _check_values(A.dtype, A, A.shape, what)
    return A if A.dtype == np.float64 else A.astype(np.float64)


def _as_meta(meta) -> dict:
    """``meta`` as a dict: None becomes ``{}``, another mapping is copied, anything else is refused."""
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return meta
    if not isinstance(meta, Mapping):
        raise InputError(f"strategy metadata must be a dict, got {type(meta).__name__}")
    return dict(meta)


@dataclass
class Strategy:
    """A strategy matrix A (p x n) with its metadata.

    Attributes
    ----------
    matrix : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy queries, one per row. Checked whenever it is set: 2-D,
        non-empty, real and finite (`InputError` otherwise). Array-likes such
        as nested lists become float ndarrays; a sparse matrix keeps its
        format and only its stored entries are checked.
    meta : dict
        JSON-serialisable metadata (README.md, "Strategy files": workload, privacy, method,
        objective, unit_total_squared_error, lower_bound, solver, ...).
    fingerprint : str or None
        `strategy_opt.io.matrix_fingerprint` of the matrix ``meta`` was computed
        for (set by `strategy_opt.solve`); writing refuses a matrix changed since.
    """

    matrix: object
    meta: dict = field(default_factory=dict)
    fingerprint: str | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name, value):
        """Check ``matrix`` and ``meta`` whenever they are set, on construction and after it."""
        if name == "matrix":
            value = _as_matrix(value)
        elif name == "meta":
            value = _as_meta(value)
        object.__setattr__(self, name, value)

    def unverified(self, missing: str = "no metadata") -> str | None:
        """Why nothing verifies this strategy; None when its metadata records a workload or privacy.

        ``missing`` names the absent metadata of a strategy that has none (a
        ``.csv`` reader says which ``.json`` is missing). A bare matrix converted
        by ``export`` carries hashes but no provenance, and is unverified too.
        """
        if self.meta.get("workload") or self.meta.get("privacy"):
            return None
        if self.meta:
            return "metadata without a recorded workload or privacy (a bare matrix converted by export?): the strategy is not verified (no recorded workload or privacy)"
        return f"{missing}: the strategy is not verified (no hashes, recorded workload or privacy)"

    @property
    def shape(self) -> tuple[int, int]:
        """``(p, n)``: number of strategy queries and of cells."""
        return tuple(int(s) for s in self.matrix.shape)

    def sensitivity(self, p: int) -> float:
        """Largest column p-norm of A."""
        return sensitivity(self.matrix, p)

    def sparse(self) -> sp.csr_matrix:
        """A as a sparse CSR matrix."""
        if isinstance(self.matrix, KroneckerMatrix):
            return self.matrix.tocsr()
        return sp.csr_matrix(self.matrix)

    def dense(self) -> np.ndarray:
        """A as a dense array."""
        if isinstance(self.matrix, np.ndarray):
            return self.matrix
        return self.sparse().toarray()

    @property
    def is_sparse(self) -> bool:
        """Whether A is stored sparse (or as Kronecker factors)."""
        return not isinstance(self.matrix, np.ndarray)

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"<Strategy {self.shape[0]}x{self.shape[1]} method={m.get('method')!r} "
            f"workload={m.get('workload')!r} E={m.get('unit_total_squared_error')}>"
        )
