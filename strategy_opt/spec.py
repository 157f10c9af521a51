"""Parse workload SPEC strings (CLI.md).

Grammar::

    SPEC  := TERM ('+' TERM)*            union over the same domain
    TERM  := ATOM ('*' ATOM)*            Kronecker product (multi-dimensional domain)
    ATOM  := identity:N | total:N | prefix:N | all-range:N | all-predicate:N | random-range:N:M[:SEED]
           | marginals:D1xD2x...:K | file:PATH | '(' SPEC ')'

Examples
--------
>>> parse_spec("prefix:4*all-range:3").shape
(24, 12)
>>> parse_spec("identity:5+total:5").m
6
"""

from __future__ import annotations

import re

import numpy as np

from .exceptions import InputError
from .workload import Workload, all_predicate, all_range, identity, kronecker, marginals, prefix, random_range, total, union

__all__ = ["parse_spec"]

_MAX_CELLS = 10**9
_SIMPLE = {"identity": identity, "total": total, "prefix": prefix, "all-range": all_range, "all-predicate": all_predicate}


def _int(text: str, what: str, spec: str) -> int:
    if not re.fullmatch(r"\d+", text or ""):
        raise InputError(f"malformed workload SPEC {spec!r}: {what} must be a positive integer, got {text!r}")
    v = int(text)
    if v < 1 and what != "seed":
        raise InputError(f"malformed workload SPEC {spec!r}: {what} must be >= 1, got {v}")
    if v > _MAX_CELLS and what != "seed":
        raise InputError(f"workload SPEC {spec!r}: {what} = {v} is too large")
    return v


def _atom(text: str, spec: str) -> Workload:
    name, _, rest = text.partition(":")
    name = name.strip()
    if name in _SIMPLE:
        return _SIMPLE[name](_int(rest, "N", spec))
    if name == "random-range":
        parts = rest.split(":")
        if len(parts) not in (2, 3):
            raise InputError(f"malformed workload SPEC {spec!r}: expected random-range:N:M[:SEED]")
        n, m = _int(parts[0], "N", spec), _int(parts[1], "M", spec)
        seed = _int(parts[2], "seed", spec) if len(parts) == 3 else 0
        return random_range(n, m, seed)
    if name == "marginals":
        dims, _, k = rest.rpartition(":")
        if not dims:
            raise InputError(f"malformed workload SPEC {spec!r}: expected marginals:D1xD2x...:K")
        shape = [_int(d, "attribute size", spec) for d in dims.split("x")]
        if not re.fullmatch(r"\d+", k):
            raise InputError(f"malformed workload SPEC {spec!r}: marginal order K must be an integer")
        if int(np.prod([float(d) for d in shape])) > _MAX_CELLS:
            raise InputError(f"workload SPEC {spec!r}: domain too large")
        return marginals(shape, int(k))
    if name == "file":
        from .io import read_workload_file

        if not rest:
            raise InputError(f"malformed workload SPEC {spec!r}: file: needs a path")
        return read_workload_file(rest)
    known = ", ".join([*_SIMPLE, "random-range", "marginals", "file"])
    raise InputError(f"malformed workload SPEC {spec!r}: unknown workload {name!r} (known: {known})")


def _split_top(text: str, op: str, spec: str) -> list[str]:
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise InputError(f"malformed workload SPEC {spec!r}: unbalanced parentheses")
        if ch == op and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if depth != 0:
        raise InputError(f"malformed workload SPEC {spec!r}: unbalanced parentheses")
    parts.append("".join(cur))
    if any(not p.strip() for p in parts):
        raise InputError(f"malformed workload SPEC {spec!r}: empty term around {op!r}")
    return parts


def _parse(text: str, spec: str) -> Workload:
    text = text.strip()
    terms = _split_top(text, "+", spec)
    if len(terms) > 1:
        return union(*[_parse(t, spec) for t in terms])
    factors = _split_top(text, "*", spec)
    if len(factors) > 1:
        return kronecker(*[_parse(f, spec) for f in factors])
    if text.startswith("(") and text.endswith(")"):
        return _parse(text[1:-1], spec)
    return _atom(text, spec)


def parse_spec(spec: str) -> Workload:
    """Build a workload from a SPEC string; `InputError` naming the bad part if malformed."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"empty workload SPEC {spec!r}")
    W = _parse(spec, spec)
    if W.n > _MAX_CELLS:
        raise InputError(f"workload SPEC {spec!r} has {W.n} cells; too large")
    if "file:" not in spec:
        W.spec = spec.strip()
    return W
