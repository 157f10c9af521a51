"""Exceptions raised by strategy_opt.

`InputError` marks a user mistake (bad parameter, malformed file, unsupported
workload): the CLI turns it into a one-line message and exit status 2.
`OptionError`, an `InputError`, marks a bad method option value: ``auto``
passes it on instead of skipping the candidate that raised it.
`PrecisionError`, an `InputError`, marks data too large for float64 to
carry the privacy noise (the CLI names the data file).
`SolverError` marks a numerical failure of a program/backend pair and says
what to try next.
"""


class InputError(ValueError):
    """Bad user input: a parameter, a workload SPEC, or a file.

    A `ValueError`, so ``except ValueError`` catches it too; `OptionError`, `SupportError`, `PrecisionError` and
    `NoiseScaleError` are kinds of it.

    Examples
    --------
    >>> from strategy_opt.spec import parse_spec
    >>> parse_spec("prefix:0")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: malformed workload SPEC 'prefix:0': N must be >= 1, got 0
    >>> issubclass(InputError, ValueError), [issubclass(e, InputError) for e in (OptionError, SupportError, PrecisionError, NoiseScaleError)]
    (True, [True, True, True, True])
    """


class OptionError(InputError):
    """A method option with a bad value (wrong type or out of range).

    Examples
    --------
    >>> from strategy_opt.problem import Problem
    >>> from strategy_opt.workload import prefix
    >>> Problem(prefix(4), options={"branching": 1}).option("branching", 2, lambda b: b >= 2, "an integer >= 2", "greedy-h")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.OptionError: greedy-h: option branching must be an integer >= 2, got 1
    """


class SupportError(InputError):
    """A strategy that does not support the workload (``W A^+ A != W``): some query is not a combination of its rows.

    Examples
    --------
    A strategy that measures only ``x0 + x1`` cannot answer ``x0`` and ``x1`` separately:

    >>> from strategy_opt.api import error_report
    >>> error_report([[1.0, 1.0]], "identity:2")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.SupportError: strategy does not support the workload (W A+ A != W: 0.5 of ||W||_F^2 lies outside ...
    """


class PrecisionError(InputError):
    """Values too large in magnitude for float64 to resolve the noise added to them.

    Examples
    --------
    Counts of 1e17 are 16 apart in float64, so Laplace noise of scale 1 would be rounded away:

    >>> from strategy_opt.executor import check_noise_resolution
    >>> try:
    ...     check_noise_resolution([1e17], 1.0)
    ... except InputError as exc:
    ...     print(type(exc).__name__)
    PrecisionError
    """


class NoiseScaleError(InputError):
    """An epsilon so small that the noise it calls for, or its variance, is beyond float64.

    Examples
    --------
    >>> from strategy_opt.executor import measure
    >>> from strategy_opt.privacy import PureDP
    >>> measure([[1.0, 0.0], [0.0, 1.0]], [1.0, 2.0], PureDP(1e-320), rng=0)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.NoiseScaleError: epsilon = ... gives noise of scale inf for sensitivity 1, beyond floating point (the answers would carry no information); use a larger epsilon
    """


class SolverError(RuntimeError):
    """A program could not be solved by the chosen backend.

    A `RuntimeError`, not an `InputError`: the input was acceptable, and the message says what to try next
    (another solver profile, a larger budget).

    Examples
    --------
    >>> issubclass(SolverError, RuntimeError), issubclass(SolverError, InputError)
    (True, False)
    """


def setting(keyword: str, value) -> str:
    """Name a setting for a message read both in Python and at the command line.

    Library errors are raised from Python calls and shown by the CLI alike, so a
    hint names the keyword argument and the flag that sets it.

    Examples
    --------
    >>> setting("privacy", "pure")
    "privacy='pure' (--privacy pure)"
    """
    return f"{keyword}={value!r} (--{keyword.replace('_', '-')} {value})"
