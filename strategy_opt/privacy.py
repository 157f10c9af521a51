"""Privacy notions and the one place where noise scales are calibrated.

``PureDP(epsilon)``
    epsilon-DP with the Laplace mechanism. Sensitivity: the largest column L1
    norm of the strategy (add/remove-one-record neighbours change one cell by
    1). Noise scale ``b = Delta_1 / epsilon``; variance ``2 b^2``.

``ApproxDP(epsilon, delta)``
    (epsilon, delta)-DP with the Gaussian mechanism. Sensitivity: the largest
    column L2 norm. The noise standard deviation comes from OpenDP's privacy
    map for its Gaussian measurement: the Gaussian with scale sigma satisfies
    rho-zCDP with ``rho = (Delta_2 / sigma)^2 / 2``, OpenDP converts that to an
    (epsilon, delta) curve, and we take the smallest sigma (binary search, via
    ``opendp.binary_search_param``) whose curve meets the target. We use it
    because released answers are drawn by OpenDP's vetted sampler
    (`strategy_opt.samplers`), so predicted and released noise are one and the
    same calibration, proven for the sampler that actually runs. It is 7%
    above the exact analytic Gaussian mechanism of Balle & Wang
    (ICML 2018; `analytic_gaussian_sigma`: 4.53 vs 4.22 at epsilon = 1,
    delta = 1e-6), valid for every epsilon > 0 (the classic
    ``sqrt(2 ln(1.25/delta))/epsilon`` needs epsilon < 1), and below the
    dissertation's ``sqrt(2 ln(2/delta))/epsilon`` (`dissertation_sigma`,
    5.39 there). Ratios between strategies do not depend on the calibration.

Error normalisation: expected total squared error of a release equals
``unit_error * privacy.noise_variance_factor()`` where unit_error is
``E_p(A; W) = ||A||_p^2 trace(W^T W (A^T A)^+)`` (see ``strategy_opt.error``).

Examples
--------
>>> from strategy_opt.privacy import PureDP, ApproxDP
>>> PureDP(0.5).noise_variance_factor()
8.0
>>> round(ApproxDP(1.0, 1e-6).gaussian_sigma(1.0), 2)
4.53
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from scipy.special import ndtr

from .defaults import DEFAULT_DELTA
from .exceptions import InputError, setting

__all__ = ["Privacy", "PureDP", "ApproxDP", "check_privacy", "privacy_from_args", "analytic_gaussian_sigma", "dissertation_sigma"]


def _check_number(value, name: str) -> float:
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return v


def _check_sensitivity(value) -> float:
    v = _check_number(value, "sensitivity")
    if v < 0:
        raise InputError(f"sensitivity must be >= 0, got {value!r}")
    return v


@dataclass(frozen=True)
class Privacy:
    """Base class of privacy notions. Use `PureDP` or `ApproxDP`.

    Attributes
    ----------
    epsilon : float
        The privacy budget.
    notion : str
        ``'pure'`` or ``'approx'`` (class attribute).
    p : int
        Column-norm order of the sensitivity, 1 or 2 (class attribute).

    Examples
    --------
    >>> [(P.notion, P.p) for P in (PureDP(1.0), ApproxDP(1.0, 1e-6))]
    [('pure', 1), ('approx', 2)]
    >>> isinstance(PureDP(1.0), Privacy)
    True
    """

    epsilon: float

    #: 'pure' or 'approx'
    notion = ""
    #: column-norm order of the sensitivity: 1 (L1) or 2 (L2)
    p = 0

    @property
    def sensitivity_norm(self) -> str:
        """``'l1'`` or ``'l2'``.

        Examples
        --------
        >>> PureDP(1.0).sensitivity_norm, ApproxDP(1.0).sensitivity_norm
        ('l1', 'l2')
        """
        return f"l{self.p}"

    def noise_scale(self, sensitivity: float) -> float:
        """Scale of the noise for a query set of the given sensitivity.

        Parameters
        ----------
        sensitivity : float
            The strategy's sensitivity in the notion's norm (`Privacy.p`), >= 0.

        Examples
        --------
        >>> PureDP(0.5).noise_scale(1.0)  # Laplace b = 1 / 0.5
        2.0
        """
        raise NotImplementedError

    def noise_variance(self, sensitivity: float) -> float:
        """Variance of the noise added to each strategy answer.

        Parameters
        ----------
        sensitivity : float
            The strategy's sensitivity in the notion's norm (`Privacy.p`), >= 0.

        Examples
        --------
        >>> PureDP(1.0).noise_variance(3.0)  # 2 b^2 with b = 3
        18.0
        """
        raise NotImplementedError

    def noise_variance_factor(self) -> float:
        """Noise variance at sensitivity 1: the factor c with total error = E_p * c.

        Examples
        --------
        >>> PureDP(1.0).noise_variance_factor()  # 2 (1 / epsilon)^2
        2.0
        >>> round(ApproxDP(1.0, 1e-6).noise_variance_factor(), 2)  # 4.53^2
        20.53
        """
        return self.noise_variance(1.0)


@dataclass(frozen=True)
class PureDP(Privacy):
    """epsilon-differential privacy (Laplace mechanism, L1 sensitivity).

    Parameters
    ----------
    epsilon : float
        Privacy budget, > 0.

    Examples
    --------
    Laplace noise for a strategy of L1 sensitivity 2 at epsilon = 0.5: scale b = 4, variance 2 b^2.

    >>> PureDP(0.5).noise_scale(2.0), PureDP(0.5).noise_variance(2.0)
    (4.0, 32.0)
    """

    notion = "pure"
    p = 1

    def __post_init__(self):
        eps = _check_number(self.epsilon, "epsilon")
        if eps <= 0:
            raise InputError(f"epsilon must be > 0, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", eps)

    def noise_scale(self, sensitivity: float) -> float:
        """Laplace scale ``b = sensitivity / epsilon``.

        Examples
        --------
        >>> PureDP(0.1).noise_scale(2.0)
        20.0
        """
        return _check_sensitivity(sensitivity) / self.epsilon

    def noise_variance(self, sensitivity: float) -> float:
        """``2 b^2``.

        Examples
        --------
        >>> PureDP(0.5).noise_variance(1.0)  # b = 2
        8.0
        """
        return 2.0 * self.noise_scale(sensitivity) ** 2


@dataclass(frozen=True)
class ApproxDP(Privacy):
    """(epsilon, delta)-differential privacy (Gaussian mechanism, L2 sensitivity).

    Parameters
    ----------
    epsilon : float
        Privacy budget, > 0.
    delta : float, default 1e-6
        Failure probability, 0 < delta < 1.

    Examples
    --------
    Gaussian noise at L2 sensitivity 1 (OpenDP's calibration; the README quotes sigma 4.53 at epsilon 1):

    >>> round(ApproxDP(1.0).noise_scale(1.0), 2), ApproxDP(1.0).delta
    (4.53, 1e-06)
    """

    delta: float = DEFAULT_DELTA
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
        """Gaussian standard deviation for the given L2 sensitivity (OpenDP calibration).

        OpenDP's calibration (zCDP converted to (epsilon, delta) at the optimal
        conversion) where OpenDP's search succeeds; where it fails (epsilon
        beyond about 1e4, or epsilon and delta both about 1e-16 or below) the analytic
        Gaussian mechanism's sigma (Balle & Wang 2018), which the
        ``simulate`` sampler uses and the ``opendp`` sampler refuses to release.

        Parameters
        ----------
        sensitivity : float
            The strategy's L2 sensitivity, >= 0 (sigma is linear in it).

        Examples
        --------
        >>> round(ApproxDP(1.0, 1e-6).gaussian_sigma(1.0), 2), round(ApproxDP(1.0, 1e-6).gaussian_sigma(2.0), 2)
        (4.53, 9.06)
        """
        return _check_sensitivity(sensitivity) * _opendp_gaussian_sigma(self.epsilon, self.delta)

    def noise_scale(self, sensitivity: float) -> float:
        """The Gaussian standard deviation sigma.

        Examples
        --------
        >>> ApproxDP(1.0).noise_scale(1.0) == ApproxDP(1.0).gaussian_sigma(1.0)
        True
        """
        return self.gaussian_sigma(sensitivity)

    def noise_variance(self, sensitivity: float) -> float:
        """``sigma^2``.

        Examples
        --------
        >>> round(ApproxDP(1.0).noise_variance(1.0), 2)  # 4.53^2
        20.53
        """
        return self.gaussian_sigma(sensitivity) ** 2


#: Below this epsilon the Gaussian privacy profile is evaluated with mpmath (see `_delta_of_sigma`).
PROFILE_FLOAT64_MIN_EPSILON = 1e-3


def _delta_of_sigma(sigma: float, eps: float) -> float:
    """The exact Gaussian privacy profile ``delta(sigma)`` at sensitivity 1 (Balle & Wang 2018, Thm 8).

    ``Phi(a - b) - e^eps Phi(-a - b)`` with ``a = 1/(2 sigma)``, ``b = eps sigma``.
    For small epsilon the two terms agree to about ``log10(1/eps)`` digits
    (their difference is ~ ``eps phi(b) / b^3``): float64 returns rounding
    noise below eps ~ 1e-8 (sigma 1.6e15 instead of 1.2e16 at eps = 1e-15,
    delta = 1e-50). Below `PROFILE_FLOAT64_MIN_EPSILON` the profile is
    evaluated with mpmath at enough digits to keep 30 of the difference; above
    it float64 keeps at least 10, and the second term goes through log space
    so that ``e^eps`` cannot overflow.
    """
    if eps >= PROFILE_FLOAT64_MIN_EPSILON:
        a, b = 1.0 / (2.0 * sigma), eps * sigma
        tail = ndtr(-a - b)
        second = math.exp(eps + math.log(tail)) if tail > 0 else 0.0
        return float(ndtr(a - b) - second)
    import mpmath

    with mpmath.workdps(40 + math.ceil(-math.log10(eps))):
        s, e = mpmath.mpf(sigma), mpmath.mpf(eps)
        a, b = 1 / (2 * s), e * s
        return float(mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b))


@lru_cache(maxsize=256)
def _opendp_gaussian_sigma(eps: float, delta: float) -> float:
    """Smallest sigma (sensitivity 1) for which OpenDP certifies (eps, delta)-DP."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float))

    def make(scale):
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale=scale)), delta)

    try:
        return float(dp.binary_search_param(make, d_in=1.0, d_out=(eps, delta)))
    except dp.OpenDPException:
        # OpenDP's search fails for very large epsilon (its map overflows from ~1e5) and for
        # epsilon and delta both ~1e-16 or below (1e-15 with 1e-15 still calibrates); the exact analytic Gaussian
        # calibration, evaluated at high precision, is used there.
        return analytic_gaussian_sigma(eps, delta)


def analytic_gaussian_sigma(eps: float, delta: float) -> float:
    """Smallest sigma (sensitivity 1) of the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8).

    Parameters
    ----------
    eps : float
        epsilon, > 0.
    delta : float
        0 < delta < 1.

    Returns
    -------
    float
        Found by bisection on the exact privacy profile (`_delta_of_sigma`), to relative precision 1e-13.

    Examples
    --------
    Balle & Wang's calibration at epsilon = 1, delta = 1e-6 (7% below OpenDP's 4.53, see the module notes):

    >>> round(analytic_gaussian_sigma(1.0, 1e-6), 2)
    4.22
    """
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
    """Gaussian sigma of Li (2013), Prop. 2.5: ``sqrt(2 ln(2/delta)) / epsilon`` (sensitivity 1).

    Parameters
    ----------
    epsilon : float
        > 0.
    delta : float
        0 < delta < 1.

    Examples
    --------
    >>> round(dissertation_sigma(1.0, 1e-6), 2)  # sqrt(2 ln 2e6)
    5.39
    >>> dissertation_sigma(1.0, 2 * math.exp(-2.0))  # sqrt(2 * 2)
    2.0
    """
    return math.sqrt(2.0 * math.log(2.0 / delta)) / epsilon


def check_privacy(privacy) -> Privacy:
    """``privacy`` itself if it is a `Privacy` object (with its budget), else `InputError` (e.g. for the notion's name ``'pure'``).

    Parameters
    ----------
    privacy : object
        The value to check.

    Returns
    -------
    Privacy
        ``privacy``, unchanged.

    Raises
    ------
    InputError
        If ``privacy`` is not a `Privacy` instance.

    Examples
    --------
    >>> check_privacy(PureDP(1.0))
    PureDP(epsilon=1.0)
    >>> check_privacy("pure")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: privacy must be PureDP(epsilon) or ApproxDP(epsilon, delta), got 'pure'
    """
    if not isinstance(privacy, Privacy):
        raise InputError(f"privacy must be PureDP(epsilon) or ApproxDP(epsilon, delta), got {privacy!r}")
    return privacy


def privacy_from_args(notion: str, epsilon=1.0, delta=None) -> Privacy:
    """Build a privacy object from CLI-style arguments.

    Parameters
    ----------
    notion : {'pure', 'approx'}
    epsilon : float
    delta : float, optional
        Only allowed for ``'approx'``; default `DEFAULT_DELTA` (1e-6).

    Returns
    -------
    PureDP or ApproxDP

    Raises
    ------
    InputError
        An unknown notion, a delta with ``'pure'``, or a bad epsilon or delta.

    Examples
    --------
    >>> privacy_from_args("approx", 0.5)
    ApproxDP(epsilon=0.5, delta=1e-06)
    >>> privacy_from_args("pure", 2)
    PureDP(epsilon=2.0)
    """
    if notion == "pure":
        if delta is not None:
            raise InputError(f"delta applies only to {setting('privacy', 'approx')}")
        return PureDP(epsilon)
    if notion == "approx":
        return ApproxDP(epsilon, DEFAULT_DELTA if delta is None else delta)
    raise InputError(f"privacy must be 'pure' or 'approx', got {notion!r}")
