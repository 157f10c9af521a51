"""Optimality certificates for the (epsilon, delta) program MINERROR-L2.

Program 3.4.2 of Li (2013, Sec. 3.4.1, Thm 3.5) minimises the unit total
squared error ``trace(G X^{-1})`` over Gram matrices ``X = A^T A`` with
``X_jj <= 1`` (unit L2 sensitivity), ``G = W^T W``. Its Lagrangian dual gives
a lower bound from any weight vector u on the simplex (ARCHITECTURE.md,
"Lower bounds")::

    d(u) = ||W diag(u)^{1/2}||_*^2 = (trace((D_u^{1/2} G D_u^{1/2})^{1/2}))^2
         = (trace((L^T D_u L)^{1/2}))^2            (G = L L^T)

Derivation: for y >= 0, ``min_X trace(G X^{-1}) + sum_j y_j (X_jj - 1)`` is
``2 trace((D_y^{1/2} G D_y^{1/2})^{1/2}) - sum_j y_j``; writing ``y = t u``
and maximising over the scale t gives d(u). By weak duality
``d(u) <= E_2(A)`` for every strategy A (E_2 is scale invariant, so every A
is a feasible X after scaling). Uniform u gives the SVD bound
``||W||_*^2 / n`` (Li 2013, Thm 4.1). At an optimum the stationarity condition
``X D_y X = G`` gives ``y = diag(X^{-1} G X^{-1})``: the KKT weights
(`kkt_weights`) make the bound tight, so a solved X certifies itself.

Examples
--------
>>> import numpy as np
>>> from strategy_opt.workload import all_range
>>> from strategy_opt.error import svd_bound
>>> G = all_range(8).gram()
>>> bool(np.isclose(dual_bound(G, np.full(8, 1 / 8)), svd_bound(all_range(8))))
True
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as la

from .defaults import EIG_RTOL
from .exceptions import InputError

__all__ = ["gram_factor", "nuclear_norm_weighted", "dual_bound", "kkt_weights", "relative_gap"]


def gram_factor(G: np.ndarray | None = None, eigh: tuple[np.ndarray, np.ndarray] | None = None, rtol: float = EIG_RTOL) -> np.ndarray:
    """Rank-revealing factor L (n x r) with ``L L^T = G`` up to the dropped eigenvalues.

    Parameters
    ----------
    G : ndarray, shape (n, n), optional
        Symmetric positive semidefinite Gram matrix.
    eigh : (lam, V), optional
        A precomputed eigendecomposition of G (e.g. ``Workload.gram_eigh()``,
        closed form for interval workloads); used instead of G.
    rtol : float
        Eigenvalues ``<= rtol * max`` are dropped. Dropping makes the Gram
        smaller in the PSD order, so dual bounds computed from L stay valid.

    Returns
    -------
    ndarray, shape (n, r)
        ``L = V_r diag(sqrt(lam_r))`` over the kept eigenpairs.
    """
    if eigh is None:
        if G is None:
            raise InputError("gram_factor needs a Gram matrix or its eigendecomposition")
        eigh = np.linalg.eigh(0.5 * (G + G.T))
    lam, V = eigh
    top = float(np.max(lam)) if np.size(lam) else 0.0
    if top <= 0:
        raise InputError("the workload's Gram matrix is zero: no query has a non-zero coefficient")
    keep = lam > rtol * top
    return V[:, keep] * np.sqrt(lam[keep])


def nuclear_norm_weighted(L: np.ndarray, u: np.ndarray) -> float:
    """``||W diag(u)^{1/2}||_* = trace((L^T D_u L)^{1/2})`` for a Gram factor L (``L L^T = W^T W``)."""
    N = (L.T * u) @ L
    lam = np.linalg.eigvalsh(0.5 * (N + N.T))
    return float(np.sqrt(np.clip(lam, 0.0, None)).sum())


def _simplex(u, n: int) -> np.ndarray:
    u = np.asarray(u, dtype=float).ravel()
    if u.shape != (n,):
        raise InputError(f"dual weights must have one entry per cell ({n}), got shape {u.shape}")
    if not np.all(np.isfinite(u)) or np.any(u < 0) or u.sum() <= 0:
        raise InputError("dual weights must be finite, non-negative and not all zero")
    return u / u.sum()


def dual_bound(G: np.ndarray, u, *, factor: np.ndarray | None = None) -> float:
    """Dual lower bound ``||W diag(u)^{1/2}||_*^2`` on the unit total squared error E_2.

    Parameters
    ----------
    G : ndarray, shape (n, n)
        Workload Gram matrix ``W^T W`` (rescaled Grams give rescaled bounds).
    u : array_like, shape (n,)
        Non-negative weights over the cells; normalised onto the simplex.
    factor : ndarray, shape (n, r), optional
        A precomputed `gram_factor` of G.

    Returns
    -------
    float
        A lower bound on E_2(A; W) of every strategy A (Li 2013, Program
        3.4.2 dual; uniform u gives the SVD bound of Thm 4.1).
    """
    L = gram_factor(G) if factor is None else factor
    return nuclear_norm_weighted(L, _simplex(u, L.shape[0])) ** 2


def _inverse(X: np.ndarray) -> np.ndarray:
    """``X^{-1}`` by Cholesky, or the pseudo-inverse when X is (numerically) singular."""
    try:
        return la.cho_solve(la.cho_factor(X, lower=True), np.eye(X.shape[0]))
    except la.LinAlgError:
        lam, V = np.linalg.eigh(X)
        keep = lam > EIG_RTOL * lam.max()
        return (V[:, keep] / lam[keep]) @ V[:, keep].T


def kkt_weights(G: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Dual weights ``u ∝ diag(X^{-1} G X^{-1})`` from the KKT conditions of Program 3.4.2.

    For the optimal X these weights make `dual_bound` equal the optimum; for an
    approximate X (an SDP solver's output) the bound they give is within a
    gap that is second order in the error of X. A singular X uses the
    pseudo-inverse.

    Returns
    -------
    ndarray, shape (n,)
        Weights on the simplex.
    """
    X = np.asarray(X, dtype=float)
    Xi = _inverse(0.5 * (X + X.T))
    u = np.clip(np.einsum("ij,ji->i", Xi @ G, Xi), 0.0, None)
    if u.sum() <= 0:
        raise InputError("KKT weights vanish: X does not see the workload (is G zero?)")
    return u / u.sum()


def relative_gap(primal: float, lower: float) -> float:
    """``primal / lower - 1`` (inf when the lower bound is not positive)."""
    return primal / lower - 1.0 if lower > 0 and math.isfinite(primal) else math.inf
