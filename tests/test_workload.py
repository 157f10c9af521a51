"""Workloads: Gram matrices, products and variances against brute-force matrices."""

import re

import numpy as np
import pytest
import scipy.sparse as sp

from strategy_opt.exceptions import InputError
from strategy_opt.workload import (
    all_range,
    from_matrix,
    identity,
    kronecker,
    marginals,
    prefix,
    random_range,
    total,
    union,
)


def brute_intervals(n, pairs):
    W = np.zeros((len(pairs), n))
    for r, (a, b) in enumerate(pairs):
        W[r, a : b + 1] = 1
    return W


def brute(W):
    """An explicit matrix for each structured workload, built by loops."""
    n = W.n
    spec = W.spec
    if spec.startswith("identity"):
        return np.eye(n)
    if spec.startswith("total"):
        return np.ones((1, n))
    if spec.startswith("prefix"):
        return brute_intervals(n, [(0, j) for j in range(n)])
    if spec.startswith("all-range"):
        return brute_intervals(n, [(a, b) for a in range(n) for b in range(a, n)])
    raise AssertionError(spec)


@pytest.mark.parametrize("W", [identity(5), total(4), prefix(7), all_range(6), all_range(1)], ids=repr)
def test_structured_matches_brute_force(W):
    M = brute(W)
    assert W.shape == M.shape
    np.testing.assert_allclose(W.matrix().toarray(), M)
    np.testing.assert_allclose(W.gram(), M.T @ M)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=W.n), rng.normal(size=W.m)
    np.testing.assert_allclose(W.matvec(x), M @ x)
    np.testing.assert_allclose(W.rmatvec(y), M.T @ y)
    S = rng.normal(size=(W.n, W.n))
    S = S + S.T
    np.testing.assert_allclose(W.query_variances(S), np.diag(M @ S @ M.T))


def test_random_range_reproducible_and_sorted():
    W1, W2 = random_range(50, 30, seed=3), random_range(50, 30, seed=3)
    lo, hi = W1.intervals
    assert np.all(lo <= hi) and lo.min() >= 0 and hi.max() < 50
    np.testing.assert_array_equal(W1.matrix().toarray(), W2.matrix().toarray())
    assert not np.array_equal(random_range(50, 30, seed=4).intervals[0], lo)
    M = brute_intervals(50, list(zip(lo, hi)))
    np.testing.assert_allclose(W1.gram(), M.T @ M)


def test_all_range_gram_closed_form_1_based():
    n = 9
    G = all_range(n).gram()
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            assert G[i - 1, j - 1] == min(i, j) * (n - max(i, j) + 1)


def test_all_range_4096_gram_without_matrix(monkeypatch):
    W = all_range(4096)
    monkeypatch.setattr(type(W), "matrix", lambda self: pytest.fail("matrix() must not be built for the Gram"))
    G = W.gram()
    assert G.shape == (4096, 4096) and G[0, 0] == 4096 and G[2047, 2047] == 2048 * 2049
    assert W.m == 4096 * 4097 // 2


def test_kronecker_gram_matvec_and_variances():
    W = kronecker(prefix(3), all_range(4))
    M = np.kron(brute(prefix(3)), brute(all_range(4)))
    np.testing.assert_allclose(W.matrix().toarray(), M)
    np.testing.assert_allclose(W.gram(), M.T @ M)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=W.n), rng.normal(size=W.m)
    np.testing.assert_allclose(W.matvec(x), M @ x)
    np.testing.assert_allclose(W.rmatvec(y), M.T @ y)
    assert W.domain == (3, 4)


@pytest.mark.parametrize(
    "make",
    [
        lambda: all_range(1), lambda: all_range(2), lambda: all_range(37), lambda: prefix(9), lambda: random_range(20, 30, 1),
        lambda: kronecker(prefix(3), all_range(4)), lambda: kronecker(all_range(5), identity(2), total(3)),
        lambda: from_matrix(np.random.default_rng(3).normal(size=(7, 6))), lambda: union(identity(5), prefix(5), weights=[1.0, 3.0]),
    ],
)
def test_gram_matvec_equals_the_product_with_the_brute_force_gram(make):
    """``gram_matvec`` (all ranges by a closed form in O(n), Kronecker factors along their axes) against M^T M v from the listed rows."""
    W = make()
    M = W.matrix().toarray()
    v = np.random.default_rng(2).normal(size=W.n)
    np.testing.assert_allclose(W.gram_matvec(v), M.T @ (M @ v), rtol=1e-12, atol=1e-12 * np.abs(M.T @ M).sum())
    np.testing.assert_allclose(W.gram_matvec(v.reshape(-1, 1)).ravel(), W.gram_matvec(v))
    with pytest.raises(InputError, match=f"must have {W.n} entries"):
        W.gram_matvec(np.ones(W.n + 1))


def test_all_range_gram_matvec_cost_is_linear_in_n():
    """The hybrid estimator takes the closed form over the dense Gram (it took the n^2 Gram at 8192 cells: 8 m > n^2)."""
    assert all_range(8192).gram_matvec_cost() == 10.0 * 8192 < 8192**2 < 8 * all_range(8192).m  # not by the m answers


def test_union_and_weights():
    W = union(identity(4), total(4), weights=[1.0, 2.0])
    M = np.vstack([np.eye(4), 2 * np.ones((1, 4))])
    np.testing.assert_allclose(W.matrix().toarray(), M)
    np.testing.assert_allclose(W.gram(), M.T @ M)
    S = np.eye(4) + 0.5
    np.testing.assert_allclose(W.query_variances(S), np.diag(M @ S @ M.T))
    np.testing.assert_allclose(W.rmatvec(np.arange(5.0)), M.T @ np.arange(5.0))
    with pytest.raises(InputError, match="different domain"):
        union(identity(3), identity(4))


def test_marginals_count_and_gram():
    W = marginals((2, 3, 2), 2)
    # three 2-way marginals with 6 + 4 + 6 cells
    assert W.m == 2 * 3 + 2 * 2 + 3 * 2
    M = W.matrix().toarray()
    x = np.arange(12.0).reshape(2, 3, 2)
    expect = np.concatenate([x.sum(axis=2).ravel(), x.sum(axis=1).ravel(), x.sum(axis=0).ravel()])
    np.testing.assert_allclose(M @ x.ravel(), expect)
    np.testing.assert_allclose(W.gram(), M.T @ M)


@pytest.mark.parametrize("W", [all_range(11), prefix(9), identity(4), kronecker(all_range(3), prefix(5))], ids=repr)
def test_gram_eigh_closed_forms(W):
    lam, V = W.gram_eigh()
    G = W.gram()
    np.testing.assert_allclose(G @ V, V * lam, atol=1e-9 * lam.max())
    np.testing.assert_allclose(V.T @ V, np.eye(W.n), atol=1e-10)
    np.testing.assert_allclose(np.linalg.eigvalsh(G), W.gram_eigvals(), rtol=1e-9, atol=1e-9)


def test_explicit_workload_validation():
    with pytest.raises(InputError, match="NaN"):
        from_matrix([[1.0, np.nan]])
    with pytest.raises(InputError, match="empty"):
        from_matrix(np.zeros((0, 3)))
    with pytest.raises(InputError, match="positive integer"):
        all_range(0)


def test_matrix_refused_when_huge():
    with pytest.raises(InputError, match="too large"):
        all_range(20000).matrix()


# --------------------------------------------------------------------------- explicit workloads


def _explicit_cases():
    """(name, matrix, expected product route) for ExplicitWorkload Gram tests."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    lo, hi = random_range(700, 300, 2).intervals
    ranges = sp.csr_matrix(brute_intervals(700, list(zip(lo, hi))))  # long ranges: fills in -> dense route
    short = sp.random(400, 700, density=0.004, random_state=3, format="csr")  # genuinely sparse
    signed = sp.random(150, 600, density=0.4, random_state=4, format="csr")
    signed.data = rng.normal(size=signed.nnz)  # real-valued, both signs
    dup = sp.coo_matrix((np.array([1.0, 2.0, -0.5, 3.0, 0.0]), (np.array([0, 0, 1, 2, 2]), np.array([3, 3, 1, 0, 4]))), shape=(3, 5))
    return [
        ("ranges-csr", ranges, True),
        ("sparse-csr", short, False),
        ("signed-csr", signed, True),
        ("duplicates-coo", dup, None),
        ("ranges-dense", ranges.toarray(), None),
        ("signed-dense", signed.toarray(), None),
    ]


@pytest.mark.parametrize("name, M, dense_route", _explicit_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_explicit_gram_equals_dense_numpy_product(name, M, dense_route, monkeypatch):
    """W^T W and W W^T of a file-like workload equal the plain dense NumPy products, on both product routes."""
    import scipy.sparse as sp

    import strategy_opt.workload as wl

    D = M.toarray() if sp.issparse(M) else np.asarray(M)
    want, want_rows = D.T @ D, D @ D.T
    W = from_matrix(M)
    if dense_route is not None:
        assert wl._dense_product_cheaper(W.matrix()) is dense_route
    G = W.gram()
    scale = np.abs(want).max()
    np.testing.assert_allclose(G, want, rtol=0, atol=1e-12 * scale)
    assert np.array_equal(G, G.T) and G.flags.c_contiguous and G.dtype == np.float64
    np.testing.assert_allclose(W._row_gram(), want_rows, rtol=0, atol=1e-12 * np.abs(want_rows).max())
    assert W.frobenius_sq() == pytest.approx(np.trace(want), rel=1e-12)
    assert W.nnz() == np.count_nonzero(D)
    if sp.issparse(M):
        # the other route, and the dense route in several row blocks, give the same matrix
        for forced in (True, False):
            monkeypatch.setattr(wl, "_dense_product_cheaper", lambda _M, f=forced: f)
            np.testing.assert_allclose(from_matrix(M).gram(), want, rtol=0, atol=1e-12 * scale)
        monkeypatch.setattr(wl, "_dense_product_cheaper", lambda _M: True)
        monkeypatch.setattr(wl, "_GRAM_BLOCK_ENTRIES", 7 * D.shape[1] + 3)
        np.testing.assert_allclose(from_matrix(M).gram(), want, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(from_matrix(M)._row_gram(), want_rows, rtol=0, atol=1e-12 * np.abs(want_rows).max())


def test_explicit_gram_eigvals_from_row_gram():
    M = brute_intervals(40, [(0, 39), (3, 9), (5, 30), (20, 20)])
    np.testing.assert_allclose(from_matrix(M).gram_eigvals(), np.linalg.eigvalsh(M.T @ M), atol=1e-10)


@pytest.mark.parametrize("sparse", [True, False])
def test_explicit_workload_is_immutable_and_caches_its_grams(sparse, monkeypatch):
    """The matrix is copied and read-only, so the cached Gram can never go stale; a repeated gram() is free."""
    import scipy.sparse as sp

    import strategy_opt.workload as wl

    D = brute_intervals(30, [(0, 29), (2, 5), (10, 20)])
    src = sp.csr_matrix(D) if sparse else D.copy()
    W = from_matrix(src)
    calls = []
    real = wl._cross_product
    monkeypatch.setattr(wl, "_cross_product", lambda M: calls.append(M.shape) or real(M))
    G = W.gram()
    assert W.gram() is G and W._row_gram() is W._row_gram() and calls == [(3, 30), (30, 3)]
    assert not G.flags.writeable and not W._row_gram().flags.writeable
    with pytest.raises(ValueError):
        G[0, 0] = 5.0
    # changing the array the workload was built from changes nothing
    if sparse:
        src.data[:] = 7.0
    else:
        src[:] = 7.0
    np.testing.assert_array_equal(W.matrix().toarray(), D)
    np.testing.assert_array_equal(W.gram(), D.T @ D)
    np.testing.assert_array_equal(W.matvec(np.ones(30)), D.sum(axis=1))
    # and what it hands out cannot change it (read-only views of the stored matrix, or fresh copies)
    M = W.matrix()
    if sparse:
        with pytest.raises(ValueError):
            M.data[0] = 3.0
    else:
        M.data[0] = 3.0
        with pytest.raises(ValueError):
            W.dense()[0, 0] = 3.0
    np.testing.assert_array_equal(W.matrix().toarray(), D)
    np.testing.assert_array_equal(W.gram(), D.T @ D)


@pytest.mark.parametrize("spec", ["random-range:64:300:1", "prefix:40", "marginals:4x5:1"])
def test_weighted_gram_matches_the_dense_product(spec):
    from strategy_opt.spec import parse_spec
    from strategy_opt.workload import weighted_gram

    W = parse_spec(spec)
    M = W.matrix().toarray()
    c = np.random.default_rng(2).uniform(0.1, 3.0, M.shape[0])
    np.testing.assert_allclose(weighted_gram(W, c), M.T @ (c[:, None] * M), rtol=1e-12, atol=1e-12 * np.abs(M).max() ** 2 * c.max())


def test_union_gram_is_computed_once_and_read_only():
    from strategy_opt.workload import Union

    parts = [prefix(6), all_range(6)]
    U = Union(parts, [1.0, 2.0])
    G = U.gram()
    assert U.gram() is G and not G.flags.writeable
    np.testing.assert_allclose(G, parts[0].gram() + 4.0 * parts[1].gram(), rtol=1e-14)


# --------------------------------------------------------------------------- constructor validation


@pytest.mark.parametrize(
    "domain, match",
    [
        ((2.5, 1.6), "got 2.5"),
        ((2.0, 2.0), "got 2.0"),
        ((-2, -2), "got -2"),
        (("2", "2"), "got '2'"),
        ((True, 4), "got True"),
        ("22", "sequence of positive integers"),
        (4.0, "sequence of positive integers"),
        ((), "non-empty"),
        ((2, 3), "6 cells, not the 4"),
        (5, "5 cells, not the 4"),
    ],
)
def test_from_matrix_refuses_bad_domains(domain, match):
    with pytest.raises(InputError, match=match):
        from_matrix(np.eye(4), domain=domain)


@pytest.mark.parametrize("domain", [(2, 2), [2, 2], (np.int64(2), np.int32(2)), np.array([2, 2])], ids=repr)
def test_from_matrix_accepts_integer_domains(domain):
    W = from_matrix(np.eye(4), domain=domain)
    assert W.domain == (2, 2) and all(type(d) is int for d in W.domain) and W.n == 4
    assert from_matrix(np.eye(4), domain=4).domain == (4,)
    assert from_matrix(np.eye(4), domain=np.int64(4)).domain == (4,)


@pytest.mark.parametrize(
    "W, match",
    [
        (np.eye(2) * (1 + 1j), "real numbers, got dtype complex128"),
        (np.eye(2) + 0j, "real numbers, got dtype complex128"),  # refused even with a zero imaginary part
        (np.array([[1j, 1]], dtype=object), "real number"),
        ([[1, 2], [3]], "ragged"),
        ([["a", "b"]], "dtype <U1"),
    ],
    ids=["complex", "zero-imaginary", "object-complex", "ragged", "strings"],
)
def test_from_matrix_refuses_non_real_matrices(W, match):
    with pytest.raises(InputError, match=match):
        from_matrix(W)


def test_from_matrix_refuses_complex_sparse_and_accepts_int_and_bool():
    import scipy.sparse as sp

    with pytest.raises(InputError, match="complex128"):
        from_matrix(sp.eye(3, dtype=complex, format="csr"))
    np.testing.assert_array_equal(from_matrix([[1, 2], [0, 1]]).dense(), [[1.0, 2.0], [0.0, 1.0]])
    np.testing.assert_array_equal(from_matrix(np.eye(2, dtype=bool)).gram(), np.eye(2))


@pytest.mark.parametrize(
    "weights, match",
    [
        ([1, np.inf], r"finite and positive, got \[1.0, inf\]"),
        ([1, np.nan], "finite and positive"),
        ([1, -2], "finite and positive"),
        ([1, 0], "finite and positive"),
        (["a", 1], r"1-D sequence of real numbers, one per part, got \['a', 1\]"),
        (2, "1-D sequence of real numbers, one per part, got 2"),
        (np.ones((2, 2)), r"got an array of shape \(2, 2\)"),
        ([[1], [2, 3]], "1-D sequence"),
        ([1 + 0j, 1], "1-D sequence"),
        ([1, 2, 3], "2 parts, 3 weights"),
    ],
    ids=repr,
)
def test_union_refuses_bad_weights(weights, match):
    with pytest.raises(InputError, match=match):
        union(prefix(3), identity(3), weights=weights)


def test_union_and_kronecker_take_a_list_and_refuse_non_workloads():
    a, b = prefix(3), identity(3)
    assert union([a, b]).spec == union(a, b).spec == "prefix:3+identity:3"
    np.testing.assert_array_equal(union((a, b), weights=np.array([1, 2])).weights, [1.0, 2.0])
    assert kronecker([prefix(2), a]).domain == kronecker(prefix(2), a).domain == (2, 3)
    with pytest.raises(InputError, match="factors of a Kronecker workload must be Workload objects, got ndarray"):
        kronecker(np.eye(2), a)
    with pytest.raises(InputError, match="parts of a union workload must be Workload objects, got str"):
        union("prefix:3", a)
    with pytest.raises(InputError, match="at least one part"):
        union([])
    with pytest.raises(InputError, match="at least one factor"):
        kronecker()


@pytest.mark.parametrize(
    "shape, k, match",
    [
        ((2, 2), 1.5, "got 1.5"),
        ((2, 2), "1", "got '1'"),
        ((2, 2), True, "got True"),
        ((2, 2), 3, "between 0 and 2, got 3"),
        ((2, 2), -1, "between 0 and 2, got -1"),
        (4, 1, r"sequence of attribute sizes, e.g. \(4,\)"),
        ((2, 2.5), 1, "got 2.5"),
        ((2, 0), 1, "got 0"),
        ((), 0, "non-empty"),
    ],
)
def test_marginals_refuses_bad_arguments(shape, k, match):
    with pytest.raises(InputError, match=match):
        marginals(shape, k)


def test_marginals_accepts_numpy_integers():
    W = marginals(np.array([2, 3]), np.int64(1))
    assert W.spec == "marginals:2x3:1" and W.domain == (2, 3) and W.m == 5


# --------------------------------------------------------------- memory: refuse before allocating
@pytest.mark.parametrize(
    "W",
    [
        marginals((2, 3, 4), 2),
        marginals((2, 3, 4), 1),
        marginals((2, 2, 3), 3),
        marginals((3, 1, 2), 0),
        union(kronecker(all_range(4), identity(3)), kronecker(identity(4), identity(3)), weights=[2.0, 0.5]),
        union(kronecker(prefix(3), total(2)), kronecker(prefix(3), identity(2))),
        union(identity(5), total(5), weights=[1.0, 3.0]),
        union(marginals((3, 4, 2), 2), identity(24)),
    ],
    ids=repr,
)
def test_union_gram_eigvals_closed_form_matches_dense(W, monkeypatch):
    """Unions of aligned Kronecker products (marginals) give their eigenvalues without the dense Gram."""
    want = np.linalg.eigvalsh(W.gram())
    monkeypatch.setattr(type(W), "gram", lambda self: pytest.fail("dense Gram formed"))
    np.testing.assert_allclose(W.gram_eigvals(), want, rtol=1e-12, atol=1e-10 * want.max())


def test_union_gram_eigvals_falls_back_to_the_dense_gram():
    """Parts that are not simultaneously diagonalisable (all ranges and the total on one axis) use the Gram."""
    W = union(kronecker(all_range(4), identity(3)), kronecker(total(4), identity(3)))
    np.testing.assert_allclose(W.gram_eigvals(), np.linalg.eigvalsh(W.gram()), atol=1e-10)


@pytest.mark.parametrize("shape, k", [((4,) * 8, 3), ((2,) * 16, 2)])
def test_marginals_on_65536_cells_have_eigenvalues_and_an_svd_bound(shape, k):
    """The audit's inputs: 65536 cells, whose Gram would be 32 GiB; the closed form takes milliseconds."""
    from strategy_opt.error import log_svd_bound

    W = marginals(shape, k)
    ev = W.gram_eigvals()
    assert np.isfinite(log_svd_bound(W))
    assert ev.size == W.n == 65536 and ev.min() >= 0
    # trace(W^T W): every marginal's Kronecker factors (I or J) have traces d, so n per part
    assert ev.sum() == pytest.approx(len(W.parts) * W.n, rel=1e-12)
    with pytest.raises(InputError, match="65536x65536 .* above 20000 cells"):
        W.gram()


def test_solve_identity_on_marginals_over_65536_cells():
    from strategy_opt.api import solve

    s = solve("marginals:4x4x4x4x4x4x4x4:3", method="identity")
    assert s.meta["svd_bound"] > 0 and s.meta["unit_total_squared_error"] == pytest.approx(3670016)


def test_dense_gram_methods_refuse_marginals_over_65536_cells_quickly(capsys):
    from strategy_opt.cli import main

    assert main(["-q", "solve", "--workload", "marginals:4x4x4x4x4x4x4x4:3", "--method", "minerror-l2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "65536x65536" in err and "20000 cells" in err


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda: all_range(600), "the Gram matrix"),
        (lambda: prefix(600), "the Gram matrix"),
        (lambda: identity(600), "the Gram matrix"),
        (lambda: random_range(600, 20, 1), "the Gram matrix"),
        (lambda: kronecker(prefix(20), all_range(30)), "the Gram matrix"),
        (lambda: marginals((20, 30), 1), "the Gram matrix"),
        (lambda: from_matrix(np.ones((2, 600))), "the Gram matrix"),
    ],
)
def test_dense_gram_is_refused_beyond_the_memory_limit(make, what, monkeypatch):
    """Every dense n x n Gram checks the memory first (STRATEGY_OPT_MEMORY is read per call)."""
    W = make()
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1M")
    with pytest.raises(InputError, match=rf"{what} of workload .*needs about .* but only 1 MB is available"):
        W.gram()
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "100M")
    assert W.gram().shape == (W.n, W.n)


def test_gram_eigh_and_row_gram_are_refused_beyond_the_memory_limit(monkeypatch):
    monkeypatch.setenv("STRATEGY_OPT_MEMORY", "1M")
    with pytest.raises(InputError, match="Gram eigenvectors .*needs about"):
        all_range(600).gram_eigh()
    with pytest.raises(InputError, match="Gram eigendecomposition .*needs about"):
        union(prefix(600), identity(600)).gram_eigh()
    with pytest.raises(InputError, match="row Gram matrix .*needs about"):
        random_range(5000, 600, 1)._row_gram()
    # closed forms need no dense matrix
    assert all_range(600).gram_eigvals().size == 600 and marginals((20, 30), 1).gram_eigvals().size == 600


def test_available_memory_respects_an_address_space_limit(monkeypatch):
    """Under ``ulimit -v`` / ``prlimit --as`` the estimate is what the limit still allows, not the machine's free memory."""
    import subprocess
    import sys

    monkeypatch.delenv("STRATEGY_OPT_MEMORY", raising=False)
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, resource.RLIM_INFINITY)); "
        "from strategy_opt.resources import available_memory; print(available_memory())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert 0 < int(out) < 4_000_000_000


def test_a_gram_matrix_that_overflows_is_refused_naming_the_workload(tmp_path, capsys):
    # 8 entries of 1e160 per column: (1e160)^2 * 8 = 8e320 > 1.8e308, an infinite Gram matrix
    from strategy_opt.cli import main

    W = np.full((8, 8), 1e160)
    with np.errstate(over="ignore"):
        assert np.isinf(W.T @ W).all()
    with pytest.raises(InputError, match=r"Gram matrix W\^T W of workload 'big' overflows float64"):
        from_matrix(W, spec="big").gram()
    with pytest.raises(InputError, match="overflows float64"):
        kronecker([from_matrix(np.full((2, 2), 1e100)), from_matrix(np.full((2, 2), 1e100))]).gram()
    np.save(tmp_path / "W.npy", W)
    np.save(tmp_path / "x.npy", np.ones(8))
    code = main(["-q", "release", "--method", "identity", "--data", str(tmp_path / "x.npy"), "--workload", f"file:{tmp_path / 'W.npy'}",
                 "--epsilon", "1", "--out", str(tmp_path / "a.npy")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"the entries of workload 'file:{tmp_path / 'W.npy'}' are too large for float64" in err[0], err


@pytest.mark.parametrize("sparse", [False, True])
def test_a_query_whose_squares_underflow_is_named_in_a_warning(sparse):
    """Rows of 1e-200 beside normal rows count as zero queries (their squares are 0 in float64); said once."""
    import logging

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    W = np.tril(np.ones((5, 5)))
    W[2] *= 1e-200
    W[4] *= 1e-170
    w = from_matrix(sp.csr_matrix(W) if sparse else W, spec="tiny")
    log = logging.getLogger("strategy_opt")  # only this test's handler: a CLI test may have left others
    saved = log.handlers[:], log.level, log.propagate
    messages: list[str] = []
    log.handlers[:], log.propagate = [Collect()], False
    log.setLevel(logging.INFO)
    try:
        G = w.gram()
        w.gram()
        w.gram_diagonal()  # checks the rows too: said once per workload, not once per computation
        tiny = [m for m in messages if "too small for float64" in m]
        messages.clear()
        from_matrix(np.tril(np.ones((5, 5))) * 1e-120).gram()  # squares 1e-240: small but representable
        assert not [m for m in messages if "too small" in m]
    finally:
        log.handlers[:], log.propagate = saved[0], saved[2]
        log.setLevel(saved[1])
    assert tiny == ["workload 'tiny': 2 queries (row 2 first) with entries too small for float64 (squared norm 0) count as zero queries; rescale them if they matter"]
    np.testing.assert_array_equal(G, np.delete(W, [2, 4], axis=0).T @ np.delete(W, [2, 4], axis=0))


def test_interval_gram_is_computed_once_read_only_and_equals_w_transpose_w():
    W = random_range(90, 40, seed=5)
    G = W.gram()
    M = W.matrix().toarray()
    np.testing.assert_array_equal(G, M.T @ M)  # integer counts: exact
    assert W.gram() is G and not G.flags.writeable
    with pytest.raises(ValueError):
        G[0, 0] = 1.0


@pytest.mark.parametrize(
    "spec",
    ["prefix:7", "all-range:6", "random-range:9:5:1", "identity:4", "total:5", "prefix:3*all-range:4", "marginals:2x3x2:1", "all-predicate:4", "prefix:6+all-range:6"],
)
def test_gram_diagonal_and_diagonal_query_variances_match_the_dense_gram(spec):
    from strategy_opt.spec import parse_spec

    W = parse_spec(spec)
    d = np.random.default_rng(0).random(W.n)
    np.testing.assert_allclose(W.gram_diagonal(), np.diag(W.gram()), rtol=1e-13)
    np.testing.assert_allclose(W.diagonal_query_variances(d), W.query_variances(np.diag(d)), rtol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_explicit_gram_diagonal_is_the_squared_column_norms(sparse):
    M = np.array([[1.0, -2.0, 0.0], [0.5, 0.0, 3.0]])
    W = from_matrix(sp.csr_matrix(M) if sparse else M)
    np.testing.assert_array_equal(W.gram_diagonal(), [1.25, 4.0, 9.0])
    np.testing.assert_array_equal(W.diagonal_query_variances(np.array([1.0, 2.0, 3.0])), [1.0 + 8.0, 0.25 + 27.0])


def test_kronecker_diagonal_query_variances_per_factor():
    """A Kronecker d (the identity's, a weighted one) is handled per factor; any other d through the matrix."""
    from strategy_opt.spec import parse_spec

    W = parse_spec("prefix:5*all-range:4")
    rng = np.random.default_rng(1)
    for d in (np.ones(20), np.kron(rng.random(5) + 0.5, rng.random(4) + 0.5), rng.random(20)):
        np.testing.assert_allclose(W.diagonal_query_variances(d), W.query_variances(np.diag(d)), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 257, 1000])
def test_interval_diagonal_query_variances_are_exact_block_sums(n):
    """Sums over dyadic blocks, against direct slices; a huge d_j elsewhere costs the other queries no digit
    (prefix-sum differences returned 0 for them)."""
    from strategy_opt.workload import IntervalWorkload

    W = random_range(n, 200, 3) if n > 1 else IntervalWorkload(1, [0], [0])
    d = np.random.default_rng(n).random(n)
    lo, hi = W.intervals
    np.testing.assert_allclose(W.diagonal_query_variances(d), [d[a : b + 1].sum() for a, b in zip(lo, hi)], rtol=1e-14)
    W = IntervalWorkload(4, [0, 1, 2], [3, 2, 3])
    np.testing.assert_array_equal(W.diagonal_query_variances(np.array([1e18, 1.0, 1.0, 1.0])), [1e18 + 3.0, 2.0, 2.0])


def test_explicit_gram_diagonal_refuses_entries_out_of_float64_range():
    for scale, word in ((1e200, "overflows"), (1e-170, "too small")):
        with pytest.raises(InputError, match=word):
            from_matrix(np.array([[scale, 0.0], [0.0, scale]])).gram_diagonal()


@pytest.mark.parametrize(
    "W",
    [prefix(5), all_range(4), identity(5), total(5), random_range(6, 4, 1), from_matrix(np.arange(10.0).reshape(2, 5)),
     from_matrix(sp.csr_matrix(np.eye(5)[[0, 2]])), kronecker(prefix(2), total(3)), union(prefix(5), identity(5)), marginals((2, 3), 1)],
    ids=lambda W: W.spec,
)
def test_products_check_the_vector_and_match_the_matrix(W):
    """matvec/rmatvec equal products with the explicit matrix; a vector of another length is refused, never truncated."""
    M = W.matrix().toarray()
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(W.n), rng.standard_normal(W.m)
    np.testing.assert_allclose(W.matvec(x), M @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(W.rmatvec(y), M.T @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(W.matvec(x.reshape(-1, 1)), (M @ x).reshape(-1, 1), rtol=1e-12, atol=1e-12)
    for bad in (np.ones(W.n + 1), np.ones(W.n - 1), np.ones((W.n, 2))):
        with pytest.raises(InputError, match=re.escape(f"data vector x must have {W.n} entries (one per cell), got shape {bad.shape}")):
            W.matvec(bad)
    with pytest.raises(InputError, match=rf"vector y must have {W.m} entries \(one per query\)"):
        W.rmatvec(np.ones(W.m + 1))


def test_interval_bounds_are_read_only_copies():
    """The bounds behind the cached Gram cannot be edited in place (the answers would change, the error analysis not)."""
    from strategy_opt.workload import IntervalWorkload, all_range, random_range

    for W in (random_range(8, 5, 1), all_range(8)):
        lo, hi = W.intervals
        with pytest.raises(ValueError, match="read-only"):
            lo[:] = 0
    given = np.array([0, 2])
    W = IntervalWorkload(4, given, np.array([1, 3]))
    given[0] = 3  # the caller's array stays the caller's
    assert W.intervals[0].tolist() == [0, 2]


def test_a_matrix_labelled_with_a_spec_must_have_that_spec_s_gram():
    """An outside audit labelled the identity 'prefix:4': its file then stated E_1 = 4 for prefix:4 (true: 1+2+3+4 = 10)."""
    from strategy_opt.api import solve
    from strategy_opt.workload import from_matrix

    with pytest.raises(InputError, match="spec 'prefix:4' names a workload whose Gram matrix"):
        from_matrix(np.eye(4), spec="prefix:4")
    # the same queries in another order (an equivalent workload) keep the SPEC; a plain label is kept as it is
    W = from_matrix(np.tril(np.ones((4, 4)))[::-1], spec="prefix:4")
    assert W.spec == "prefix:4"
    assert solve(W, privacy="pure", method="identity").meta["unit_total_squared_error"] == 10
    assert from_matrix(np.eye(4), spec="minimized(prefix:4)").spec == "minimized(prefix:4)"
    assert from_matrix(np.eye(4), spec="mine").spec == "mine"


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: identity(10**12), r"n = 1,000,000,000,000 is too large \(at most 1,000,000,000\)"),
        (lambda: prefix(10**12), "too large"),
        (lambda: all_range(10**10), "too large"),
        (lambda: random_range(8, 10**12), r"m = 1,000,000,000,000 is too large"),
    ],
)
def test_constructors_refuse_sizes_beyond_the_spec_limit(build, words):
    """An outside audit: identity(10**12) raised numpy's MemoryError (7.28 TiB) where parse_spec refuses cleanly."""
    with pytest.raises(InputError, match=words):
        build()


def test_interval_bounds_that_do_not_fit_in_memory_are_refused_before_allocation(monkeypatch):
    import strategy_opt.resources as resources

    monkeypatch.setattr(resources, "available_memory", lambda: 10**6)  # 1 MB: 31250 intervals at 32 bytes
    with pytest.raises(InputError, match=r"workload prefix:40000 \(40,000 intervals\) needs about"):
        prefix(40000)
    assert prefix(30000).n == 30000 and total(10**9).n == 10**9  # total: one interval, whatever n
