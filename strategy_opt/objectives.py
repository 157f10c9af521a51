"""Objectives: convex, non-decreasing functions of the per-query variances.

An objective maps the vector u of unit per-query variances
(``u_i = w_i (A^T A)^+ w_i^T`` at unit sensitivity) to a number to minimise.
``total`` (sum of u, the default), ``max``, ``weighted`` and ``relative``
(weights ``1/||w_i||^2``: the total error of the row-normalised workload) are built in.
Researchers add their own with `register_objective` or through the
``strategy_opt.objectives`` entry-point group (an entry point naming an
`Objective` instance or a zero-argument factory returning one).

Examples
--------
>>> import numpy as np
>>> get_objective("max").value(np.array([1.0, 3.0, 2.0]))
3.0
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

import numpy as np

from .exceptions import InputError

__all__ = ["Objective", "register_objective", "get_objective", "objectives"]


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
