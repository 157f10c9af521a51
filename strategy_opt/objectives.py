"""Objectives: convex, non-decreasing functions of the per-query variances.

An objective maps the vector u of unit per-query variances
(``u_i = w_i (A^T A)^+ w_i^T`` at unit sensitivity) to a number to minimise.
``total`` (sum of u, the default), ``max``, ``weighted`` and ``relative``
(weights ``1/||w_i||^2``: the total error of the row-normalised workload) are built in.
Researchers add their own with `register_objective` or through the
``strategy_opt.objectives`` entry-point group (an entry point naming an
`Objective` instance or a zero-argument factory returning one). An objective
must be convex and non-decreasing in every variance (more noise is never
better); `check_monotone` tests the second on a probe before a program uses a
user objective, and refuses one that decreases.

Examples
--------
>>> import numpy as np
>>> get_objective("max").value(np.array([1.0, 3.0, 2.0]))
3.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

import numpy as np

from .exceptions import InputError

__all__ = ["Objective", "register_objective", "get_objective", "objectives", "check_monotone", "BUILTIN_OBJECTIVES"]

#: The objectives defined here (known to be non-decreasing).
BUILTIN_OBJECTIVES = ("total", "max", "weighted", "relative")
#: Probe of `check_monotone`: queries perturbed (all when fewer), and the relative rounding allowance.
MONOTONE_PROBE_QUERIES = 64
MONOTONE_RTOL = 1e-9


@dataclass(frozen=True)
class Objective:
    """A named objective over per-query variances.

    Attributes
    ----------
    name : str
    description : str
    value : callable
        ``value(u, weights=None) -> float`` on a NumPy vector of variances.
    cvx : callable
        ``cvx(u, weights=None)`` building the same function of a cvxpy
        expression (convex and non-decreasing in u).
    """

    name: str
    description: str
    value: Callable
    cvx: Callable


_OBJECTIVES: dict[str, Objective] = {}
_loaded_entry_points = False


def register_objective(obj: Objective) -> Objective:
    """Register an objective (overrides one of the same name); returns it."""
    if not isinstance(obj, Objective):
        raise InputError(f"register_objective expects an Objective, got {type(obj).__name__}")
    _OBJECTIVES[obj.name] = obj
    return obj


def _weights(u, weights):
    return np.ones(np.shape(u)[0]) if weights is None else np.asarray(weights, dtype=float)


def _relative_weights(u, weights):
    if weights is None:
        raise InputError("objective 'relative' needs the inverse squared row norms 1/||w_i||^2 as weights")
    return np.asarray(weights, dtype=float)


def _builtin():
    import cvxpy as cp

    register_objective(Objective("total", "sum of per-query variances (total squared error)", lambda u, w=None: float(np.sum(u)), lambda u, w=None: cp.sum(u)))
    register_objective(Objective("max", "largest per-query variance (min-max strategy)", lambda u, w=None: float(np.max(u)), lambda u, w=None: cp.max(u)))
    register_objective(
        Objective(
            "weighted",
            "weighted sum of per-query variances (option weights: one positive weight per query, as 1,2,0.5 or [1, 2, 0.5] or a .npy file)",
            lambda u, w=None: float(_weights(u, w) @ np.asarray(u)),
            lambda u, w=None: _weights(u, w) @ u,
        )
    )
    register_objective(
        Objective(
            "relative",
            "total squared error of the row-normalised workload (Li 2013 Sec. 5.1.4): weights 1/||w_i||^2",
            lambda u, w=None: float(_relative_weights(u, w) @ np.asarray(u)),
            lambda u, w=None: _relative_weights(u, w) @ u,
        )
    )


def _load_entry_points():
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for ep in entry_points(group="strategy_opt.objectives"):
        try:
            obj = ep.load()
            obj = obj() if callable(obj) and not isinstance(obj, Objective) else obj
            register_objective(obj)
        except Exception as exc:  # a broken plug-in must not break the library
            import warnings

            warnings.warn(f"objective entry point {ep.name!r} failed to load: {exc}", stacklevel=2)


def objectives() -> dict[str, Objective]:
    """All registered objectives (built-ins, entry points, API registrations)."""
    if "total" not in _OBJECTIVES:
        _builtin()
    _load_entry_points()
    return dict(_OBJECTIVES)


def get_objective(name: str) -> Objective:
    """Look up an objective by name; `InputError` listing the choices if unknown."""
    table = objectives()
    if name not in table:
        raise InputError(f"unknown objective {name!r}; available: {', '.join(sorted(table))}")
    return table[name]


def check_monotone(obj: Objective, m: int, weights=None, seed: int = 0) -> None:
    """Refuse (`InputError`) an objective that decreases when a query's variance grows.

    A cheap probe of the contract (non-decreasing in every variance), not a
    proof: at two random positive variance vectors of length m (scales 1 and
    1000), the value must not drop when one variance is raised (each of up to
    `MONOTONE_PROBE_QUERIES` queries, by half its value and by 10x) or when
    all of them are doubled; drops within `MONOTONE_RTOL` (relative) are rounding. An objective
    whose ``value`` raises on the probe, or returns a non-number, is refused too.

    Examples
    --------
    >>> check_monotone(get_objective("max"), 5)
    >>> shrink = Objective("shrink", "sum of 1/u", lambda u, w=None: float(np.sum(1 / np.asarray(u))), None)
    >>> check_monotone(shrink, 5)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: objective 'shrink' decreases when every variance doubles (value 6.72458 at a probe, 3.36229 after); objectives must be non-decreasing in every per-query variance
    """
    rng = np.random.default_rng(seed)
    queries = np.arange(m) if m <= MONOTONE_PROBE_QUERIES else np.sort(rng.choice(m, MONOTONE_PROBE_QUERIES, replace=False))

    def value(u: np.ndarray) -> float:
        try:
            v = float(obj.value(u, weights))
        except Exception as exc:  # a user's objective may fail on any input
            raise InputError(f"objective {obj.name!r}: its value failed on a probe vector of {m} variances ({' '.join(str(exc).split())})") from None
        if math.isnan(v):
            raise InputError(f"objective {obj.name!r}: its value is NaN on a probe vector of {m} positive variances")
        return v

    for scale in (1.0, 1000.0):
        u0 = scale * rng.uniform(0.5, 1.5, m)
        f0 = value(u0)
        slack = MONOTONE_RTOL * max(abs(f0), 1e-300)
        f2 = value(2.0 * u0)
        if f2 < f0 - slack:
            raise InputError(
                f"objective {obj.name!r} decreases when every variance doubles (value {f0:.6g} at a probe, {f2:.6g} after); "
                "objectives must be non-decreasing in every per-query variance"
            )
        for i in queries:
            for factor in (1.5, 10.0):
                u = u0.copy()
                u[i] *= factor
                f1 = value(u)
                if f1 < f0 - slack:
                    raise InputError(
                        f"objective {obj.name!r} decreases when the variance of query {i} grows (value {f0:.6g} at a probe, {f1:.6g} after raising it); "
                        "objectives must be non-decreasing in every per-query variance"
                    )
