"""Where the bundled problem files and solver profiles live.

In a source checkout (and an editable install) they are the repository's ``problems/`` and
``solvers/`` beside the ``strategy_opt`` package; a regular install (``pip install .``, a wheel)
copies them to ``<data>/share/strategy_opt/`` (``pyproject.toml``, ``[tool.setuptools.data-files]``),
``<data>`` being the install scheme's data directory (``sys.prefix`` in a virtual environment).
"""

from __future__ import annotations

import sysconfig
from importlib import metadata
from pathlib import Path

__all__ = ["bundled_dir"]

#: The repository root of a source checkout: the directory holding the ``strategy_opt`` package.
_SOURCE_ROOT = Path(__file__).resolve().parent.parent


def bundled_dir(name: str) -> Path:
    """The directory of the bundled ``name`` files (``'problems'`` or ``'solvers'``).

    The source checkout's directory when it exists, else the installed copy's
    (which need not exist either: callers check).

    Parameters
    ----------
    name : {'problems', 'solvers'}

    Returns
    -------
    Path

    Examples
    --------
    >>> bundled_dir("solvers").name, (bundled_dir("solvers") / "native.toml").is_file()
    ('solvers', True)
    """
    source = _SOURCE_ROOT / name
    if source.is_dir() and (_SOURCE_ROOT / "pyproject.toml").is_file():  # a checkout, not a `problems` package in site-packages
        return source
    return _installed_dir(name) or Path(sysconfig.get_path("data")) / "share" / "strategy_opt" / name


def _installed_dir(name: str) -> Path | None:
    """Where the installed distribution put ``share/strategy_opt/<name>`` (any scheme: a venv, ``--user``,
    ``--prefix``), from its record of installed files; None if it is not installed that way."""
    try:
        files = metadata.files("strategy-opt") or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.parts[-3:-1] == ("strategy_opt", name) and f.parts[-4:-3] == ("share",):
            return Path(f.locate()).resolve().parent
    return None
