"""Exceptions raised by strategy_opt.

`InputError` marks a user mistake (bad parameter, malformed file, unsupported
workload): the CLI turns it into a one-line message and exit status 2.
`SolverError` marks a numerical failure of a program/backend pair and says
what to try next.
"""


class InputError(ValueError):
    """Bad user input: a parameter, a workload SPEC, or a file."""


class SolverError(RuntimeError):
    """A program could not be solved by the chosen backend."""
