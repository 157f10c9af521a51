"""Privacy notions and the one place where noise scales are calibrated.

``PureDP(epsilon)``
    epsilon-DP with the Laplace mechanism. Sensitivity: the largest column L1
    norm of the strategy (add/remove-one-record neighbours change one cell by
    1). Noise scale ``b = Delta_1 / epsilon``; variance ``2 b^2``.

``ApproxDP(epsilon, delta)``
    (epsilon, delta)-DP with the Gaussian mechanism. Sensitivity: the largest
    column L2 norm. The noise standard deviation is the *analytic Gaussian
    mechanism* of Balle & Wang (ICML 2018, Theorem 8): the smallest sigma with

        Phi(D/(2 s) - e s/D) - exp(e) Phi(-D/(2 s) - e s/D) <= delta,

    found by bisection. We use it because it is exact (necessary and
    sufficient for the Gaussian mechanism), valid for every epsilon > 0 (the
    classic ``sqrt(2 ln(1.25/delta))/epsilon`` holds only for epsilon < 1), and
    never larger than the dissertation's ``sqrt(2 ln(2/delta))/epsilon``
    (Prop. 2.5 of Li 2013). ``dissertation_sigma`` is provided for reproducing
    the papers' absolute numbers; ratios between strategies do not depend on
    the calibration.

Error normalisation: expected total squared error of a release equals
``unit_error * privacy.noise_variance_factor()`` where unit_error is
``E_p(A; W) = ||A||_p^2 trace(W^T W (A^T A)^+)`` (see ``strategy_opt.error``).

Examples
--------
>>> from strategy_opt.privacy import PureDP, ApproxDP
>>> PureDP(0.5).noise_variance_factor()
8.0
>>> round(ApproxDP(1.0, 1e-6).gaussian_sigma(1.0), 4)
4.4224
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtr

from .exceptions import InputError

__all__ = ["Privacy", "PureDP", "ApproxDP", "privacy_from_args", "dissertation_sigma"]


def _check_number(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return v


@dataclass(frozen=True)
class Privacy:
    """Base class of privacy notions. Use `PureDP` or `ApproxDP`."""

    epsilon: float

    #: 'pure' or 'approx'
    notion = ""
    #: column-norm order of the sensitivity: 1 (L1) or 2 (L2)
    p = 0

    @property
    def sensitivity_norm(self) -> str:
        """``'l1'`` or ``'l2'``."""
        return f"l{self.p}"

    def noise_scale(self, sensitivity: float) -> float:
        """Scale of the noise for a query set of the given sensitivity."""
        raise NotImplementedError

    def noise_variance(self, sensitivity: float) -> float:
        """Variance of the noise added to each strategy answer."""
        raise NotImplementedError

    def noise_variance_factor(self) -> float:
        """Noise variance at sensitivity 1: the factor c with total error = E_p * c."""
        return self.noise_variance(1.0)


@dataclass(frozen=True)
class PureDP(Privacy):
    """epsilon-differential privacy (Laplace mechanism, L1 sensitivity).

    Parameters
    ----------
    epsilon : float
        Privacy budget, > 0.
    """

    notion = "pure"
    p = 1

    def __post_init__(self):
        eps = _check_number(self.epsilon, "epsilon")
        if eps <= 0:
            raise InputError(f"epsilon must be > 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", eps)

    def noise_scale(self, sensitivity: float) -> float:
        """Laplace scale ``b = sensitivity / epsilon``."""
        return float(sensitivity) / self.epsilon

    def noise_variance(self, sensitivity: float) -> float:
        """``2 b^2``."""
        return 2.0 * self.noise_scale(sensitivity) ** 2


@dataclass(frozen=True)
class ApproxDP(Privacy):
    """(epsilon, delta)-differential privacy (Gaussian mechanism, L2 sensitivity).

    Parameters
    ----------
    epsilon : float
        Privacy budget, > 0.
    delta : float
        Failure probability, 0 < delta < 1.
    """

    delta: float = 1e-6
    notion = "approx"
    p = 2

    def __post_init__(self):
        eps = _check_number(self.epsilon, "epsilon")
        if eps <= 0:
            raise InputError(f"epsilon must be > 0, got {self.epsilon!r}")
        delta = _check_number(self.delta, "delta")
        if not 0.0 < delta < 1.0:
            raise InputError(f"delta must be in (0, 1), got {self.delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    def gaussian_sigma(self, sensitivity: float) -> float:
        """Analytic-Gaussian standard deviation (Balle & Wang 2018) for L2 sensitivity."""
        return float(sensitivity) * _analytic_gaussian_sigma(self.epsilon, self.delta)

    def noise_scale(self, sensitivity: float) -> float:
        """The Gaussian standard deviation sigma."""
        return self.gaussian_sigma(sensitivity)

    def noise_variance(self, sensitivity: float) -> float:
        """``sigma^2``."""
        return self.gaussian_sigma(sensitivity) ** 2


def _delta_of_sigma(sigma: float, eps: float) -> float:
    a = 1.0 / (2.0 * sigma)
    b = eps * sigma
    # exp(eps) * Phi(-a - b) computed in log space to avoid overflow for large eps
    tail = ndtr(-a - b)
    second = math.exp(eps + math.log(tail)) if tail > 0 else 0.0
    return float(ndtr(a - b) - second)


def _analytic_gaussian_sigma(eps: float, delta: float) -> float:
    """Smallest sigma (sensitivity 1) satisfying the Balle-Wang condition."""
    lo, hi = 1e-12, 1.0
    while _delta_of_sigma(hi, eps) > delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _delta_of_sigma(mid, eps) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def dissertation_sigma(epsilon: float, delta: float) -> float:
    """Gaussian sigma of Li (2013), Prop. 2.5: ``sqrt(2 ln(2/delta)) / epsilon`` (sensitivity 1)."""
    return math.sqrt(2.0 * math.log(2.0 / delta)) / epsilon


def privacy_from_args(notion: str, epsilon=1.0, delta=None) -> Privacy:
    """Build a privacy object from CLI-style arguments.

    Parameters
    ----------
    notion : {'pure', 'approx'}
    epsilon : float
    delta : float, optional
        Required (and only allowed) for ``'approx'``; default 1e-6.
    """
    if notion == "pure":
        if delta is not None:
            raise InputError("--delta applies only to --privacy approx")
        return PureDP(epsilon)
    if notion == "approx":
        return ApproxDP(epsilon, 1e-6 if delta is None else delta)
    raise InputError(f"privacy must be 'pure' or 'approx', got {notion!r}")
