"""Independent oracles shared by the tests: error formulas computed from their definitions with numpy only.

They never call the library's error analysis, so a test comparing a strategy's reported
error with them checks the library against the definition, not against itself.
"""

import numpy as np


def dense(A) -> np.ndarray:
    """A strategy (dense, sparse, Kronecker or stacked marginals) as a dense array."""
    if hasattr(A, "factors") or type(A).__name__ == "MarginalsMatrix":
        A = A.tocsr()
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A, dtype=float)


def e1_from_gram(A, G) -> float:
    """E_1 = ||A||_1^2 trace(G pinv(A^T A)): largest absolute column sum squared, numpy's pinv."""
    A = dense(A)
    return float(np.abs(A).sum(axis=0).max() ** 2 * np.trace(G @ np.linalg.pinv(A.T @ A)))


def direct_error(A, W, p: int) -> float:
    """E_p of strategy A on workload W by the definition: sensitivity^2 ||W A^+||_F^2 (numpy's pinv)."""
    A = dense(A)
    Wm = W.matrix().toarray()
    sens = np.abs(A).sum(0).max() if p == 1 else np.sqrt((A * A).sum(0)).max()
    return float(sens**2 * np.linalg.norm(Wm @ np.linalg.pinv(A), "fro") ** 2)


def query_variances(A, W, p: int) -> np.ndarray:
    """Unit per-query variances ``sensitivity^2 w_i pinv(A^T A) w_i^T`` by the definition (numpy's pinv)."""
    A = dense(A)
    Wm = W.matrix().toarray()
    sens = np.abs(A).sum(0).max() if p == 1 else np.sqrt((A * A).sum(0)).max()
    return sens**2 * np.einsum("ij,jk,ik->i", Wm, np.linalg.pinv(A.T @ A), Wm)
