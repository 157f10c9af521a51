"""The method registry: every strategy method is one function plus one registration.

A method is ``func(problem: Problem) -> Strategy`` decorated with
`register_method`, which records the privacy notions it supports and the
source it implements. Data-dependent release methods (DAWA, MWEM) register
with `register_release`.

Examples
--------
>>> from strategy_opt.registry import methods
>>> 'identity' in methods()
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from .exceptions import InputError

__all__ = [
    "MethodInfo",
    "register_method",
    "register_release",
    "register_subcommand",
    "get_method",
    "get_release",
    "methods",
    "releases",
    "subcommands",
]


@dataclass(frozen=True)
class MethodInfo:
    """A registered method.

    Attributes
    ----------
    name, func, privacy, source, summary
        As given to `register_method`.
    objectives : tuple of str or None
        The objectives the method minimises (None: any registered objective).
    options : frozenset of str or None
        The option names it reads (None: not declared, nothing is checked).

    Examples
    --------
    >>> info = get_method("identity")
    >>> info.name, info.privacy, info.objectives, info.options
    ('identity', ('pure', 'approx'), ('total',), frozenset())
    >>> info.summary
    'ask every cell once (A = I)'
    """

    name: str
    func: Callable
    privacy: tuple[str, ...]
    source: str
    summary: str
    objectives: tuple[str, ...] | None = ("total",)
    options: frozenset | None = None

    def check(self, objective: str, options) -> None:
        """`InputError` if the method does not minimise ``objective`` or does not know an option.

        Parameters
        ----------
        objective : str
            The objective asked for.
        options : iterable of str
            The option names given.

        Examples
        --------
        >>> get_method("identity").check("total", {})  # passes silently
        >>> get_method("identity").check("max", {})
        Traceback (most recent call last):
        ...
        strategy_opt.exceptions.InputError: method 'identity' minimises the total objective, not 'max'; methods for 'max': ...
        """
        if self.objectives is not None and objective not in self.objectives:
            able = sorted(m.name for m in methods().values() if m.objectives is None or objective in m.objectives)
            raise InputError(
                f"method {self.name!r} minimises the {'/'.join(self.objectives)} objective, not {objective!r}; "
                f"methods for {objective!r}: {', '.join(able)} (per-query errors of any strategy: strategy-opt error)"
            )
        unknown = sorted(set(options) - self.options) if self.options is not None else []
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise InputError(f"method {self.name!r}: unknown option(s) {', '.join(map(repr, unknown))}; its options: {known}")


_METHODS: dict[str, MethodInfo] = {}
_RELEASES: dict[str, MethodInfo] = {}
_SUBCOMMANDS: list[Callable] = []


def _names(value, what: str, name) -> tuple[str, ...]:
    """A registration's list of names as a tuple (one string is one name, not its characters)."""
    items = (value,) if isinstance(value, str) else value
    try:
        items = tuple(items)
    except TypeError:
        raise InputError(f"registering method {name!r}: {what} must be a name or a sequence of names, got {value!r}") from None
    if not all(isinstance(v, str) and v for v in items):
        raise InputError(f"registering method {name!r}: {what} must be non-empty strings, got {value!r}")
    return items


def _origin(func) -> tuple[str | None, str | None]:
    """Where a registered callable was defined (module, qualified name); None parts for partials and instances."""
    return getattr(func, "__module__", None), getattr(func, "__qualname__", None)


def _register(table, name, privacy, source, summary, objectives=("total",), options=None):
    """Decorator adding ``func`` to ``table`` under ``name``, its arguments checked.

    A name already taken by a different function is refused (a built-in method
    would be replaced silently, or would replace the user's when the package
    loads its programs later); the same function defined again (a re-run
    notebook cell: same module and qualified name) replaces itself.
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InputError(f"a method name must be a non-empty string without surrounding spaces, got {name!r}")
    privacy = _names(privacy, "privacy", name)
    if not privacy or not set(privacy) <= {"pure", "approx"}:
        raise InputError(f"registering method {name!r}: privacy must name 'pure', 'approx' or both, got {privacy!r}")
    objectives = None if objectives is None else _names(objectives, "objectives", name)
    opts = None if options is None else frozenset(_names(options, "options", name))
    _load()  # the built-in programs first, so that a clash with one is seen whichever registers first

    def deco(func):
        for other in (_METHODS, _RELEASES):  # one name space: `release --method` looks in both tables
            old = other.get(name)
            if old is not None and (other is not table or _origin(old.func) != _origin(func)):
                where = ".".join(v for v in _origin(old.func) if v) or repr(old.func)
                raise InputError(f"method {name!r} is already registered (by {where}); choose another name")
        table[name] = MethodInfo(name, func, privacy, source, summary, objectives, opts)
        return func

    return deco


def register_method(
    name: str,
    *,
    privacy=("pure", "approx"),
    source: str = "",
    summary: str = "",
    objectives: tuple[str, ...] | None = ("total",),
    options: tuple[str, ...] | None = None,
):
    """Decorator registering a strategy method ``func(problem) -> Strategy``.

    Parameters
    ----------
    name : str
        The method's name (``solve(..., method=name)``); a name already taken
        by another function (a built-in's) is refused with `InputError`.
    privacy : str or sequence of str
        The notions it supports, among ``"pure"`` and ``"approx"``.
    source, summary : str
        What it implements and a one-line description (``strategy-opt list methods``).
    objectives : str, sequence of str or None
        The objectives it minimises (None: any registered one; the compiler
        then evaluates the problem's objective at the strategy).
    options : str, sequence of str or None
        The option names it reads (None: undeclared, not checked).
        `strategy_opt.api.solve` refuses other objectives and options.

    Returns
    -------
    callable
        The decorator; it returns ``func`` unchanged.

    Examples
    --------
    A method builds its matrix A and hands it to the compiler, which checks it
    (support, column completion) and computes its error and lower bound:

    >>> import numpy as np
    >>> from strategy_opt import solve
    >>> from strategy_opt.compiler import compile_strategy
    >>> @register_method("example-doubled-identity", privacy=("pure",), options=("copies",))
    ... def doubled(problem):
    ...     k = int(problem.options.get("copies", 2))
    ...     return compile_strategy(np.vstack([np.eye(problem.workload.n)] * k), problem, "example-doubled-identity")
    >>> s = solve("prefix:4", privacy="pure", method="example-doubled-identity", copies=3)
    >>> s.shape, round(s.meta["unit_total_squared_error"], 9)  # sensitivity 3, variance 1/3 a cell: 3^2 / 3 times trace 10
    ((12, 4), 30.0)
    >>> _ = _METHODS.pop("example-doubled-identity")  # (unregistered again)
    """
    return _register(_METHODS, name, privacy, source, summary, objectives, options)


def register_release(name: str, *, privacy=("pure",), source: str = "", summary: str = ""):
    """Decorator registering a data-dependent release ``func(x, workload, privacy, rng, **options)``.

    The registered (and returned) function takes the workload as a `Workload`,
    a SPEC string or a matrix, as `strategy_opt.executor.run` does, and refuses
    a privacy that is not a `strategy_opt.privacy.Privacy` object with an
    `InputError`; ``func`` itself always receives a `Workload`.

    Parameters
    ----------
    name : str
        The release's name (``run(..., method=name)``).
    privacy : str or sequence of str
        The notions it supports, among ``"pure"`` and ``"approx"``.
    source, summary : str
        What it implements and a one-line description.

    Returns
    -------
    callable
        The decorator; it returns the checking wrapper of ``func``.

    Examples
    --------
    A (non-private) toy release that returns the workload's exact answers:

    >>> @register_release("example-exact", summary="exact answers (no noise, not private)")
    ... def exact(x, workload, privacy, rng=None):
    ...     return workload.matvec(x)
    >>> from strategy_opt.privacy import PureDP
    >>> exact([1.0, 2.0, 3.0], "prefix:3", PureDP(1.0)).tolist()  # a SPEC becomes a Workload
    [1.0, 3.0, 6.0]
    >>> exact([1.0, 2.0, 3.0], "prefix:3", "pure")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: privacy must be PureDP(epsilon) or ApproxDP(epsilon, delta), got 'pure'
    >>> _ = _RELEASES.pop("example-exact")  # (unregistered again)
    """
    notions = privacy

    def deco(func):
        @functools.wraps(func)
        def release(x, workload, privacy, *args, **kwargs):
            from .api import as_workload
            from .privacy import check_privacy

            return func(x, as_workload(workload), check_privacy(privacy), *args, **kwargs)

        return _register(_RELEASES, name, notions, source, summary)(release)

    return deco


def register_subcommand(func: Callable) -> Callable:
    """Register ``func(subparsers, common)`` that adds an extra CLI sub-command (e.g. ``online``).

    ``common`` is the parent parser holding the options every sub-command takes
    (``-q``/``-v``); pass it as ``parents=[common]`` to ``subparsers.add_parser``.

    Examples
    --------
    >>> @register_subcommand
    ... def add_hello(subparsers, common):
    ...     subparsers.add_parser("hello", parents=[common], help="say hello")
    >>> add_hello in subcommands()
    True
    >>> _SUBCOMMANDS.remove(add_hello)  # (unregistered again)
    """
    _SUBCOMMANDS.append(func)
    return func


def subcommands() -> list[Callable]:
    """Registered extra CLI sub-command builders (those registered so far: the command line's own,
    such as ``online``, register when `strategy_opt.cli` is imported).

    Examples
    --------
    >>> all(callable(f) for f in subcommands())
    True
    """
    _load()
    return list(_SUBCOMMANDS)


def _load():
    from . import programs  # noqa: F401  (registers every program)


def methods() -> dict[str, MethodInfo]:
    """All strategy methods, by name.

    Examples
    --------
    >>> {"identity", "hierarchical", "wavelet", "minerror-l2"} <= set(methods())
    True
    """
    _load()
    return dict(_METHODS)


def releases() -> dict[str, MethodInfo]:
    """All data-dependent release methods, by name.

    Examples
    --------
    >>> sorted(releases())
    ['dawa', 'mwem']
    """
    _load()
    return dict(_RELEASES)


def get_method(name: str) -> MethodInfo:
    """Look up a strategy method; `InputError` listing the choices if unknown.

    Examples
    --------
    >>> info = get_method("identity")
    >>> info.summary, info.privacy
    ('ask every cell once (A = I)', ('pure', 'approx'))
    """
    table = methods()
    if name not in table:
        raise InputError(f"unknown method {name!r}; available: {', '.join(sorted(table))}")
    return table[name]


def get_release(name: str) -> MethodInfo:
    """Look up a release method (data-dependent methods and every strategy method).

    Examples
    --------
    >>> get_release("mwem").privacy, get_release("identity").name  # a strategy method is also a release
    (('pure',), 'identity')
    """
    table = releases()
    if name in table:
        return table[name]
    if name in methods():
        return _METHODS[name]
    raise InputError(f"unknown release method {name!r}; available: {', '.join(sorted(set(table) | set(_METHODS)))}")
