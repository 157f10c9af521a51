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

import numpy as np

from .exceptions import InputError, SolverError, setting
from .privacy import Privacy

__all__ = ["opendp_release", "opendp_select_max", "opendp_perturb"]


def opendp_release(exact: np.ndarray, privacy: Privacy, sensitivity: float) -> np.ndarray:
    """``exact + noise`` drawn by OpenDP's Laplace or Gaussian measurement.

    Parameters
    ----------
    exact : ndarray
        The exact strategy answers ``A x``.
    privacy : PureDP or ApproxDP
    sensitivity : float
        L1 (pure) or L2 (approx) sensitivity of the strategy.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = [float(v) for v in np.asarray(exact, dtype=float).ravel()]
    scale = privacy.noise_scale(sensitivity)
    try:
        return _release(dp, values, privacy, float(sensitivity), scale)
    except dp.OpenDPException as exc:
        raise InputError(
            f"OpenDP cannot certify this release (epsilon={privacy.epsilon:g}): {str(exc).strip().splitlines()[0]}; "
            f"use {setting('sampler', 'simulate')} for simulations with extreme parameters"
        ) from None


def _release(dp, values, privacy, sensitivity, scale):
    if privacy.notion == "pure":
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))
        meas = dp.m.make_laplace(*space, scale=scale)
        achieved = meas.map(float(sensitivity))
        ok = achieved <= privacy.epsilon * (1 + 1e-9)
    else:
        space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float))
        meas = dp.m.make_gaussian(*space, scale=scale)
        curve = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(meas), privacy.delta)
        achieved = curve.map(float(sensitivity))
        ok = achieved[0] <= privacy.epsilon * (1 + 1e-6)
    if not ok and privacy.notion == "approx":  # outside OpenDP's search the sigma is the analytic Gaussian's
        raise InputError(
            f"OpenDP cannot certify epsilon={privacy.epsilon:g}, delta={privacy.delta:g}: its privacy map gives "
            f"epsilon {achieved[0]:.6g} for the calibrated noise sigma {scale:.6g} (OpenDP's own search, or the analytic "
            f"Gaussian calibration where that search fails: epsilon beyond about 1e4, or tiny epsilon with tiny delta); "
            f"use {setting('sampler', 'simulate')} for simulations with extreme parameters"
        )
    if not ok:
        raise SolverError(f"OpenDP's privacy map gives {achieved} for noise scale {scale}; refusing to release")
    return np.asarray(meas(values), dtype=float)


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
        Positive finite Laplace scales, one per value.
    granularity_exponent : int, optional
        OpenDP's ``k``: each value is rounded to a multiple of ``2^k`` and gets
        discrete Laplace noise on that grid (about 10 us per value, against
        about 38 us at OpenDP's default, finest grid). The rounding moves a
        value by up to ``2^(k-1)``, so the caller's accounting must allow each
        value's sensitivity to grow by ``2^k`` (OpenDP's own privacy map does
        the same).
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
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    scale = 2.0 * float(sensitivity) / float(epsilon)
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float))
    try:
        meas = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=scale)
        achieved = meas.map(float(sensitivity))
    except dp.OpenDPException as exc:
        raise InputError(f"OpenDP cannot certify this selection (epsilon={epsilon:g}): {str(exc).strip().splitlines()[0]}") from None
    if achieved > epsilon * (1 + 1e-9):
        raise SolverError(f"OpenDP's privacy map gives {achieved} for selection scale {scale}; refusing to select")
    return int(meas([float(v) for v in np.asarray(scores, dtype=float).ravel()]))
