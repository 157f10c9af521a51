"""The executor: measure a strategy with noise, reconstruct, answer the workload.

Three reusable steps (ektelo's vocabulary), used by `run` and by the
data-dependent methods:

* `measure` -- ``y = A x + noise``, Laplace (pure) or Gaussian (approx), with
  the scale calibrated by `strategy_opt.privacy` to A's *computed* sensitivity.
* `reconstruct` -- ``x_hat``: least squares (dense ``lstsq`` for small A, LSMR for
  large or sparse A), non-negative least squares, or the hybrid estimator of
  Li 2013, Sec. 3.5.2 (LS answers ``z = W x_ls``, then ``argmin_{x >= 0} ||W x - z||``).
* `answer` -- ``W x_hat`` plus 95% intervals for the LS estimator.

Noise samplers:

* ``"opendp"`` -- OpenDP's vetted Laplace/Gaussian measurements
  (`strategy_opt.samplers`), safe against the floating-point attack of
  Mironov (CCS 2012). Not seedable. The default whenever no seed is given:
  this is the sampler for answers that are released.
* ``"simulate"`` -- NumPy's seeded generator: fast and reproducible, for
  simulations and benchmarks only. The default when a seed (``rng``) is given.

Both add noise of the same scale, so their error statistics agree (tested).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
from scipy.optimize import Bounds, minimize, nnls
from scipy.sparse.linalg import lsmr

from .defaults import (
    BYTES_PER_QUERY, CONFIDENCE, DENSE_LSTSQ_ENTRIES, EIG_RTOL, MAX_DENSE_N, NNLS_DENSE_MAX_N, NNLS_MAX_ITER, NOISE_RESOLUTION,
    SUPPORT_PROBE_MASS_RTOL, SUPPORT_PROBE_MAX_ITER, SUPPORT_PROBE_MAX_QUERIES, SUPPORT_PROBE_NULL_FLOOR, SUPPORT_PROBES, SUPPORT_RTOL,
)
from .certificates import gram_factor
from .error import ADD_ROWS, STRUCTURED, ErrorProfile, KroneckerMatrix, as_strategy_matrix, check_columns, check_kronecker_support, diagonal_inverse, factored, flat_nonzeros, kron_apply, kronecker_query_variances, sensitivity
from .exceptions import InputError, NoiseScaleError, PrecisionError, SupportError, setting
from .marginals import MarginalsMatrix, marginals_query_variances
from .privacy import Privacy, check_privacy
from .progress import PROGRESS_MIN_N, Progress
from .resources import require_memory
from .strategy import Strategy
from .workload import Workload

__all__ = [
    "Release",
    "measure",
    "reconstruct",
    "answer_intervals",
    "check_measured_cells",
    "check_histogram",
    "as_real",
    "probe_support",
    "check_noise_resolution",
    "resolution_exponent",
    "check_finite_answers",
    "run",
    "SAMPLERS",
]

log = logging.getLogger("strategy_opt")

ESTIMATORS = ("ls", "nnls", "hybrid")
SAMPLERS = ("opendp", "simulate")


@dataclass
class Release:
    """Answers to a workload from one private measurement.

    Attributes
    ----------
    answers : ndarray (m,)
        Estimated workload answers ``W x_hat``.
    lower, upper : ndarray (m,) or None
        Two-sided 95% intervals: arrays for the LS estimator; None for nnls and
        hybrid, for data-dependent releases, and where the domain is too large for them.
    x_hat : ndarray (n,)
        Estimated histogram.
    noise_scale : float
        Laplace scale b or Gaussian sigma used for every strategy answer.
    facts : dict
        What a data-dependent release decided (effective options, budget split, ...),
        recorded in the answer sidecar.

    Examples
    --------
    Releases come from `run`; the identity strategy answers the identity workload with its own noisy counts:

    >>> from strategy_opt.privacy import PureDP
    >>> r = run(np.eye(2), np.array([3.0, 4.0]), "identity:2", PureDP(1.0), rng=0)
    >>> float(r.noise_scale)  # Laplace scale b = sensitivity / epsilon = 1 / 1
    1.0
    >>> r.answers.shape, r.lower.shape, bool(np.allclose(r.answers, r.x_hat))
    ((2,), (2,), True)
    """

    answers: np.ndarray
    lower: np.ndarray | None
    upper: np.ndarray | None
    x_hat: np.ndarray
    noise_scale: float
    facts: dict = field(default_factory=dict)

    def __post_init__(self):
        # whatever the method: no release carries NaN or infinite answers
        self.answers = check_finite_answers(self.answers)


def _as_operator_matrix(A, keep_kronecker: bool = False):
    """The strategy matrix of a `Strategy` or a matrix, validated (`as_strategy_matrix`); Kronecker factors multiplied out
    unless the product is too large (`strategy_opt.error.factored`) or ``keep_kronecker`` (least squares per factor)."""
    A = as_strategy_matrix(A.matrix if isinstance(A, Strategy) else A)
    if factored(A) or (keep_kronecker and isinstance(A, KroneckerMatrix)):  # measured and reconstructed factor by factor
        return A
    return A.tocsr() if isinstance(A, STRUCTURED) else A


def _check_vector(v, size: int, what: str, sized_by: str) -> np.ndarray:
    """``v`` as a finite float vector of ``size`` entries (a column or row of that size is flattened); ``sized_by`` says what fixes the size."""
    v = as_real(v, what).ravel()
    if v.size != size:
        raise InputError(f"{what} has {v.size} entries but {sized_by} {size}")
    if not np.all(np.isfinite(v)):
        raise InputError(f"{what} contains NaN or infinite values")
    return v


def _check_rng(rng) -> None:
    """Refuse an ``rng`` that is not None, a non-negative integer seed or a NumPy generator."""
    if rng is None or isinstance(rng, (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)):
        return
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise InputError(f"rng must be a non-negative integer seed or a numpy Generator, got {rng!r}")
        return
    raise InputError(f"rng must be a non-negative integer seed or a numpy Generator, got {rng!r}")


def resolve_sampler(sampler: str | None, rng) -> str:
    """The sampler to use: the one named, else ``simulate`` when ``rng`` is given and the vetted ``opendp`` otherwise.

    A seed with ``sampler='opendp'`` is refused: OpenDP's noise is not seedable, and the seed would be ignored.

    Parameters
    ----------
    sampler : {'opendp', 'simulate'} or None
        The sampler asked for.
    rng : int, numpy Generator or None
        The seed asked for.

    Examples
    --------
    >>> resolve_sampler(None, None), resolve_sampler(None, 0)
    ('opendp', 'simulate')
    """
    _check_rng(rng)
    if sampler is None:
        return "simulate" if rng is not None else "opendp"
    if sampler not in SAMPLERS:
        raise InputError(f"unknown sampler {sampler!r}; use 'opendp' or 'simulate'")
    if sampler == "opendp" and rng is not None:
        raise InputError("rng cannot be used with sampler='opendp' (its noise is not seedable); use sampler='simulate'")
    return sampler


def _check_noise(privacy: Privacy, delta_A: float) -> float:
    """The noise scale for sensitivity ``delta_A``; `InputError` if it is not a usable float."""
    try:
        scale = privacy.noise_scale(delta_A)
    except OverflowError:
        scale = math.inf
    try:
        variance = privacy.noise_variance(delta_A)
    except OverflowError:
        variance = math.inf
    if not (math.isfinite(variance) and scale > 0):
        beyond = "beyond floating point" if not math.isfinite(scale) else "whose variance is beyond floating point"
        raise NoiseScaleError(
            f"epsilon = {privacy.epsilon:g} gives noise of scale {scale:g} for sensitivity {delta_A:g}, {beyond} "
            "(the answers would carry no information); use a larger epsilon"
        )
    return scale


def check_noise_resolution(values, scale, what: str = "the exact strategy answers") -> None:
    """Refuse to add noise of ``scale`` to values at whose size float64 cannot resolve it.

    Every value that gets noise must be finite and the spacing of float64
    numbers at its magnitude (``np.spacing``) at most ``scale / NOISE_RESOLUTION``;
    otherwise ``value + noise`` rounds the noise away (every answer of 1e17
    counts under Laplace noise of scale 1 comes back exactly 1e17), and the
    rounding of the exact values themselves can move neighbouring datasets'
    answers further apart than the sensitivity. Every path that adds noise to
    data calls this before sampling: `measure` (run, release, DAWA's stage 2,
    MWEM, the online answerer), DAWA's stage-1 costs and MWEM's selection scores.

    Privacy: the refusal depends on the data only through one bit, whether
    some value reaches the threshold ``2^e`` with ``e = floor(log2(scale /
    NOISE_RESOLUTION)) + 53`` (2^49 = 5.6e14 at scale 1), which the noise
    scale alone fixes; the message states that threshold, never the value.

    Parameters
    ----------
    values : array_like
        The values the noise is added to.
    scale : float or array_like
        Laplace scale b, Gaussian sigma or exponential scale, one for all values or one each
        (a zero scale, no noise, is not checked).
    what : str
        What the values are, for the message.

    Raises
    ------
    PrecisionError
        An `InputError` naming the threshold, the float64 spacing there and the noise scale.

    Examples
    --------
    >>> check_noise_resolution([1e6, 3.0], 1.0)
    >>> check_noise_resolution([1e17], 1.0)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.PrecisionError: the exact strategy answers: a value reaches 2^49 = 5.6295e+14, where float64 values are 0.125 apart, too coarse for noise of scale 1 (the spacing must be at most the scale / 16): the noise would be lost in rounding; rescale the data (count in larger units), split it into parts with smaller counts, or spend a smaller epsilon (larger noise)
    """
    v = np.abs(np.asarray(values, dtype=float)).ravel()
    if v.size == 0:
        return
    s = np.broadcast_to(np.asarray(scale, dtype=float), v.shape)
    finite = np.isfinite(v)
    if not np.all(finite):
        raise PrecisionError(f"{what} overflow float64: the data counts are too large; rescale the data (count in larger units) or split it into parts with smaller counts")
    gap = np.spacing(v)
    bad = (gap * NOISE_RESOLUTION > s) & (s > 0)  # a zero scale adds no noise (a choice of one)
    if np.any(bad):
        scale_k = float(s[np.argmax(bad)])
        e = resolution_exponent(scale_k)
        if e < 0:  # any count of 1 or more is too coarse: the epsilon, not the data, is the cause
            raise PrecisionError(
                f"{what}: noise of scale {scale_k:.3g} is finer than float64 can add to any value from 2^{e} = {2.0**e:.5g} up "
                f"(the spacing there exceeds the scale / {NOISE_RESOLUTION}): the epsilon is too large for the noise to survive rounding; use a smaller epsilon"
            )
        raise PrecisionError(
            f"{what}: a value reaches 2^{e} = {2.0**e:.5g}, where float64 values are {np.spacing(2.0**e):.3g} apart, too coarse for noise of scale "
            f"{scale_k:.3g} (the spacing must be at most the scale / {NOISE_RESOLUTION}): the noise would be lost in rounding; "
            "rescale the data (count in larger units), split it into parts with smaller counts, or spend a smaller epsilon (larger noise)"
        )


def resolution_exponent(scale: float) -> int:
    """The least e such that float64 values from ``2^e`` up are too coarse for noise of ``scale``.

    Their spacing, ``2^(e - 52)``, exceeds ``scale / NOISE_RESOLUTION`` (the rule of `check_noise_resolution`).

    Parameters
    ----------
    scale : float
        The noise scale (Laplace b or Gaussian sigma), positive.

    Returns
    -------
    int
        ``floor(log2(scale / NOISE_RESOLUTION)) + 53``.

    Examples
    --------
    With ``NOISE_RESOLUTION = 16``: from ``2^49`` up float64 values are ``2^-3 = 1/8`` apart, more than ``1/16``:

    >>> resolution_exponent(1.0)
    49
    >>> resolution_exponent(16.0)  # log2(16 / 16) = 0
    53
    """
    return math.floor(math.log2(scale / NOISE_RESOLUTION)) + 53


def check_finite_answers(answers: np.ndarray) -> np.ndarray:
    """The answers, or `InputError` if any is NaN or infinite (every `Release` checks its answers).

    Examples
    --------
    >>> check_finite_answers([1.0, 2.0]).tolist()
    [1.0, 2.0]
    >>> check_finite_answers([1.0, np.inf])
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: the reconstructed answers overflow float64: the data counts or the noise are too large
    """
    answers = np.asarray(answers, dtype=float)
    if not np.all(np.isfinite(answers)):
        raise InputError("the reconstructed answers overflow float64: the data counts or the noise are too large")
    return answers


def measure(
    A, x: np.ndarray, privacy: Privacy, rng=None, sampler: str | None = None, what: str = "the exact strategy answers"
) -> tuple[np.ndarray, float]:
    """Noisy strategy answers ``y = A x + noise`` calibrated to A's sensitivity.

    Parameters
    ----------
    A : ndarray, sparse matrix, KroneckerMatrix or Strategy
    x : ndarray (n,)
        The histogram.
    privacy : PureDP or ApproxDP
    rng : numpy Generator or int, optional
        Seed/generator for the ``"simulate"`` sampler.
    sampler : {'opendp', 'simulate'}, optional
        Default: ``'simulate'`` if ``rng`` is given, else the vetted ``'opendp'``.
    what : str, optional
        What ``A x`` is, for the message of a `PrecisionError` (see
        `check_noise_resolution`).

    Returns
    -------
    y : ndarray
    scale : float
        Laplace scale or Gaussian sigma.

    Examples
    --------
    The identity on two cells has L1 sensitivity 1: Laplace scale ``1 / 0.5 = 2``.

    >>> from strategy_opt.privacy import PureDP
    >>> y, scale = measure(np.eye(2), [10.0, 20.0], PureDP(0.5), rng=0)
    >>> y.shape, scale
    ((2,), 2.0)
    """
    A = _as_operator_matrix(A, keep_kronecker=True)  # its answers by the factors, at any size
    check_privacy(privacy)
    x = _check_vector(_as_histogram(x), A.shape[1], "data", "the strategy's columns number")
    sampler = resolve_sampler(sampler, rng)
    delta_A = sensitivity(A, privacy.p)
    if not math.isfinite(delta_A):
        raise InputError("strategy has NaN or infinite entries")
    if delta_A <= 0:
        raise InputError("strategy has zero sensitivity (all-zero matrix)")
    scale = _check_noise(privacy, delta_A)
    exact = kron_apply(A.factors, x) if isinstance(A, KroneckerMatrix) else np.asarray(A @ x, dtype=float).ravel()
    check_noise_resolution(exact, scale, what)  # also refuses answers that overflow
    if sampler == "simulate":
        rng = np.random.default_rng(rng)
        noise = rng.laplace(0.0, scale, exact.size) if privacy.notion == "pure" else rng.normal(0.0, scale, exact.size)
        return exact + noise, scale
    from .samplers import opendp_release

    return opendp_release(exact, privacy, delta_A)


def _pinv(F) -> np.ndarray:
    """``F^+ = (F^T F)^+ F^T`` with the error profile's rank cutoff (`EIG_RTOL`), which the support check of a
    Kronecker strategy applies to each factor: a direction it counts as unmeasured gets no weight here either."""
    return ErrorProfile(F).solve_normal(F.T.toarray() if sp.issparse(F) else np.asarray(F, dtype=float).T)


def _least_squares(A, y: np.ndarray) -> np.ndarray:
    if not sp.issparse(A) and A.size <= DENSE_LSTSQ_ENTRIES:
        return np.linalg.lstsq(np.asarray(A, dtype=float), y, rcond=None)[0]
    A = sp.csr_matrix(A)
    res = lsmr(A, y, atol=1e-14, btol=1e-14, maxiter=20 * max(A.shape))
    if res[1] == 7:
        log.warning("LSMR reached its iteration limit; the reconstruction may be inaccurate")
    return res[0]


def _reduced_system(M, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, c)`` with ``||R x - c||^2 = ||M_k x - b||^2 - const`` and ``R`` at most n x n.

    ``M_k`` is M without its negligible directions: those of eigenvalue of
    ``M^T M`` below `EIG_RTOL` of the largest, the rank cutoff of the error
    analysis (`strategy_opt.error.ErrorProfile`, whose test this repeats: a
    Cholesky factor when its pivots stay above the cutoff, else the
    eigendecomposition). Without the cutoff, rounding level
    directions (singular values ~1e-16 of the largest, left by an optimiser on
    cells no query reads) carry weights ~1e15 and let NNLS fit the noise with
    cells of ~1e14 that the workload partly sees.
    """
    MtM = (M.T @ M).toarray() if sp.issparse(M) else M.T @ M
    d = np.diag(MtM)
    if d.min() > 0 and np.count_nonzero(MtM) == np.count_nonzero(d):  # disjoint columns: exact, no cutoff (as ErrorProfile)
        root = np.sqrt(d)
        return np.diag(root), (M.T @ b) / root
    try:  # positive definite and well inside the cutoff: a Cholesky factor, several times faster than eigh
        U = la.cholesky(MtM, lower=False, check_finite=False)
        pivots = np.diag(U) ** 2
        if pivots.min() > EIG_RTOL * pivots.max():
            return U, la.solve_triangular(U, M.T @ b, trans="T", check_finite=False)
    except la.LinAlgError:
        pass
    R = gram_factor(MtM).T  # rows sqrt(lam_i) v_i^T over the kept eigenpairs: R R^T = diag(lam)
    return R, (R @ (M.T @ b)) / np.einsum("ij,ij->i", R, R)


def _nonneg_ls(M, b: np.ndarray, *, reduced: bool = False) -> np.ndarray:
    """``argmin_{x >= 0} ||M x - b||``.

    With at most `NNLS_DENSE_MAX_N` columns: scipy's active-set NNLS, exact, on
    `_reduced_system` (``reduced=True``: M already is such a factor, e.g. of
    ``W^T W``): hierarchy on 4096 cells 7-11 s on 2 cores. Larger (sparse)
    systems: `_nonneg_lbfgsb` on ``||M x - b||^2 / 2`` (two sparse products a
    step), started from the least-squares estimate clipped at 0.
    """
    n = M.shape[1]
    if n <= NNLS_DENSE_MAX_N:
        R, c = (np.asarray(M, dtype=float), b) if reduced else _reduced_system(M, b)
        return nnls(R, c, maxiter=50 * n)[0]
    M = sp.csr_matrix(M)
    Mt = M.T.tocsr()

    def objective(x):
        r = M @ x - b
        return 0.5 * float(r @ r), Mt @ r

    log.info("non-negative least squares on a %d x %d system (L-BFGS-B from the clipped least-squares estimate)", *M.shape)
    return _nonneg_lbfgsb(objective, np.clip(_least_squares(M, b), 0.0, None), "nnls")


def _nonneg_lbfgsb(objective, x0: np.ndarray, label: str) -> np.ndarray:
    """``argmin_{x >= 0}`` of a convex quadratic by L-BFGS-B with bounds, from ``x0 >= 0``.

    ``objective(x)`` returns ``(f, gradient)``. It is divided by its value at
    ``x0``, so it starts at 1: L-BFGS-B's tests are partly absolute (its
    ``ftol`` is relative to ``max(|f|, 1)``), and an objective far below 1
    ended the run at the start (counts of 1e5-1e6 on 8192 cells scaled by
    ``||b||^2`` stopped after one step with 400x the optimum). Up to
    `NNLS_MAX_ITER` steps in all (the problem is convex: its stationary point
    is the optimum), restarted from where a run stops while a run still lowers the objective
    (`LBFGSB_RESTARTS`). The cells are divided by the largest entry of ``x0`` for the same
    reason: its projected-gradient test ``gtol`` is absolute, and with the
    objective at 1 the gradient scales as one over the counts (1e12 per cell
    stopped at 1.5x the optimum).
    """
    f0 = objective(x0)[0]
    if not f0 > 0:  # x0 already fits exactly
        return x0
    top = float(np.max(x0, initial=0.0))
    unit = top if 0.0 < top < np.inf else 1.0
    progress = Progress()

    def scaled(y):
        f, g = objective(unit * y)
        return f / f0, g * (unit / f0)

    def report(y):
        if progress.due():  # the objective costs two products: only when a line is due
            f = objective(unit * y)[0]
            log.info("%s: L-BFGS-B on %d cells, objective %.8g (%.4g of the start)", label, y.size, f, f / f0)

    y, value, left = x0 / unit, 1.0, NNLS_MAX_ITER
    for _ in range(LBFGSB_RESTARTS + 1):
        res = minimize(scaled, y, jac=True, method="L-BFGS-B", bounds=Bounds(0.0, np.inf), callback=report,
                       options={"maxiter": left, "maxfun": 2 * left, "ftol": 1e-15, "gtol": 1e-12})
        improved = res.fun < value * (1.0 - LBFGSB_RESTART_RTOL)
        y, value, left = res.x, min(value, float(res.fun)), left - res.nit
        if res.status == 1 or left <= 0:
            log.warning("%s: L-BFGS-B reached its iteration limit (%d); the reconstruction may be inaccurate", label, NNLS_MAX_ITER)
            break
        if not improved:
            break
    return np.clip(unit * y, 0.0, None)


#: `_nonneg_lbfgsb` restarts L-BFGS-B from where it stopped (a fresh curvature memory) this many times at most,
#: while a run lowers the objective by more than `LBFGSB_RESTART_RTOL` of its value: a stop on stale curvature
#: pairs left prefix:300's hybrid fit 1.1e-4 above the optimum (the same run from rounding-level different
#: gradients reached it; one restart does too, where running on with ``ftol = 0`` took hybrid fits past 4096
#: cells to the iteration cap, 1.5x the time).
LBFGSB_RESTARTS = 3
LBFGSB_RESTART_RTOL = 1e-9


def _hybrid(workload: Workload, x_ls: np.ndarray) -> np.ndarray:
    """``argmin_{x >= 0} ||W x - W x_ls||``: the second step of the hybrid estimator.

    Up to `NNLS_DENSE_MAX_N` cells, exact active-set NNLS on a factor R of the
    unit-diagonal scaling of ``W^T W`` (eigenvalues at rounding level dropped), in
    cells scaled by their column norms. Larger domains: `_nonneg_lbfgsb` on ``(x - x_ls)^T W^T W (x - x_ls) / 2``, its gradient by the workload's
    `Workload.gram_matvec` where it costs less than the dense Gram matrix's (interval, sparse and
    Kronecker workloads; all ranges in O(n)), else by ``W^T W`` (n x n), never a factor
    (at 8192 cells the factor took minutes and the L-BFGS-B steps on it more).
    """
    n = workload.n
    if n <= NNLS_DENSE_MAX_N:
        # in the cells z = D x (D^2 = diag(W^T W)), R^T R = D^-1 W^T W D^-1 has a unit diagonal; dropping only
        # its eigenvalues at eigh's rounding level keeps the direction of a query far smaller than the others
        # (rows 1e5 apart: eigenvalues 1e10 apart), which the error analysis's rank cutoff (EIG_RTOL) on
        # W^T W itself dropped, leaving that query's answer at 0
        G = workload.gram()
        d = np.sqrt(np.diag(G))
        read = np.flatnonzero(d > 0)  # cells no query reads get 0: a rounding-level column of theirs in R took
        d = d[read]  # NNLS's active set with a coefficient of 1e17 and spoiled the fit of the others
        Gs = G[np.ix_(read, read)]  # one copy (G may be the workload's cached, read-only Gram)
        Gs /= d[:, None]
        Gs /= d[None, :]
        R = gram_factor(Gs, rtol=max(read.size, 16) * np.finfo(float).eps).T
        del Gs
        x = np.zeros(n)
        x[read] = _nonneg_ls(R, R @ (d * x_ls[read]), reduced=True) / d
        return x
    if workload.gram_matvec_cost() <= n * n:
        gram_times = workload.gram_matvec
    else:
        G = workload.gram()

        def gram_times(d):
            return G @ d

    def objective(x):
        g = gram_times(x - x_ls)
        return 0.5 * float((x - x_ls) @ g), g

    log.info("hybrid estimator: non-negative fit to the least-squares answers on %d cells (L-BFGS-B from the clipped estimate)", n)
    return _nonneg_lbfgsb(objective, np.clip(x_ls, 0.0, None), "hybrid")


def reconstruct(A, y: np.ndarray, estimator: str = "ls", workload: Workload | None = None, profile: ErrorProfile | None = None) -> np.ndarray:
    """Estimate the histogram from noisy strategy answers.

    Parameters
    ----------
    A : strategy matrix (p x n)
    y : ndarray (p,)
    estimator : {'ls', 'nnls', 'hybrid'}
        ``ls``: minimum-norm least squares ``A^+ y``; ``nnls``: ``argmin_{x >= 0} ||A x - y||``;
        ``hybrid`` (Li 2013, Sec. 3.5.2): ``argmin_{x >= 0} ||W x - W A^+ y||``, solved
        through a factor of ``W^T W`` so the m x n workload is never formed.
    workload : Workload
        Required for ``hybrid``.
    profile : ErrorProfile, optional
        A's error profile, when already built (else it is built up to
        `MAX_DENSE_N` cells, or for a diagonal ``A^T A``). ``ls`` and the first
        step of ``hybrid`` solve ``A^T A x = A^T y`` through it, so ``A^+``
        has the rank cutoff of the support check and the error analysis
        (`EIG_RTOL`: singular values below ``1e-5`` of the largest count as
        zero); a strategy kept as its Kronecker factors is inverted factor by
        factor with the same cutoff. Past `MAX_DENSE_N` cells ``ls`` is LSMR.

    Returns
    -------
    ndarray (n,)
        The estimated histogram.

    Examples
    --------
    Cells measured alone and as their sum, the sum answered 1 too high: least
    squares spreads the inconsistency, ``(A^T A)^{-1} A^T y = [10, 13] / 3``.

    >>> A = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> reconstruct(A, np.array([3.0, 4.0, 8.0])).round(4).tolist()
    [3.3333, 4.3333]
    >>> reconstruct(np.eye(2), np.array([-1.0, 5.0]), estimator="nnls").tolist()  # no negative counts
    [0.0, 5.0]
    """
    A = _as_operator_matrix(A, keep_kronecker=estimator == "ls")
    y = _check_vector(y, A.shape[0], "noisy answers y", "the strategy's rows number")
    if isinstance(A, KroneckerMatrix):  # pinv(A_1 (x) A_2) = pinv(A_1) (x) pinv(A_2): least squares factor by factor
        if estimator != "ls":
            raise InputError(
                f"the {estimator} estimator needs the flat {A.shape[0]}x{A.shape[1]} strategy ({flat_nonzeros(A):.3g} non-zeros); "
                f"this Kronecker strategy is kept as its factors: use {setting('estimator', 'ls')}"
            )
        return kron_apply([_pinv(f) for f in A.factors], y)
    if estimator == "nnls":
        return _nonneg_ls(A, y)
    if estimator not in ("ls", "hybrid"):
        raise InputError(f"unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")
    if estimator == "hybrid" and workload is None:
        raise InputError("the hybrid estimator needs the workload")
    if profile is None and (A.shape[1] <= MAX_DENSE_N or diagonal_inverse(A) is not None):
        profile = ErrorProfile(A)
    x_ls = _least_squares(A, y) if profile is None else profile.solve_normal(np.asarray(A.T @ y).ravel())
    if estimator == "hybrid":
        return _hybrid(workload, x_ls)
    return x_ls


def answer_intervals(A, workload: Workload, privacy: Privacy, answers: np.ndarray, level: float = CONFIDENCE, profile: ErrorProfile | None = None):
    """Two-sided intervals for LS answers: ``answer +- z * sd_i``.

    ``sd_i^2 = Var(noise) * w_i (A^T A)^+ w_i^T``. Gaussian mechanism: ``z`` is
    the normal quantile and the interval is exact. Laplace mechanism: each
    answer's error is a weighted sum of independent Laplace variables, whose
    tails at the 95% level lie between the normal's and a single Laplace
    variable's of the same variance; ``z`` is the larger of the two quantiles
    (``ln(1 / (1 - level)) / sqrt(2)``, 2.118 at 95%), so the interval is exact
    when one noisy count carries the answer (identity) and conservative
    otherwise (the normal quantile alone covers only 93.7% for the identity).

    Returns ``(lower, upper)`` or ``(None, None)`` when the domain is too large
    for a dense error profile.

    Parameters
    ----------
    A : strategy matrix (p x n)
        The strategy that was measured.
    workload : Workload
        The queries answered.
    privacy : PureDP or ApproxDP
        The notion and budget of the measurement.
    answers : ndarray (m,)
        The workload answers reconstructed by least squares.
    level : float
        Coverage, strictly between 0 and 1 (default `CONFIDENCE`).
    profile : ErrorProfile, optional
        A's error profile, when already built.

    Returns
    -------
    lower, upper : ndarray (m,) or None

    Examples
    --------
    The identity at epsilon = 1 answers each cell with one Laplace(1) variable:
    ``P(|noise| > t) = exp(-t)``, so the 95% half-width is ``ln 20 = 2.9957``.

    >>> from strategy_opt.privacy import PureDP
    >>> from strategy_opt.workload import identity
    >>> lo, hi = answer_intervals(np.eye(2), identity(2), PureDP(1.0), np.array([10.0, 20.0]))
    >>> lo.round(4).tolist(), hi.round(4).tolist()
    ([7.0043, 17.0043], [12.9957, 22.9957])
    """
    if not (isinstance(level, (int, float, np.floating)) and not isinstance(level, bool) and 0.0 < level < 1.0):
        raise InputError(f"level must be a number strictly between 0 and 1 (0.95 for 95% intervals), got {level!r}")
    A = _as_operator_matrix(A)
    check_columns(A, workload)
    answers = _check_vector(answers, workload.m, "answers", "the workload's queries number")
    prof = profile
    if prof is None:
        try:
            prof = ErrorProfile(A)
        except InputError:
            log.warning("domain too large for per-query intervals; intervals omitted")
            return None, None
    try:
        qv = prof.query_variances(workload)
    except InputError as exc:  # queries too many to enumerate (the answers come from the implicit operator)
        log.warning("per-query intervals omitted: %s", exc)
        return None, None
    return _intervals(A, privacy, answers, qv, level)


def _intervals(A, privacy: Privacy, answers: np.ndarray, query_variances: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``answers -+ z sd_i`` with ``sd_i^2 = Var(noise) * query_variances_i`` and z as `answer_intervals` chooses it."""
    var = privacy.noise_variance(sensitivity(A, privacy.p)) * query_variances
    z = NormalDist().inv_cdf(0.5 + level / 2)
    if privacy.p == 1:
        z = max(z, -math.log1p(-level) / math.sqrt(2.0))
    half = z * np.sqrt(np.clip(var, 0, None))
    return answers - half, answers + half


def probe_support(A, workload: Workload, probes: int = SUPPORT_PROBES, seed: int = 0) -> bool:
    """Randomised support test for domains too large for the n x n one.

    Two probes per round, each solved by LSMR on ``A^T``:

    * per query: ``r = (I - P) z``, a standard Gaussian vector z less its
      least-squares fit by A's rows (P projects on A's row space). Then
      ``w . r = ((I - P) w) . z`` is normal with variance ``||(I - P) w||^2``,
      so ``(w . r)^2 / ||w||^2`` is the share of ``||w||^2`` outside A's row
      space (the dense test's per-query share) times a chi-square variable
      with one degree of freedom: an unbiased estimate of it, whatever the
      size of A's null space or the number of other queries. A supported
      query gives zero up to LSMR's accuracy. A query whose estimate exceeds
      `SUPPORT_RTOL` in any round is refused. A query with share s is missed
      by one round with probability ``P(chi2_1 < SUPPORT_RTOL / s)``: about
      0.8% at ``s = 1e-4``, 8% at ``s = 1e-6``, and the rounds are
      independent.
    * mass: a random combination ``W^T g`` of the queries
      (`Workload.row_space_sample`) tested for lying in A's row space; its
      share outside estimates the dense test's share of ``||W||_F^2`` but can
      exceed every query's own share, so it refuses only beyond
      `SUPPORT_PROBE_MASS_RTOL`.

    Parameters
    ----------
    A : strategy matrix (p x n), dense or sparse
    workload : Workload
    probes : int
        Rounds of the two probes.
    seed : int
        Seed of the probes (the test does not touch the data or the noise).

    Returns
    -------
    bool
        True when every probe passed, False when the test is undecided (LSMR's
        iteration limit, or too many queries to draw or answer a probe).

    Raises
    ------
    InputError
        When a probe leaves A's row space: A does not support the workload.

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.workload import prefix
    >>> probe_support(np.tril(np.ones((4, 4))), prefix(4))
    True
    >>> probe_support(np.vstack([np.eye(4)[:2], [0.0, 0.0, 1.0, 1.0]]), prefix(4))  # cells 2 and 3 only as their sum
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.SupportError: strategy does not support the workload (W A+ A != W): about 0.0239 of query 2's squared norm lies outside the strategy's row space (a random probe's estimate); add rows (e.g. the identity) so that every query is a linear combination of strategy queries
    """
    rng = np.random.default_rng(seed)
    At = A.T.tocsr() if sp.issparse(A) else np.asarray(A, dtype=float).T

    def solve(b: np.ndarray) -> tuple:
        """LSMR's least-squares fit of b by A's rows: (y, istop, itn, ||A^T y - b||, ...)."""
        return lsmr(At, b, atol=1e-14, btol=1e-14, maxiter=SUPPORT_PROBE_MAX_ITER)

    try:
        norms = workload.diagonal_query_variances(np.ones(workload.n)) if workload.m <= SUPPORT_PROBE_MAX_QUERIES else None
    except InputError:  # rows too many to build
        norms = None
    decided = norms is not None
    for _ in range(probes):
        z = rng.standard_normal(workload.n)
        y, istop = solve(z)[:2]
        r = z - At @ y
        if istop in (3, 7):
            decided = False
        elif norms is not None and np.linalg.norm(r) > SUPPORT_PROBE_NULL_FLOOR * np.linalg.norm(z):  # A has a null space
            y, istop = solve(r)[:2]  # once more: what the first solve left of A's row space in r
            r = r - At @ y
            shares = np.divide(workload.matvec(r) ** 2, norms, out=np.zeros(workload.m), where=norms > 0)
            i = int(np.argmax(shares))
            if shares[i] > SUPPORT_RTOL and istop not in (3, 7):
                raise SupportError(
                    f"strategy does not support the workload (W A+ A != W): about {shares[i]:.3g} of query {i}'s squared norm "
                    f"lies outside the strategy's row space (a random probe's estimate); {ADD_ROWS}"
                )
        v = workload.row_space_sample(rng)
        if v is None:
            decided = False
            continue
        norm = float(np.linalg.norm(v))
        if norm == 0:
            continue
        fit = solve(v / norm)
        istop, share = fit[1], float(fit[3]) ** 2
        if share <= SUPPORT_PROBE_MASS_RTOL:
            continue
        if istop in (3, 7):  # condition or iteration limit: not converged, undecided
            decided = False
            continue
        raise SupportError(
            f"strategy does not support the workload (W A+ A != W): {share:.3g} of a random combination of the queries "
            f"lies outside the strategy's row space; {ADD_ROWS}"
        )
    return decided


def check_measured_cells(A, workload: Workload, cell_weights: np.ndarray | None = None) -> None:
    """Refuse a strategy with an all-zero column under a cell that the workload queries.

    A zero strategy column means the cell is never measured; that is harmless
    when no query touches the cell (a zero workload column) and fatal
    otherwise. This necessary condition for support is cheap (O(nnz(A) + m + n)),
    so it also guards domains too large for the full support check.

    Parameters
    ----------
    A : strategy matrix (p x n)
    workload : Workload
    cell_weights : ndarray (n,), optional
        ``diag(W^T W)`` when already known.

    Raises
    ------
    SupportError
        When a queried cell is never measured.

    Examples
    --------
    >>> from strategy_opt.workload import from_matrix, prefix
    >>> A = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # cell 2 never measured
    >>> check_measured_cells(A, from_matrix([[1.0, 1.0, 0.0]]))  # nor queried: fine
    >>> check_measured_cells(A, prefix(3))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.SupportError: strategy does not support the workload: its column(s) 2 (1 in all) are zero, ...
    """
    col = np.asarray(abs(A).sum(axis=0)).ravel() if sp.issparse(A) else np.abs(np.asarray(A)).sum(axis=0)
    unmeasured = np.flatnonzero(col == 0)
    if unmeasured.size == 0:
        return
    if cell_weights is None:
        try:
            cell_weights = workload.gram_diagonal()
        except InputError:  # a workload too large to build whose structure is not known here
            log.warning("strategy has %d all-zero columns; could not check that the workload never queries them", unmeasured.size)
            return
    weights = cell_weights
    bad = unmeasured[weights[unmeasured] > 0]
    if bad.size:
        shown = ", ".join(map(str, bad[:5])) + (", ..." if bad.size > 5 else "")
        raise SupportError(
            f"strategy does not support the workload: its column(s) {shown} ({bad.size} in all) are zero, so those "
            "cells are never measured, but the workload queries them; add rows that measure them (e.g. the identity)"
        )


def as_real(v, what: str, items: str = "numbers") -> np.ndarray:
    """``v`` as a float array of its own shape; `InputError` for sparse, non-numeric or complex values.

    Parameters
    ----------
    v : array_like
        The values.
    what : str
        Names them in error messages (``"data"``).
    items : str
        What the entries are, for the messages.

    Examples
    --------
    >>> as_real([[1, 2]], "data").tolist()
    [[1.0, 2.0]]
    >>> as_real([1j], "data")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: data must be an array of real numbers, got complex entries
    """
    if sp.issparse(v):
        raise InputError(f"{what} must be a dense array of {items}, got a scipy.sparse matrix (use .toarray())")
    if isinstance(v, (str, bytes)):
        raise InputError(f"{what} must be an array of {items}, got a string {v[:40]!r}")
    try:
        arr = np.asarray(v)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InputError(f"{what} must be an array of {items}: {exc}") from None
    if arr.dtype.kind not in "biuf":
        kind = "complex" if arr.dtype.kind == "c" else f"dtype {arr.dtype}"
        raise InputError(f"{what} must be an array of real {items}, got {kind} entries")
    return arr.astype(float, copy=False)


def _as_histogram(x, domain: tuple[int, ...] | None = None) -> np.ndarray:
    """The data as a flat float array; `InputError` for sparse, non-numeric or complex data.

    With a ``domain``, an array of more than one dimension must have exactly
    that shape, as the CLI requires of data files: the transpose of a 4 x 2
    table has the right number of cells in the wrong order, and a 4 x 8 table
    for a 1-D domain of 32 cells is no vector of them.
    """
    arr = as_real(x, "data", "counts")
    if domain is not None and arr.ndim > 1 and arr.shape != tuple(domain):
        raise InputError(f"data has shape {arr.shape} but the workload's domain is {tuple(domain)} (cells in row-major order); pass an array of that shape or a flat one")
    return arr.ravel()


def check_histogram(x, n: int | None = None, domain: tuple[int, ...] | None = None) -> np.ndarray:
    """Data as a flat float array of counts, checked once for every method that answers on it.

    Parameters
    ----------
    x : array_like
        Counts: a vector, or an array of the domain's shape (flattened in row-major order).
    n : int, optional
        Number of cells the data must have (the workload's).
    domain : tuple of int, optional
        The workload's domain: a multi-dimensional array must have this shape.

    Raises
    ------
    InputError
        Sparse, non-numeric or complex data, another shape or size, an empty,
        NaN, infinite or negative count.

    Examples
    --------
    >>> check_histogram([[1, 2], [3, 4]], n=4, domain=(2, 2)).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    x = _as_histogram(x, domain)
    if x.size == 0:
        raise InputError("histogram is empty")
    if n is not None and x.size != n:
        raise InputError(f"data has {x.size} cells but the workload has {n}")
    if not np.all(np.isfinite(x)):
        raise InputError("data contains NaN or infinite counts")
    if np.any(x < 0):
        raise InputError(f"data (histogram) has negative counts (smallest {x.min():g}); counts must be >= 0")
    return x


def run(
    strategy,
    x: np.ndarray,
    workload: Workload,
    privacy: Privacy,
    *,
    estimator: str = "ls",
    rng=None,
    sampler: str | None = None,
    intervals: bool = True,
    allow_undecided_support: bool = False,
) -> Release:
    """Answer a workload through a strategy: measure, reconstruct, answer.

    Parameters
    ----------
    strategy : Strategy or matrix
        A matrix (array-like, sparse or KroneckerMatrix) is checked as `Strategy` checks it.
    x : array_like (n,)
        Histogram (flattened C-order), non-negative finite counts (dense).
    workload : Workload, str or array_like
        A workload object, a SPEC string or a matrix (as for `strategy_opt.solve`).
    privacy : PureDP or ApproxDP
        The privacy object with its budget (not the notion's name).
    estimator : {'ls', 'nnls', 'hybrid'}
    rng : int or numpy Generator, optional
        Non-negative seed or generator for the ``simulate`` sampler (refused with ``'opendp'``).
    sampler : {'opendp', 'simulate'}, optional
        Default: ``'simulate'`` if ``rng`` is given, else the vetted ``'opendp'``
        (use it for answers that are released).
    intervals : bool
        Compute 95% intervals (LS estimator only).
    allow_undecided_support : bool
        Past the dense limit support is tested by random probes (`probe_support`);
        when they cannot decide (LSMR does not converge on a badly conditioned
        strategy) the strategy is refused unless this is True (``--force``), and
        then only its measured cells are checked.

    Returns
    -------
    Release

    Notes
    -----
    Unlike ``strategy-opt run``, this does not compare the workload recorded
    in the strategy's metadata with ``workload``: any strategy that supports
    the workload answers it.

    A Kronecker strategy (`strategy_opt.error.KroneckerMatrix`, as a per-attribute
    ``solve`` returns and a strategy file with ``kronecker_factor_shapes`` reads
    back) on a product workload with matching factors is checked, measured and
    inverted factor by factor, as `strategy_opt.api.error_report` analyses it:
    each factor must support its factor workload under the rank cutoff
    (`EIG_RTOL`), so a product whose smallest singular value is below the
    cutoff only relative to the product's largest is answered (exactly, with
    wide intervals) where its multiplied-out matrix would be refused.

    Raises
    ------
    InputError
        If the strategy does not support the workload (an all-zero strategy
        column under a queried cell included), the shapes disagree, the data
        have negative, NaN or infinite counts, the noise is not a finite
        float, or an argument has the wrong type (privacy given as ``'pure'``,
        a string ``rng``, sparse data, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt import solve
    >>> from strategy_opt.privacy import PureDP
    >>> h = solve("prefix:4", privacy="pure", method="hierarchical", branching=2)
    >>> r = run(h, np.array([5.0, 0.0, 2.0, 1.0]), "prefix:4", PureDP(1e9), rng=0)  # a huge epsilon: almost no noise
    >>> np.round(r.answers, 3).tolist(), bool(np.all(r.lower <= r.answers) and np.all(r.answers <= r.upper))
    ([5.0, 5.0, 7.0, 8.0], True)
    """
    from .api import as_workload

    check_privacy(privacy)
    workload = as_workload(workload)
    if not isinstance(strategy, Strategy):
        strategy = Strategy(strategy)  # checks the matrix: 2-D, real, finite
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise InputError(f"unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")
    kron = None
    if estimator == "ls" and isinstance(strategy.matrix, KroneckerMatrix):
        # a product strategy on a product workload with its factors: checked, measured and inverted factor by factor at
        # any size (prefix:64*all-range:64 multiplied out: 4.3 million non-zeros, 72 s against 1 s); None on a
        # workload of other factors or columns, which the flat checks below then take
        kron = check_kronecker_support(strategy.matrix, workload)
    A = _as_operator_matrix(strategy, keep_kronecker=kron is not None)
    x = check_histogram(x, workload.n, workload.domain)
    check_columns(A, workload)
    if estimator != "ls" and isinstance(A, KroneckerMatrix):  # before any noise is drawn
        raise InputError(
            f"the {estimator} estimator needs the flat {A.shape[0]}x{A.shape[1]} strategy ({flat_nonzeros(A):.3g} non-zeros); "
            f"this Kronecker strategy is kept as its factors: use {setting('estimator', 'ls')}"
        )
    if estimator == "hybrid" and workload.n > MAX_DENSE_N:
        raise InputError(
            f"the hybrid estimator runs up to {MAX_DENSE_N} cells (where its least-squares step and W^T W are dense), "
            f"this workload has {workload.n}; "
            f"use {setting('estimator', 'ls')} or {setting('estimator', 'nnls')}"
        )
    if not isinstance(intervals, (bool, np.bool_)):
        raise InputError(f"intervals must be True or False, got {intervals!r}")
    require_memory(  # before any noise is drawn (the CLI checks this when it parses the SPEC)
        float(min(BYTES_PER_QUERY * workload.m, 10**300)), f"answering the {workload.m:,} queries of workload {workload.spec!r}", "use fewer queries"
    )
    sampler = resolve_sampler(sampler, rng)
    prof = marginal = None
    if workload.n >= PROGRESS_MIN_N:
        log.info("run: checking that the %d x %d strategy supports the workload", *A.shape)
    if not isinstance(A, KroneckerMatrix) and (workload.n <= MAX_DENSE_N or diagonal_inverse(A) is not None):  # a diagonal A^T A (the identity) needs no n x n matrix
        prof = ErrorProfile(A)
        if not prof.full_rank:  # full column rank measures every cell and supports every workload
            G = workload.gram()
            check_measured_cells(A, workload, np.diag(G))
            prof.check_support(G, workload=workload)
    else:
        if kron is None:  # a product strategy on a product workload: checked factor by factor
            kron = check_kronecker_support(strategy.matrix, workload)
        if kron is None and isinstance(A, KroneckerMatrix):
            raise InputError(
                f"this {A.shape[0]}x{A.shape[1]} Kronecker strategy is kept as its factors ({flat_nonzeros(A):.3g} non-zeros flat); "
                f"it answers product workloads whose factors match its own, not {workload.spec!r}"
            )
        if kron is None and isinstance(strategy.matrix, MarginalsMatrix):  # None for another workload; checks support
            marginal = marginals_query_variances(strategy.matrix, workload)
        if marginal is not None:
            log.info("domain of %d cells: support checked per eigenspace of the marginal algebra", workload.n)
        elif kron is None:
            check_measured_cells(A, workload)
            if probe_support(A, workload):
                log.info("domain of %d cells: support checked by %d random probes; intervals are omitted (they need the n x n error profile)", workload.n, SUPPORT_PROBES)
            elif allow_undecided_support:
                log.warning("domain of %d cells: only measured cells are checked (the random support probes were undecided); intervals are omitted", workload.n)
            else:
                # a rank-deficient strategy with every column measured answered identity:30000 wrongly with exit 0
                raise InputError(
                    f"domain of {workload.n} cells: whether the strategy supports the workload could not be decided (the random "
                    f"support probes did not converge in {SUPPORT_PROBE_MAX_ITER} LSMR iterations: the strategy is badly conditioned "
                    "or does not support it), so its answers may be wrong; pass --force (Python: allow_undecided_support=True) "
                    "to run it with only its measured cells checked"
                )
    y, scale = measure(A, x, privacy, rng=rng, sampler=sampler)
    if workload.n >= PROGRESS_MIN_N or estimator != "ls":
        log.info("run: %d noisy strategy answers drawn; reconstructing %d cells (%s)", A.shape[0], workload.n, estimator)
    x_hat = reconstruct(A, y, estimator, workload, profile=prof)
    answers = workload.matvec(x_hat)
    lower = upper = None
    if intervals and estimator == "ls" and prof is not None:
        lower, upper = answer_intervals(A, workload, privacy, answers, profile=prof)
    elif intervals and estimator == "ls" and (kron is not None or marginal is not None):  # a structured strategy past the dense limit
        variances = marginal if marginal is not None else kronecker_query_variances(strategy.matrix, workload, kron)
        lower, upper = _intervals(A, privacy, answers, variances, CONFIDENCE)
    return Release(answers, lower, upper, x_hat, scale)
