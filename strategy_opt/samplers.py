"""Vetted noise sampling for released answers, through OpenDP.

Textbook floating-point Laplace and Gaussian sampling leaks information
through the pattern of representable outputs (Mironov, CCS 2012). Released
answers are therefore drawn by OpenDP's measurements (``make_laplace``,
``make_gaussian`` on float vectors), which sample safely and carry their own
privacy maps. The NumPy path in `strategy_opt.executor` (``sampler="simulate"``)
is for simulations and benchmarks only: it is seedable and fast.

The noise scale is the one `strategy_opt.privacy` calibrates (for the
Gaussian, that calibration is itself OpenDP's privacy map); this module checks
with OpenDP's own map that the measurement meets the target before sampling.
"""

from __future__ import annotations

import math

import numpy as np

from .exceptions import InputError, SolverError, setting
from .privacy import Privacy

__all__ = ["opendp_release", "opendp_select_max", "noisy_max_scale", "opendp_perturb", "SCALE_NUDGE_RTOL", "GAUSSIAN_NUDGE_RTOL"]

#: Where OpenDP's privacy map of the calibrated Laplace (or noisy-max) scale rounds a hair above the target
#: epsilon, the scale grows by at most this share until the map gives at most epsilon exactly (else refused).
SCALE_NUDGE_RTOL = 1e-9
#: The same for the Gaussian's sigma, calibrated by the analytic Gaussian where OpenDP's search fails.
GAUSSIAN_NUDGE_RTOL = 1e-6


def opendp_release(exact: np.ndarray, privacy: Privacy, sensitivity: float) -> tuple[np.ndarray, float]:
    """``exact + noise`` drawn by OpenDP's Laplace or Gaussian measurement, and the noise scale used.

    Parameters
    ----------
    exact : ndarray
        The exact strategy answers ``A x``.
    privacy : PureDP or ApproxDP
    sensitivity : float
        L1 (pure) or L2 (approx) sensitivity of the strategy.

    Returns
    -------
    y : ndarray
        The noisy answers.
    scale : float
        The Laplace scale or Gaussian sigma drawn: the calibrated one, or the
        least larger float (at most `SCALE_NUDGE_RTOL` above) at which
        OpenDP's own privacy map gives at most the target epsilon exactly.

    Raises
    ------
    InputError
        When OpenDP cannot certify the release (extreme epsilon or delta).
    SolverError
        When no scale within `SCALE_NUDGE_RTOL` of the calibrated one meets epsilon under OpenDP's map.

    Examples
    --------
    OpenDP's noise cannot be seeded; at epsilon = 1e6 the Laplace scale ``2 / 1e6`` leaves the answers
    unchanged at three decimals:

    >>> from strategy_opt.privacy import PureDP
    >>> y, scale = opendp_release(np.array([10.0, 20.0]), PureDP(1e6), sensitivity=2.0)
    >>> np.round(y, 3).tolist(), round(scale, 12)
    ([10.0, 20.0], 2e-06)
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = np.ascontiguousarray(np.asarray(exact, dtype=float).ravel())  # OpenDP reads float64 arrays (a list cost 4x the memory)
    scale = privacy.noise_scale(sensitivity)
    try:
        meas, scale = _measurement(dp, privacy, float(sensitivity), scale)
    except dp.OpenDPException as exc:
        raise InputError(
            f"OpenDP cannot certify this release (epsilon={privacy.epsilon:g}): {str(exc).strip().splitlines()[0]}; "
            f"use {setting('sampler', 'simulate')} for simulations with extreme parameters"
        ) from None
    return np.asarray(meas(values), dtype=float), scale


def _least_scale(achieved_at, scale: float, target: float, rtol: float):
    """The least of ``scale`` and floats above it (steps of 1, 2, 4, ... ulps, at most ``rtol`` relatively
    above) at which ``achieved_at(s)`` (OpenDP's privacy map at noise scale s) is at most ``target`` exactly;
    ``(s, what achieved_at returned)``, or ``(None, its value at scale)`` when there is none."""
    first = achieved_at(scale)
    s, step, value = scale, math.ulp(scale), first
    while s <= scale * (1.0 + rtol):
        if value[0] <= target:
            return s, value
        s, step = scale + step, 2.0 * step
        value = achieved_at(s)
    return None, first


def _measurement(dp, privacy, sensitivity: float, scale: float):
    """OpenDP's Laplace or Gaussian vector measurement at a scale its own map certifies for ``privacy``."""
    if privacy.notion == "pure":
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))

        def achieved_at(s):
            meas = dp.m.make_laplace(*space, scale=s)
            return meas.map(sensitivity), meas

        rtol = SCALE_NUDGE_RTOL
    else:
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float))

        def achieved_at(s):
            meas = dp.m.make_gaussian(*space, scale=s)
            return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), privacy.delta).map(sensitivity)[0], meas

        rtol = GAUSSIAN_NUDGE_RTOL
    found, (achieved, meas) = _least_scale(achieved_at, scale, privacy.epsilon, rtol)
    if found is None and privacy.notion == "approx":  # outside OpenDP's search the sigma is the analytic Gaussian's
        raise InputError(
            f"OpenDP cannot certify epsilon={privacy.epsilon:g}, delta={privacy.delta:g}: its privacy map gives "
            f"epsilon {achieved:.6g} for the calibrated noise sigma {scale:.6g} (OpenDP's own search, or the analytic "
            f"Gaussian calibration where that search fails: epsilon beyond about 1e4, or tiny epsilon with tiny delta); "
            f"use {setting('sampler', 'simulate')} for simulations with extreme parameters"
        )
    if found is None:
        raise SolverError(f"OpenDP's privacy map gives {achieved} for noise scale {scale}; refusing to release")
    return meas, found


def opendp_perturb(values: np.ndarray, scales: np.ndarray, granularity_exponent: int | None = None) -> np.ndarray:
    """``values[i] + Laplace(scales[i])`` for every i, sampled by OpenDP.

    A vetted sampler for noise whose privacy accounting is done elsewhere
    (DAWA's stage-1 costs, Thm 6.1): values sharing a scale go through one
    OpenDP Laplace measurement on a float vector, which adds its noise to the
    value itself (no second floating-point rounding).

    Parameters
    ----------
    values : ndarray (k,)
        Finite values.
    scales : ndarray (k,)
        Positive finite Laplace scales, one per value (a scalar is broadcast).
    granularity_exponent : int, optional
        OpenDP's ``k``: each value is rounded to a multiple of ``2^k`` and gets
        discrete Laplace noise on that grid (about 10 us per value, against
        about 38 us at OpenDP's default, finest grid). The rounding moves a
        value by up to ``2^(k-1)``, so the caller's accounting must allow each
        value's sensitivity to grow by ``2^k`` (OpenDP's own privacy map does
        the same).

    Returns
    -------
    ndarray (k,)
        The noisy values.

    Raises
    ------
    InputError
        For a non-finite value or a scale that is not positive and finite.

    Examples
    --------
    Tiny scales (the noise cannot be seeded) leave the values unchanged at six decimals:

    >>> np.round(opendp_perturb(np.array([1.0, 2.0, 3.0]), np.array([1e-9, 1e-9, 1e-8])), 6).tolist()
    [1.0, 2.0, 3.0]
    >>> opendp_perturb(np.array([1.0]), np.array([0.0]))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: noise needs finite values and positive finite scales
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = np.asarray(values, dtype=float).ravel()
    scales = np.broadcast_to(np.asarray(scales, dtype=float), values.shape)
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(scales)) and np.all(scales > 0)):
        raise InputError("noise needs finite values and positive finite scales")
    grid = {} if granularity_exponent is None else {"k": int(granularity_exponent)}
    out = np.empty_like(values)
    levels, which = np.unique(scales, return_inverse=True)
    for k, scale in enumerate(levels.tolist()):
        idx = np.flatnonzero(which == k)
        # a grid other than OpenDP's default needs the vector's length in the domain
        size = {"size": idx.size} if grid else {}
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False), **size), dp.l1_distance(T=float))
        out[idx] = dp.m.make_laplace(*space, scale=scale, **grid)(values[idx].tolist())
    return out


def noisy_max_scale(sensitivity: float, epsilon: float) -> float:
    """Scale ``2 sensitivity / epsilon`` of report-noisy-max's exponential noise, eps-DP for scores that
    one record moves by at most ``sensitivity`` in either direction (not monotone in the data).

    Examples
    --------
    >>> noisy_max_scale(1.0, 0.5)
    4.0
    """
    return 2.0 * float(sensitivity) / float(epsilon)


def opendp_select_max(scores: np.ndarray, sensitivity: float, epsilon: float) -> int:
    """Index of the best score, chosen eps-DP by OpenDP's report-noisy-max.

    The scores get exponential noise of scale ``2 * sensitivity / epsilon``
    (OpenDP's ``make_noisy_max`` under ``max_divergence``; the same law as
    permute-and-flip, McKenna & Sheldon 2020), which is eps-DP when one record
    moves every score by at most ``sensitivity`` in either direction.

    Parameters
    ----------
    scores : ndarray (k,)
        Finite quality scores; higher is better.
    sensitivity : float
        Largest change of any one score between neighbouring datasets.
    epsilon : float
        Budget of this selection.

    Returns
    -------
    int
        The selected index.

    Raises
    ------
    InputError
        When OpenDP cannot certify the selection.
    SolverError
        When no scale within `SCALE_NUDGE_RTOL` of ``2 * sensitivity / epsilon`` meets epsilon under OpenDP's map.

    Examples
    --------
    With noise of scale 2, a score 1000 above the others wins except with probability about ``e^{-500}``:

    >>> opendp_select_max(np.array([0.0, 1000.0, 3.0]), sensitivity=1.0, epsilon=1.0)
    1
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    scale = noisy_max_scale(sensitivity, epsilon)
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float))

    def achieved_at(s):
        meas = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=s)
        return meas.map(float(sensitivity)), meas

    try:
        found, (achieved, meas) = _least_scale(achieved_at, scale, float(epsilon), SCALE_NUDGE_RTOL)
    except dp.OpenDPException as exc:
        raise InputError(f"OpenDP cannot certify this selection (epsilon={epsilon:g}): {str(exc).strip().splitlines()[0]}") from None
    if found is None:
        raise SolverError(f"OpenDP's privacy map gives {achieved} for selection scale {scale}; refusing to select")
    # a float64 array, not a list: a Python float per score made MWEM's selection over all-range:4096's 8.4
    # million queries peak at 1.9 GB (226 bytes per query)
    return int(meas(np.ascontiguousarray(np.asarray(scores, dtype=float).ravel())))
