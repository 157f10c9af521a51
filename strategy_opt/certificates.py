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
from .threads import factorization_threads

__all__ = [
    "gram_factor",
    "nuclear_norm_weighted",
    "dual_bound",
    "kkt_weights",
    "kkt_bound",
    "relative_gap",
    "bound_below_error",
    "reconcile_bound",
    "INACCURATE_RTOL",
]

#: Relative accuracy of a solve that reports ``*_inaccurate`` (cvxpy): Clarabel's default
#: ``reduced_tol_gap_rel`` (5e-5), the accuracy it falls back to when it stops short.
INACCURATE_RTOL = 5e-5


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

    Raises
    ------
    InputError
        If neither G nor ``eigh`` is given, or the Gram matrix is zero.

    Examples
    --------
    The all-ones Gram J of ``total:3`` has rank 1, eigenvalue 3 on the constant vector:

    >>> L = gram_factor(np.ones((3, 3)))
    >>> L.shape, np.round(np.abs(L.ravel()), 6).tolist()  # +-sqrt(3) * (1, 1, 1) / sqrt(3)
    ((3, 1), [1.0, 1.0, 1.0])
    """
    if eigh is None:
        if G is None:
            raise InputError("gram_factor needs a Gram matrix or its eigendecomposition")
        S = G + G.T
        S *= 0.5
        eigh = np.linalg.eigh(S)
        del S
    lam, V = eigh
    top = float(np.max(lam)) if np.size(lam) else 0.0
    if top <= 0:
        raise InputError("the workload's Gram matrix is zero: no query has a non-zero coefficient")
    keep = lam > rtol * top
    return V[:, keep] * np.sqrt(lam[keep])


#: Largest factor rank whose weighted nuclear norm is taken from singular values (above: eigenvalues of
#: the r x r product, about 4x faster: 80 s of SVD at r = 8192 would double an Eigen-Design bound's cost).
SVD_NUCLEAR_MAX_RANK = 2048


def nuclear_norm_weighted(L: np.ndarray, u: np.ndarray) -> float:
    """``||W diag(u)^{1/2}||_* = trace((L^T D_u L)^{1/2})`` for a Gram factor L (``L L^T = W^T W``).

    Up to rank `SVD_NUCLEAR_MAX_RANK`: the sum of the singular values of
    ``diag(u)^{1/2} L``, each within about eps times the largest. The square
    roots of the eigenvalues of ``L^T D_u L`` (the route above that rank) are
    not: a rounding-level eigenvalue, ~eps times the largest, adds ~sqrt(eps) =
    1.5e-8 of it, and such a bound came out 2e-8 above the optimum on rows
    scaled over four decades.

    Parameters
    ----------
    L : ndarray, shape (n, r)
        A Gram factor (`gram_factor`).
    u : ndarray, shape (n,)
        Non-negative weights over the cells (used as given: not normalised).

    Returns
    -------
    float

    Examples
    --------
    With ``L = I`` (the identity workload) and u = 1/4 on 4 cells the singular values are four halves:

    >>> nuclear_norm_weighted(np.eye(4), np.full(4, 0.25))
    2.0
    """
    B = np.sqrt(u)[:, None] * L
    with factorization_threads():
        if L.shape[1] <= SVD_NUCLEAR_MAX_RANK:
            return float(np.linalg.svd(B, compute_uv=False).sum())
        lam = np.linalg.eigvalsh(B.T @ B)
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

    Raises
    ------
    InputError
        If u has the wrong shape, or is negative, non-finite or all zero.

    Examples
    --------
    On the identity workload the uniform weights give ``(4 * sqrt(1/4))^2 = 4``, the identity strategy's E_2: tight.

    >>> dual_bound(np.eye(4), np.ones(4))
    4.0

    On prefix:2 (``G = [[2, 1], [1, 1]]``, eigenvalues ``(3 +- sqrt 5) / 2`` with square roots summing to ``sqrt 5``): ``5 / 2``.

    >>> round(dual_bound(np.array([[2.0, 1.0], [1.0, 1.0]]), [0.5, 0.5]), 6)
    2.5
    """
    L = gram_factor(G) if factor is None else factor
    return nuclear_norm_weighted(L, _simplex(u, L.shape[0])) ** 2


def _cho_factor(X: np.ndarray, **kw) -> tuple:
    """``la.cho_factor(X, lower=True)``, raising `LinAlgError` also for a pivot below the rank cutoff.

    A singular PSD matrix often factors in floating point with a pivot of
    rounding size, whose inverse is garbage (every KKT weight then clips to
    zero); such a matrix goes to the eigendecomposition like a failed factorisation.
    """
    c = la.cho_factor(X, lower=True, **kw)
    pivots = np.abs(np.diag(c[0]))
    if pivots.size and pivots.min() ** 2 <= EIG_RTOL * pivots.max() ** 2:
        raise la.LinAlgError("pivot below the rank cutoff")
    return c


def _inverse(X: np.ndarray, rtol: float = EIG_RTOL) -> np.ndarray:
    """``X^{-1}`` by Cholesky, or the pseudo-inverse (eigenvalues below ``rtol`` of the largest dropped)
    when X is (numerically) singular; with ``rtol`` above `EIG_RTOL`, always the pseudo-inverse."""
    if rtol <= EIG_RTOL:
        try:
            return la.cho_solve(_cho_factor(X), np.eye(X.shape[0]))
        except la.LinAlgError:
            pass
    lam, V = np.linalg.eigh(X)
    keep = lam > rtol * lam.max()
    return (V[:, keep] / lam[keep]) @ V[:, keep].T


#: `kkt_weights`: weights below ``-KKT_NEGATIVE_RTOL`` times the largest (a diagonal of a PSD matrix,
#: so non-negative but for rounding) mean the inverse was swamped by near-null directions of X; they
#: are recomputed with pseudo-inverses dropping eigenvalues below each of ``KKT_PINV_RTOLS`` of the largest
#: (`kkt_bound` keeps the best bound).
KKT_NEGATIVE_RTOL = 1e-8
KKT_PINV_RTOLS = (1e-5, 1e-7, 1e-9)


def kkt_weights(G: np.ndarray | None, X: np.ndarray, *, factor: np.ndarray | None = None) -> np.ndarray:
    """Dual weights ``u ∝ diag(X^{-1} G X^{-1})`` from the KKT conditions of Program 3.4.2.

    For the optimal X these weights make `dual_bound` equal the optimum; for an
    approximate X (an SDP solver's output) the bound they give is within a
    gap that is second order in the error of X. A singular X uses the
    pseudo-inverse.

    Parameters
    ----------
    G : ndarray, shape (n, n), or None
        The Gram matrix; not read when ``factor`` is given.
    X : ndarray, shape (n, n)
        ``A^T A`` of the strategy.
    factor : ndarray, shape (n, r), optional
        A factor ``L L^T = G`` (`gram_factor`): then ``u_j = ||(X^{-1} L)_j||^2``
        from one Cholesky solve with r right-hand sides, without forming
        ``X^{-1}`` or G (three n x n matrices fewer at the peak).

    Returns
    -------
    ndarray, shape (n,)
        Weights on the simplex.

    Raises
    ------
    InputError
        If the weights vanish (X does not see the workload).

    Examples
    --------
    For ``G = diag(4, 1)`` the optimum is ``X = I`` and ``u ∝ diag(G)``:

    >>> np.round(kkt_weights(np.diag([4.0, 1.0]), np.eye(2)), 6).tolist()
    [0.8, 0.2]
    """
    return _kkt_candidates(G, X, factor)[0]


def kkt_bound(G: np.ndarray | None, X: np.ndarray, *, factor: np.ndarray | None = None) -> float:
    """`dual_bound` at the KKT weights of X (`kkt_weights`): the larger when X gives two candidates.

    Every weight vector on the simplex gives a valid bound; when the weights of
    X's inverse are swamped by its near-null directions, both they (clipped)
    and those of its pseudo-inverse are tried.

    Parameters
    ----------
    G : ndarray, shape (n, n), or None
        The Gram matrix; not read when ``factor`` is given.
    X : ndarray, shape (n, n)
        ``A^T A`` of the strategy.
    factor : ndarray, shape (n, r), optional
        A factor ``L L^T = G`` (`gram_factor`).

    Returns
    -------
    float
        A lower bound on E_2 of every strategy; equal to ``trace(G X^{-1})`` when X is optimal.

    Raises
    ------
    InputError
        If X is not n x n, or its KKT weights vanish.

    Examples
    --------
    For ``G = diag(4, 1)`` and ``X = I`` (the optimum, error ``trace(G) = 5``) the weights (0.8, 0.2) give
    ``(sqrt(0.8 * 4) + sqrt(0.2 * 1))^2 = 5``; the uniform weights give only ``(2 + 1)^2 / 2 = 4.5``:

    >>> G = np.diag([4.0, 1.0])
    >>> round(kkt_bound(G, np.eye(2)), 6), round(dual_bound(G, [1.0, 1.0]), 6)
    (5.0, 4.5)
    """
    n = (factor if factor is not None else np.asarray(G)).shape[0]
    if np.shape(X) != (n, n):
        raise InputError(f"X must be {n} x {n} (the Gram matrix's cells), got shape {np.shape(X)}")
    return max(dual_bound(G, u, factor=factor) for u in _kkt_candidates(G, X, factor))


def _kkt_candidates(G, X, factor) -> list[np.ndarray]:
    """The KKT weight vectors of X on the simplex, the one `kkt_weights` returns first."""
    X = np.asarray(X, dtype=float)
    out = []
    if factor is not None:
        try:
            c = _cho_factor(X, check_finite=False)  # reads the lower triangle only
            Y = la.cho_solve(c, factor, check_finite=False)
        except la.LinAlgError:
            Y = _inverse(0.5 * (X + X.T)) @ factor
        out.append(np.einsum("ij,ij->i", Y, Y))
    else:
        S = X + X.T
        S *= 0.5
        try:  # in place: fewer n x n matrices at the peak than _inverse's copies
            c = _cho_factor(S, overwrite_a=True, check_finite=False)
            # two solves, not an explicit inverse: with G in X's range, X^{-1} G X^{-1} stays accurate for an
            # ill-conditioned X (cond 1e9 from an SDP solver), where products of an explicit inverse are garbage
            Z = la.cho_solve(c, np.asarray(G, dtype=float), check_finite=False)
            u = np.diag(la.cho_solve(c, Z.T, overwrite_b=True, check_finite=False)).copy()
        except la.LinAlgError:
            Xi = _inverse(0.5 * (X + X.T))  # S may be overwritten: symmetrise again
            u = np.einsum("ij,ji->i", Xi @ G, Xi)
        del S
        if not u.max() > 0 or u.min() < -KKT_NEGATIVE_RTOL * u.max():
            # X nearly singular with a solver's rounding in its near-null directions (eigenvalue 1e-9 of the
            # largest): those directions swamp u with rounding; without them u is accurate
            for rtol in KKT_PINV_RTOLS:  # where the near-null directions end is not known: a few cutoffs
                Xi = _inverse(0.5 * (X + X.T), rtol=rtol)
                out.append(np.einsum("ij,ji->i", Xi @ G, Xi))
        out.append(u)
    weights = [np.clip(u, 0.0, None) for u in out]
    weights = [u / u.sum() for u in weights if u.sum() > 0]
    if not weights:
        raise InputError("KKT weights vanish: X does not see the workload (is G zero?)")
    return weights


def relative_gap(primal: float, lower: float) -> float:
    """``primal / lower - 1`` (inf when the lower bound is not positive).

    Parameters
    ----------
    primal : float
        The achieved value (error or objective).
    lower : float
        A lower bound on it.

    Returns
    -------
    float

    Examples
    --------
    >>> relative_gap(5.0, 4.0)
    0.25
    >>> relative_gap(5.0, 0.0)
    inf
    """
    return primal / lower - 1.0 if lower > 0 and math.isfinite(primal) else math.inf


def bound_below_error(lower: float, error: float, rtol: float) -> tuple[float | None, dict | None]:
    """A lower bound made consistent with the error it bounds: never above it.

    A valid bound exceeds the error only through floating-point and solver
    inaccuracy (the error of a near-singular strategy is computed to a few
    digits less than the bound). An excess within ``rtol`` (relative) is
    clamped to the error; a larger one means the bound cannot be trusted and it
    is dropped.

    Parameters
    ----------
    lower, error : float
        The bound and the achieved value (error or objective value), same scale.
    rtol : float
        The relative excess tolerated (the solver's accuracy).

    Returns
    -------
    bound : float or None
        ``lower`` when it is ``<= error``; ``error`` when clamped; None when dropped.
    note : dict or None
        What was done (``action`` 'clamped' or 'dropped', the original bound, the
        relative excess, the tolerance, a reason); None when nothing was.

    Examples
    --------
    >>> bound_below_error(9.0, 10.0, 1e-8)
    (9.0, None)
    >>> b, note = bound_below_error(10.0 * (1 + 1e-9), 10.0, 1e-8)
    >>> b, note["action"]
    (10.0, 'clamped')
    >>> b, note = bound_below_error(11.0, 10.0, 1e-8)
    >>> b, note["action"]
    (None, 'dropped')
    """
    if not (math.isfinite(lower) and math.isfinite(error)) or lower <= error:
        return lower, None
    excess = lower / error - 1.0 if error > 0 else math.inf
    note = {"original": float(lower), "excess_relative": excess, "tolerance": float(rtol)}
    if excess <= rtol:
        note.update(action="clamped", reason="the bound exceeded the achieved value by no more than the solver's accuracy: set to the achieved value")
        return float(error), note
    note.update(action="dropped", reason="the bound exceeded the achieved value by more than the solver's accuracy: it cannot be trusted")
    return None, note


def reconcile_bound(meta: dict, rtol: float) -> dict:
    """Make the strategy metadata's lower bounds never exceed what they bound (in place; returns meta).

    Checks ``lower_bound`` against ``unit_total_squared_error`` (through their
    ``_log10`` fields, which exist even when the values overflow) and
    ``objective_lower_bound`` against ``objective_value``, with `bound_below_error`.
    A clamped bound is set to the achieved value (gap 0, ratio 1) and
    ``lower_bound_adjustment`` (``objective_lower_bound_adjustment``) says so; a
    dropped total-error bound falls back to the SVD bound when that is below the
    error (kind ``svd-bound``), otherwise to none (``lower_bound_kind`` None and a
    ``lower_bound_unavailable`` reason); a dropped objective bound becomes None
    with ``objective_lower_bound_unavailable`` giving the reason.

    Examples
    --------
    >>> meta = {"unit_total_squared_error": 10.0, "unit_total_squared_error_log10": 1.0,
    ...         "lower_bound": 10.0000001, "lower_bound_log10": math.log10(10.0000001),
    ...         "lower_bound_kind": "dual-certificate", "svd_bound": 8.0}
    >>> m = reconcile_bound(meta, 1e-6)
    >>> m["lower_bound"], m["relative_gap"], m["lower_bound_adjustment"]["action"]
    (10.0, 0.0, 'clamped')
    """
    E_log, lb_log = meta.get("unit_total_squared_error_log10"), meta.get("lower_bound_log10")
    if E_log is not None and lb_log is not None and lb_log > E_log:
        bound, note = bound_below_error(10.0 ** (lb_log - E_log), 1.0, rtol)
        note["original"] = meta.get("lower_bound")
        note["kind"] = meta.get("lower_bound_kind")
        meta["lower_bound_adjustment"] = note
        if bound is not None:
            meta.update(lower_bound=meta.get("unit_total_squared_error"), lower_bound_log10=E_log, ratio_to_lower_bound=1.0, relative_gap=0.0)
        else:
            svd = meta.get("svd_bound")
            E = meta.get("unit_total_squared_error")
            if svd is not None and E is not None and 0 < svd <= E:
                meta.update(lower_bound=svd, lower_bound_log10=math.log10(svd), lower_bound_kind="svd-bound", ratio_to_lower_bound=E / svd, relative_gap=E / svd - 1.0)
            else:
                meta.update(lower_bound=None, lower_bound_log10=None, lower_bound_kind=None, ratio_to_lower_bound=None, relative_gap=None)
                meta["lower_bound_unavailable"] = "the program's bound exceeded the error beyond tolerance and the SVD bound is not below the error either"
    value, obj_lb = meta.get("objective_value"), meta.get("objective_lower_bound")
    if value is not None and obj_lb is not None:
        bound, note = bound_below_error(obj_lb, value, rtol)
        if note is not None:
            meta["objective_lower_bound_adjustment"] = note
            meta["objective_lower_bound"] = bound
            meta["objective_relative_gap"] = relative_gap(value, bound) if bound is not None else None
            if bound is None:
                meta["objective_lower_bound_unavailable"] = note["reason"]
    return meta
