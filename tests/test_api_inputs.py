"""Input checks at the Python API boundary: solve, error_report, Strategy and executor.run refuse bad values with InputError."""

import json
import logging
import math
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp

import strategy_opt as so
from strategy_opt.bases import hierarchical_matrix
from strategy_opt.cli import main
from strategy_opt.error import KroneckerMatrix
from strategy_opt.exceptions import InputError
from strategy_opt.executor import run
from strategy_opt.io import read_strategy, write_strategy
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.strategy import Strategy
from strategy_opt.workload import from_matrix, kronecker, prefix, union

UNVERIFIED = "the strategy is not verified"


# every test here reads the package's log records through caplog
pytestmark = pytest.mark.usefixtures("package_log")


# ------------------------------------------------------------------------------- 1. all-zero workload
@pytest.mark.parametrize("method", ["eigen-design", "auto", "minerror-l2", "identity", "hierarchical"])
@pytest.mark.parametrize("privacy", ["approx", "pure"])
def test_solve_refuses_an_all_zero_workload_for_every_method(method, privacy):
    with pytest.raises(InputError, match=r"all zeros: no query has a non-zero coefficient|supports privacy"):
        so.solve(np.zeros((3, 4)), method=method, privacy=privacy)


@pytest.mark.parametrize("privacy", ["approx", "pure"])
def test_solve_auto_names_the_all_zero_workload(privacy):
    with pytest.raises(InputError, match=r"workload 'matrix' is all zeros"):
        so.solve(np.zeros((3, 4)), privacy=privacy)


def test_solve_refuses_zero_workloads_inside_products_and_unions():
    Z = from_matrix(sp.csr_matrix((2, 4)))
    with pytest.raises(InputError, match="all zeros"):
        so.solve(sp.csr_matrix((3, 4)), method="identity")
    with pytest.raises(InputError, match="all zeros"):
        so.solve(kronecker(prefix(3), Z), method="identity")
    with pytest.raises(InputError, match="all zeros"):
        so.solve(union(Z, from_matrix(np.zeros((1, 4)))), method="identity")
    # a zero part next to a non-zero one is a workload like any other
    assert so.solve(union(Z, prefix(4)), method="identity").shape == (4, 4)
    assert so.solve(np.array([[0.0, 0, 1, 0]]), method="identity").shape == (4, 4)


# ------------------------------------------------------------------ 2. error_report default privacy
def _bare(tmp_path):
    path = tmp_path / "bare.npz"
    np.savez(path, A=np.eye(4))
    return path


def test_error_report_defaults_to_pure_for_a_strategy_without_privacy(tmp_path, caplog):
    s = read_strategy(_bare(tmp_path))
    with caplog.at_level(logging.WARNING, logger="strategy_opt"):
        report = so.error_report(s, "prefix:4")
    assert report["privacy"] == "pure" and report["sensitivity_norm"] == "l1"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and UNVERIFIED in warnings[0] and "privacy pure" in warnings[0]


def test_error_report_agrees_with_the_cli_on_a_bare_strategy(tmp_path, capsys):
    import json

    path = _bare(tmp_path)
    assert main(["error", str(path), "--workload", "prefix:4", "--json"]) == 0
    out = capsys.readouterr()
    cli_report = json.loads(out.out)
    assert out.err.count(UNVERIFIED) == 1  # the CLI passes its privacy: the API does not warn a second time
    api_report = so.error_report(read_strategy(path), "prefix:4")
    assert api_report["privacy"] == cli_report["privacy"] == "pure"
    assert api_report["unit_total_squared_error"] == pytest.approx(cli_report["unit_total_squared_error"], rel=1e-12)


def test_error_report_no_warning_with_explicit_or_recorded_privacy(tmp_path, caplog):
    bare = read_strategy(_bare(tmp_path))
    solved = so.solve("prefix:4", privacy="approx", method="identity")
    with caplog.at_level(logging.WARNING, logger="strategy_opt"):
        assert so.error_report(bare, "prefix:4", "approx")["privacy"] == "approx"
        assert so.error_report(solved, "prefix:4")["privacy"] == "approx"  # the recorded one
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_error_report_metadata_without_provenance_is_warned(caplog):
    s = Strategy(np.eye(4), {"content_sha256": "x"})
    with caplog.at_level(logging.WARNING, logger="strategy_opt"):
        assert so.error_report(s, "prefix:4")["privacy"] == "pure"
    assert any("metadata without a recorded workload or privacy" in r.getMessage() for r in caplog.records)


def test_error_report_privacy_and_strategy_checks():
    s = Strategy(np.eye(4))
    with pytest.raises(InputError, match=r"'pure' or 'approx'.*got PureDP\(epsilon=1.0\): pass privacy='pure'"):
        so.error_report(s, "prefix:4", PureDP(1.0))
    with pytest.raises(InputError, match="privacy must be 'pure' or 'approx', got 'l1'"):
        so.error_report(s, "prefix:4", "l1")
    # a bare matrix is wrapped as a Strategy (and checked as one)
    assert so.error_report(np.eye(4), "prefix:4", "pure")["shape"] == [4, 4]
    with pytest.raises(InputError, match=r"2-D matrix, got shape \(4,\)"):
        so.error_report(np.ones(4), "prefix:4", "pure")


# ------------------------------------------------------------------------ 3. Strategy construction
def test_strategy_converts_array_likes():
    s = Strategy([[1, 0], [0, 1]])
    assert isinstance(s.matrix, np.ndarray) and s.matrix.dtype == np.float64 and s.shape == (2, 2)
    assert Strategy(np.eye(2, dtype=bool)).matrix.dtype == np.float64
    A = np.eye(3)
    assert Strategy(A).matrix is A  # float64 arrays are kept, not copied
    assert Strategy(np.eye(2), None).meta == {}


def test_strategy_keeps_sparse_and_kronecker_matrices():
    H = hierarchical_matrix(64, 2)
    s = Strategy(H)
    assert sp.issparse(s.matrix) and s.matrix.format == H.format
    assert Strategy(sp.csc_matrix(np.eye(3), dtype=int)).matrix.dtype == np.float64
    K = KroneckerMatrix([np.eye(2), sp.csr_matrix(np.eye(3))])
    assert Strategy(K).matrix is K and Strategy(K).shape == (6, 6)


@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.ones(3), r"must be a 2-D matrix, got shape \(3,\)"),
        (np.ones((2, 2, 2)), r"must be a 2-D matrix, got shape \(2, 2, 2\)"),
        (np.zeros((0, 3)), r"is empty \(shape \(0, 3\)\)"),
        (np.full((2, 2), np.nan), "NaN or infinite"),
        (np.array([[1.0, np.inf]]), "NaN or infinite"),
        (sp.csr_matrix(np.array([[1.0, np.nan]])), "NaN or infinite"),
        (np.eye(2) * 1j, "real numeric matrix, got complex"),
        ([["a", "b"]], "real numeric matrix, got dtype <U1"),
        ([[1.0], [1.0, 2.0]], "2-D numeric matrix"),
        (None, "got NoneType"),
        ("eye", "got str"),
        (KroneckerMatrix([np.eye(2), np.full((2, 2), np.inf)]), r"Kronecker factor 1\) contains NaN or infinite"),
    ],
)
def test_strategy_refuses_bad_matrices(matrix, message):
    with pytest.raises(InputError, match=message):
        Strategy(matrix)


def test_strategy_refuses_non_dict_metadata():
    with pytest.raises(InputError, match="metadata must be a dict, got list"):
        Strategy(np.eye(2), [1, 2])


def test_strategy_checks_matrix_and_metadata_set_after_construction():
    s = Strategy(np.eye(3), {"method": "identity"})
    with pytest.raises(InputError, match="got NoneType"):
        s.matrix = None
    with pytest.raises(InputError, match="NaN or infinite"):
        s.matrix = np.full((2, 2), np.nan)
    with pytest.raises(InputError, match="metadata must be a dict, got list"):
        s.meta = [1]
    assert s.shape == (3, 3) and s.meta == {"method": "identity"}  # the refused values were not stored
    s.matrix = [[1, 0], [1, 1]]
    s.meta = None
    assert s.matrix.dtype == np.float64 and s.sensitivity(1) == 2.0 and s.meta == {}


def test_nan_strategy_never_reaches_a_file(tmp_path):
    with pytest.raises(InputError, match="NaN or infinite"):
        write_strategy(Strategy(np.full((2, 2), np.nan)), tmp_path / "nan.npz")
    assert not (tmp_path / "nan.npz").exists()


def test_strategy_check_of_a_large_sparse_matrix_is_cheap():
    n = 1 << 20
    A = sp.identity(n, format="csr")
    s = Strategy(A)
    assert s.matrix is A  # kept as it is: only .data is checked (O(nnz)), no dense conversion


def test_every_solved_strategy_still_constructs():
    for spec, method, kw in [
        ("prefix:16", "hierarchical", {"branching": 2}),
        ("prefix:16", "identity", {}),
        ("prefix:4*prefix:4", "identity", {}),
        ("all-range:16", "eigen-design", {}),
    ]:
        s = so.solve(spec, privacy="pure" if method != "eigen-design" else "approx", method=method, **kw)
        assert Strategy(s.matrix, s.meta).shape == s.shape


# -------------------------------------------------------------------------------- 4. executor.run
S4 = np.eye(4)
X4 = np.arange(4.0)


def test_run_accepts_spec_strings_and_matrices_as_workloads():
    truth = np.cumsum(X4)
    for W in ("prefix:4", np.tril(np.ones((4, 4))), sp.csr_matrix(np.tril(np.ones((4, 4))))):
        rel = run(S4, X4, W, PureDP(1e7), rng=0)
        np.testing.assert_allclose(rel.answers, truth, atol=1e-3)


def test_run_accepts_a_list_strategy():
    rel = run(S4.tolist(), X4, "prefix:4", PureDP(1e7), rng=0)
    np.testing.assert_allclose(rel.answers, np.cumsum(X4), atol=1e-3)


@pytest.mark.parametrize("privacy", ["pure", "approx", 1.0, None, ("pure", 1.0)])
def test_run_refuses_privacy_that_is_not_a_privacy_object(privacy):
    with pytest.raises(InputError, match=r"privacy must be PureDP\(epsilon\) or ApproxDP\(epsilon, delta\), got"):
        run(S4, X4, "prefix:4", privacy, rng=0)


@pytest.mark.parametrize(
    "strategy, message",
    [
        (np.ones(4), r"2-D matrix, got shape \(4,\)"),
        ([[1.0, np.nan, 0, 0]], "NaN or infinite"),
        ("eye", "got str"),
        ([["a"] * 4], "real numeric matrix"),
    ],
)
def test_run_checks_the_strategy(strategy, message):
    with pytest.raises(InputError, match=message):
        run(strategy, X4, "prefix:4", PureDP(1.0), rng=0)


@pytest.mark.parametrize(
    "data, message",
    [
        (sp.csr_matrix(X4), "dense array of counts, got a scipy.sparse matrix"),
        ("0,1,2,3", "got a string '0,1,2,3'"),
        (["a", "b", "c", "d"], "array of real counts, got dtype <U1"),
        (X4 + 1j, "array of real counts, got complex"),
        ([0, 1, [2, 3]], "array of counts"),
        (np.array([1.0, -1.0, 2.0, 0.0]), r"negative counts.*; counts must be >= 0"),
        (np.array([1.0, np.nan, 2.0, 0.0]), "NaN or infinite counts"),
        (np.ones(3), "data has 3 cells but the workload has 4"),
    ],
)
def test_run_checks_the_data(data, message):
    with pytest.raises(InputError, match=message):
        run(S4, data, "prefix:4", PureDP(1.0), rng=0)


@pytest.mark.parametrize("rng", ["a", -1, 1.5, True, [1, 2]])
def test_run_refuses_bad_rng(rng):
    with pytest.raises(InputError, match="rng must be a non-negative integer seed or a numpy Generator, got"):
        run(S4, X4, "prefix:4", PureDP(1.0), rng=rng)


def test_run_accepts_generators_and_numpy_integers_as_rng():
    a = run(S4, X4, "prefix:4", ApproxDP(1.0, 1e-6), rng=np.int64(3)).answers
    b = run(S4, X4, "prefix:4", ApproxDP(1.0, 1e-6), rng=np.random.default_rng(3)).answers
    np.testing.assert_array_equal(a, b)


def test_run_refuses_a_seed_with_the_opendp_sampler():
    with pytest.raises(InputError, match="rng cannot be used with sampler='opendp'"):
        run(S4, X4, "prefix:4", PureDP(1.0), rng=0, sampler="opendp")


def test_measure_refuses_a_seed_with_the_opendp_sampler():
    # measure used to ignore the seed there: two calls with rng=0 drew different noise
    from strategy_opt.executor import measure

    with pytest.raises(InputError, match="rng cannot be used with sampler='opendp'"):
        measure(np.eye(4), X4, PureDP(1.0), rng=0, sampler="opendp")


# ------------------------------------------------------------------------ 5. solve privacy, solver
@pytest.mark.parametrize("privacy, hint", [(PureDP(1.0), "pure"), (ApproxDP(1.0, 1e-6), "approx")])
def test_solve_refuses_privacy_objects_with_a_hint(privacy, hint):
    with pytest.raises(InputError, match=rf"privacy must be 'pure' or 'approx' \(the notion's name; strategies do not depend on epsilon\).*pass privacy='{hint}'"):
        so.solve("prefix:8", privacy=privacy, method="identity")


@pytest.mark.parametrize("privacy", [None, "l1", 1, "PURE"])
def test_solve_refuses_unknown_privacy(privacy):
    with pytest.raises(InputError, match="privacy must be 'pure' or 'approx', got"):
        so.solve("prefix:8", privacy=privacy, method="identity")


@pytest.mark.parametrize("solver", [3, 1.5, ["scs"], True])
def test_solve_refuses_a_solver_of_the_wrong_type(solver):
    with pytest.raises(InputError, match="solver must be a profile name .* got"):
        so.solve("prefix:8", privacy="pure", method="identity", solver=solver)


def test_solve_refuses_a_method_that_is_not_a_name():
    with pytest.raises(InputError, match="method must be a method name"):
        so.solve("prefix:8", privacy="pure", method=None)


@pytest.mark.parametrize("workload", [None, {"prefix": 8}, 3.0, [["a"]]])
def test_solve_refuses_workloads_of_the_wrong_type(workload):
    with pytest.raises(InputError, match="workload"):
        so.solve(workload, privacy="pure", method="identity")


# ------------------------------------------------------------------ outside API audit (2026-11-25)
@pytest.mark.parametrize("fmt", ["lil", "dok"])
def test_lil_and_dok_matrices_are_accepted_like_every_sparse_format(fmt):
    """Their .data is not the flat array of stored entries (LIL: lists, DOK: none); they used to crash in the value check."""
    A = sp.random(10, 8, density=0.5, random_state=1, format=fmt) + sp.eye(10, 8, format=fmt)
    W = np.tril(np.ones((8, 8)))
    dense = A.toarray()
    E = np.abs(dense).sum(axis=0).max() ** 2 * np.trace(W.T @ W @ np.linalg.pinv(dense.T @ dense))
    assert so.error_report(A, "prefix:8", privacy="pure")["unit_total_squared_error"] == pytest.approx(E, rel=1e-9)
    assert np.array_equal(Strategy(A).dense(), dense)
    assert so.solve(sp.csr_matrix(W).asformat(fmt), method="identity").meta["unit_total_squared_error"] == pytest.approx(36.0)
    with pytest.raises(InputError, match="NaN or infinite"):
        Strategy(sp.csr_matrix(np.array([[1.0, np.nan]])).asformat(fmt))


def test_write_strategy_takes_a_bare_matrix(tmp_path):
    write_strategy(np.eye(3), tmp_path / "t.npz")
    s = read_strategy(tmp_path / "t.npz")
    assert np.array_equal(s.dense(), np.eye(3)) and s.unverified() is not None
    with pytest.raises(InputError, match="must be a 2-D array"):
        write_strategy(None, tmp_path / "n.npz")
    assert not (tmp_path / "n.npz").exists()


def test_error_module_functions_name_a_workload_that_is_not_a_workload():
    from strategy_opt.error import expected_total_error, per_query_variances, supports, svd_bound, unit_error

    for call in (
        lambda: unit_error(np.eye(4), np.eye(4), 1),
        lambda: unit_error(np.eye(4), "prefix:4", 2),
        lambda: svd_bound(np.eye(4)),
        lambda: supports(np.eye(4), "prefix:4"),
        lambda: per_query_variances(np.eye(4), [[1, 0, 0, 0]], 2),
    ):
        with pytest.raises(InputError, match="workload must be a strategy_opt Workload, got (ndarray|str|list) .*from_matrix"):
            call()
    with pytest.raises(InputError, match="privacy must be PureDP"):
        expected_total_error(np.eye(4), prefix(4), "pure")
    assert unit_error([[1, 0], [0, 1]], prefix(2), 2) == 3.0  # nested lists as a strategy, like the top-level API


@pytest.mark.parametrize("scale, words", [(1e-200, "too small for float64 .* multiply"), (1e200, "too large for float64 .* divide")])
def test_workloads_whose_squares_leave_float64_are_named_once(scale, words):
    """1e-200 I used to be called 'all zeros'; 1e200 I gave the overflow message once per auto candidate."""
    with pytest.raises(InputError, match=words) as info:
        so.solve(np.eye(3) * scale)
    assert str(info.value).count("float64") == 1
    assert so.solve(np.eye(3) * 1e-120, method="identity").meta["unit_total_squared_error"] == pytest.approx(3e-240)


@pytest.mark.parametrize("weights, words", [([1e200, 1], "too large for float64 .*part 'prefix:3' at weight 1e\\+200"), ([1e-200, 1e-200], "too small"), ([1e-160, 1], "too small")])
def test_union_weights_whose_squares_leave_float64_are_refused(weights, words):
    """An outside audit: weight 1e200 gave E = inf, weights 1e-200 an error of exactly 0 (true 9e-400)
    and an IndexError from auto and eigen-design."""
    W = union(prefix(3), so.workload.identity(3), weights=weights)
    for call in (lambda: so.error_report(np.eye(3), W, "pure"), lambda: so.solve(W, method="auto"), lambda: so.solve(W, method="eigen-design")):
        with pytest.raises(InputError, match=words):
            call()
    # moderate weights: E_1 of the identity is the weighted trace, 1e-100^2 * 6 + 3
    W = union(prefix(3), so.workload.identity(3), weights=[1e-100, 1])
    assert so.error_report(np.eye(3), W, "pure")["unit_total_squared_error"] == pytest.approx(3 + 6e-200)


def test_a_strategy_too_small_for_float64_is_named_as_such():
    with pytest.raises(InputError, match="too small for error analysis"):
        so.error_report(np.eye(8) * 1e-300, "prefix:8", privacy="pure")


def test_run_refuses_a_non_boolean_intervals_flag():
    with pytest.raises(InputError, match="intervals must be True or False, got 'no'"):
        run(np.eye(4), np.ones(4), "prefix:4", PureDP(1.0), rng=1, intervals="no")


def test_all_predicate_beyond_float64_is_solved_and_evaluated_in_log10(tmp_path, capsys):
    """all-predicate:1100 has E ~ 10^333: auto compared 10 ** log10 (OverflowError traceback) and error's
    matrix-size check computed n * 2.0 ** (n - 1)."""
    out = tmp_path / "ap.npz"
    assert main(["-q", "solve", "--workload", "all-predicate:1100", "--out", str(out)]) == 0
    meta = read_strategy(out).meta
    assert meta["unit_total_squared_error"] is None and meta["unit_total_squared_error_log10"] > 333
    assert meta["auto_candidates"]["identity"] is None
    # identity: E_2 = trace(W^T W) = 2^(N-2) (N + N) = N 2^(N-1)
    assert main(["-q", "error", str(out), "--workload", "all-predicate:1100", "--json"]) == 0
    assert main(["-q", "solve", "--workload", "all-predicate:1100", "--method", "identity", "--out", str(tmp_path / "i.npz")]) == 0
    capsys.readouterr()
    assert main(["-q", "error", str(tmp_path / "i.npz"), "--workload", "all-predicate:1100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit_total_squared_error_log10"] == pytest.approx(math.log10(1100) + 1099 * math.log10(2), rel=1e-12)


def test_library_hints_name_the_keyword_and_the_flag(tmp_path, capsys):
    """A hint raised by the library reads for a Python caller and for the CLI user alike."""
    from strategy_opt.privacy import privacy_from_args

    with pytest.raises(InputError, match=r"^delta applies only to privacy='approx' \(--privacy approx\)$"):
        privacy_from_args("pure", 1.0, delta=1e-6)
    with pytest.raises(InputError, match=r"use method='p-identity' \(--method p-identity\) or 'auto'"):
        so.solve("prefix:33", privacy="pure", method="minerror-l1")
    assert main(["solve", "--workload", "prefix:33", "--privacy", "pure", "--method", "minerror-l1", "--out", str(tmp_path / "s.npz")]) == 2
    assert "(--method p-identity)" in capsys.readouterr().err
    assert not (tmp_path / "s.npz").exists()


def test_integer_strategies_are_calibrated_like_their_float_copies():
    """int8 entries squared overflow (17^2 = 289): every representation is made float64 first."""
    from strategy_opt.error import sensitivity, unit_error
    from strategy_opt.executor import measure

    K = KroneckerMatrix([np.eye(4, dtype=np.int8) * 17, np.eye(2, dtype=np.int8)])
    assert run(Strategy(K), np.arange(8.0), "prefix:4*prefix:2", ApproxDP(1, 1e-6), rng=0).noise_scale == pytest.approx(
        17 * ApproxDP(1, 1e-6).noise_scale(1.0)
    )
    # E_1 of 17 I on prefix:4 x prefix:2: 17^2 * trace(G) / 17^2 = 10 * 3
    assert so.error_report(Strategy(K), "prefix:4*prefix:2", "pure")["unit_total_squared_error"] == pytest.approx(30.0)
    A = sp.identity(8, dtype=np.int8, format="csr") * np.int8(17)
    assert sensitivity(A, 2) == 17.0
    assert measure(A, np.ones(8), PureDP(1.0), rng=0)[1] == 17.0
    assert unit_error(A, prefix(8), 1) == pytest.approx(36.0)  # trace of prefix:8's Gram
    R = so.parse_spec("all-range:24").matrix().astype(np.int8)  # 0/1 entries, A^T A up to 144 > 127
    assert unit_error(R, prefix(24), 2) == pytest.approx(unit_error(R.astype(float), prefix(24), 2))


def test_error_functions_test_every_query_and_the_shapes():
    """A strategy that skips one small query does not support the workload, however small the query."""
    from strategy_opt.error import per_query_variances, sensitivity, supports, unit_error

    W = from_matrix(np.array([[1e4, 0, 0], [0, 0, 1e4], [0, 1, 0]]))
    A = np.array([[1.0, 0, 0], [0, 0, 1]])
    assert not supports(A, W)
    with pytest.raises(InputError, match="of query 2's squared norm lies outside"):
        unit_error(A, W, 1)
    assert supports(np.eye(3), W)
    for cols in (7, 9):
        with pytest.raises(InputError, match=f"strategy has {cols} columns but the workload has 8 cells"):
            supports(np.eye(cols), prefix(8))
        with pytest.raises(InputError, match=f"strategy has {cols} columns"):
            per_query_variances(np.eye(cols), prefix(8), 1)
    with pytest.raises(InputError, match="complex"):
        unit_error(np.eye(8) * (1 + 5j), prefix(8), 1)
    with pytest.raises(InputError, match="NaN or infinite"):
        sensitivity(np.array([[np.nan, 1.0]]), 1)
    with pytest.raises(InputError, match="2-D matrix, got shape"):
        sensitivity(np.ones(8), 1)
    with pytest.raises(InputError, match=r"2-D matrix, got shape \(2, 2, 2\)"):
        unit_error(np.ones((2, 2, 2)), prefix(2), 1)


def test_measure_and_reconstruct_check_their_vectors():
    from strategy_opt.executor import answer_intervals, measure, reconstruct

    with pytest.raises(InputError, match="data has 7 entries but the strategy's columns number 8"):
        measure(np.eye(8), np.ones(7), PureDP(1.0), rng=0)
    with pytest.raises(InputError, match="privacy must be PureDP"):
        measure(np.eye(8), np.ones(8), "pure")
    with pytest.raises(InputError, match="noisy answers y has 7 entries but the strategy's rows number 8"):
        reconstruct(np.eye(8), np.ones(7))
    with pytest.raises(InputError, match="noisy answers y contains NaN"):
        reconstruct(np.eye(8), np.full(8, np.nan), "nnls")
    with pytest.raises(InputError, match="answers has 7 entries but the workload's queries number 8"):
        answer_intervals(np.eye(8), prefix(8), PureDP(1.0), np.zeros(7))
    with pytest.raises(InputError, match="strategy has 7 columns"):
        answer_intervals(np.eye(7), prefix(8), PureDP(1.0), np.zeros(8))
    y = np.arange(8.0)
    assert np.allclose(reconstruct(np.eye(8), y.reshape(8, 1)), y)  # a column vector is a vector


def test_run_refuses_data_in_another_shape_of_the_domain():
    W = so.parse_spec("prefix:4*identity:2")
    s = so.solve(W, privacy="pure", method="identity")
    x = np.arange(8.0).reshape(4, 2)
    with pytest.raises(InputError, match=r"data has shape \(2, 4\) but the workload's domain is \(4, 2\)"):
        run(s, x.T, W, PureDP(1.0), rng=0)
    flat = run(s, x.ravel(), W, PureDP(1e3), rng=0).answers
    assert np.array_equal(run(s, x, W, PureDP(1e3), rng=0).answers, flat)
    assert np.allclose(flat, W.matvec(x.ravel()), atol=0.1)
    # a 1-D domain too, as the CLI refuses such data files (audit Z2: the API flattened them)
    h = so.solve("prefix:32", privacy="pure", method="hierarchical")
    for shape in ((4, 8), (32, 1), (1, 32), (2, 2, 8)):
        with pytest.raises(InputError, match=rf"data has shape \({shape[0]}, .* but the workload's domain is \(32,\)"):
            run(h, np.ones(shape), "prefix:32", PureDP(1.0), rng=0)


def test_a_solver_given_to_a_closed_form_method_is_noted(caplog, monkeypatch):
    log = logging.getLogger("strategy_opt")  # a CLI call in an earlier test may have stopped its propagation
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    monkeypatch.setattr(log, "propagate", False)
    with caplog.at_level(logging.INFO, logger="strategy_opt"):
        s = so.solve("prefix:8", privacy="pure", method="hierarchical", solver="scs")
        so.solve("prefix:8", privacy="pure", method="hierarchical")
    assert s.meta["solver"] == "closed-form"
    notes = [r.getMessage() for r in caplog.records if "not used" in r.getMessage()]
    assert notes == ["method 'hierarchical' is a closed form: solver profile 'scs' not used"]


def test_from_matrix_refuses_a_spec_that_is_not_a_string():
    with pytest.raises(InputError, match="spec must be a string"):
        from_matrix(np.eye(2), spec=5)


def test_strategies_record_their_ratio_to_the_identity_and_warn_when_far_worse(caplog, monkeypatch):
    """E_p(identity) = trace(W^T W): n(n+1)/2 for prefix:n, its square for prefix:n*prefix:n (per factor, never formed)."""
    log = logging.getLogger("strategy_opt")
    monkeypatch.setattr(log, "handlers", [caplog.handler])
    monkeypatch.setattr(log, "propagate", False)
    from strategy_opt.api import IDENTITY_WARNING_RATIO

    with caplog.at_level(logging.WARNING, logger="strategy_opt"):
        flat = so.solve("prefix:64", privacy="pure", method="fourier")
        kron = so.solve("prefix:16*prefix:16", privacy="pure", method="hierarchical")
        better = so.solve("prefix:64", privacy="pure", method="hierarchical")
        so.solve("prefix:64", privacy="pure", method="identity")
    assert flat.meta["ratio_to_identity"] == pytest.approx(flat.meta["unit_total_squared_error"] / (64 * 65 / 2), rel=1e-12)
    assert kron.meta["ratio_to_identity"] == pytest.approx(kron.meta["unit_total_squared_error"] / (16 * 17 / 2) ** 2, rel=1e-12)
    assert better.meta["ratio_to_identity"] == pytest.approx(better.meta["unit_total_squared_error"] / (64 * 65 / 2), rel=1e-12)
    warned = [r.getMessage() for r in caplog.records if "times the identity's" in r.getMessage()]
    assert flat.meta["ratio_to_identity"] > 2 and kron.meta["ratio_to_identity"] > IDENTITY_WARNING_RATIO > 1 > better.meta["ratio_to_identity"]
    assert len(warned) == 2 and warned[0].startswith("fourier: this strategy's E_1 is") and warned[1].startswith("hierarchical: this strategy's E_1 is 1.68")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="strategy_opt"):  # candidates auto compares and drops are not warned about
        for privacy in ("pure", "approx"):
            assert so.solve("identity:64", privacy=privacy, method="auto").meta["ratio_to_identity"] == pytest.approx(1.0)
    assert not [r for r in caplog.records if "times the identity's" in r.getMessage()]


@pytest.mark.parametrize("name", ["dawa", "mwem"])
def test_releases_take_a_spec_or_a_matrix_and_refuse_a_privacy_name(name):
    """As `run` does: a SPEC string or a matrix is a workload; the privacy must be a Privacy object, not its name."""
    from strategy_opt.registry import get_release

    release = get_release(name).func
    x = np.arange(16.0)
    by_spec = release(x, "prefix:16", PureDP(1e6), rng=3, sampler="simulate")
    by_matrix = release(x, np.tril(np.ones((16, 16))), PureDP(1e6), rng=3, sampler="simulate")
    np.testing.assert_allclose(by_spec.answers, by_matrix.answers, rtol=1e-12)
    np.testing.assert_allclose(by_spec.answers, np.cumsum(x), rtol=0.05, atol=2.0)  # epsilon 1e6: about the true answers
    with pytest.raises(InputError, match=r"privacy must be PureDP\(epsilon\) or ApproxDP\(epsilon, delta\), got 'pure'"):
        release(x, "prefix:16", "pure", rng=3, sampler="simulate")


def test_online_answerer_refuses_text_for_numbers():
    from strategy_opt.online import OnlineAnswerer

    with pytest.raises(InputError, match="budget must be a positive number, got '1'"):
        OnlineAnswerer(np.arange(4.0), "1")
    answerer = OnlineAnswerer(np.arange(4.0), 1.0, rng=0)
    with pytest.raises(InputError, match=r"query must be an array of coefficients \(one per cell, 4 in all\), got a string 'prefix'"):
        answerer.answer("prefix", 1.0, 0.9)
    assert answerer.counts == {"history": 0, "fresh": 0, "refused": 0}  # nothing spent on refused input


def test_a_registered_method_that_returns_a_bare_matrix_is_named():
    from strategy_opt.compiler import compile_strategy
    from strategy_opt.registry import _METHODS, register_method

    try:
        register_method("test-bare-matrix", privacy=("pure", "approx"))(lambda problem: np.eye(problem.workload.n))
        register_method("test-compiled", privacy=("pure", "approx"))(lambda problem: compile_strategy(np.eye(problem.workload.n), problem, "test-compiled"))
        with pytest.raises(InputError, match="method 'test-bare-matrix' returned a ndarray, not a Strategy; a registered method returns "
                                             r"strategy_opt.compiler.compile_strategy\(A, problem, name\)"):
            so.solve("prefix:4", method="test-bare-matrix")
        assert so.solve("prefix:4", privacy="pure", method="test-compiled").meta["unit_total_squared_error"] == 10.0  # trace(W^T W)
    finally:
        _METHODS.pop("test-bare-matrix", None)
        _METHODS.pop("test-compiled", None)


def test_exported_helpers_refuse_bad_arguments_with_input_errors():
    # they raised statistics.StatisticsError, IndexError and a scipy ValueError (level=0 gave zero-width intervals)
    from strategy_opt.augment import complete_columns_l1
    from strategy_opt.certificates import kkt_bound
    from strategy_opt.executor import answer_intervals

    for level in (2.0, 0.0, 1.0, True):
        with pytest.raises(InputError, match="level must be a number strictly between 0 and 1"):
            answer_intervals(np.eye(4), "prefix:4", PureDP(1.0), np.arange(4.0), level=level)
    with pytest.raises(InputError, match="must be a 2-D matrix"):
        complete_columns_l1(np.ones(4))
    with pytest.raises(InputError, match=r"X must be 4 x 4"):
        kkt_bound(np.eye(4), np.eye(3))


def test_strategies_compare_by_identity():
    """An outside audit: == between two strategies (a pickled copy, a second solve) raised 'truth value of an array is ambiguous'."""
    import copy
    import pickle

    from strategy_opt.api import solve

    s = solve("prefix:8", privacy="approx", method="eigen-design")
    h = solve("prefix:8", privacy="pure", method="hierarchical")  # a sparse matrix
    assert s == s and h == h and not (pickle.loads(pickle.dumps(s)) == s) and s != copy.deepcopy(s)
    assert s in [h, s] and h not in [s]
    back = pickle.loads(pickle.dumps(s))
    assert np.array_equal(back.matrix, s.matrix) and back.meta == s.meta  # the way to compare contents


def test_python_made_solver_profiles_are_checked_as_files_are():
    from strategy_opt.api import solve
    from strategy_opt.solvers import SolverProfile

    cases = [
        (dict(time_limit=-1.0), "time_limit = -1.0 (must be a finite number > 0"),
        (dict(time_limit=float("nan")), "time_limit = nan"),
        (dict(max_iters=0), "max_iters = 0 (must be an integer >= 1)"),
        (dict(tol="1e-3"), "tol = '1e-3'"),
        (dict(backend="cvxpy", solver="SCS", options=[1]), "options = [1]"),
        (dict(backend="foo"), "backend = 'foo' (must be 'cvxpy' or 'native')"),
        (dict(solver="SCS"), "names a cvxpy solver but the backend is 'native'"),
    ]
    for fields, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            solve("all-range:16", method="minerror-l2", solver=SolverProfile("mine", **fields))
    with pytest.raises(InputError, match="backend = 'foo'"):  # whatever the method (a closed form reads no budget)
        solve("prefix:16", privacy="pure", method="identity", solver=SolverProfile("mine", backend="foo"))


def test_numbers_beyond_float64_and_bytes_paths(tmp_path):
    from strategy_opt.api import solve
    from strategy_opt.io import read_strategy, write_strategy
    from strategy_opt.workload import from_matrix

    for call in (lambda: solve([[10**400]], privacy="pure"), lambda: from_matrix([[10**400]])):
        with pytest.raises(InputError, match="beyond float64's range"):
            call()
    s = solve("prefix:4", privacy="pure", method="identity")
    path = write_strategy(s, os.fsencode(tmp_path / "s.npz"))  # a bytes path, as os functions take
    assert read_strategy(os.fsencode(path)).meta["unit_total_squared_error"] == 10.0
    with pytest.raises(InputError, match="must be a file path"):
        write_strategy(s, 3)
