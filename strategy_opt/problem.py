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

Data-driven problems may also give ``data``, ``epsilon``, ``delta``.
"""

from __future__ import annotations

import math

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .exceptions import InputError
from .solvers import SolverProfile, load_profile
from .spec import parse_spec
from .workload import Workload

__all__ = ["Problem", "load_problem", "list_problems", "problem_dir"]

_ROOT = Path(__file__).resolve().parent.parent
_KEYS = {"description", "workload", "privacy", "method", "objective", "solver", "options", "data", "epsilon", "delta"}


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
    options : dict
        Method-specific options (``branching``, ``basis``, ``group_size``, ...).
    """

    workload: Workload
    privacy: str = "approx"
    objective: str = "total"
    solver: SolverProfile = field(default_factory=lambda: load_profile(None))
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.privacy not in ("pure", "approx"):
            raise InputError(f"privacy must be 'pure' or 'approx', got {self.privacy!r}")

    @property
    def p(self) -> int:
        """Sensitivity norm order: 1 (pure) or 2 (approx)."""
        return 1 if self.privacy == "pure" else 2

    def with_options(self, **options) -> "Problem":
        """A copy with extra method options."""
        return replace(self, options={**self.options, **options})


def problem_dir() -> Path:
    """The ``problems/`` folder of the installation."""
    return _ROOT / "problems"


def list_problems() -> dict[str, Path]:
    """Map of problem name to file for the bundled problems."""
    d = problem_dir()
    return {f.stem: f for f in sorted(d.glob("*.toml"))} if d.is_dir() else {}


def read_problem_file(path: str | Path) -> dict:
    """Read and validate a problem TOML file (path or bundled problem name) into a dict."""
    p = Path(path)
    if not p.exists():
        # a bundled name, or a path to a bundled file given from another directory (problems/NAME.toml)
        named = list_problems().get(str(path)) or (list_problems().get(p.stem) if p.suffix == ".toml" and p.parent.name == "problems" else None)
        if named is None:
            raise InputError(f"problem file not found: {path} (bundled problems: {', '.join(list_problems())})")
        p = named
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"problem file {p}: malformed TOML ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"problem file {p}: cannot read ({exc})") from None
    unknown = set(data) - _KEYS
    if unknown:
        raise InputError(f"problem file {p}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    if "options" in data and not isinstance(data["options"], dict):
        raise InputError(f"problem file {p}: 'options' must be a table")
    for key in sorted(set(data) & {"description", "workload", "privacy", "method", "objective", "solver", "data"}):
        if not isinstance(data[key], str):
            raise InputError(f"problem file {p}: '{key}' must be a string, got {data[key]!r}")
    for key, lo, hi in (("epsilon", 0.0, math.inf), ("delta", 0.0, 1.0)):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not lo < v < hi):
            raise InputError(f"problem file {p}: '{key}' must be a number in ({lo:g}, {hi:g}), got {v!r}")
    return data


def load_problem(path: str | Path, **overrides) -> tuple[Problem, str]:
    """Build a `Problem` (and its method name) from a problem file; keyword overrides win."""
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
