"""Registering methods from outside the package: checked arguments, no silent replacement, returned strategies checked."""

import numpy as np
import pytest

from strategy_opt.api import solve
from strategy_opt.compiler import compile_strategy
from strategy_opt.exceptions import InputError
from strategy_opt.problem import Problem
from strategy_opt.spec import parse_spec
from strategy_opt.registry import _METHODS, _RELEASES, get_release, methods, register_method, register_release
from strategy_opt.strategy import Strategy


@pytest.fixture
def registry(monkeypatch):
    methods()  # the built-ins, before the copy
    monkeypatch.setattr("strategy_opt.registry._METHODS", dict(_METHODS))
    monkeypatch.setattr("strategy_opt.registry._RELEASES", dict(_RELEASES))


def test_a_built_in_name_is_refused_and_a_redefinition_replaces_itself(registry):
    # a user's 'wavelet' replaced the built-in silently (solve and auto used it; the file said wavelet)
    with pytest.raises(InputError, match=r"method 'wavelet' is already registered \(by strategy_opt.programs.baselines.wavelet\); choose another name"):
        @register_method("wavelet")
        def wavelet(problem):
            raise AssertionError
    assert methods()["wavelet"].func.__module__ == "strategy_opt.programs.baselines"
    for copies in (2, 3):  # a notebook cell run twice: the same function defined again
        @register_method("test-copies", privacy=("pure",))
        def stacked(problem, copies=copies):
            return compile_strategy(np.vstack([np.eye(problem.workload.n)] * copies), problem, "test-copies")
    assert solve("prefix:4", privacy="pure", method="test-copies").shape == (12, 4)

    def other(problem):
        raise AssertionError

    other.__qualname__ = "another"
    with pytest.raises(InputError, match="method 'test-copies' is already registered"):
        register_method("test-copies")(other)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": None}, "a method name must be a non-empty string"),
    ({"name": " padded"}, "a method name must be a non-empty string without surrounding spaces"),
    ({"name": "m", "privacy": ("pure", "exact")}, "privacy must name 'pure', 'approx' or both"),
    ({"name": "m", "privacy": ()}, "privacy must name 'pure', 'approx' or both"),
    ({"name": "m", "objectives": ("total", 3)}, "objectives must be non-empty strings"),
    ({"name": "m", "options": 5}, "options must be a name or a sequence of names"),
])
def test_registration_arguments_are_checked(registry, kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(InputError, match=message):
        register_method(name, **kwargs)


def test_one_string_is_one_name(registry):
    # privacy="pure" became ('p', 'u', 'r', 'e'): solve then said "supports privacy p/u/r/e, not 'pure'"
    @register_method("test-one-name", privacy="pure", objectives="total", options="copies")
    def ident(problem):
        return compile_strategy(np.eye(problem.workload.n), problem, "test-one-name")

    info = methods()["test-one-name"]
    assert (info.privacy, info.objectives, info.options) == (("pure",), ("total",), frozenset({"copies"}))
    assert solve("prefix:4", privacy="pure", method="test-one-name", copies=1).meta["unit_total_squared_error"] == 10.0  # trace(W^T W) of prefix:4


def _edit_matrix(problem):
    s = compile_strategy(np.eye(problem.workload.n), problem, "test-returned")
    s.matrix[0, 0] = 1e-3
    return s


def _edit_meta(problem):
    s = compile_strategy(np.eye(problem.workload.n), problem, "test-returned")
    s.meta["unit_total_squared_error"] = 1.0
    return s


def _edit_certificate(problem):
    # audit E1: a lower bound 10x the error and an objective value of 0 were sealed, written and read back
    s = compile_strategy(np.eye(problem.workload.n), problem, "test-returned")
    s.meta["lower_bound"] = 10 * s.meta["unit_total_squared_error"]
    s.meta["objective_value"] = 0.0
    return s


def _copied_meta(problem):
    s = compile_strategy(np.eye(problem.workload.n), problem, "test-returned")
    return Strategy(s.matrix, dict(s.meta))  # true numbers, but nothing says the compiler made them


@pytest.mark.parametrize("build, message", [
    (_edit_matrix, r"metadata does not match its matrix \(unit_total_squared_error 36 recorded, 8000028 computed\)"),
    (_edit_meta, r"whose metadata was edited after compile_strategy made it"),
    (_edit_certificate, r"whose metadata was edited after compile_strategy made it \(add fields with compile_strategy\(\.\.\., extra=\{\.\.\.\}\)\)"),
    (_copied_meta, r"whose metadata was not made by compile_strategy"),
    (lambda problem: solve("prefix:16", privacy=problem.privacy, method="identity"), "for workload 'prefix:16', not the problem's 'prefix:8'"),
    (lambda problem: solve("prefix:8", privacy="pure", method="identity"), "for privacy 'pure', not the problem's 'approx'"),
    (lambda problem: compile_strategy(np.eye(8), problem, "hierarchical"), "compiled as method 'hierarchical'"),
])
def test_solve_refuses_a_returned_strategy_that_is_not_the_compiled_answer(registry, build, message):
    # solve sealed it: a file certifying E_2 36 for a strategy whose E_2 is 8,000,028 (numpy), or another workload's strategy
    register_method("test-returned", privacy=("approx",))(build)
    with pytest.raises(InputError, match=message):
        solve("prefix:8", method="test-returned")
    register_method("test-fine", privacy=("approx",))(lambda problem: compile_strategy(np.eye(8), problem, "test-fine"))
    assert solve("prefix:8", method="test-fine").meta["unit_total_squared_error"] == 36.0  # trace(W^T W) of prefix:8


def test_compile_strategy_refuses_a_list():
    from strategy_opt.problem import Problem
    from strategy_opt.spec import parse_spec

    with pytest.raises(InputError, match="compile_strategy expects the strategy as a NumPy array, a SciPy sparse matrix or a KroneckerMatrix, got list"):
        compile_strategy([[1.0, 0.0], [0.0, 1.0]], Problem(parse_spec("prefix:2")), "identity")


def test_the_returned_strategy_check_compares_errors_beyond_float64(registry):
    # all-predicate:1027 has errors past 1e308 (log_scale (n - 2) ln 2): the check raised OverflowError there
    register_method("test-huge", privacy=("approx",))(lambda problem: compile_strategy(np.eye(problem.workload.n), problem, "test-huge"))
    s = solve("all-predicate:1027", method="test-huge")
    assert s.meta["unit_total_squared_error"] is None
    # identity: trace(W^T W) = n 2^(n-1) for all 2^n predicates
    assert s.meta["unit_total_squared_error_log10"] == pytest.approx(np.log10(1027) + 1026 * np.log10(2), rel=1e-12)


def test_methods_and_releases_share_one_name_space(registry):
    # register_release("hierarchical") was accepted and `release --method hierarchical` then ran it (releases are looked up first)
    with pytest.raises(InputError, match=r"method 'hierarchical' is already registered \(by strategy_opt.programs.baselines.hierarchical\)"):
        register_release("hierarchical")(lambda x, workload, privacy, rng=None: None)
    assert get_release("hierarchical").func.__module__ == "strategy_opt.programs.baselines"
    with pytest.raises(InputError, match="method 'dawa' is already registered"):
        register_method("dawa", privacy="pure")(lambda problem: None)


def test_partials_and_callable_instances_can_be_registered_again(registry):
    # a second registration read old.func.__qualname__, which partials and instances lack: AttributeError
    import functools

    def stack(problem, k):
        return compile_strategy(np.vstack([np.eye(problem.workload.n)] * k), problem, "test-partial")

    class Identity:
        def __call__(self, problem):
            return compile_strategy(np.eye(problem.workload.n), problem, "test-instance")

    for k in (2, 3):  # a notebook cell run twice
        register_method("test-partial", privacy="pure")(functools.partial(stack, k=k))
        register_method("test-instance", privacy="pure")(Identity())
    assert solve("prefix:4", privacy="pure", method="test-partial").shape == (12, 4)
    assert solve("prefix:4", privacy="pure", method="test-instance").shape == (4, 4)
    with pytest.raises(InputError, match="method 'wavelet' is already registered"):
        register_method("wavelet")(functools.partial(stack, k=2))


@pytest.mark.parametrize("claim", [float("inf"), float("nan"), -1.0, "big"])
def test_compile_strategy_refuses_a_lower_bound_that_is_not_a_finite_number(claim):
    """inf as a method's bound deleted the bound altogether (an outside audit): the SVD bound was lost too."""
    problem = Problem(parse_spec("prefix:4"), privacy="pure")
    with pytest.raises(InputError, match="lower_bound must be a finite number >= 0"):
        compile_strategy(np.eye(4), problem, "test-claim", lower_bound=claim, lower_bound_kind="my-proof")


def test_a_registered_method_cannot_state_a_lower_bound_above_its_own_error(registry):
    """A lower bound on the optimum is at most the error of any strategy (an outside audit: a registered method stated
    1e9 beside E_1 = 10, and solve sealed and wrote it). solve refuses it in one line; a claim above the error within
    1e-6 (rounding) is set to the error, and one below it is kept (E_1 = trace(W^T W) = 10 for the identity on prefix:4)."""
    for claim, ok in ((1e9, False), (10.0 * (1 + 1e-3), False), (10.0 * (1 + 1e-8), True), (9.0, True)):
        @register_method("test-claim", privacy=("pure",))
        def claimed(problem, claim=claim):
            return compile_strategy(np.eye(problem.workload.n), problem, "test-claim", lower_bound=claim, lower_bound_kind="my-proof")

        if ok:
            s = solve("prefix:4", privacy="pure", method="test-claim")
            assert s.meta["unit_total_squared_error"] == 10.0 and s.meta["lower_bound"] == min(claim, 10.0)
        else:
            with pytest.raises(InputError, match="is above its own error 10: a lower bound on the optimum cannot exceed"):
                solve("prefix:4", privacy="pure", method="test-claim")
