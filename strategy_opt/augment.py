"""Column completion for epsilon-DP strategies (Li 2013, Sec. 3.4.3, Thm 3.11).

Under epsilon-DP the sensitivity of a strategy A is its largest absolute column
sum ``||A||_1 = max_j sum_i |a_ij|``. A column whose sum is below that maximum is
*deficient*: it can carry more measurement without raising the sensitivity.
The augmentation heuristic completes it with one extra row ``(Delta - colsum_j) e_j``
per deficient column j, i.e. appends ``diag(Delta - colsum)`` restricted to the
deficient columns. Every column then sums to exactly ``Delta``. (The compiler
then projects out the strategy's numerical null space, `compiler.final_strategy`,
which can leave a column short of ``Delta`` by up to about 1e-6 relative,
measured on svd-approx strategies; the sensitivity and E_1 in the metadata are
computed from the final matrix, so they stay exact.)

Theorem 3.11: for ``A' = [A; B]`` and any W supported by A, A' supports W and
``||W A'^+||_F <= ||W A^+||_F``. The sensitivity is unchanged, so the unit
error ``E_1 = ||A||_1^2 trace(W^T W (A^T A)^+)`` never increases; it strictly
decreases for every workload touching a deficient column. (Eigen-Design's steps
4-5 are the same completion for L2.)

A Kronecker strategy is completed factor by factor: the sensitivity of a
Kronecker product is the product of the factors' sensitivities, and the
product of completed factors contains every row of the original product, so
Thm 3.11 applies to the product as well.

Examples
--------
>>> import numpy as np
>>> A, added = complete_columns_l1(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
>>> added, A.tolist()
(2, [[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .error import KroneckerMatrix, as_strategy_matrix
from .marginals import MarginalsMatrix

__all__ = ["complete_columns_l1", "COMPLETION_RTOL"]

#: Columns whose deficit ``Delta - colsum_j`` is at most ``COMPLETION_RTOL * Delta`` count as complete.
COMPLETION_RTOL = 1e-9


def _completion(colsum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deficient column indices and their deficits ``Delta - colsum_j``."""
    delta = colsum.max() if colsum.size else 0.0
    deficit = delta - colsum
    cols = np.flatnonzero(deficit > COMPLETION_RTOL * delta)
    return cols, deficit[cols]


def complete_columns_l1(A):
    """Append ``diag(||A||_1 - colsum_j)`` rows for the deficient columns of A.

    Parameters
    ----------
    A : ndarray, scipy.sparse matrix or KroneckerMatrix, shape (p, n)
        An epsilon-DP strategy.

    Returns
    -------
    A_completed : same kind as A
        A with one extra row per deficient column (each a multiple of a unit
        vector); dense stays dense, sparse stays sparse (CSR), Kronecker
        strategies are completed factor by factor. A stack of marginals is
        returned unchanged (its columns are equal).
    added : int
        Number of rows appended (for a Kronecker strategy: the increase of the
        product's row count).

    Examples
    --------
    The prefix strategy on 3 cells has column sums 3, 2, 1: cells 1 and 2 get rows of 1 and 2:

    >>> A, added = complete_columns_l1(np.tril(np.ones((3, 3))))
    >>> added, A[3:].tolist()
    (2, [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    >>> A, added = complete_columns_l1(sp.csr_matrix(np.eye(2)))  # already complete
    >>> added, A.format
    (0, 'csr')
    """
    A = as_strategy_matrix(A, "the strategy to complete")
    if isinstance(A, MarginalsMatrix):  # every cell lies in one row of each marginal: equal column norms
        return A, 0
    if isinstance(A, KroneckerMatrix):
        factors = [complete_columns_l1(f)[0] for f in A.factors]
        out = KroneckerMatrix(factors)
        return out, out.shape[0] - A.shape[0]
    if sp.issparse(A):
        A = sp.csr_matrix(A, dtype=float)
        colsum = np.asarray(abs(A).sum(axis=0)).ravel()
        cols, deficit = _completion(colsum)
        if cols.size == 0:
            return A, 0
        extra = sp.csr_matrix((deficit, (np.arange(cols.size), cols)), shape=(cols.size, A.shape[1]))
        return sp.vstack([A, extra], format="csr"), int(cols.size)
    A = np.asarray(A, dtype=float)
    cols, deficit = _completion(np.abs(A).sum(axis=0))
    if cols.size == 0:
        return A, 0
    extra = np.zeros((cols.size, A.shape[1]))
    extra[np.arange(cols.size), cols] = deficit
    return np.vstack([A, extra]), int(cols.size)
