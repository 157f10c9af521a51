"""Eigen-Design (Li 2013 Ch. 5) against the notes' recomputed Table 4.1 values and independent computations.

Reference values: ../shared/notes/thesis-mm-eigen.md Secs. 3.8, 8 and 9 (error / SVD bound,
(epsilon, delta)-DP; pre-completion = Program 5.1.1 optimum before steps 4-5).
"""

import math

import numpy as np
import pytest
import scipy.linalg as la

from strategy_opt.api import solve
from strategy_opt.error import ErrorProfile, log_svd_bound, svd_bound, unit_error
from strategy_opt.exceptions import InputError
from strategy_opt.io import read_strategy, write_strategy
from strategy_opt.objectives import get_objective
from strategy_opt.problem import Problem
from strategy_opt.programs import eigen_design as ed
from strategy_opt.query_weights import query_weights
from strategy_opt.spec import parse_spec
from strategy_opt.workload import all_predicate, all_range, from_matrix, kronecker, prefix, random_range, union
from oracles import direct_error


def _ratio(s, W):
    return 10 ** (s.meta["unit_total_squared_error_log10"] - log_svd_bound(W) / math.log(10))


def _pre_ratio(s, W):
    return s.meta["eigen_design"]["pre_completion_error"] / svd_bound(W)


# --------------------------------------------------------------------------- reference values


def test_all_range_256_reference():
    W = all_range(256)
    s = solve(W, method="eigen-design")
    assert _ratio(s, W) == pytest.approx(1.0353, abs=1e-4)
    assert _pre_ratio(s, W) == pytest.approx(1.0776, abs=1e-4)
    assert s.meta["eigen_design"]["program_5_1_1"]["value"] == pytest.approx(2.93271e5, rel=5e-6)
    assert s.meta["eigen_design"]["program_5_1_1"]["relative_gap"] <= 1e-6


def test_binary_cube_all_ranges_is_optimal():
    # ALLRANGE([2]^10): the SVD bound is tight and Eigen-Design reaches it (Thm 5.2)
    W = parse_spec("*".join(["all-range:2"] * 10))
    s = solve(W, method="eigen-design")
    assert svd_bound(W) == pytest.approx((1 + math.sqrt(3)) ** 20 / 1024, rel=1e-12)
    assert _ratio(s, W) == pytest.approx(1.0, abs=1e-6)
    assert s.meta["eigen_design"]["program_5_1_1"]["value"] == pytest.approx(5.24174e5, rel=1e-5)


def test_all_predicate_1024_no_overflow():
    W = parse_spec("all-predicate:1024")
    s = solve(W, method="eigen-design")
    m = s.meta
    # Cor. 4.4: SVDB = 2^(n-2)/n (n - 1 + sqrt(n + 1))^2, log10 = 310.689
    n = 1024
    log10_svdb = ((n - 2) * math.log(2) - math.log(n) + 2 * math.log(n - 1 + math.sqrt(n + 1))) / math.log(10)
    assert log_svd_bound(W) / math.log(10) == pytest.approx(log10_svdb, abs=1e-9)
    assert log10_svdb == pytest.approx(310.689, abs=1e-3)
    assert math.isfinite(m["unit_total_squared_error_log10"]) and math.isfinite(m["lower_bound_log10"])
    assert m["unit_total_squared_error_log10"] == pytest.approx(log10_svdb, abs=1e-6)  # ratio 1.0000
    assert m["eigen_design"]["program_5_1_1"]["value"] == pytest.approx(1.086971e3, rel=1e-6)
    assert m["svd_bound"] is None and m["svd_bound_log10"] == pytest.approx(log10_svdb, abs=1e-9)  # an outside audit: it was missing


def test_relative_objective_beyond_float64_states_its_bound_in_logs(tmp_path, capsys):
    """An outside audit: on all-predicate:1024 with objective relative the value was null with only its log10 given,
    and the bound a plain 9.55e307 with no log10; both are now given as log10 too, and the summary line shows them."""
    from strategy_opt.cli import main

    s = solve("all-predicate:1024", method="eigen-design", objective="relative")
    m = s.meta
    assert m["objective_value"] is None and m["objective_lower_bound_log10"] <= m["objective_value_log10"] + 1e-9
    assert m["objective_value_log10"] == pytest.approx(307.98, abs=0.01)
    out = tmp_path / "s.npz"
    assert main(["-q", "solve", "--workload", "all-predicate:1024", "--method", "eigen-design", "--objective", "relative", "--out", str(out)]) == 0
    line = capsys.readouterr().out
    assert "value=10^307.98" in line and "objective_lower_bound=10^307.98" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, post, pre, program",
    [
        ("all-range:2048", 1.0278, 1.0606, 3.21796e7),
        ("all-range:64*all-range:32", 1.1071, 1.1900, 2.69004e7),
        ("all-range:1024", 1.0301, 1.0656, 6.82081e6),
    ],
)
def test_table_4_1_reference(spec, post, pre, program):
    W = parse_spec(spec)
    s = solve(W, method="eigen-design")
    assert _ratio(s, W) == pytest.approx(post, abs=1e-4)
    assert _pre_ratio(s, W) == pytest.approx(pre, abs=1e-4)
    assert s.meta["eigen_design"]["program_5_1_1"]["value"] == pytest.approx(program, rel=5e-6)
    assert s.meta["lower_bound"] >= svd_bound(W)


@pytest.mark.slow
def test_cdf_2048_soft_reference():
    # notes Sec. 5.4: CDF (prefix) 2048: 1.6396 (soft, ~5%), pre-completion 1.7276, program 3.46540e4
    W = prefix(2048)
    s = solve(W, method="eigen-design")
    assert _ratio(s, W) == pytest.approx(1.6396, rel=0.05)
    assert _pre_ratio(s, W) == pytest.approx(1.7276, abs=1e-4)
    assert s.meta["eigen_design"]["program_5_1_1"]["value"] == pytest.approx(3.46540e4, rel=5e-6)


# --------------------------------------------------------------------------- the algorithm, checked independently


def _dense_eigen_design(G):
    """Program 5.1.2 from scratch: numpy eigh, weighting by the notes' single-formula dual, completion."""
    from strategy_opt.weighting import solve_weighting

    lam, V = np.linalg.eigh(G)
    keep = lam > 1e-10 * lam.max()
    Q, sigma = V[:, keep].T, lam[keep]
    u = solve_weighting(sigma, (Q * Q).T).u
    A1 = np.sqrt(u)[:, None] * Q
    m2 = (A1 * A1).sum(axis=0)
    return np.vstack([A1, np.diag(np.sqrt(m2.max() - m2))])


@pytest.mark.parametrize("spec", ["prefix:40", "random-range:30:50:1", "marginals:3x4:1", "all-range:6*prefix:5"])
def test_matches_direct_construction(spec):
    W = parse_spec(spec)
    s = solve(W, method="eigen-design")
    A = _dense_eigen_design(W.gram())
    assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(A, W, 2), rel=1e-6)


def test_completion_only_helps_and_pre_value_is_the_error_of_A_prime():
    W = random_range(24, 40, seed=3)
    problem = Problem(W)
    design = ed._design(problem, None)
    wt = ed._full(design.eigen, problem.solver)
    A1 = np.sqrt(wt.u)[:, None] * wt.Q
    assert unit_error(A1, W, 2) == pytest.approx(wt.value, rel=1e-9)  # Thm 5.1: c_i = sigma_i
    A, _ = ed._assemble(wt, design.eigen)
    assert unit_error(A, W, 2) <= wt.value * (1 + 1e-12)  # Thm 3.11


def test_exported_strategy_error_matches_meta(tmp_path):
    W = all_range(64)
    s = solve(W, method="eigen-design")
    path = write_strategy(s, tmp_path / "eigen.npz")
    back = read_strategy(path)
    assert unit_error(back.matrix, W, 2) == pytest.approx(back.meta["unit_total_squared_error"], rel=1e-10)
    assert back.meta["lower_bound"] >= back.meta["svd_bound"]
    assert back.meta["lower_bound"] <= back.meta["unit_total_squared_error"]
    assert back.meta["method"] == "eigen-design" and back.meta["privacy"] == "approx"


def test_certificate_is_a_lower_bound_on_other_strategies():
    # the dual certificate holds for every strategy: check it against identity, wavelet,
    # hierarchical and random strategies
    W = all_range(32)
    s = solve(W, method="eigen-design")
    lb = s.meta["lower_bound"]
    assert s.meta["lower_bound_kind"] == "dual-certificate" and lb > svd_bound(W)
    rng = np.random.default_rng(0)
    for method in ("identity", "wavelet", "hierarchical"):
        assert solve(W, method=method).meta["unit_total_squared_error"] >= lb
    for _ in range(20):
        assert unit_error(rng.standard_normal((40, 32)), W, 2) >= lb


# --------------------------------------------------------------------------- speed-ups


def test_principal_vectors_restrict_the_full_program():
    W = all_range(128)
    full = solve(W, method="eigen-design")
    for principal, k in ((True, 13), (0.25, 32), (20, 20)):
        s = solve(W, method="eigen-design", principal=principal)
        m = s.meta["eigen_design"]
        assert m["variant"] == "principal" and m["principal_vectors"] == k
        # k individual weights and one shared weight: a special case of the full weighting
        assert m["pre_completion_error"] >= full.meta["eigen_design"]["pre_completion_error"] * (1 - 1e-8)
        assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(s.matrix, W, 2), rel=1e-9)
    assert solve(W, method="eigen-design", principal=127).meta["eigen_design"]["variant"] == "full"


def test_principal_program_matches_explicit_formulation():
    # [R] form of Sec. 5.2.2.2 written out with numpy eigenvectors and solved by Clarabel
    import cvxpy as cp

    W = prefix(30)
    k = 6
    s = solve(W, method="eigen-design", principal=k)
    lam, V = np.linalg.eigh(W.gram())
    lam, V = lam[::-1], V[:, ::-1]
    u = cp.Variable(k, pos=True)
    u0 = cp.Variable(pos=True)
    load = (V[:, :k] ** 2) @ u + (V[:, k:] ** 2).sum(axis=1) * u0
    obj = lam[:k] @ cp.inv_pos(u) + lam[k:].sum() * cp.inv_pos(u0)
    value = cp.Problem(cp.Minimize(obj), [load <= 1]).solve(solver="CLARABEL")
    assert s.meta["eigen_design"]["pre_completion_error"] == pytest.approx(value, rel=1e-6)


@pytest.mark.parametrize("k", [13, 60])  # prefix:100: k = 60 has principal weights below the shared one
def test_principal_assembly_reproduces_the_weighted_gram(k):
    W = prefix(100)
    problem = Problem(W)
    design = ed._design(problem, None)
    wt = ed._principal(design.eigen, problem.solver, k)
    A, _ = ed._assemble(wt, design.eigen)
    assert A.shape[0] <= k + 100
    lam, V = np.linalg.eigh(W.gram())
    rest = V[:, ::-1][:, k:]
    u0 = wt.shared[0]
    X = (wt.Q.T * wt.u) @ wt.Q + u0 * rest @ rest.T
    X += np.diag(X.diagonal().max() - X.diagonal())  # completion rows D'
    np.testing.assert_allclose(A.T @ A, X, atol=1e-9 * X.max())
    assert (k == 60) == bool(np.any(wt.u < u0))


def test_separation_with_singleton_groups_is_the_full_program():
    # groups of one query: the group scales t_g span every weighting, so the optimum is the full one
    W = prefix(48)
    full = solve(W, method="eigen-design").meta["eigen_design"]["pre_completion_error"]
    one = solve(W, method="eigen-design", group_size=1).meta["eigen_design"]
    assert one["variant"] == "separation" and one["reduced_program"]["groups"] == 48
    assert one["pre_completion_error"] == pytest.approx(full, rel=1e-6)
    whole = solve(W, method="eigen-design", group_size=48).meta["eigen_design"]["pre_completion_error"]
    assert whole == pytest.approx(full, rel=1e-6)
    default = solve(W, method="eigen-design", separation=True).meta["eigen_design"]
    assert default["group_size"] == round(48 ** (1 / 3))
    assert default["pre_completion_error"] >= full * (1 - 1e-8)


def test_principal_on_large_positive_definite_gram_uses_leading_eigenvectors_only(monkeypatch):
    monkeypatch.setattr(ed, "SUBSET_EIGH_MIN_N", 64)
    W = random_range(96, 400, seed=2)
    assert np.all(la.eigvalsh(W.gram()) > 0)
    s = solve(W, method="eigen-design", principal=10)
    monkeypatch.setattr(ed, "SUBSET_EIGH_MIN_N", 10**9)
    t = solve(W, method="eigen-design", principal=10)
    assert s.meta["eigen_design"]["pre_completion_error"] == pytest.approx(t.meta["eigen_design"]["pre_completion_error"], rel=1e-7)
    assert s.meta["unit_total_squared_error"] == pytest.approx(t.meta["unit_total_squared_error"], rel=1e-7)


# --------------------------------------------------------------------------- objectives and bases


def _explicit_row_normalized(W):
    A = W.matrix().toarray()
    norms = np.linalg.norm(A, axis=1)
    return A[norms > 0] / norms[norms > 0, None]


@pytest.mark.parametrize(
    "W",
    [all_range(9), prefix(7), random_range(10, 15, seed=1), kronecker(all_range(3), prefix(4)), union(all_range(5), prefix(5)), all_predicate(6)],
    ids=lambda W: W.spec,
)
def test_normalized_gram_matches_explicit(W):
    Wn = _explicit_row_normalized(W)
    np.testing.assert_allclose(ed.normalized_gram(W) * math.exp(W.log_scale), Wn.T @ Wn, rtol=1e-12, atol=1e-12)


def test_relative_objective():
    W = random_range(16, 60, seed=4)
    s = solve(W, method="eigen-design", objective="relative")
    # same strategy error as Eigen-Design on the explicitly row-normalised workload
    Wn = from_matrix(_explicit_row_normalized(W))
    t = solve(Wn, method="eigen-design")
    assert unit_error(s.matrix, Wn, 2) == pytest.approx(t.meta["unit_total_squared_error"], rel=1e-6)
    # objective_value = the registered 'relative' objective of the per-query variances
    P = ErrorProfile(s.matrix).pinv()
    Wd = W.matrix().toarray()
    var = s.meta["sensitivity"] ** 2 * np.einsum("ij,jk,ik->i", Wd, P, Wd)
    rel = get_objective("relative").value(var, query_weights(Problem(W, objective="relative")))
    assert s.meta["objective_value"] == pytest.approx(rel, rel=1e-9)
    # the reported total error is the original workload's
    assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(s.matrix, W, 2), rel=1e-9)


def test_weighted_objective():
    W = random_range(12, 30, seed=5)
    w = np.random.default_rng(5).uniform(0.5, 2.0, 30)
    s = solve(W, method="eigen-design", objective="weighted", weights=list(w))
    Ww = from_matrix(np.sqrt(w)[:, None] * W.matrix().toarray())
    t = solve(Ww, method="eigen-design")
    assert s.meta["objective_value"] == pytest.approx(t.meta["unit_total_squared_error"], rel=1e-6)


@pytest.mark.parametrize("method", ["eigen-design", "auto"])
def test_weighted_objective_on_a_kronecker_workload(method):
    """Weights that do not factor over a product workload (an outside audit: the certificate mixed the
    12 x 12 Gram with one factor's 3 x 3 and the solve ended in a traceback)."""
    W = kronecker(prefix(3), prefix(4))
    w = np.arange(1.0, 13.0)
    s = solve(W, method=method, objective="weighted", weights=list(w))
    Wm = W.matrix().toarray()
    # the weighted objective by its definition: sum_i w_i sigma^2 w_i^T (A^T A)^+ w_i, unit L2 sensitivity
    A = s.dense()
    P = np.linalg.pinv(A.T @ A) * (np.sqrt((A * A).sum(0)).max() ** 2)
    assert s.meta["objective_value"] == pytest.approx(float(w @ np.einsum("ij,jk,ik->i", Wm, P, Wm)), rel=1e-8)
    assert s.meta["unit_total_squared_error"] == pytest.approx(direct_error(A, W, 2), rel=1e-8)
    # both bounds valid: below the certified weighted optimum and the certified total optimum
    weighted_opt = solve(W, method="minerror-l2", objective="weighted", weights=list(w)).meta["objective_value"]
    total_opt = solve(W, method="minerror-l2").meta["unit_total_squared_error"]
    assert s.meta["objective_value"] >= weighted_opt * (1 - 1e-6)
    assert s.meta["objective_lower_bound"] <= weighted_opt * (1 + 1e-8)
    assert s.meta["lower_bound"] <= total_opt * (1 + 1e-8)


@pytest.mark.parametrize("basis", ["wavelet", "fourier", "identity"])
def test_basis_design_sets(basis):
    W = all_range(32)
    problem = Problem(W, options={"basis": basis})
    wt, _ = ed._basis_design(problem, basis, problem.solver)
    # Thm 5.1: with c_i = ||(W Q^-1)_{:,i}||^2 the program value is the error of diag(sqrt(u)) Q
    assert unit_error(np.sqrt(wt.u)[:, None] * wt.Q, W, 2) == pytest.approx(wt.value, rel=1e-8)
    s = solve(W, method="eigen-design", basis=basis)
    assert s.meta["eigen_design"]["variant"] == f"basis:{basis}"
    assert s.meta["unit_total_squared_error"] <= wt.value * (1 + 1e-12)
    assert s.meta["unit_total_squared_error"] >= solve(W, method="eigen-design").meta["unit_total_squared_error"] * 0.999


def test_identity_basis_weighting_is_closed_form():
    # Q = I: c_j = G_jj and the only feasible weights are u_j <= 1, so A = I and E = trace(G)
    W = prefix(10)
    s = solve(W, method="eigen-design", basis="identity")
    assert s.meta["unit_total_squared_error"] == pytest.approx(np.trace(W.gram()), rel=1e-7)


# --------------------------------------------------------------------------- minimization inside the method


def test_kronecker_with_total_factor_is_minimized():
    W = parse_spec("total:4*all-range:8")
    s = solve(W, method="eigen-design")
    assert s.meta["eigen_design"]["minimized_cells"] == 8
    t = solve(all_range(8), method="eigen-design")
    # W = 4 copies of the same cells: error equals that of all-range:8 scaled by the total's Gram entry 1
    assert s.meta["unit_total_squared_error"] == pytest.approx(t.meta["unit_total_squared_error"], rel=1e-7)


# --------------------------------------------------------------------------- all-predicate workload


def test_all_predicate_workload():
    W = all_predicate(5)
    A = W.matrix().toarray()
    assert A.shape == (32, 5) and W.m == 32
    np.testing.assert_allclose(A.T @ A, math.exp(W.log_scale) * W.gram())
    lam, V = W.gram_eigh()
    np.testing.assert_allclose(V @ np.diag(lam) @ V.T, W.gram(), atol=1e-12)
    np.testing.assert_allclose(W.matvec(np.arange(5.0)), A @ np.arange(5.0))
    assert parse_spec("all-predicate:5").spec == "all-predicate:5"
    with pytest.raises(InputError, match="too large"):
        all_predicate(1024).matrix()


# --------------------------------------------------------------------------- input validation


@pytest.mark.parametrize(
    "options, match",
    [
        ({"principal": True, "group_size": 4}, "either"),
        ({"principal": 0}, "principal"),
        ({"principal": 1.5}, "principal"),
        ({"group_size": 0}, "group_size"),
        ({"group_size": 17}, r"group_size must be an integer in \[1, 16\]"),  # more than n: silently clipped before
        ({"principal": 17}, r"count in \[1, 16\]"),
        ({"separation": False, "group_size": 3}, "group_size applies to eigen-query separation"),
        ({"separation": "yes"}, "separation"),
        ({"basis": "hierarchical"}, "basis"),
        ({"basis": "wavelet", "principal": 3}, "eigen-queries only"),
        ({"bogus": 1}, "unknown option"),
    ],
)
def test_bad_options(options, match):
    with pytest.raises(InputError, match=match):
        solve(all_range(16), method="eigen-design", **options)


@pytest.mark.parametrize("option", ["separation", "principal", "certificate"])
def test_numpy_booleans_are_booleans(option):
    """np.bool_ (e.g. from a comparison on an array) means what True means (it was refused: "got np.True_")."""
    plain = solve(all_range(16), method="eigen-design", **{option: True}).meta["unit_total_squared_error"]
    assert solve(all_range(16), method="eigen-design", **{option: np.bool_(True)}).meta["unit_total_squared_error"] == plain


def test_refuses_pure_dp_and_max_objective():
    with pytest.raises(InputError, match="approx"):
        solve(all_range(8), method="eigen-design", privacy="pure")
    with pytest.raises(InputError, match="minimises the total/relative/weighted objective, not 'max'"):
        solve(all_range(8), method="eigen-design", objective="max")
    with pytest.raises(InputError, match="weights"):
        solve(all_range(8), method="eigen-design", objective="weighted")


# --------------------------------------------------------------------------- audit fixes


def _cli(*args):
    from strategy_opt.cli import main

    return main([str(a) for a in args])


def test_weighted_objective_records_weights_and_a_valid_objective_bound(tmp_path):
    import hashlib

    W = random_range(16, 12, seed=2)
    w = np.random.default_rng(0).uniform(0.5, 3.0, W.m)
    np.save(tmp_path / "w.npy", w)
    out = tmp_path / "s.npz"
    assert _cli("-q", "solve", "--workload", "random-range:16:12:2", "--method", "eigen-design", "--objective", "weighted", "--option", f"weights={tmp_path / 'w.npy'}", "--out", out) == 0
    m = read_strategy(out).meta
    assert m["weights"] == [float(v) for v in w] and m["weights_count"] == 12 and m["weights_file"] == str(tmp_path / "w.npy")
    assert m["weights_sha256"] == hashlib.sha256(w.astype("<f8").tobytes()).hexdigest()
    assert m["objective_lower_bound_kind"] == "dual-certificate"
    assert m["objective_lower_bound"] <= m["objective_value"]
    assert m["objective_relative_gap"] == pytest.approx(m["objective_value"] / m["objective_lower_bound"] - 1)
    # valid: no strategy does better on the weighted objective, e.g. minerror-l2's certified optimum
    opt = solve(W, method="minerror-l2", objective="weighted", weights=list(w)).meta
    assert m["objective_lower_bound"] <= opt["objective_value"] * (1 + 1e-9)
    assert m["objective_lower_bound"] >= 0.5 * opt["objective_value"]


def test_relative_objective_gets_an_objective_bound():
    W = prefix(16)
    m = solve(W, method="eigen-design", objective="relative").meta
    opt = solve(W, method="minerror-l2", objective="relative").meta
    assert m["objective_lower_bound_kind"] == "dual-certificate"
    assert m["objective_lower_bound"] <= opt["objective_value"] * (1 + 1e-9) <= m["objective_value"] * (1 + 1e-9)
    assert "weights" not in m  # relative computes its own weights: nothing of the user's to record
    # skipped certificate: said so, not a silent null
    m = solve(W, method="eigen-design", objective="relative", certificate=False).meta
    assert m["objective_lower_bound"] is None and "certificate skipped" in m["objective_lower_bound_unavailable"]


@pytest.mark.parametrize("objective, copies", [("total", ed.DENSE_COPIES), ("relative", ed.DENSE_COPIES_REWEIGHTED)])
def test_memory_estimate_refuses_before_allocating(monkeypatch, capsys, objective, copies):
    # 6 copies (the generic solve estimate of the SPEC) fit in 4 MB at n = 256; eigen-design's do not
    n = 256
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "4M")
    assert _cli("solve", "--workload", f"all-range:{n}", "--method", "eigen-design", "--objective", objective) == 2
    need = copies * 8 * n * n / 1e6
    assert capsys.readouterr().err.strip() == (
        f"strategy-opt: error: eigen-design on {n} cells ({copies} dense {n}x{n} matrices of 524 kB) needs about "
        f"{need:.3g} MB of memory but only 4 MB is available; try a smaller domain, or hierarchical/wavelet (structured strategies)"
    )


@pytest.mark.parametrize(
    "spec, options",
    [("all-range:384", {}), ("all-range:384", {"principal": True}), ("all-range:384", {"objective": "relative"}), ("all-range:16*prefix:24", {}), ("all-range:384", {"basis": "wavelet"})],
)
def test_memory_estimate_covers_the_peak(spec, options):
    # the allocations NumPy reports to tracemalloc (arrays; not LAPACK work space) stay under the estimate
    import tracemalloc

    solve("all-range:8", method="eigen-design")  # imports and caches outside the measurement
    W = parse_spec(spec)
    copies = ed.DENSE_COPIES if options.get("objective", "total") == "total" else ed.DENSE_COPIES_REWEIGHTED
    tracemalloc.start()
    try:
        solve(W, method="eigen-design", **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= copies * 8.0 * W.n**2
    assert peak >= 0.5 * copies * 8.0 * W.n**2  # and the estimate is not wildly generous


# --------------------------------------------------------------------------- the profile's time_limit and max_iters


@pytest.mark.parametrize("solver", ["scs", "clarabel"])
def test_cvxpy_profile_budget_stops_program_5_1_1_and_is_reported(solver):
    # before: weighting.py solved with the profile's [options] only: max_iters = 1 still gave status 'optimal'
    from dataclasses import replace

    from strategy_opt.solvers import load_profile

    base = load_profile(solver)
    profile = replace(base, max_iters=1, options={k: v for k, v in base.options.items() if k != "max_iters"})
    s = solve("all-range:16", method="eigen-design", solver=profile)
    program = s.meta["eigen_design"]["program_5_1_1"]
    assert program["iterations"] <= 1
    assert s.meta["solver_status"] == program["status"] != "optimal"  # optimal_inaccurate (SCS) / user_limit (Clarabel)
    assert s.meta["lower_bound"] <= s.meta["unit_total_squared_error"]


@pytest.mark.parametrize("options", [{}, {"group_size": 4}, {"principal": 3}, {"basis": "wavelet"}])
def test_time_limit_covers_every_program_5_1_1_solve(monkeypatch, options):
    # each solve gets what is left of the profile's time_limit (measured from the start of eigen-design), not all of it
    from dataclasses import replace

    from strategy_opt.solvers import load_profile

    limits, real = [], ed.solve_weighting

    def record(c, B, profile):
        limits.append(profile.time_limit)
        return real(c, B, profile)

    monkeypatch.setattr(ed, "solve_weighting", record)
    solve("all-range:16", method="eigen-design", solver=replace(load_profile("native"), time_limit=30.0), **options)
    assert limits and all(0 < t < 30.0 for t in limits) and limits == sorted(limits, reverse=True)


def test_separation_reports_groups_stopped_by_the_time_limit(monkeypatch):
    # the top-level program finishing does not make the design optimal when a group ran out of time
    from dataclasses import replace

    real = ed.solve_weighting

    def groups_out_of_time(c, B, profile):
        return real(c, B, replace(profile, time_limit=1e-9) if B.shape[1] == 4 else profile)  # groups of 4; the top program has 8 columns

    monkeypatch.setattr(ed, "solve_weighting", groups_out_of_time)
    s = solve("all-range:32", method="eigen-design", group_size=4)
    program = s.meta["eigen_design"]["reduced_program"]
    assert program["groups"] == 8 and sum(program["group_statuses"].values()) == 8 and program["group_statuses"].get("time_limit", 0) >= 1
    assert s.meta["solver_status"] == program["status"] == "time_limit"
    assert s.meta["unit_total_squared_error"] >= s.meta["lower_bound"]
    monkeypatch.setattr(ed, "solve_weighting", real)
    s = solve("all-range:32", method="eigen-design", group_size=4)
    assert s.meta["eigen_design"]["reduced_program"]["group_statuses"] == {"optimal": 8} and s.meta["eigen_design"]["reduced_program"]["status"] == "optimal"
    assert s.meta["solver_status"] == "heuristic"  # the reduced program's optimum, not Program 5.1.1's


def test_a_repeated_eigenvalue_does_not_make_the_design_depend_on_the_cell_order():
    """W^T W has eigenvalue 2 twice: the eigen-queries there are any basis of a plane, and LAPACK's depended on the cell
    order (E_2 from 16.79 to 17.30 over the 24 orders). The canonical basis gives one E_2 for every order, and the
    strategy for one order is the strategy for another with its columns permuted."""
    import itertools

    W = np.array([[1, 1, 2, 2], [0, 1, 0, 0], [0, 1, 0, 2], [1, 2, 1, 1.0]])
    lam = np.linalg.eigvalsh(W.T @ W)
    assert lam[1] == pytest.approx(2.0) and lam[2] == pytest.approx(2.0)
    base = solve(from_matrix(W), method="eigen-design")
    A = base.dense()
    for perm in itertools.permutations(range(4)):
        s = solve(from_matrix(W[:, perm]), method="eigen-design")
        assert s.meta["unit_total_squared_error"] == pytest.approx(base.meta["unit_total_squared_error"], rel=1e-9)
        # the same error profile with the cells renumbered: (A_perm^T A_perm)^-1 = P^T (A^T A)^-1 P
        B = s.dense()
        np.testing.assert_allclose(np.linalg.inv(B.T @ B), np.linalg.inv(A.T @ A)[np.ix_(perm, perm)], rtol=1e-6, atol=1e-9)
    E = np.max(np.sum(A**2, axis=0)) * np.trace(W.T @ W @ np.linalg.inv(A.T @ A))  # independent recomputation
    assert base.meta["unit_total_squared_error"] == pytest.approx(E, rel=1e-9)


def test_relative_objective_with_a_nearly_singular_design():
    """W = [[1,1,0,0],[0,1,1,1]] under the relative objective: the design's A^T A has an eigenvalue 1e-9 of the largest
    whose direction carries only rounding, which swamped the KKT weights (all clipped to zero: the solve was refused).
    Now the strategy comes with a valid bound: below the exact optimum of minerror-l2 (a second solver)."""
    W = np.array([[1.0, 1, 0, 0], [0, 1, 1, 1]])
    s = solve(W, privacy="approx", method="eigen-design", objective="relative")
    opt = solve(W, privacy="approx", method="minerror-l2", objective="relative", solver="clarabel")
    lower, value = s.meta["objective_lower_bound"], s.meta["objective_value"]
    assert 0 < lower <= opt.meta["objective_value"] * (1 + 1e-6)
    assert value >= opt.meta["objective_value"] * (1 - 1e-6)
    assert value == pytest.approx(opt.meta["objective_value"], rel=1e-4)


@pytest.mark.parametrize("side, objective", [(16, "total"), (4, "relative"), (4, "total")])
def test_kronecker_spec_gets_the_strategy_of_the_same_matrix_as_a_file(tmp_path, side, objective):
    """An outside audit: on a square grid products of factor eigenvalues coincide, and the Kronecker route kept the
    products as the basis of each repeated eigenspace while the dense route rotates it canonically: E_2 3377.9 for
    prefix:16*prefix:16 against 2808.2 for the same matrix as a file (the optimum is 2085.3). Both now agree."""
    P = np.tril(np.ones((side, side)))
    np.save(tmp_path / "w.npy", np.kron(P, P))
    spec = solve(f"prefix:{side}*prefix:{side}", privacy="approx", method="eigen-design", objective=objective)
    file = solve(f"file:{tmp_path / 'w.npy'}", privacy="approx", method="eigen-design", objective=objective)
    key = "unit_total_squared_error" if objective == "total" else "objective_value"
    assert spec.meta[key] == pytest.approx(file.meta[key], rel=1e-4)
    G = np.kron(P, P).T @ np.kron(P, P)
    if objective == "total":  # recomputed from the Kronecker SPEC's matrix by numpy
        A = spec.dense()
        assert spec.meta[key] == pytest.approx((A * A).sum(axis=0).max() * np.trace(G @ np.linalg.pinv(A.T @ A)), rel=1e-9)


def test_identity_factors_need_no_rotation_and_no_memory():
    """A regression audit: identity:32*identity:32 (one repeated eigenspace of 1024 products) took 9.1 GB and 23 s after
    the canonical rotation of product eigenspaces; its compression is diagonal (any basis is canonical), so no rotation
    is built. E_2 = trace(W^T W) = 1024 by the identity's optimality."""
    import tracemalloc

    tracemalloc.start()  # NumPy reports its arrays to tracemalloc
    try:
        s = solve("identity:32*identity:32", privacy="approx", method="eigen-design")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.meta["unit_total_squared_error"] == pytest.approx(1024.0, rel=1e-9)
    assert peak < 500e6  # bytes; the rotation built 9.1 GB


def test_meta_solver_names_the_profile_that_ran_as_minerror_l2_does(tmp_path):
    # with a custom cvxpy profile, eigen-design recorded "cvxpy:SCS" where minerror-l2 records the profile's name
    (tmp_path / "scs1.toml").write_text('backend = "cvxpy"\nsolver = "SCS"\ntol = 1e-6\n')
    profile = str(tmp_path / "scs1.toml")
    ed = solve("prefix:12", privacy="approx", method="eigen-design", solver=profile).meta
    l2 = solve("prefix:12", privacy="approx", method="minerror-l2", solver=profile).meta
    assert ed["solver"] == l2["solver"] == "scs1"
    assert ed["eigen_design"]["program_5_1_1"]["backend"] == "cvxpy:SCS"  # the backend that ran stays in the facts
    assert solve("prefix:12", privacy="approx", method="eigen-design").meta["solver"] == "native"


@pytest.mark.parametrize("options", [{"separation": True}, {"principal": 4}])
def test_speed_ups_report_their_own_program_not_program_5_1_1(options):
    # separation and principal vectors solve a smaller program: its dual value (12009 with separation on
    # all-range:64) is not a bound on Program 5.1.1 (optimum 11752.6 there), and its optimum is not 5.1.1's
    full = solve("all-range:64", method="eigen-design").meta
    fast = solve("all-range:64", method="eigen-design", **options).meta
    assert "program_5_1_1" not in fast["eigen_design"] and fast["eigen_design"]["reduced_program"]["status"] == "optimal"
    assert fast["solver_status"] == "heuristic" and full["solver_status"] == "optimal"
    assert fast["eigen_design"]["pre_completion_error"] >= full["eigen_design"]["program_5_1_1"]["value"] * (1 - 1e-6)


@pytest.mark.parametrize("spec", ["marginals:4x4x4x4:2", "marginals:3x4x5:2"])
def test_the_eigen_queries_of_a_repeated_eigenvalue_do_not_depend_on_lapacks_basis(spec, monkeypatch):
    """All cells of a marginal workload have the same Gram diagonal, so the compression that fixes the basis of a
    repeated eigenspace is a multiple of the identity there, and LAPACK's basis (which follows the BLAS kernel and
    thread count) stood: separation on marginals:8x16x16:2 gave E_2 1.117-1.152 SVD bounds between kernels (audit).
    Here every eigenspace's basis is rotated at random before the canonical rotation: the eigen-queries, and the
    separated design's error, stay the same."""
    G = parse_spec(spec).gram()
    reference = ed._generic_eigen(G)
    real_eigh = np.linalg.eigh
    rng = np.random.default_rng(3)

    def rotated_eigh(M):
        w, V = real_eigh(M)
        V = V.copy()
        start = 0
        for i in range(1, w.size + 1):  # a random orthogonal mix of each repeated eigenvalue's eigenvectors
            if i < w.size and abs(w[i] - w[i - 1]) <= 1e-9 * abs(w).max():
                continue
            if i - start > 1:
                Q, _ = np.linalg.qr(rng.standard_normal((i - start, i - start)))
                V[:, start:i] = V[:, start:i] @ Q
            start = i
        return w, V

    base = solve(spec, privacy="approx", method="eigen-design", separation=True).meta["unit_total_squared_error"]
    with monkeypatch.context() as patch:  # numpy's eigh, for this eigendecomposition only
        patch.setattr(np.linalg, "eigh", rotated_eigh)
        mixed = ed._generic_eigen(G)
    n = G.shape[0]
    keep = reference.values > ed.EIG_RTOL * reference.values[0]
    a, b = reference.rows(np.flatnonzero(keep)), mixed.rows(np.flatnonzero(keep))
    np.testing.assert_allclose(np.abs((a * b).sum(axis=1)), 1.0, atol=1e-8)  # the same rows up to sign
    assert a.shape == (keep.sum(), n)
    monkeypatch.setattr(ed, "_generic_eigen", lambda G, top=None: mixed)
    again = solve(spec, privacy="approx", method="eigen-design", separation=True).meta["unit_total_squared_error"]
    assert again == pytest.approx(base, rel=1e-9)
