"""Objectives: convex, non-decreasing functions of the per-query variances.

An objective maps the vector u of unit per-query variances
(``u_i = w_i (A^T A)^+ w_i^T`` at unit sensitivity) to a number to minimise.
``total`` (sum of u, the default), ``max``, ``weighted`` and ``relative``
(weights ``1/||w_i||^2``: the total error of the row-normalised workload) are built in.
Researchers add their own with `register_objective` or through the
``strategy_opt.objectives`` entry-point group (an entry point naming an
`Objective` instance or a zero-argument factory returning one; it is known by the
Objective's own name, and `register_objective` overrides it). An objective
must be convex and non-decreasing in every variance (more noise is never
better); `check_monotone` tests the second on a probe before a program uses a
user objective, and refuses one that decreases. `check_cvx_form` refuses a
solver (cvx) form that is not a scalar, DCP-convex cvxpy expression of the
variance variable (None, a number, a constant); that it is the same function as
``value`` is checked after solving (minerror-l2's ``objective_mismatch``).

Examples
--------
>>> import numpy as np
>>> get_objective("max").value(np.array([1.0, 3.0, 2.0]))
3.0
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

import numpy as np

from .exceptions import InputError

__all__ = ["Objective", "register_objective", "get_objective", "objectives", "evaluate", "check_monotone", "check_cvx_form", "BUILTIN_OBJECTIVES"]

#: The objectives defined here (known to be non-decreasing).
BUILTIN_OBJECTIVES = ("total", "max", "weighted", "relative")
#: Probe of `check_monotone`: queries perturbed (all when fewer), and the relative rounding allowance.
MONOTONE_PROBE_QUERIES = 64
MONOTONE_RTOL = 1e-9

log = logging.getLogger("strategy_opt")


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
        ``cvx(u, weights=None)`` building the same function of the cvxpy
        variable u (m variances) as a scalar cvxpy expression, convex and
        non-decreasing in u (checked by `check_cvx_form`).

    Examples
    --------
    The weights go positionally or as ``weights=``, ``value(u, weights)``:

    >>> get_objective("weighted").value(np.array([1.0, 2.0]), np.array([3.0, 1.0]))  # 3 * 1 + 1 * 2
    5.0
    >>> sq = Objective("sum-sq", "sum of squared variances", lambda u, w=None: float(np.sum(np.square(u))), None)
    >>> sq.name, sq.value(np.array([1.0, 2.0]))  # an objective that is only evaluated needs no cvx form
    ('sum-sq', 5.0)
    """

    name: str
    description: str
    value: Callable
    cvx: Callable


_OBJECTIVES: dict[str, Objective] = {}
_loaded_entry_points = False


def register_objective(obj: Objective) -> Objective:
    """Register an objective under ``obj.name`` (overrides a registered user or plug-in objective of the same name); returns it.

    The built-in names (`BUILTIN_OBJECTIVES`) are refused: methods solve them
    by their own programs (the native MINERROR solver for ``total``), which a
    replacement registered under the same name would not reach.

    Parameters
    ----------
    obj : Objective
        Its ``name`` (a non-empty string), ``value(u, weights=None) -> float``
        on a NumPy vector of per-query variances, and ``cvx(u, weights=None)``,
        the same convex non-decreasing function of a cvxpy variable (for
        ``minerror-l2``; may be None for objectives only evaluated).

    Returns
    -------
    Objective
        ``obj``, now listed by `objectives` and ``strategy-opt list objectives``.

    Examples
    --------
    >>> import cvxpy as cp
    >>> import numpy as np
    >>> from strategy_opt import solve
    >>> obj = register_objective(Objective(
    ...     "example-sum-of-squares", "sum of squared per-query variances",
    ...     value=lambda u, weights=None: float(np.sum(np.square(u))),
    ...     cvx=lambda u, weights=None: cp.sum_squares(u)))
    >>> s = solve("prefix:4", method="minerror-l2", objective="example-sum-of-squares")  # a generic SDP (SCS)
    >>> s.meta["objective"], round(s.meta["objective_value"])  # the identity's variances 1, 2, 3, 4 give 30
    ('example-sum-of-squares', 12)
    >>> _ = _OBJECTIVES.pop("example-sum-of-squares")  # (unregistered again)
    """
    _load_entry_points()  # plug-ins first, so that a registration here overrides one of the same name
    return _register(obj)


def _register(obj: Objective) -> Objective:
    if not isinstance(obj, Objective):
        raise InputError(f"register_objective expects an Objective, got {type(obj).__name__}")
    if not isinstance(obj.name, str) or not obj.name.strip() or obj.name != obj.name.strip():
        raise InputError(f"an objective's name must be a non-empty string without surrounding spaces, got {obj.name!r}")
    if not callable(obj.value):
        raise InputError(f"objective {obj.name!r}: value must be a function value(u, weights=None) -> float, got {type(obj.value).__name__}")
    if obj.name in BUILTIN_OBJECTIVES:
        raise InputError(f"objective {obj.name!r} is built in (methods have their own programs for it); register yours under another name")
    _OBJECTIVES[obj.name] = obj
    return obj


def _add_builtin(obj: Objective) -> None:
    _OBJECTIVES[obj.name] = obj


def _weights(u, weights):
    return np.ones(np.shape(u)[0]) if weights is None else np.asarray(weights, dtype=float)


def _relative_weights(u, weights):
    if weights is None:
        raise InputError("objective 'relative' needs the inverse squared row norms 1/||w_i||^2 as weights")
    return np.asarray(weights, dtype=float)


def _cvxpy():
    """cvxpy, imported when a convex program first needs it (not at CLI start-up)."""
    import cvxpy

    return cvxpy


def _builtin():
    _add_builtin(Objective("total", "sum of per-query variances (total squared error)", lambda u, weights=None: float(np.sum(u)), lambda u, weights=None: _cvxpy().sum(u)))
    _add_builtin(Objective("max", "largest per-query variance (min-max strategy)", lambda u, weights=None: float(np.max(u)), lambda u, weights=None: _cvxpy().max(u)))
    _add_builtin(
        Objective(
            "weighted",
            "weighted sum of per-query variances (option weights: one positive weight per query, as 1,2,0.5 or [1, 2, 0.5] or a .npy file)",
            lambda u, weights=None: float(_weights(u, weights) @ np.asarray(u)),
            lambda u, weights=None: _weights(u, weights) @ u,
        )
    )
    _add_builtin(
        Objective(
            "relative",
            "total squared error of the row-normalised workload (Li 2013 Sec. 5.1.4): weights 1/||w_i||^2",
            lambda u, weights=None: float(_relative_weights(u, weights) @ np.asarray(u)),
            lambda u, weights=None: _relative_weights(u, weights) @ u,
        )
    )


def _load_entry_points():
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    loaded_by: dict[str, str] = {}
    for ep in entry_points(group="strategy_opt.objectives"):
        try:
            obj = ep.load()
            obj = obj() if callable(obj) and not isinstance(obj, Objective) else obj
            if isinstance(obj, Objective) and obj.name in loaded_by:  # two plug-ins, one name: the first stays
                raise InputError(f"its objective's name {obj.name!r} is taken by entry point {loaded_by[obj.name]!r}")
            _register(obj)  # under the Objective's own name, which may differ from the entry point's
            loaded_by[obj.name] = ep.name
        except Exception as exc:  # a broken plug-in must not break the library: one warning (shown with -q too, as warnings are)
            log.warning("objective entry point %r not loaded: %s", ep.name, " ".join(str(exc).split()))


def objectives() -> dict[str, Objective]:
    """All registered objectives (built-ins, entry points, API registrations).

    Examples
    --------
    >>> sorted(objectives())[:4]
    ['max', 'relative', 'total', 'weighted']
    """
    if "total" not in _OBJECTIVES:
        _builtin()
    _load_entry_points()
    return dict(_OBJECTIVES)


def get_objective(name: str) -> Objective:
    """Look up an objective by name; `InputError` listing the choices if unknown.

    Examples
    --------
    >>> get_objective("total").value(np.array([1.0, 2.0]), None)  # sum of the variances
    3.0
    >>> get_objective("sum")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: unknown objective 'sum'; available: ...
    """
    if not isinstance(name, str):
        raise InputError(f"objective must be a name (a string), got {name!r}")
    table = objectives()
    if name not in table:
        raise InputError(f"unknown objective {name!r}; available: {', '.join(sorted(table))}")
    return table[name]


def evaluate(obj: Objective, u: np.ndarray, weights=None, where: str = "the strategy's per-query variances") -> float:
    """``obj.value(u, weights)`` as a float; `InputError` naming ``where`` when a (user's) objective fails there or gives NaN.

    Parameters
    ----------
    obj : Objective
        The objective.
    u : ndarray (m,)
        Per-query variances.
    weights : ndarray (m,), optional
        Query weights, for the objectives that take them.
    where : str
        What ``u`` is, for the message.

    Returns
    -------
    float

    Examples
    --------
    >>> evaluate(get_objective("max"), np.array([1.0, 3.0]))
    3.0
    """
    try:
        value = float(obj.value(u, weights))
    except InputError:
        raise
    except Exception as exc:  # a user's objective may fail on any input
        raise InputError(f"objective {obj.name!r}: its value failed on {where} ({' '.join(str(exc).split())})") from None
    if math.isnan(value):
        raise InputError(f"objective {obj.name!r}: its value is NaN on {where}")
    return value


def check_monotone(obj: Objective, m: int, weights=None, seed: int = 0) -> None:
    """Refuse (`InputError`) an objective that decreases when a query's variance grows.

    A cheap probe of the contract (non-decreasing in every variance), not a
    proof: at two random positive variance vectors of length m (scales 1 and
    1000), the value must not drop when one variance is raised (each of up to
    `MONOTONE_PROBE_QUERIES` queries, by half its value and by 10x) or when
    all of them are doubled; drops within `MONOTONE_RTOL` (relative) are rounding. An objective
    whose ``value`` raises on the probe, or returns a non-number, NaN or -inf, is refused too
    (+inf is an extended value: a finite value after raising a variance is then a decrease).

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
        if math.isnan(v) or v == -math.inf:
            raise InputError(f"objective {obj.name!r}: its value is {'NaN' if math.isnan(v) else '-inf'} on a probe vector of {m} positive variances")
        return v

    for scale in (1.0, 1000.0):
        u0 = scale * rng.uniform(0.5, 1.5, m)
        f0 = value(u0)
        slack = MONOTONE_RTOL * max(abs(f0), 1e-300) if math.isfinite(f0) else 0.0
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


def check_cvx_form(obj: Objective, u, weights=None):
    """The objective's cvx form built on the cvxpy variable ``u``; `InputError` unless a solver can minimise it.

    Refused (the solver would otherwise return an arbitrary strategy as
    "optimal"): a cvx form that raises, returns something other than a cvxpy
    expression (None, a number), a non-scalar expression, one that does not
    depend on ``u`` (a constant), one with a parameter left without a value, or
    one that is not DCP-convex. Whether it is the same function as ``value`` can
    only be seen at a point: programs compare the two at the optimum.

    Examples
    --------
    >>> import cvxpy as cp
    >>> u = cp.Variable(3)
    >>> check_cvx_form(get_objective("max"), u).is_convex()
    True
    >>> check_cvx_form(Objective("zero", "", lambda u, w=None: 0.0, lambda u, w=None: cp.Constant(0.0)), u)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: objective 'zero': its cvx form does not depend on the variance variable u (it is a constant), so every strategy would be optimal; build it from u, e.g. cp.sum(u) or cp.max(u)
    """
    import cvxpy as cp

    m = int(u.shape[0]) if u.shape else 1
    hint = "it must return a scalar, convex, non-decreasing cvxpy expression of the variance variable u, e.g. cp.sum(u) or cp.max(u)"
    if not callable(obj.cvx):
        raise InputError(f"objective {obj.name!r} has no cvx form (got {type(obj.cvx).__name__}); {hint}")
    try:
        expr = obj.cvx(u, weights)
    except Exception as exc:  # a user's objective may fail on a cvxpy variable
        raise InputError(f"objective {obj.name!r}: its cvx form failed on a cvxpy variable of {m} variances ({' '.join(str(exc).split())}); {hint}") from None
    if not isinstance(expr, cp.Expression):
        shown = " ".join(repr(expr).split())[:60]
        raise InputError(f"objective {obj.name!r}: its cvx form returned {type(expr).__name__} ({shown}), not a cvxpy expression; {hint}")
    if not expr.is_scalar():
        raise InputError(f"objective {obj.name!r}: its cvx form has shape {tuple(expr.shape)}, not a scalar; {hint}")
    if not {v.id for v in expr.variables()} & {v.id for v in u.variables()}:  # u: a variable, or an affine expression of one
        raise InputError(
            f"objective {obj.name!r}: its cvx form does not depend on the variance variable u (it is a constant), so every strategy would be optimal; "
            "build it from u, e.g. cp.sum(u) or cp.max(u)"
        )
    unset = [p.name() for p in expr.parameters() if p.value is None]
    if unset:
        raise InputError(f"objective {obj.name!r}: its cvx form has cvxpy parameter(s) without a value ({', '.join(unset)}); set their values before solving")
    if not expr.is_dcp() or not expr.is_convex():
        raise InputError(f"objective {obj.name!r} is not DCP-convex in cvxpy; register a convex, non-decreasing cvx form")
    return expr
