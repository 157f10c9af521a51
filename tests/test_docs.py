"""Run the docstring examples of every public module (they are part of the documentation)."""

import doctest
import importlib
import pkgutil

import pytest

import strategy_opt

MODULES = ["strategy_opt"] + sorted(  # the package's own docstring first: the first example a user sees
    name
    for _, name, _ in pkgutil.walk_packages(strategy_opt.__path__, prefix="strategy_opt.")
    if not name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
