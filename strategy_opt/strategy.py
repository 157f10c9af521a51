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

from .error import STRUCTURED, as_strategy_matrix, sensitivity
from .exceptions import InputError

__all__ = ["Strategy"]


def _as_meta(meta) -> dict:
    """``meta`` as a dict: None becomes ``{}``, another mapping is copied, anything else is refused."""
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return meta
    if not isinstance(meta, Mapping):
        raise InputError(f"strategy metadata must be a dict, got {type(meta).__name__}")
    return dict(meta)


@dataclass(eq=False)
class Strategy:
    """A strategy matrix A (p x n) with its metadata.

    Strategies compare by identity (``==`` is ``is``), as objects holding arrays
    do: compare ``matrix`` and ``meta`` explicitly to ask whether two hold the
    same numbers.

    Attributes
    ----------
    matrix : ndarray, scipy.sparse matrix, KroneckerMatrix or MarginalsMatrix
        The strategy queries, one per row. Checked whenever it is set: 2-D,
        non-empty, real and finite (`InputError` otherwise). Array-likes such
        as nested lists become float ndarrays; a sparse matrix keeps its
        format and only its stored entries are checked.
    meta : dict
        JSON-serialisable metadata (README.md, "Strategy files": workload, privacy, method,
        objective, unit_total_squared_error, lower_bound, solver, ...).
    fingerprint : str or None
        `strategy_opt.fingerprints.matrix_fingerprint` of the matrix ``meta`` was computed
        for (set by `strategy_opt.solve`); writing refuses a matrix changed since.
    meta_fingerprint : str or None
        `strategy_opt.fingerprints.meta_fingerprint` of ``meta`` as computed or read
        (set by `strategy_opt.solve` and `strategy_opt.io.read_strategy`):
        metadata edited since is checked against the matrix on writing, as
        metadata written by hand is (`strategy_opt.api.checked_hand_written`).

    Examples
    --------
    A bare matrix has no metadata; `strategy_opt.solve` returns a strategy with its certificate.

    >>> import numpy as np
    >>> Strategy(np.eye(3)).shape, Strategy(np.eye(3)).meta
    ((3, 3), {})
    >>> from strategy_opt import solve
    >>> s = solve("prefix:8", privacy="pure", method="identity")
    >>> s.shape, s.meta["method"], s.meta["unit_total_squared_error"]
    ((8, 8), 'identity', 36.0)
    """

    matrix: object
    meta: dict = field(default_factory=dict)
    fingerprint: str | None = field(default=None, repr=False, compare=False)
    meta_fingerprint: str | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name, value):
        """Check ``matrix`` and ``meta`` whenever they are set, on construction and after it."""
        if name == "matrix":
            value = as_strategy_matrix(value)
        elif name == "meta":
            value = _as_meta(value)
        object.__setattr__(self, name, value)

    def unverified(self, missing: str = "no metadata") -> str | None:
        """Why nothing verifies this strategy; None when its metadata records a workload or privacy.

        ``missing`` names the absent metadata of a strategy that has none (a
        ``.csv`` reader says which ``.json`` is missing). A bare matrix converted
        by ``export`` carries hashes but no provenance, and is unverified too.

        Examples
        --------
        >>> Strategy(np.eye(2), {"workload": "identity:2"}).unverified() is None
        True
        >>> Strategy(np.eye(2)).unverified()
        'no metadata: the strategy is not verified (no hashes, recorded workload or privacy)'
        """
        if self.meta.get("workload") or self.meta.get("privacy"):
            return None
        if self.meta:
            return "metadata without a recorded workload or privacy (a bare matrix converted by export?): the strategy is not verified (no recorded workload or privacy)"
        return f"{missing}: the strategy is not verified (no hashes, recorded workload or privacy)"

    @property
    def shape(self) -> tuple[int, int]:
        """``(p, n)``: number of strategy queries and of cells.

        Examples
        --------
        >>> Strategy(np.ones((1, 3))).shape
        (1, 3)
        """
        return tuple(int(s) for s in self.matrix.shape)

    def sensitivity(self, p: int) -> float:
        """Largest column p-norm of A.

        Parameters
        ----------
        p : {1, 2}
            1 for epsilon-DP, 2 for (epsilon, delta)-DP.

        Examples
        --------
        >>> s = Strategy(np.array([[1.0, 1.0], [0.0, 2.0]]))
        >>> s.sensitivity(1), round(s.sensitivity(2) ** 2, 12)  # column 2: |1| + |2|, 1^2 + 2^2
        (3.0, 5.0)
        """
        return sensitivity(self.matrix, p)

    def sparse(self) -> sp.csr_matrix:
        """A as a sparse CSR matrix.

        Examples
        --------
        >>> Strategy(np.array([[1.0, 1.0], [0.0, 2.0]])).sparse().nnz
        3
        """
        if isinstance(self.matrix, STRUCTURED):
            return self.matrix.tocsr()
        return sp.csr_matrix(self.matrix)

    def dense(self) -> np.ndarray:
        """A as a dense array: the stored array itself (not a copy) when A is stored dense.

        Examples
        --------
        >>> Strategy(sp.identity(2, format="csr")).dense().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        if isinstance(self.matrix, np.ndarray):
            return self.matrix
        return self.sparse().toarray()

    @property
    def is_sparse(self) -> bool:
        """Whether A is stored sparse (or as Kronecker factors).

        Examples
        --------
        >>> Strategy(np.eye(2)).is_sparse, Strategy(sp.identity(2, format="csr")).is_sparse
        (False, True)
        """
        return not isinstance(self.matrix, np.ndarray)

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"<Strategy {self.shape[0]}x{self.shape[1]} method={m.get('method')!r} "
            f"workload={m.get('workload')!r} E={m.get('unit_total_squared_error')}>"
        )
