"""Tests of the Orthogonal Mechanism (strategy_opt.programs.orthogonal) against the notes' values."""

import numpy as np
import pytest
import scipy.sparse as sp

from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import sensitivity, unit_error
from strategy_opt.executor import measure, reconstruct
from strategy_opt.io import read_strategy
from strategy_opt.privacy import PureDP
from strategy_opt.programs.orthogonal import independent_rows, om_blocks
from strategy_opt.workload import from_matrix

# OM paper, Example 1 (notes Sec. 1.2).
W_EX1 = np.array(
    [
        [0.3657, 0, 0.9812, 0],
        [0, 0.0645, 0, 0],
        [0, 0.5879, 0.7602, 0],
        [0, 0, 0, 0.7310],
        [0, 0.7313, 0, 0],
        [0, 0, 0.7122, 0.9053],
    ]
)


def census_workload():
    """OM paper Sec. 1: cells (Sex x Race x Salary), q1..q4 Race x Salary marginals, q5 = q1+q3, q6 = q2+q4."""
    W = np.zeros((6, 8))
    for i in range(4):  # cell index = sex * 4 + (race, salary)
        W[i, [i, 4 + i]] = 1
    W[4] = W[0] + W[2]
    W[5] = W[1] + W[3]
    return W


def test_example1_totals():
    s = solve(W_EX1, privacy="pure", method="orthogonal")
    A = s.dense()
    # W~ is a permutation matrix: every row one unit entry, every cell once.
    assert sorted(np.abs(A).sum(axis=1)) == [1, 1, 1, 1]
    assert np.allclose(np.sort(A.ravel())[-4:], 1) and np.count_nonzero(A) == 4
    assert s.meta["sensitivity"] == 1.0 and s.meta["om_reduces_to"] == "identity"
    lm_total = 2 * W_EX1.shape[0] * sensitivity(W_EX1, 1) ** 2  # Laplace on W, direct answers
    assert lm_total == pytest.approx(72.24, abs=0.005)
    assert 2 * s.meta["unit_total_squared_error"] == pytest.approx(8.840, abs=0.0005)
    B = W_EX1 @ np.linalg.pinv(A)  # Theorem 5: 2 trace(B B^T) S(W~)^2
    assert np.allclose(B @ A, W_EX1, atol=1e-12)
    assert np.trace(B @ B.T) == pytest.approx(4.42013825, abs=1e-8)


def test_census_example_om_identity_lm():
    W = census_workload()
    s = solve(W, privacy="pure", method="orthogonal")
    assert s.shape == (4, 8) and s.meta["om_rank1_blocks"] == 4
    assert s.meta["om_reduces_to"] == "identity on coarsened cells"
    assert 2 * s.meta["unit_total_squared_error"] == pytest.approx(16.0)
    assert 2 * unit_error(np.eye(8), from_matrix(W), 1) == pytest.approx(32.0)
    assert 2 * W.shape[0] * sensitivity(W, 1) ** 2 == pytest.approx(48.0)


def algorithm3_b(W, Wt):
    """The paper's Algorithm 3 (rank-1 tests), written independently to show where it fails."""
    B = np.zeros((W.shape[0], Wt.shape[0]))
    for i, q in enumerate(W):
        for j, r in enumerate(Wt):
            dom = r != 0
            if np.all(q[dom] != 0):
                pair = np.vstack([q[dom], r[dom]])
                if np.linalg.matrix_rank(pair) == 1:
                    B[i, j] = (q[dom] @ r[dom]) / (r[dom] @ r[dom])
    return B


def test_multi_query_block_needs_least_squares():
    W = np.array([[1.0, 2.0], [3.0, 1.0], [1.0, 1.0]])  # one support pattern, rank 2
    s = solve(W, privacy="pure", method="orthogonal")
    full = s.dense()
    A = full[: full.shape[0] - s.meta["completion_rows"]]  # OM's block queries, before the eps-DP completion pass
    assert s.meta["om_blocks"] == 1 and A.shape == (2, 2) and s.meta["om_reduces_to"] == "block bases"
    assert sensitivity(A, 1) == pytest.approx(1.0) and sensitivity(full, 1) == pytest.approx(1.0)
    assert np.linalg.norm(algorithm3_b(W, A) @ A - W) > 0.5  # Algorithm 3 leaves W != B W~
    B = W @ np.linalg.pinv(A)
    assert np.allclose(B @ A, W, atol=1e-12) and s.meta["om_decomposition_residual"] < 1e-12
    B_full = W @ np.linalg.pinv(full)
    assert s.meta["unit_total_squared_error"] == pytest.approx(np.trace(B_full @ B_full.T))
    assert s.meta["unit_total_squared_error"] <= np.trace(B @ B.T) * (1 + 1e-12)  # Thm 3.11


def random_tau_workload(m, n, tau, seed):
    rng = np.random.default_rng(seed)
    H = rng.random((m, n))
    return np.where(H < tau, rng.random((m, n)), 0.0)


def test_random_workload_reduces_to_identity():
    W = random_tau_workload(40, 120, 0.2, seed=3)
    s = solve(W, privacy="pure", method="orthogonal")
    touched = np.any(W != 0, axis=0)
    assert s.meta["om_reduces_to"] == "identity"
    assert s.meta["om_untouched_cells"] == int((~touched).sum())
    assert s.meta["unit_total_squared_error"] == pytest.approx(np.sum(W * W), rel=1e-9)


def test_theorem5_error_on_mixed_blocks():
    rng = np.random.default_rng(5)
    base = (rng.random((12, 10)) < 0.3).astype(float) * rng.integers(1, 4, (12, 10))
    W = base[:, np.repeat(np.arange(10), [1, 3, 1, 2, 1, 1, 4, 1, 1, 2])]  # repeated cells share patterns
    W[:, 5] *= 2.0
    s = solve(W, privacy="pure", method="orthogonal")
    A = s.dense()
    B = W @ np.linalg.pinv(A)
    assert np.allclose(B @ A, W, atol=1e-9)
    assert s.meta["unit_total_squared_error"] == pytest.approx(sensitivity(A, 1) ** 2 * np.trace(B @ B.T), rel=1e-8)
    # every block has L1 sensitivity 1 (parallel composition: S(W~) = max over blocks)
    blocks, _ = om_blocks(sp.csr_matrix(W), np.random.default_rng(0))
    assert all(np.abs(rows).sum(axis=0).max() == pytest.approx(1.0) for _, rows in blocks)
    assert sum(rows.shape[0] for _, rows in blocks) == A.shape[0] - s.meta["completion_rows"]


def test_blocks_follow_each_querys_own_scale():
    # the 1e10 row must not turn the unit rows' entries into "rounding noise": cells 0 and 1 are
    # told apart by rows 1 and 2, so OM is the identity, and W = B W~ holds for every query
    W = np.array([[1e10, 1e10], [0.0, 1.0], [1.0, 0.0]])
    s = solve(W, privacy="pure", method="orthogonal")
    A = s.dense()
    assert np.allclose(W @ np.linalg.pinv(A) @ A, W, rtol=1e-12, atol=1e-12)
    assert s.meta["om_decomposition_residual"] < 1e-12
    assert s.meta["unit_total_squared_error"] == pytest.approx(np.sum(W * W), rel=1e-9)


def test_independent_rows_are_a_basis_of_the_row_space():
    W = census_workload()
    for seed in range(4):
        rows = independent_rows(sp.csr_matrix(W), np.random.default_rng(seed))
        assert rows.size == np.linalg.matrix_rank(W) == np.linalg.matrix_rank(W[rows])


def test_om_answers_are_B_times_noisy_block_answers():
    W = census_workload()
    s = solve(W, privacy="pure", method="orthogonal")
    x = np.arange(8.0) * 3
    y, scale = measure(s.matrix, x, PureDP(0.5), rng=1)
    assert scale == pytest.approx(2.0)  # S(W~) / eps
    answers = W @ reconstruct(s.matrix, y)
    assert np.allclose(answers, W @ np.linalg.pinv(s.dense()) @ y)


def test_cli_file_and_structured_workloads(tmp_path, capsys):
    np.save(tmp_path / "W.npy", W_EX1)
    out = tmp_path / "s.npz"
    assert main(["-q", "solve", "--workload", f"file:{tmp_path / 'W.npy'}", "--privacy", "pure", "--method", "orthogonal", "--out", str(out)]) == 0
    st = read_strategy(out)
    assert st.meta["method"] == "orthogonal" and st.shape == (4, 4)
    assert main(["-q", "solve", "--workload", "prefix:16", "--privacy", "pure", "--method", "orthogonal", "--out", str(tmp_path / "p.mtx")]) == 0
    assert read_strategy(tmp_path / "p.mtx").meta["om_reduces_to"] == "identity"
    assert main(["-q", "solve", "--workload", "prefix:16", "--privacy", "approx", "--method", "orthogonal"]) == 2
    assert main(["-q", "solve", "--workload", "prefix:16", "--privacy", "pure", "--method", "orthogonal", "--option", "seed=-1"]) == 2
    assert "seed" in capsys.readouterr().err


def test_domain_above_the_dense_limit_is_refused_before_the_block_search(capsys, monkeypatch):
    from strategy_opt.programs import orthogonal as om

    def not_reached(*args):
        raise AssertionError("the block search ran")

    monkeypatch.setattr(om, "om_strategy", not_reached)  # about a minute at 65536 cells before the refusal moved up
    assert main(["-q", "solve", "--workload", "marginals:" + "x".join(["2"] * 16) + ":2", "--privacy", "pure", "--method", "orthogonal"]) == 2
    err = capsys.readouterr().err
    assert "orthogonal works on at most 20,000 cells" in err and "65,536 cells" in err and len(err.strip().splitlines()) == 1
