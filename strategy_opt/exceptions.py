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
    """Bad user input: a parameter, a workload SPEC, or a file."""


class OptionError(InputError):
    """A method option with a bad value (wrong type or out of range)."""


class SupportError(InputError):
    """A strategy that does not support the workload (``W A^+ A != W``): some query is not a combination of its rows."""


class PrecisionError(InputError):
    """Values too large in magnitude for float64 to resolve the noise added to them."""


class NoiseScaleError(InputError):
    """An epsilon so small that the noise it calls for, or its variance, is beyond float64."""


class SolverError(RuntimeError):
    """A program could not be solved by the chosen backend."""


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
