"""Tests of Workload Division (strategy_opt.programs.workload_division) against the notes' values."""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from strategy_opt.api import solve
from strategy_opt.cli import main
from strategy_opt.error import sensitivity
from strategy_opt.io import read_strategy
from strategy_opt.programs.workload_division import Part, average_l1_error, budget_shares, divide_workload
from strategy_opt.workload import from_matrix


def example_workload():
    """WD's worked example as reconstructed in the notes (Sec. 2.3): 8 queries, Delta W = 4.

    Queries 0-3 share the hot cell 0; every query also has a cell of its own.
    """
    hot = np.r_[np.ones(4), np.zeros(4)][:, None]
    return np.hstack([hot, np.eye(8)])


def test_worked_example_errors():
    W = example_workload()
    parts = divide_workload(sp.csr_matrix(W), rng=0)
    assert [(p.rows.size, p.sensitivity) for p in parts] == [(3, 3.0), (5, 1.0)]
    assert sensitivity(W, 1) == 4.0  # undivided average L1 error 4 at eps = 1
    assert average_l1_error(parts, [0.58, 0.42]) == pytest.approx(3.42775, abs=5e-6)
    shares = budget_shares(parts)
    assert shares[0] == pytest.approx(3 / (3 + math.sqrt(5)))  # 0.5729
    assert average_l1_error(parts, shares) == pytest.approx(3.42705, abs=5e-6)
    assert average_l1_error(parts, [0.5, 0.5]) == pytest.approx(3.5)
    s = solve(W, privacy="pure", method="workload-division")
    assert s.meta["wd_average_l1_error"] == pytest.approx(3.42705, abs=5e-6)
    assert s.meta["wd_undivided_average_l1_error"] == 4.0
    e = solve(W, privacy="pure", method="workload-division", split="equal")
    assert e.meta["wd_average_l1_error"] == pytest.approx(3.5) and e.meta["wd_budget_shares"] == [0.5, 0.5]


def test_optimal_shares_beat_a_grid_of_splits():
    parts = [Part(np.arange(4), 5.0, 1), Part(np.arange(4, 6), 2.0, 2), Part(np.arange(6, 13), 1.0, 2)]
    best = average_l1_error(parts, budget_shares(parts))
    a = np.array([4 * 5.0, 2 * 2.0, 7 * 1.0])
    assert best == pytest.approx(np.sum(np.sqrt(a)) ** 2 / 13)
    grid = np.linspace(0.01, 0.98, 98)
    for e1, e2 in itertools.product(grid, grid):
        if e1 + e2 < 0.999:
            assert average_l1_error(parts, [e1, e2, 1 - e1 - e2]) >= best - 1e-12
    # L2 metric: shares proportional to (|W_k| Delta_k^2)^(1/3)
    s2 = budget_shares(parts, metric="l2")
    w = np.array([4 * 25.0, 2 * 4.0, 7 * 1.0]) ** (1 / 3)
    assert np.allclose(s2, w / w.sum())


def test_strategy_is_reweighted_workload_with_sensitivity_at_most_one():
    rng = np.random.default_rng(2)
    W = np.zeros((30, 50))
    for i in range(30):
        a = rng.integers(0, 45)
        W[i, a : a + rng.integers(1, 6)] = 1
        if rng.random() < 0.5:
            W[i, 25] = 1  # hot cell
    s = solve(W, privacy="pure", method="workload-division")
    full = s.dense()
    A = full[: full.shape[0] - s.meta["completion_rows"]]  # WD's rows, before the eps-DP completion pass
    assert sensitivity(full, 1) <= 1 + 1e-12
    sizes, deltas, shares = (np.array(s.meta[k]) for k in ("wd_part_sizes", "wd_part_sensitivities", "wd_budget_shares"))
    assert sizes.sum() == 30 and shares.sum() == pytest.approx(1.0) and s.meta["wd_parts"] > 1
    # every strategy row is a workload row scaled by share_k / Delta_k
    norms = np.abs(A).max(axis=1)
    assert np.allclose(np.sort(norms), np.sort(np.repeat(shares / deltas, sizes)))
    # the LS error never exceeds WD's own (direct-answer) squared error; rows independent here -> equal
    direct = float(np.sum(sizes * (deltas / shares) ** 2))
    if np.linalg.matrix_rank(W) == W.shape[0]:
        assert s.meta["unit_total_squared_error"] == pytest.approx(sensitivity(A, 1) ** 2 * direct, rel=1e-8)
    assert s.meta["unit_total_squared_error"] <= direct * (1 + 1e-9)


def test_dependent_rows_least_squares_helps():
    W = np.vstack([np.tril(np.ones((8, 8))), np.ones((4, 8)), np.eye(8)[:4]])  # prefixes + repeated totals
    s = solve(W, privacy="pure", method="workload-division")
    sizes, deltas, shares = (np.array(s.meta[k]) for k in ("wd_part_sizes", "wd_part_sensitivities", "wd_budget_shares"))
    assert s.meta["unit_total_squared_error"] < float(np.sum(sizes * (deltas / shares) ** 2))


def test_stopping_rule_refuses_useless_divisions():
    W = sp.csr_matrix(np.ones((6, 3)))  # every query holds every cell: dividing cannot help
    parts = divide_workload(W)
    assert len(parts) == 1 and parts[0].rows.size == 6
    # the paper's literal test (noise >= noise_divided, no budget halving) would divide:
    k = math.floor((6 + 6) / 4 + 0.5)
    assert 6 * 6 >= k * k + (6 - k) * (6 - k)


def test_hot_cell_is_read_from_coverage_not_values():
    W = np.zeros((6, 4))
    W[:, 0] = 1  # covered by every query, small coefficients
    W[0, 3] = 50.0  # one query with a huge coefficient elsewhere
    W[1:, 1] = np.arange(1, 6)
    parts = divide_workload(sp.csr_matrix(W), rng=1)
    assert all(W[p.rows, 0].all() for p in parts)  # every part still built around cell 0


def test_g_changes_the_first_part_size():
    W = sp.csr_matrix(example_workload())
    assert [p.rows.size for p in divide_workload(W, g=0.0)][:1] == [3]
    # g = 4: |W_1| = 4 takes every hot query (Delta 4); sqrt(16) + sqrt(4) > sqrt(32): no division
    assert [p.rows.size for p in divide_workload(W, g=4.0)] == [8]


def test_cli_options(tmp_path, capsys):
    np.save(tmp_path / "W.npy", example_workload())
    out = tmp_path / "wd.npz"
    args = ["-q", "solve", "--workload", f"file:{tmp_path / 'W.npy'}", "--privacy", "pure", "--method", "workload-division"]
    assert main(args + ["--option", "g=1.5", "--out", str(out)]) == 0
    st = read_strategy(out)
    assert st.meta["method"] == "workload-division" and st.meta["g"] == 1.5
    assert main(["-q", "solve", "--workload", "all-range:16", "--privacy", "pure", "--method", "workload-division", "--out", str(tmp_path / "r.csv")]) == 0
    assert main(args + ["--option", "split=half"]) == 2
    assert "split" in capsys.readouterr().err
    assert main(args + ["--option", "g=abc"]) == 2


def test_all_zero_workload_is_refused():
    from strategy_opt.exceptions import InputError

    with pytest.raises(InputError, match="all zeros"):
        solve(from_matrix(np.zeros((2, 3))), privacy="pure", method="workload-division")


@pytest.mark.parametrize("method", ["workload-division", "orthogonal"])
@pytest.mark.parametrize("seed", [1e20, 1.0, -1, True, "3"])
def test_seed_option_is_one_rule_for_both_seed_systems(method, seed):
    """An outside audit: workload-division took seed=1e20 (stored as the integer 10^20) while orthogonal refused
    seed=1.0. Both now take only integers >= 0."""
    from strategy_opt.api import solve
    from strategy_opt.exceptions import InputError

    with pytest.raises(InputError, match="seed must be a non-negative integer"):
        solve("prefix:8", privacy="pure", method=method, seed=seed)
    assert solve("prefix:8", privacy="pure", method=method, seed=2**40).meta["seed"] == 2**40
