"""Parse workload SPEC strings (README.md, "Workload SPECs").

Grammar::

    SPEC  := TERM ('+' TERM)*            union over the same domain
    TERM  := ATOM ('*' ATOM)*            Kronecker product (multi-dimensional domain)
    ATOM  := identity:N | total:N | prefix:N | all-range:N | all-predicate:N | random-range:N:M[:SEED]
           | marginals:D1xD2x...:K | file:PATH | file:'PATH' | file:"PATH" | '(' SPEC ')'

Numbers are ASCII digits. An unquoted ``file:PATH`` ends at the next ``+``,
``*`` or parenthesis, which are SPEC operators; a path containing them (or
starting with a quote, or with blanks at either end) is written in single or
double quotes, ``file:'a+b.npz'``, and is then taken literally up to the
matching quote. Parsing never depends on which files exist; an error whose
SPEC holds an unquoted path that exists only when read through the operators
says how to quote it. A SPEC is parsed in three steps: syntax into a tree,
sizes (cells, queries, bytes to build; `strategy_opt.resources`) without
building anything, then the workload objects. A SPEC whose estimated memory
exceeds the machine's is refused with the estimate before any allocation.

Examples
--------
>>> parse_spec("prefix:4*all-range:3").shape
(24, 12)
>>> parse_spec("identity:5+total:5").m
6
>>> canonical_spec(" (random-range:10:4) + identity:10 ")
'random-range:10:4:0+identity:10'
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .defaults import MAX_CELLS, MAX_SPEC_DEPTH, MAX_SPEC_LENGTH, WORKLOAD_OBJECT_BYTES
from .exceptions import InputError
from .resources import WorkloadSize, operation_bytes, require_memory
from .workload import Workload, all_predicate, all_range, identity, kronecker, marginals, prefix, random_range, total, union, union_domain

__all__ = ["parse_spec", "canonical_spec", "file_spec", "file_paths", "MAX_CELLS"]

#: Largest number of cells of a workload domain.
_SIMPLE = {"identity": identity, "total": total, "prefix": prefix, "all-range": all_range, "all-predicate": all_predicate}
_KNOWN = ", ".join([*_SIMPLE, "random-range", "marginals", "file"])
_QUOTES = "'\""
#: Characters that end an unquoted file: path (SPEC operators).
_OPERATORS = "+*()"


def file_spec(path: str) -> str:
    """The SPEC atom ``file:PATH`` of a path, quoted when the path holds SPEC operators.

    Examples
    --------
    >>> print(file_spec("w.npy"), file_spec("a+b.npz"), file_spec("it's(1).npz"))
    file:w.npy file:'a+b.npz' file:"it's(1).npz"
    """
    path = str(path)
    plain = path and path == path.strip() and path[0] not in _QUOTES and not any(c in path for c in _OPERATORS)
    if plain:
        return f"file:{path}"
    quote = "'" if "'" not in path else '"'
    return f"file:{quote}{path}{quote}"


def _unquoted(text: str, spec: str):
    """``(index, character)`` of ``text`` outside quoted file paths (a quote right after ``file:``)."""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _QUOTES and text.endswith("file:", 0, i):
            end = text.find(ch, i + 1)
            if end < 0:
                raise InputError(f"malformed workload SPEC {spec!r}: the quoted file path {text[i:]!r} has no closing {ch}")
            i = end + 1
            continue
        yield i, ch
        i += 1


def _quoting_hint(spec: str) -> str | None:
    """How to quote an unquoted file: path that exists only if read through the SPEC operators in it."""
    best = None
    for match in re.finditer(r"file:(?!['\"])", spec):
        rest = spec[match.end():]
        for k in [i for i, c in enumerate(rest) if c in _OPERATORS] + [len(rest)]:
            candidate = rest[:k].strip()
            if any(c in candidate for c in _OPERATORS) and os.path.isfile(candidate) and (best is None or len(candidate) > len(best)):
                best = candidate
    if best is None:
        return None
    return f"workload SPEC {spec!r}: '+', '*' and parentheses are SPEC operators, so the file path {best!r} must be quoted: {file_spec(best)}"


@dataclass
class _Node:
    """A parsed SPEC: ``kind`` is an atom name, ``'kron'`` or ``'union'``."""

    kind: str
    args: tuple = ()
    children: list = field(default_factory=list)
    loaded: Workload | None = None  # file: atoms, read while sizing
    domain: tuple = ()  # set while sizing


def _int(text: str, what: str, spec: str, minimum: int = 1) -> int:
    if not re.fullmatch(r"[0-9]+", text or ""):
        kind = "a positive integer" if minimum >= 1 else "a non-negative integer"
        got = repr(text) if text else "nothing ('+', '*' and parentheses are SPEC operators, not signs)"
        raise InputError(f"malformed workload SPEC {spec!r}: {what} must be {kind}, got {got}")
    v = int(text)
    if v < minimum:
        raise InputError(f"malformed workload SPEC {spec!r}: {what} must be >= {minimum}, got {v}")
    if v > MAX_CELLS and what != "seed":
        raise InputError(f"workload SPEC {spec!r}: {what} = {v} is too large (at most {MAX_CELLS:,})")
    return v


def _atom(text: str, spec: str) -> _Node:
    name, _, rest = text.partition(":")
    name = name.strip()
    if name in _SIMPLE:
        return _Node(name, (_int(rest, "N", spec),))
    if name == "random-range":
        parts = rest.split(":")
        if len(parts) not in (2, 3):
            raise InputError(f"malformed workload SPEC {spec!r}: expected random-range:N:M[:SEED]")
        seed = _int(parts[2], "seed", spec, 0) if len(parts) == 3 else 0
        return _Node(name, (_int(parts[0], "N", spec), _int(parts[1], "M", spec), seed))
    if name == "marginals":
        dims, _, k = rest.rpartition(":")
        if not dims:
            raise InputError(f"malformed workload SPEC {spec!r}: expected marginals:D1xD2x...:K")
        shape = tuple(_int(d, "attribute size", spec) for d in dims.split("x"))
        k = _int(k, "marginal order K", spec, 0)
        if k > len(shape):
            raise InputError(f"malformed workload SPEC {spec!r}: marginal order K = {k} exceeds the {len(shape)} attributes")
        return _Node(name, (shape, k))
    if name == "file":
        if rest[:1] in _QUOTES and rest:
            if rest.find(rest[0], 1) != len(rest) - 1:
                raise InputError(f"malformed workload SPEC {spec!r}: a quoted path is file:{rest[0]}PATH{rest[0]}, with nothing after the closing quote (got file:{rest})")
            rest = rest[1:-1]
        if not rest:
            raise InputError(f"malformed workload SPEC {spec!r}: file: needs a path")
        return _Node(name, (rest,))
    raise InputError(f"malformed workload SPEC {spec!r}: unknown workload {name!r} (known: {_KNOWN})")


def _split_top(text: str, op: str, spec: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in _unquoted(text, spec):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise InputError(f"malformed workload SPEC {spec!r}: unbalanced parentheses")
        elif ch == op and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise InputError(f"malformed workload SPEC {spec!r}: unbalanced parentheses")
    parts.append(text[start:])
    if any(not p.strip() for p in parts):
        raise InputError(f"malformed workload SPEC {spec!r}: empty term around {op!r}")
    return parts


def _parse(text: str, spec: str) -> _Node:
    text = text.strip()
    terms = _split_top(text, "+", spec)
    if len(terms) > 1:
        return _Node("union", children=[_parse(t, spec) for t in terms])
    factors = _split_top(text, "*", spec)
    if len(factors) > 1:
        return _Node("kron", children=[_parse(f, spec) for f in factors])
    if text.startswith("(") and text.endswith(")"):
        return _parse(text[1:-1], spec)
    return _atom(text, spec)


def _tree(spec) -> _Node:
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"workload SPEC must be a non-empty string, got {spec!r}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise InputError(f"workload SPEC of {len(spec)} characters is too long (at most {MAX_SPEC_LENGTH})")
    depth = deepest = 0
    for _, ch in _unquoted(spec, spec):
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    if deepest > MAX_SPEC_DEPTH:
        raise InputError(f"workload SPEC nests parentheses {deepest} deep (at most {MAX_SPEC_DEPTH})")
    try:
        return _parse(spec, spec)
    except InputError as exc:
        hint = _quoting_hint(spec)
        if hint is None and re.search(r"file:(?!['\"])[^+*()]*[+*()]", spec):
            hint = f"{exc} (a file path containing '+', '*' or parentheses must be quoted: file:'PATH')"
        if hint is None:
            raise
        raise InputError(hint) from None


def _elementary_symmetric(values, k: int) -> int:
    """``e_k(values)``: the number of queries of all k-way marginals (exact integers)."""
    e = [1] + [0] * k
    for v in values:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * v
    return e[k]


def _size(node: _Node, spec: str) -> WorkloadSize:
    """Sizes of the workload of ``node`` without building it (file: atoms are read); sets ``node.domain``."""
    size = _sized(node, spec)
    if node.kind == "marginals":
        node.domain = node.args[0]
    elif node.kind == "file":
        node.domain = node.loaded.domain
    elif node.kind == "kron":
        node.domain = tuple(d for c in node.children for d in c.domain)
    elif node.kind == "union":
        try:
            node.domain = union_domain([c.domain for c in node.children])
        except InputError as exc:
            raise InputError(f"workload SPEC {spec!r}: {exc}") from None
    else:
        node.domain = (size.n,)
    return size


def _sized(node: _Node, spec: str) -> WorkloadSize:
    kind, args = node.kind, node.args
    if kind in ("identity", "prefix"):
        return WorkloadSize(args[0], args[0], 16.0 * args[0] + WORKLOAD_OBJECT_BYTES)
    if kind == "total":
        return WorkloadSize(args[0], 1, WORKLOAD_OBJECT_BYTES)
    if kind == "all-range":
        return WorkloadSize(args[0], args[0] * (args[0] + 1) // 2, WORKLOAD_OBJECT_BYTES)
    if kind == "all-predicate":
        return WorkloadSize(args[0], 2 ** args[0], WORKLOAD_OBJECT_BYTES)
    if kind == "random-range":
        return WorkloadSize(args[0], args[1], 48.0 * args[1] + WORKLOAD_OBJECT_BYTES)
    if kind == "marginals":
        shape, k = args
        n = math.prod(shape)
        if n > MAX_CELLS:
            raise InputError(f"workload SPEC {spec!r}: marginals over {n:,} cells; at most {MAX_CELLS:,}")
        parts = math.comb(len(shape), k)  # one Kronecker product of len(shape) factors per marginal
        identities = 16.0 * sum(shape) * math.comb(len(shape) - 1, k - 1) if k else 0.0
        build = float(parts) * len(shape) * WORKLOAD_OBJECT_BYTES + identities
        # exact query count when it is cheap to compute; else the lower bound of one query per marginal
        m = _elementary_symmetric(shape, k) if len(shape) * k <= 10**6 else parts
        return WorkloadSize(n, m, build, kron_blocks=list(shape))
    if kind == "file":
        from .matrix_files import read_workload_file

        node.loaded = read_workload_file(args[0])
        return WorkloadSize(node.loaded.n, node.loaded.m)
    sizes = [_size(c, spec) for c in node.children]
    build = sum(s.build_bytes for s in sizes)
    if kind == "kron":
        n = math.prod(s.n for s in sizes)
        if n > MAX_CELLS:
            raise InputError(f"workload SPEC {spec!r} has {n:,} cells; at most {MAX_CELLS:,}")
        return WorkloadSize(n, math.prod(s.m for s in sizes), build, [s.n for s in sizes])
    ns = [s.n for s in sizes]
    if len(set(ns)) != 1:
        raise InputError(f"workload SPEC {spec!r}: union of workloads over different domain sizes {ns}")
    blocks = sizes[0].kron_blocks if all(s.kron_blocks == sizes[0].kron_blocks for s in sizes) else []
    return WorkloadSize(ns[0], sum(s.m for s in sizes), build, blocks)


def _build(node: _Node) -> Workload:
    kind, args = node.kind, node.args
    if kind in _SIMPLE:
        return _SIMPLE[kind](args[0])
    if kind == "random-range":
        return random_range(*args)
    if kind == "marginals":
        return marginals(*args)
    if kind == "file":
        return node.loaded
    children = [_build(c) for c in node.children]
    return kronecker(*children) if kind == "kron" else union(*children)


def _text(node: _Node, file_name=None) -> str:
    if node.kind == "union":
        return "+".join(_text(c, file_name) for c in node.children)
    if node.kind == "kron":
        return "*".join(f"({_text(c, file_name)})" if c.kind == "union" else _text(c, file_name) for c in node.children)
    if node.kind == "marginals":
        return f"marginals:{'x'.join(map(str, node.args[0]))}:{node.args[1]}"
    if node.kind == "file":
        return file_spec(node.args[0] if file_name is None else file_name(node.args[0]))
    return f"{node.kind}:{':'.join(map(str, node.args))}"


def canonical_spec(spec: str, file_name: Callable[[str], str] | None = None) -> str:
    """The SPEC in canonical form: no blanks or redundant parentheses, default seeds filled in.

    Two SPECs with the same canonical form denote the same workload. Nothing is
    built or read. ``file_name``, if given, maps each ``file:`` atom's path to
    what stands for it in the result (for instance the file's content hash, so
    that SPECs reading the same bytes under different paths compare equal).

    Examples
    --------
    >>> canonical_spec("( prefix:4 ) + file:w.npy", file_name=str.upper)
    'prefix:4+file:W.NPY'
    """
    return _text(_tree(spec), file_name)


def file_paths(spec: str) -> list[str]:
    """The paths of the SPEC's ``file:`` atoms, in order (nothing is read).

    Examples
    --------
    >>> file_paths("file:'a+b.npz'*prefix:4 + file:c.npy")
    ['a+b.npz', 'c.npy']
    """
    paths = []

    def walk(node: _Node) -> None:
        if node.kind == "file":
            paths.append(node.args[0])
        for child in node.children:
            walk(child)

    walk(_tree(spec))
    return paths


def parse_spec(spec: str, operation: str | None = None) -> Workload:
    """Build a workload from a SPEC string; `InputError` naming the bad part if malformed.

    Parameters
    ----------
    spec : str
        The SPEC (README.md, "Workload SPECs").
    operation : {None, 'solve', 'error', 'run', 'release', 'release-data', 'solve-diagonal', 'error-diagonal', 'release-diagonal', 'error-factors'}
        Also refuse the SPEC if this operation on it would need more memory
        than is available (`strategy_opt.resources.operation_bytes`). Building
        the workload is always checked.

    Returns
    -------
    Workload
        Structured where the SPEC says so (intervals, Kronecker products,
        unions); its ``spec`` attribute is the SPEC as given, stripped of
        surrounding blanks (`canonical_spec` gives the canonical form, which
        comparisons of recorded workloads use).

    Raises
    ------
    InputError
        Malformed SPEC, or not enough memory (the message gives the estimate).

    Examples
    --------
    >>> W = parse_spec("prefix:3*all-range:4")
    >>> W.shape, W.domain
    ((30, 12), (3, 4))
    """
    tree = _tree(spec)
    try:
        size = _size(tree, spec)
    except InputError:  # e.g. file:a+b.npz read as the file 'a' and the workload 'b.npz'
        hint = _quoting_hint(spec)
        if hint is None:
            raise
        raise InputError(hint) from None
    if size.n > MAX_CELLS:
        raise InputError(f"workload SPEC {spec!r} has {size.n:,} cells; at most {MAX_CELLS:,}")
    nbytes, why = operation_bytes(size, operation)
    require_memory(
        nbytes,
        f"workload SPEC {spec!r}" + (f" for {operation.removesuffix('-data').removesuffix('-diagonal').removesuffix('-factors')!r}" if operation else ""),
        f"mostly for {why}; use a smaller domain" + ("" if "*" in spec else ", a Kronecker-structured SPEC (SPEC*SPEC)") + " or a larger machine",
    )
    W = _build(tree)
    if "file:" not in spec:
        W.spec = spec.strip()
    return W
