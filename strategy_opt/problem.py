"""A strategy-optimisation problem: workload, privacy notion, objective, method, solver.

Problems come from the Python API, from CLI flags, or from TOML problem files
(``problems/*.toml``)::

    description = "All ranges on 2048 cells (Li 2013, Table 4.1)"
    workload = "all-range:2048"
    privacy = "approx"         # pure | approx
    method = "eigen-design"
    objective = "total"
    solver = "native"
    [options]                  # method options, e.g. branching = 4, basis = "wavelet"

``branching`` and ``basis`` (also `solve` flags) may instead stand beside ``method``.

Data-driven problems may also give ``data``, ``epsilon``, ``delta``: ``solve``
computes the strategy only and prints the ``strategy-opt run`` command that
answers the data with them.

Relative paths inside a problem file resolve against the file's own directory,
not the current one: ``file:`` atoms of the workload SPEC, a ``solver`` given as
a path (ending in ``.toml`` or containing a directory separator; a bare name
such as ``scs`` is a profile name), a ``weights`` option given as a ``.npy``
path, and ``data``. Flags given on the command line are relative to the current
directory as usual.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .bundled import bundled_dir
from .exceptions import InputError, OptionError
from .solvers import SolverProfile, check_solver_cones, check_solver_options, load_profile
from .spec import canonical_spec, file_spec, parse_spec
from .workload import Workload

log = logging.getLogger("strategy_opt")

__all__ = ["Problem", "is_number", "is_integer", "is_seed", "absolute_file_paths", "load_problem", "list_problems", "problem_dir"]

_KEYS = {"description", "workload", "privacy", "method", "objective", "solver", "options", "data", "epsilon", "delta"}
#: Method options that are also `solve` flags: allowed beside ``method`` as well as in ``[options]``.
_FLAG_OPTIONS = ("branching", "basis")


@dataclass(frozen=True)
class Problem:
    """Everything a method needs to compute a strategy.

    Attributes
    ----------
    workload : Workload
    privacy : {'pure', 'approx'}
        Sensitivity norm L1 (pure) or L2 (approx).
    objective : str
        Name of a registered objective (``'total'`` by default).
    solver : SolverProfile
        Default: the ``native`` profile (`strategy_opt.solvers.load_profile` of None).
    options : dict
        Method-specific options (``branching``, ``basis``, ``group_size``, ...).

    Raises
    ------
    InputError
        For a privacy other than ``'pure'`` or ``'approx'``, or a solver profile whose cones or options the
        problem cannot use.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> pr = Problem(prefix(4), privacy="pure", options={"branching": 2})
    >>> pr.workload.spec, pr.privacy, pr.objective, pr.solver.name, pr.options
    ('prefix:4', 'pure', 'total', 'native', {'branching': 2})
    >>> Problem(prefix(4), privacy="renyi")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: privacy must be 'pure' or 'approx', got 'renyi'
    """

    workload: Workload
    privacy: str = "approx"
    objective: str = "total"
    solver: SolverProfile = field(default_factory=lambda: load_profile(None))
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.privacy not in ("pure", "approx"):
            raise InputError(f"privacy must be 'pure' or 'approx', got {self.privacy!r}")
        check_solver_cones(self.solver)
        check_solver_options(self.solver)  # a cvxpy profile's [options], before any program solves

    @property
    def p(self) -> int:
        """Sensitivity norm order: 1 (pure) or 2 (approx).

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Problem(prefix(4), privacy="pure").p, Problem(prefix(4), privacy="approx").p
        (1, 2)
        """
        return 1 if self.privacy == "pure" else 2

    def with_options(self, **options) -> "Problem":
        """A copy with extra method options.

        Parameters
        ----------
        **options
            Method options; they replace options of the same name.

        Returns
        -------
        Problem
            A new problem (this one is frozen and unchanged).

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> pr = Problem(prefix(4), options={"branching": 2, "seed": 0})
        >>> pr.with_options(branching=4).options, pr.options
        ({'branching': 4, 'seed': 0}, {'branching': 2, 'seed': 0})
        """
        return replace(self, options={**self.options, **options})

    def option(self, name: str, default, check, what: str, method: str | None = None):
        """Method option ``name`` (``default`` when not given), refused with an `OptionError` unless ``check(value)``.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> Problem(prefix(4), options={"g": 2.0}).option("g", 0.0, lambda v: v >= 0, "a number >= 0")
        2.0
        """
        value = self.options.get(name, default)
        if not check(value):
            raise OptionError(f"{method + ': ' if method else ''}option {name} must be {what}, got {value!r}")
        return value


def is_number(value) -> bool:
    """Whether an option value is a real number (Python or NumPy; not a bool), for `Problem.option` checks.

    Examples
    --------
    >>> is_number(2), is_number(np.float32(0.5)), is_number(True), is_number("1")
    (True, True, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def is_integer(value, least: int = 0) -> bool:
    """Whether a method option is an integer >= ``least`` (Python or NumPy; not a bool or a float).

    Examples
    --------
    >>> is_integer(3, 1), is_integer(0, 1), is_integer(2.0)
    (True, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and bool(value >= least)


def is_seed(value) -> bool:
    """Whether a method option is a valid random seed: an integer >= 0 (Python or NumPy; not a bool or a float).

    Examples
    --------
    >>> is_seed(0), is_seed(np.int64(7)), is_seed(1.0), is_seed(1e20), is_seed(-1), is_seed(True)
    (True, True, False, False, False, False)
    """
    return is_integer(value, 0)


def problem_dir() -> Path:
    """The ``problems/`` folder of the installation.

    Returns
    -------
    Path
        The bundled ``problems`` directory (`strategy_opt.bundled.bundled_dir`).

    Examples
    --------
    >>> problem_dir().name, (problem_dir() / "quickstart.toml").is_file()
    ('problems', True)
    """
    return bundled_dir("problems")


def list_problems() -> dict[str, Path]:
    """Map of problem name to file for the bundled problems.

    Returns
    -------
    dict of str to Path
        ``{stem: path}`` of every ``*.toml`` in `problem_dir`, sorted by file name; empty when that folder is absent.

    Examples
    --------
    >>> list_problems()["quickstart"].name
    'quickstart.toml'
    """
    d = problem_dir()
    return {f.stem: f for f in sorted(d.glob("*.toml"))} if d.is_dir() else {}


def _rebase(path: str, base: Path) -> str:
    """``path`` relative to ``base`` (a leading ``~`` expanded; unchanged when absolute, empty, or when base is the current directory)."""
    path = os.path.expanduser(path) if path else path
    if not path or os.path.isabs(path) or base == Path("."):
        return path
    return str(base / path)


def _rebase_spec(spec: str, base: Path) -> str:
    """The SPEC with every relative ``file:PATH`` atom made relative to ``base`` (quoting as needed).

    An unquoted path ends at the next SPEC operator (``+ * ( )``) and loses its
    trailing blanks, as in `strategy_opt.spec`; a quoted one ends at its
    closing quote. A malformed SPEC is returned as is for the parser to report.

    Examples
    --------
    >>> _rebase_spec("file:w.npy*prefix:4", Path("probs"))
    'file:probs/w.npy*prefix:4'
    >>> _rebase_spec("identity:3+file:'a+b.npy'", Path("d"))
    "identity:3+file:'d/a+b.npy'"
    >>> _rebase_spec("file:/abs/w.npy", Path("d"))
    'file:/abs/w.npy'
    """
    if base == Path("."):
        return spec
    out, i = [], 0
    while True:
        j = spec.find("file:", i)
        if j < 0:
            out.append(spec[i:])
            return "".join(out)
        out.append(spec[i:j])
        k = j + len("file:")
        if spec[k : k + 1] in ("'", '"') and spec[k : k + 1]:
            end = spec.find(spec[k], k + 1)
            if end < 0:
                out.append(spec[j:])
                return "".join(out)
            path, tail, i = spec[k + 1 : end], "", end + 1
        else:
            end = k
            while end < len(spec) and spec[end] not in "+*()":
                end += 1
            raw = spec[k:end]
            path = raw.rstrip()
            tail, i = raw[len(path) :], end
        out.append((file_spec(_rebase(path, base)) if path else spec[j:k]) + tail)


def absolute_file_paths(spec: str) -> str:
    """The SPEC with every relative ``file:PATH`` atom made absolute (against the current directory).

    A strategy records the SPEC it was computed for; with absolute paths the
    record names the same files from any directory.

    Parameters
    ----------
    spec : str
        A workload SPEC; a malformed one is returned as is for the parser to report.

    Returns
    -------
    str

    Examples
    --------
    >>> absolute_file_paths("file:w.npy*prefix:4") == file_spec(str(Path.cwd() / "w.npy")) + "*prefix:4"
    True
    >>> absolute_file_paths("prefix:4"), absolute_file_paths("file:/data/w.npy")
    ('prefix:4', 'file:/data/w.npy')
    """
    return _rebase_spec(spec, Path.cwd())


def _rebase_paths(data: dict, base: Path) -> dict:
    """The problem's relative paths made relative to the problem file's directory ``base``."""
    if isinstance(data.get("workload"), str):
        data["workload"] = _rebase_spec(data["workload"], base)
    solver = data.get("solver")
    if isinstance(solver, str) and (solver.endswith(".toml") or os.sep in solver or "/" in solver):
        data["solver"] = _rebase(solver, base)
    if isinstance(data.get("data"), str):
        data["data"] = _rebase(data["data"], base)
    weights = data.get("options", {}).get("weights")
    if isinstance(weights, str) and weights.strip().endswith(".npy"):
        data["options"]["weights"] = _rebase(weights.strip(), base)
    return data


def read_problem_file(path: str | Path) -> dict:
    r"""Read and validate a problem TOML file (path or bundled problem name) into a dict.

    Relative paths in it (workload ``file:`` atoms, a solver profile path, a
    ``weights`` ``.npy`` option, ``data``) are returned relative to the file's
    directory, so a problem file works from any current directory.

    Parameters
    ----------
    path : str or Path
        A TOML file, or the name of a bundled problem (`list_problems`).

    Returns
    -------
    dict
        The file's keys; ``branching`` and ``basis`` given beside ``method`` are moved into ``options``.

    Raises
    ------
    InputError
        For a missing file, malformed TOML, unknown keys, values of the wrong type or range, conflicting options,
        or ``delta`` with ``privacy = 'pure'``.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "p.toml"
    >>> _ = path.write_text('workload = "file:w.npy"\nmethod = "eigen-design"\nbranching = 4\n')
    >>> data = read_problem_file(path)
    >>> data["workload"] == f"file:{Path(tmp.name) / 'w.npy'}", data["method"], data["options"]
    (True, 'eigen-design', {'branching': 4})
    >>> tmp.cleanup()
    """
    p = Path(path)
    if not p.exists() or p.is_dir():  # a pipe or /dev/stdin is read as a file
        # a bundled name (also where a directory has that name), or a path to a bundled file given from another directory (problems/NAME.toml)
        named = list_problems().get(str(path)) or (list_problems().get(p.stem) if p.suffix == ".toml" and str(p.parent) in (".", "problems") else None)
        if named is None:
            what = f"problem file {path} is a directory" if p.is_dir() else f"problem file not found: {path}"
            if _is_spec(str(path)):
                raise InputError(f"{what}; it is a workload SPEC: give it as --workload {shlex.quote(str(path))}")
            raise InputError(f"{what} (bundled problems: {', '.join(list_problems())})")
        if str(path) != p.stem:  # a path, not a bare name: say which file is read
            log.info("%s is not a file here; reading the bundled problem %r (%s)", path, named.stem, named)
        p = named
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a byte-order mark is not TOML, but editors write one
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"problem file {p}: malformed TOML ({exc})") from None
    except RecursionError:
        raise InputError(f"problem file {p}: malformed TOML (nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"problem file {p}: cannot read ({exc})") from None
    unknown = set(data) - _KEYS - set(_FLAG_OPTIONS)
    if unknown:
        raise InputError(f"problem file {p}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS | set(_FLAG_OPTIONS))}")
    if "options" in data and not isinstance(data["options"], dict):
        raise InputError(f"problem file {p}: 'options' must be a table")
    for key in _FLAG_OPTIONS:
        if key in data:
            options = data.setdefault("options", {})
            if key in options and options[key] != data[key]:
                raise InputError(f"problem file {p}: '{key}' = {data[key]!r} and [options] {key} = {options[key]!r} conflict; give it once")
            options[key] = data.pop(key)
    for key in sorted(set(data) & {"description", "workload", "privacy", "method", "objective", "solver", "data"}):
        if not isinstance(data[key], str):
            raise InputError(f"problem file {p}: '{key}' must be a string, got {data[key]!r}")
    for key, lo, hi in (("epsilon", 0.0, math.inf), ("delta", 0.0, 1.0)):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not lo < v < hi):
            raise InputError(f"problem file {p}: '{key}' must be a number in ({lo:g}, {hi:g}), got {v!r}")
    if data.get("privacy") == "pure" and "delta" in data:
        raise InputError(f"problem file {p}: delta = {data['delta']!r} applies only to privacy 'approx', but the file says privacy = 'pure'")
    return _rebase_paths(data, p.parent)


def _is_spec(text: str) -> bool:
    """Whether ``text`` (a missing problem file) reads as a workload SPEC, such as ``prefix:100``."""
    if ":" not in text:
        return False
    try:
        canonical_spec(text)
    except InputError:
        return False
    return True


def load_problem(path: str | Path, **overrides) -> tuple[Problem, str]:
    r"""Build a `Problem` (and its method name) from a problem file; keyword overrides win.

    Parameters
    ----------
    path : str or Path
        A TOML problem file or a bundled problem name (see `read_problem_file`).
    **overrides
        File keys to replace (``workload``, ``privacy``, ``method``, ``objective``, ``solver``, ``options``, ...);
        None values are ignored.

    Returns
    -------
    (Problem, str)
        The problem (privacy ``'approx'``, objective ``'total'`` and the native solver unless given) and the
        method name (``'auto'`` unless given).

    Raises
    ------
    InputError
        For an invalid file, a missing workload, or a bad SPEC, privacy or solver.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "p.toml"
    >>> _ = path.write_text('workload = "prefix:8"\nprivacy = "pure"\nmethod = "greedy-h"\n[options]\nbranching = 2\n')
    >>> pr, method = load_problem(path)
    >>> pr.workload.spec, pr.privacy, pr.options, method
    ('prefix:8', 'pure', {'branching': 2}, 'greedy-h')
    >>> load_problem(path, privacy="approx", method=None)[0].privacy
    'approx'
    >>> tmp.cleanup()
    """
    data = {**read_problem_file(path), **{k: v for k, v in overrides.items() if v is not None}}
    if "workload" not in data:
        raise InputError(f"problem {path} gives no workload")
    problem = Problem(
        workload=parse_spec(str(data["workload"])),
        privacy=data.get("privacy", "approx"),
        objective=data.get("objective", "total"),
        solver=load_profile(data.get("solver")),
        options=dict(data.get("options", {})),
    )
    return problem, data.get("method", "auto")
