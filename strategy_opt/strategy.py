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

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .error import KroneckerMatrix, sensitivity

__all__ = ["Strategy"]


@dataclass
class Strategy:
    """A strategy matrix A (p x n) with its metadata.

    Attributes
    ----------
    matrix : ndarray, scipy.sparse matrix or KroneckerMatrix
        The strategy queries, one per row.
    meta : dict
        JSON-serialisable metadata (see CLI.md: workload, privacy, method,
        objective, unit_total_squared_error, lower_bound, solver, ...).
    """

    matrix: object
    meta: dict = field(default_factory=dict)

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
