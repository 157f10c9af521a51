"""Semiseparable Gram matrices (strategy_opt.semiseparable) against dense products."""

import numpy as np
import pytest

from strategy_opt.programs.pidentity import hat_rows, hat_support, pidentity_loss, pidentity_loss_on_support
from strategy_opt.semiseparable import SemiseparableGram
from strategy_opt.workload import all_predicate, all_range, from_matrix, identity, prefix, random_range, total


def _suffix(n: int):
    return from_matrix(np.triu(np.ones((n, n))), spec="suffix")


@pytest.mark.parametrize("workload", [all_range(37), prefix(50), total(9), _suffix(23), all_range(1)], ids=lambda W: f"{W.spec}:{W.n}")
def test_products_of_range_grams_equal_dense_products(workload):
    G = workload.gram()
    S = SemiseparableGram.detect(G)
    assert S is not None
    np.testing.assert_array_equal(S.dense(), G)  # integer Gram matrices: exact
    np.testing.assert_array_equal(S.diagonal(), np.diag(G))
    rng = np.random.default_rng(3)
    for X in (rng.random((5, G.shape[0])), rng.standard_normal((2, G.shape[0])), np.zeros((1, G.shape[0]))):
        np.testing.assert_allclose(S.right_product(X), X @ G, rtol=1e-12, atol=1e-12 * np.abs(X).max() * np.abs(G).sum(axis=0).max())


def test_generators_of_all_ranges_are_the_closed_form():
    n = 12
    S = SemiseparableGram.detect(all_range(n).gram() / 7.0)  # scaled: the form is kept
    i = np.arange(n)
    np.testing.assert_allclose(S.u * S.v[0], (i + 1) * n / 7.0, rtol=1e-14)  # u_i v_0 = G_i0 = (i + 1) n / 7
    np.testing.assert_allclose(S.dense(), all_range(n).gram() / 7.0, rtol=1e-14)


@pytest.mark.parametrize(
    "G",
    [identity(6).gram(), all_predicate(5).gram(), random_range(20, 30, seed=2).gram(), prefix(8).gram() + _suffix(8).gram(), np.zeros((3, 3)), np.ones((2, 3))],
    ids=["identity", "all-predicate", "random-range", "prefix-plus-suffix", "zero", "not-square"],
)
def test_other_matrices_are_not_taken_for_semiseparable(G):
    assert SemiseparableGram.detect(G) is None


def test_prefix_plus_all_range_is_semiseparable_too():
    # (n - max) + (min + 1)(n - max) = (min + 2)(n - max): the same v, u shifted by one
    S = SemiseparableGram.detect(prefix(9).gram() + all_range(9).gram())
    np.testing.assert_allclose(S.u * S.v[0], (np.arange(9) + 2) * 9, rtol=1e-14)


def test_generators_of_a_huge_range_are_refused():
    # the Kac matrix rho^|i-j| is exactly semiseparable (u_i = rho^-i), but u spans 1e307 on 512 cells: X u overflowed
    # and the p-identity loss came out NaN where the dense product is finite (audit R5)
    i = np.arange(512)
    K = 0.25 ** np.abs(i[:, None] - i[None, :])
    assert SemiseparableGram.detect(K) is None
    T = np.random.default_rng(0).random((32, 512))
    f, g = pidentity_loss(T.ravel(), K, 32, SemiseparableGram.detect(K))
    assert np.isfinite(f) and np.all(np.isfinite(g))
    mild = 0.9 ** np.abs(i[:40, None] - i[None, :40])  # u spans 0.9^-39 = 61: kept, and exact
    S = SemiseparableGram.detect(mild)
    X = np.random.default_rng(1).standard_normal((3, 40))
    np.testing.assert_allclose(S.right_product(X), X @ mild, rtol=1e-12, atol=1e-13 * np.abs(X).sum(axis=1).max())


def test_a_near_miss_is_refused():
    G = all_range(10).gram().copy()
    G[3, 7] = G[7, 3] = G[3, 7] * (1 + 1e-9)  # off by far more than rounding
    assert SemiseparableGram.detect(G) is None


@pytest.mark.parametrize("spec_n", [("prefix", 64), ("all-range", 48)])
def test_p_identity_losses_agree_with_and_without_the_structure(spec_n):
    kind, n = spec_n
    G = (prefix(n) if kind == "prefix" else all_range(n)).gram()
    S = SemiseparableGram.detect(G)
    T = np.vstack([hat_rows(n, 6), hat_rows(n, 24)]) * np.random.default_rng(1).uniform(0.5, 2.0, (1, n))
    f, g = pidentity_loss(T.ravel(), G, T.shape[0])
    fs, gs = pidentity_loss(T.ravel(), G, T.shape[0], S)
    assert fs == pytest.approx(f, rel=1e-11)
    np.testing.assert_allclose(gs, g, rtol=1e-8, atol=1e-11 * np.abs(g).max())
    rows, cols = hat_support(T, 1.0)
    fp, gp = pidentity_loss_on_support(T[rows, cols], G, rows, cols, T.shape[0], S)
    assert fp == pytest.approx(f, rel=1e-11)
    np.testing.assert_allclose(gp, g.reshape(T.shape)[rows, cols], rtol=1e-8, atol=1e-11 * np.abs(g).max())
