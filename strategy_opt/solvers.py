"""Solver profiles: named TOML files that configure a backend.

A profile (``solvers/NAME.toml``) looks like::

    backend = "cvxpy"          # or "native"
    solver = "SCS"             # cvxpy solver name (cvxpy backend only)
    max_iters = 100000
    time_limit = 600.0         # seconds, a budget for iterative programs
    tol = 1e-8                 # target relative gap / accuracy
    verbose = false
    [options]                  # passed to the solver as keyword arguments
    eps_abs = 1e-9

``--solver NAME`` looks for ``NAME.toml`` in the profile directories
(``$STRATEGY_OPT_SOLVERS``, ``./solvers`` and the ``solvers/`` folder of the
installation); ``--solver path/to/file.toml`` uses that file.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .exceptions import InputError

__all__ = ["SolverProfile", "load_profile", "list_profiles", "profile_dirs"]

_ROOT = Path(__file__).resolve().parent.parent
_KNOWN = {"backend", "solver", "max_iters", "time_limit", "tol", "verbose", "options", "description"}


@dataclass(frozen=True)
class SolverProfile:
    """Settings of one backend, read from a solver profile."""

    name: str
    backend: str = "native"
    solver: str | None = None
    max_iters: int = 10_000
    time_limit: float = 600.0
    tol: float = 1e-8
    verbose: bool = False
    options: dict = field(default_factory=dict)
    description: str = ""


def profile_dirs() -> list[Path]:
    """Directories searched for ``NAME.toml`` profiles, in order."""
    dirs = []
    if os.environ.get("STRATEGY_OPT_SOLVERS"):
        dirs.append(Path(os.environ["STRATEGY_OPT_SOLVERS"]))
    dirs += [Path.cwd() / "solvers", _ROOT / "solvers"]
    seen, out = set(), []
    for d in dirs:
        r = d.resolve()
        if r not in seen and r.is_dir():
            seen.add(r)
            out.append(r)
    return out


def _read(path: Path, name: str) -> SolverProfile:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"solver profile {path}: malformed TOML ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"solver profile {path}: cannot read ({exc})") from None
    unknown = set(data) - _KNOWN
    if unknown:
        raise InputError(f"solver profile {path}: unknown keys {sorted(unknown)}; allowed: {sorted(_KNOWN)}")
    backend = data.get("backend", "native")
    if backend not in ("cvxpy", "native"):
        raise InputError(f"solver profile {path}: backend must be 'cvxpy' or 'native', got {backend!r}")
    try:
        profile = SolverProfile(
            name=name,
            backend=backend,
            solver=data.get("solver"),
            max_iters=int(data.get("max_iters", 10_000)),
            time_limit=float(data.get("time_limit", 600.0)),
            tol=float(data.get("tol", 1e-8)),
            verbose=bool(data.get("verbose", False)),
            options=dict(data.get("options", {})),
            description=str(data.get("description", "")),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"solver profile {path}: bad value ({exc})") from None
    if profile.solver is not None and not isinstance(profile.solver, str):
        raise InputError(f"solver profile {path}: solver must be a string, got {profile.solver!r}")
    if profile.max_iters < 1 or not 0 < profile.time_limit < math.inf or not 0 < profile.tol < math.inf:
        raise InputError(
            f"solver profile {path}: need max_iters >= 1 and finite time_limit > 0 and tol > 0, got "
            f"max_iters={profile.max_iters}, time_limit={profile.time_limit}, tol={profile.tol}"
        )
    return profile


def load_profile(name_or_path: str | os.PathLike | None) -> SolverProfile:
    """Load a solver profile by name (``scs``, ``clarabel``, ``native``) or path.

    ``None`` gives the ``native`` profile (or built-in native defaults if no
    profile file is found).
    """
    if name_or_path is None:
        name_or_path = "native"
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise InputError(f"solver profile file not found: {p}")
        return _read(p, p.stem)
    for d in profile_dirs():
        f = d / f"{name_or_path}.toml"
        if f.is_file():
            return _read(f, str(name_or_path))
    if str(name_or_path) == "native":
        return SolverProfile(name="native")
    known = sorted(list_profiles())
    raise InputError(f"unknown solver profile {str(name_or_path)!r}; available: {', '.join(known) or 'none'}")


def list_profiles() -> dict[str, Path]:
    """Map of profile name to file for every profile found."""
    out: dict[str, Path] = {}
    for d in profile_dirs():
        for f in sorted(d.glob("*.toml")):
            out.setdefault(f.stem, f)
    return out
