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
installation); ``--solver path/to/file.toml`` uses that file. Without
``--solver`` the installation's ``native`` profile is used, whatever the
working directory holds. Strategy metadata records the profile's name and
file (``solver_profile``).

``time_limit`` is the native solver's budget for its whole program (it may
overshoot by the one step running at the deadline); for a cvxpy profile it goes
to the solver (SCS ``time_limit_secs``, Clarabel ``time_limit``) and bounds its
iterations only: cvxpy compiles the problem first, which on SDPs of 1000+ cells
takes about as long as a short solve (from 1024 cells progress lines say so,
and how the time split).

Loading a profile file checks its top-level keys: each must have its type
(``max_iters`` a TOML integer >= 1, ``time_limit`` and ``tol`` finite numbers
> 0, ``verbose`` a boolean, ``backend``, ``solver`` and ``description``
strings), ``solver`` must name an installed cvxpy solver
(``cvxpy.installed_solvers()``) that handles second-order cones (the strategy
programs are SOCPs and SDPs: OSQP, HiGHS or SciPy cannot solve them) and is
refused with the ``native`` backend (the default). Each refusal is an
`InputError` naming the file, key and value. A program that needs PSD cones
(minerror-l1, minerror-l2) refuses a solver without them (ECOS) the same way,
through `require_cone`.

The ``[options]`` of a cvxpy profile are checked before a program solves
(`check_solver_options`, called when a `strategy_opt.problem.Problem` is made):
an unknown option or a value of the wrong type is refused as an input error
naming the option, instead of failing inside the solver.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .bundled import bundled_dir
from .exceptions import InputError

__all__ = [
    "SolverProfile", "load_profile", "list_profiles", "profile_dirs", "check_solver_options", "check_solver_cones",
    "require_cone", "rejected_option", "cvxpy_solve_kwargs", "check_profile", "solve_cvxpy",
]


def _positive_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


#: Each top-level key: (test of its TOML value, what the value must be).
_RULES: dict[str, tuple[Callable[[object], bool], str]] = {
    "backend": (lambda v: v in ("cvxpy", "native"), "must be 'cvxpy' or 'native'"),
    "solver": (lambda v: isinstance(v, str), "must be a string naming a cvxpy solver"),
    "max_iters": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "must be an integer >= 1"),
    "time_limit": (_positive_number, "must be a finite number > 0 (seconds)"),
    "tol": (_positive_number, "must be a finite number > 0"),
    "verbose": (lambda v: isinstance(v, bool), "must be true or false"),
    "options": (lambda v: isinstance(v, dict), "[options] must be a table of solver keyword arguments"),
    "description": (lambda v: isinstance(v, str), "must be a string"),
}
#: Keyword arguments of ``cvxpy.Problem.solve`` that the programs set from the profile's top-level keys.
RESERVED_OPTIONS = ("solver", "verbose")


@dataclass(frozen=True)
class SolverProfile:
    """Settings of one backend, read from a solver profile.

    Attributes
    ----------
    name : str
        The profile's name (a file's stem).
    backend : {'native', 'cvxpy'}
    solver : str or None
        The cvxpy solver (``SCS``, ``CLARABEL``, ...); None for the native backend.
    max_iters : int
    time_limit : float
        Seconds.
    tol : float
        Target relative gap (native) or tolerance the programs read.
    verbose : bool
    options : dict
        Extra keyword arguments for ``cvxpy.Problem.solve`` (``[options]`` of the file).
    description : str
    source : str
        The absolute path of the file it was read from ("" for built-in defaults and API-made profiles).

    Examples
    --------
    >>> SolverProfile("mine", time_limit=30.0)
    SolverProfile(name='mine', backend='native', solver=None, max_iters=10000, time_limit=30.0, tol=1e-08, verbose=False, options={}, description='', source='')
    """

    name: str
    backend: str = "native"
    solver: str | None = None
    max_iters: int = 10_000
    time_limit: float = 600.0
    tol: float = 1e-8
    verbose: bool = False
    options: dict = field(default_factory=dict)
    description: str = ""
    source: str = ""  # the file it was read from ("" for built-in defaults and API-made profiles)


def cvxpy_solve_kwargs(profile: SolverProfile, solver: str | None = None) -> dict:
    """Keyword arguments for ``cvxpy.Problem.solve`` from a cvxpy profile: its ``[options]`` and its budgets.

    ``solver`` names the solver when the profile leaves it to the program's default.

    ``max_iters`` and ``time_limit`` go to the solver under its own names (SCS:
    ``max_iters``, ``time_limit_secs``; Clarabel: ``max_iter``, ``time_limit``);
    the same setting in ``[options]`` wins. Other solvers get ``[options]`` only.
    ``solver`` and ``verbose`` are not included (the programs pass them).
    The tolerance is the solver's own option (``eps_abs``/``eps_rel``, ``tol_gap_*``).

    Examples
    --------
    >>> cvxpy_solve_kwargs(SolverProfile("p", backend="cvxpy", solver="SCS", max_iters=50, time_limit=5.0))
    {'max_iters': 50, 'time_limit_secs': 5.0}
    >>> cvxpy_solve_kwargs(SolverProfile("p", backend="cvxpy", solver="clarabel", time_limit=2.0, options={"max_iter": 7}))
    {'max_iter': 7, 'time_limit': 2.0}
    """
    kw = dict(profile.options)
    name = (profile.solver or solver or "").upper()
    if name == "SCS":
        kw.setdefault("max_iters", profile.max_iters)
        kw.setdefault("time_limit_secs", profile.time_limit)
    elif name == "CLARABEL":
        kw.setdefault("max_iter", profile.max_iters)
        kw.setdefault("time_limit", profile.time_limit)
    return kw


@contextlib.contextmanager
def solver_output_to_stderr():
    """Send what a solve prints on standard output to standard error while it runs.

    A profile with ``verbose = true`` makes cvxpy print its banner and SCS or
    Clarabel their iterations, all on stdout (from Python, C and Rust alike), where
    the CLI writes its result (``--json``): this points file descriptor 1 at
    stderr for the duration of the solve, flushing Python's and C's buffers
    before it is put back. Where stdout or stderr has no file descriptor (a
    captured stream, as under pytest) nothing is redirected.

    Examples
    --------
    >>> with solver_output_to_stderr():
    ...     pass
    """
    try:
        out, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(out)
    try:
        os.dup2(err, out)
        yield
    finally:
        try:  # C's stdio buffer of SCS's printf: flushed while it still points at stderr
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
        sys.stdout.flush()
        os.dup2(saved, out)
        os.close(saved)


#: SCS's status value when its own SIGINT handler stopped it (``scs.h``: SCS_SIGINT)
_SCS_SIGINT = -5
_interruptible_scs = None


def cvxpy_solver(name: str | None):
    """The ``solver`` argument for ``cvxpy.Problem.solve``, given a solver's name.

    SCS installs its own SIGINT handler while it iterates: Ctrl-C stops it with
    status "interrupted", which cvxpy reports as a failed solve, so Python never
    sees the KeyboardInterrupt. For SCS this returns an instance of a cvxpy SCS
    interface that raises KeyboardInterrupt on that status (the CLI then exits
    130, "interrupted"); every other name is returned unchanged.

    Examples
    --------
    >>> cvxpy_solver("CLARABEL")
    'CLARABEL'
    >>> cvxpy_solver("scs").name()
    'SCS (Ctrl-C aware)'
    """
    global _interruptible_scs
    if name is None or str(name).upper() != "SCS":
        return name
    if _interruptible_scs is None:
        from cvxpy.reductions.solvers.conic_solvers.scs_conif import SCS

        class _InterruptibleSCS(SCS):
            def name(self):  # cvxpy refuses a custom solver under a built-in solver's name
                return "SCS (Ctrl-C aware)"

            def invert(self, solution, inverse_data):
                if solution.get("info", {}).get("status_val") == _SCS_SIGINT:
                    raise KeyboardInterrupt
                return super().invert(solution, inverse_data)

        _interruptible_scs = _InterruptibleSCS()
    return _interruptible_scs


def check_profile(profile: SolverProfile) -> None:
    """Refuse a `SolverProfile` made in Python whose fields a profile file could not hold (`InputError`).

    The checks of a file's keys (types and ranges) and of its backend and solver,
    so that ``solve(..., solver=SolverProfile(...))`` is refused as a ``.toml`` with
    the same values is, before anything runs.

    Examples
    --------
    >>> check_profile(SolverProfile("ok", time_limit=5.0))
    >>> check_profile(SolverProfile("bad", time_limit=-1.0))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: solver profile 'bad': bad value: time_limit = -1.0 (must be a finite number > 0 (seconds))
    """
    where = f"solver profile {profile.name!r}"
    fields = {"backend": profile.backend, "max_iters": profile.max_iters, "time_limit": profile.time_limit, "tol": profile.tol,
              "verbose": profile.verbose, "options": profile.options, "description": profile.description}
    if profile.solver is not None:
        fields["solver"] = profile.solver
    _check_values(where, fields)
    if profile.backend == "native" and profile.solver is not None:
        raise InputError(f"{where}: solver = {profile.solver!r:.60} names a cvxpy solver but the backend is 'native'; give backend='cvxpy' or no solver")


def solve_cvxpy(prob, solver: str | None, **kwargs):
    """``prob.solve`` on the named solver as every program runs it: Ctrl-C aware (`cvxpy_solver`), and
    what the solver prints sent to stderr (`solver_output_to_stderr`); ``kwargs`` go to ``prob.solve``.

    Examples
    --------
    >>> import cvxpy as cp
    >>> x = cp.Variable()
    >>> prob = cp.Problem(cp.Minimize(cp.square(x - 2)))
    >>> round(float(solve_cvxpy(prob, "CLARABEL")), 6), round(float(x.value), 4)
    (0.0, 2.0)
    """
    with solver_output_to_stderr():
        return prob.solve(solver=cvxpy_solver(solver), **kwargs)


def _check_values(where: str, values: dict) -> None:
    """`InputError` for the first of ``values`` (profile key -> value) that breaks its rule in `_RULES`."""
    for key, value in values.items():
        ok, what = _RULES[key]
        if not ok(value):
            raise InputError(f"{where}: bad value: {key} = {value!r:.60} ({what})")


def profile_dirs() -> list[Path]:
    """Directories searched for ``NAME.toml`` profiles, in order.

    ``$STRATEGY_OPT_SOLVERS`` (when set), ``./solvers``, then the installation's ``solvers/``; only existing
    directories, resolved, each once.

    Returns
    -------
    list of Path

    Examples
    --------
    >>> profile_dirs()[-1] == bundled_dir("solvers").resolve()  # the bundled profiles come last
    True
    """
    dirs = []
    if os.environ.get("STRATEGY_OPT_SOLVERS"):
        dirs.append(Path(os.environ["STRATEGY_OPT_SOLVERS"]))
    dirs += [Path.cwd() / "solvers", bundled_dir("solvers")]
    seen, out = set(), []
    for d in dirs:
        r = d.resolve()
        if r not in seen and r.is_dir():
            seen.add(r)
            out.append(r)
    return out


def _read(path: Path, name: str) -> SolverProfile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is not TOML, but editors write one
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"solver profile {path}: malformed TOML ({exc})") from None
    except RecursionError:
        raise InputError(f"solver profile {path}: malformed TOML (nested too deeply to read)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"solver profile {path}: cannot read ({exc})") from None
    unknown = set(data) - set(_RULES)
    if unknown:
        raise InputError(f"solver profile {path}: unknown keys {sorted(unknown)}; allowed: {sorted(_RULES)}")
    _check_values(f"solver profile {path}", data)
    backend = data.get("backend", "native")
    if "solver" in data and backend == "native":
        raise InputError(
            f"solver profile {path}: solver = {data['solver']!r:.60} names a cvxpy solver but the backend is 'native'"
            f'{"" if "backend" in data else " (the default)"}; add backend = "cvxpy" or remove solver'
        )
    if backend == "cvxpy" and "solver" not in data:
        raise InputError(f'solver profile {path}: backend = "cvxpy" names no solver; add solver = "SCS" or solver = "CLARABEL"')
    if "solver" in data:
        import cvxpy as cp

        installed = cp.installed_solvers()
        if data["solver"].upper() not in installed:
            raise InputError(f"solver profile {path}: bad value: solver = {data['solver']!r:.60} is not an installed cvxpy solver; installed: {', '.join(installed)}")
        _refuse_without_cone(f"solver profile {path}", data["solver"], "SOC", "the strategy programs")
    return SolverProfile(
        name=name,
        backend=backend,
        solver=data.get("solver"),
        max_iters=data.get("max_iters", 10_000),
        time_limit=float(data.get("time_limit", 600.0)),
        tol=float(data.get("tol", 1e-8)),
        verbose=data.get("verbose", False),
        options=dict(data.get("options", {})),
        description=data.get("description", ""),
        source=str(path.resolve()),  # absolute: the strategy file's meta names it wherever it is read
    )


def load_profile(name_or_path: str | os.PathLike | None) -> SolverProfile:
    r"""Load a solver profile by name (``scs``, ``clarabel``, ``native``) or path.

    ``None`` (no profile named) gives the installation's own ``native``
    profile, or built-in native defaults if it has none: a ``./solvers`` or
    ``$STRATEGY_OPT_SOLVERS`` folder is searched only for a profile named,
    so that an unnamed default cannot change with the working directory.

    Parameters
    ----------
    name_or_path : str, os.PathLike or None
        A profile name (looked up in `profile_dirs`), a ``.toml`` file, or None.

    Returns
    -------
    SolverProfile

    Raises
    ------
    InputError
        For an unknown name, a missing file, malformed TOML, unknown keys or bad values, or a cvxpy solver that
        is not installed or cannot solve second-order cone programs.

    Examples
    --------
    >>> load_profile(None).backend
    'native'
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = Path(tmp.name) / "quick.toml"
    >>> _ = path.write_text('backend = "native"\ntime_limit = 10\ntol = 1e-6\n')
    >>> p = load_profile(path)
    >>> p.name, p.backend, p.time_limit, p.tol, p.max_iters, p.source == str(path.resolve())
    ('quick', 'native', 10.0, 1e-06, 10000, True)
    >>> _ = path.write_text('backend = "native"\ntimelimit = 10\n')
    >>> load_profile(path)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: solver profile .../quick.toml: unknown keys ['timelimit']; allowed: [...]
    >>> tmp.cleanup()
    """
    if name_or_path is None:
        bundled = bundled_dir("solvers") / "native.toml"
        return _read(bundled, "native") if bundled.is_file() else SolverProfile(name="native")
    if not str(name_or_path).strip():
        raise InputError("solver profile name is empty; give a profile name (scs, clarabel, native) or a .toml file")
    text = str(name_or_path)
    p = Path(text).expanduser()
    if p.is_file():
        return _read(p, p.stem)
    if p.suffix.lower() == ".toml" or "/" in text or os.sep in text:  # a path, not a profile name
        raise InputError(f"solver profile {p} is a directory, not a .toml file" if p.is_dir() else f"solver profile file not found: {p}")
    for d in profile_dirs():
        f = d / f"{name_or_path}.toml"
        if f.is_file():
            return _read(f, str(name_or_path))
    if str(name_or_path) == "native":
        return SolverProfile(name="native")
    known = sorted(list_profiles())
    raise InputError(f"unknown solver profile {str(name_or_path)!r}; available: {', '.join(known) or 'none'}")


def list_profiles() -> dict[str, Path]:
    """Map of profile name to file for every profile found.

    Returns
    -------
    dict of str to Path
        The first file of each name in `profile_dirs` order.

    Examples
    --------
    >>> profiles = list_profiles()
    >>> {"clarabel", "native", "scs"} <= set(profiles), profiles["scs"].name
    (True, 'scs.toml')
    """
    out: dict[str, Path] = {}
    for d in profile_dirs():
        for f in sorted(d.glob("*.toml")):
            out.setdefault(f.stem, f)
    return out


def solver_cones(solver: str) -> frozenset[str]:
    """The cones cvxpy's interface to ``solver`` accepts (``PSD``, ``SOC``, ...); empty for a QP or unknown solver.

    Examples
    --------
    >>> sorted(solver_cones("SCS") & {"PSD", "SOC"})
    ['PSD', 'SOC']
    >>> sorted(solver_cones("OSQP"))
    []
    """
    from cvxpy.reductions.solvers.defines import SOLVER_MAP_CONIC

    interface = SOLVER_MAP_CONIC.get(solver.upper())
    if interface is None:
        return frozenset()
    return frozenset("PSD" if c.__name__ == "SvecPSD" else c.__name__ for c in interface.SUPPORTED_CONSTRAINTS)


def _conic_solvers(cone: str) -> str:
    import cvxpy as cp

    return ", ".join(s for s in cp.installed_solvers() if cone in solver_cones(s))


def _refuse_without_cone(where: str, solver: str, cone: str, what: str) -> None:
    import cvxpy as cp

    if solver.upper() not in cp.installed_solvers() or cone in solver_cones(solver):
        return
    kind = {"SOC": "second-order cone programs", "PSD": "semidefinite programs"}[cone]
    raise InputError(
        f"{where}: bad value: solver = {solver!r:.60} cannot solve {what} ({kind}: {solver.upper()} "
        f"has no {cone} cone); installed solvers that have one: {_conic_solvers(cone) or 'none'}"
    )


def check_solver_cones(profile: SolverProfile) -> None:
    """Refuse (`InputError`) a cvxpy profile whose installed solver has no second-order cone.

    Every cvxpy program of the package is at least an SOCP (Program 5.1.1 through
    ``inv_pos``, l1-weighting through ``power``), so a QP or LP solver (OSQP,
    HiGHS, SciPy) would fail inside ``solve``. Profile files are checked when
    loaded; a profile made through the API is checked when a
    `strategy_opt.problem.Problem` is made. A solver that is not installed is left
    to the program.

    Examples
    --------
    >>> check_solver_cones(SolverProfile("p", backend="cvxpy", solver="OSQP"))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: solver profile 'p': bad value: solver = 'OSQP' cannot solve the strategy programs (second-order cone programs: OSQP has no SOC cone); installed solvers that have one: ...
    """
    if profile.backend == "cvxpy" and profile.solver:
        _refuse_without_cone(f"solver profile {profile.source or repr(profile.name)}", profile.solver, "SOC", "the strategy programs")


def require_cone(profile: SolverProfile, cone: str, what: str) -> None:
    """Refuse (`InputError`) a cvxpy profile for program ``what`` when its solver has no ``cone`` (``"PSD"``).

    Examples
    --------
    >>> require_cone(SolverProfile("p", backend="cvxpy", solver="CLARABEL"), "PSD", "minerror-l2")
    """
    if profile.backend == "cvxpy" and profile.solver:
        _refuse_without_cone(f"solver profile {profile.source or repr(profile.name)}", profile.solver, cone, what)


_checked: set[tuple] = set()


def _probe(solver: str, options: dict) -> Exception | None:
    """The exception by which cvxpy refuses ``options`` on ``min x s.t. x >= 1``, or None.

    A ``cvxpy.error.SolverError`` counts only when it names one of the options
    (OSQP: "Unrecognized settings"); otherwise the solver merely failed on the
    probe, which says nothing about the options.
    """
    import warnings

    import cvxpy as cp

    x = cp.Variable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cp.Problem(cp.Minimize(x), [x >= 1]).solve(solver=solver, verbose=False, **options)
    except cp.error.SolverError as exc:
        return exc if any(str(k) in str(exc) for k in options) else None
    except Exception as exc:  # TypeError, ValueError, OverflowError, ...: the option is refused
        return exc
    return None


def _one_line(exc: Exception, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def rejected_option(profile: SolverProfile, name, exc: Exception) -> InputError:
    r"""The one-line input error for option ``name`` of the profile's ``[options]``, refused by its solver with ``exc``.

    Parameters
    ----------
    profile : SolverProfile
        A cvxpy profile (its ``solver`` is named in the message).
    name : str
        The refused key of ``profile.options``.
    exc : Exception
        What the solver raised; its text is collapsed to one line of at most 200 characters.

    Returns
    -------
    InputError
        The error to raise (it is returned, not raised).

    Examples
    --------
    >>> p = SolverProfile("p", backend="cvxpy", solver="scs", options={"eps_abs": "x"})
    >>> print(rejected_option(p, "eps_abs", TypeError("must be real number,\n not str")))
    solver profile 'p': [options] eps_abs = 'x' is not accepted by SCS (must be real number, not str); fix or remove it
    """
    where = f"solver profile {profile.source or repr(profile.name)}"
    return InputError(f"{where}: [options] {name} = {profile.options[name]!r} is not accepted by {profile.solver.upper()} ({_one_line(exc)}); fix or remove it")


def check_solver_options(profile: SolverProfile) -> None:
    """Refuse (`InputError`) a cvxpy profile whose ``[options]`` its solver would not accept.

    Each option set is tried once on a one-variable linear program through the same
    ``cvxpy.Problem.solve`` call the programs make (a few milliseconds): cvxpy and
    the solver interfaces raise ``TypeError``/``ValueError`` (SCS, Clarabel,
    HiGHS, SciPy) or a ``SolverError`` naming the setting (OSQP) for an unknown
    option or a value of the wrong type. The offending key is found by trying the
    options one at a time. ``solver`` and ``verbose`` are refused as options (the
    profile sets them with its top-level keys). A solver that is not installed is
    refused when a profile file is loaded; in a profile made through the API it is
    left to the program, which reports it when it solves. Native profiles are not
    checked.

    Examples
    --------
    >>> from dataclasses import replace
    >>> check_solver_options(load_profile("scs"))
    >>> check_solver_options(replace(load_profile("scs"), options={"bogus": 3}, source="my.toml"))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: solver profile my.toml: [options] bogus = 3 is not accepted by SCS ('bogus' is an invalid keyword argument for this function); fix or remove it
    """
    if profile.backend != "cvxpy" or not profile.solver or not profile.options:
        return
    where = f"solver profile {profile.source or repr(profile.name)}"
    for name in RESERVED_OPTIONS:
        if name in profile.options:
            raise InputError(f"{where}: [options] may not set {name!r}; use the top-level key {name} = ...")
    solver = profile.solver.upper()
    key = (solver, repr(sorted(profile.options.items(), key=lambda kv: str(kv[0]))))
    if key in _checked:
        return
    import cvxpy as cp

    if solver not in cp.installed_solvers():
        return
    exc = _probe(solver, dict(profile.options))
    if exc is not None:
        for name, value in profile.options.items():
            one = _probe(solver, {name: value})
            if one is not None:
                raise rejected_option(profile, name, one)
        reason = _one_line(exc)
        raise InputError(f"{where}: [options] {', '.join(map(str, profile.options))} are not accepted together by {solver} ({reason})")
    _checked.add(key)
