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
    """A registered method."""

    name: str
    func: Callable
    privacy: tuple[str, ...]
    source: str
    summary: str


_METHODS: dict[str, MethodInfo] = {}
_RELEASES: dict[str, MethodInfo] = {}
_SUBCOMMANDS: list[Callable] = []


def _register(table, name, privacy, source, summary):
    def deco(func):
        table[name] = MethodInfo(name, func, tuple(privacy), source, summary)
        return func

    return deco


def register_method(name: str, *, privacy=("pure", "approx"), source: str = "", summary: str = ""):
    """Decorator registering a strategy method ``func(problem) -> Strategy``."""
    return _register(_METHODS, name, privacy, source, summary)


def register_release(name: str, *, privacy=("pure",), source: str = "", summary: str = ""):
    """Decorator registering a data-dependent release ``func(x, workload, privacy, rng, **options)``."""
    return _register(_RELEASES, name, privacy, source, summary)


def register_subcommand(func: Callable) -> Callable:
    """Register ``func(subparsers)`` that adds an extra CLI sub-command (e.g. ``online``)."""
    _SUBCOMMANDS.append(func)
    return func


def subcommands() -> list[Callable]:
    """Registered extra CLI sub-command builders."""
    _load()
    return list(_SUBCOMMANDS)


def _load():
    from . import programs  # noqa: F401  (registers every program)


def methods() -> dict[str, MethodInfo]:
    """All strategy methods, by name."""
    _load()
    return dict(_METHODS)


def releases() -> dict[str, MethodInfo]:
    """All data-dependent release methods, by name."""
    _load()
    return dict(_RELEASES)


def get_method(name: str) -> MethodInfo:
    """Look up a strategy method; `InputError` listing the choices if unknown."""
    table = methods()
    if name not in table:
        raise InputError(f"unknown method {name!r}; available: {', '.join(sorted(table))}")
    return table[name]


def get_release(name: str) -> MethodInfo:
    """Look up a release method (data-dependent methods and every strategy method)."""
    table = releases()
    if name in table:
        return table[name]
    if name in methods():
        return _METHODS[name]
    raise InputError(f"unknown release method {name!r}; available: {', '.join(sorted(set(table) | set(_METHODS)))}")
