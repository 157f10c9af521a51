"""DAWA end to end (strategy_opt.programs.dawa): calibration, edge cases, 2-D, CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from strategy_opt.exceptions import InputError
from strategy_opt.executor import measure
from strategy_opt.partition import bucket_counts, expand
from strategy_opt.privacy import ApproxDP, PureDP
from strategy_opt.programs.dawa import dawa, dawa_estimate, random_rectangles, rectangle_workload
from strategy_opt.programs.greedy_h import MappedWorkload, greedy_hierarchy
from strategy_opt.registry import get_release
from strategy_opt.spec import parse_spec
from strategy_opt.workload import from_matrix, identity, kronecker, prefix, random_range


def sparse_histogram(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    x[rng.choice(n, n // 32, replace=False)] = rng.integers(100, 2000, n // 32)
    return x


def test_registered():
    info = get_release("dawa")
    assert info.privacy == ("pure",) and "PVLDB 2014" in info.source


def test_stage_two_error_matches_its_prediction():
    """Over many seeds, the stage-2 squared error on the mapped workload is (2/eps2^2) tr(G_hat M^-1)."""
    W = random_range(64, 30, 4)
    edges = np.array([0, 5, 6, 20, 21, 22, 40, 64])
    x = np.random.default_rng(1).integers(0, 50, 64).astype(float)
    tree = greedy_hierarchy(MappedWorkload(W, np.arange(64), edges), 2)
    A = tree.strategy()
    s_true = bucket_counts(x, edges)
    eps2 = 0.5
    errs = []
    for seed in range(4000):
        y, scale = measure(A, s_true, PureDP(eps2), rng=seed)
        assert scale == pytest.approx(1 / eps2)
        errs.append(np.sum((W.matvec(expand(tree.least_squares(y) - s_true, edges))) ** 2))
    predicted = 2 / eps2**2 * tree.unit_error
    assert np.mean(errs) == pytest.approx(predicted, rel=0.06)


def test_reproducible_by_seed():
    W = random_range(256, 100, 1)
    x = sparse_histogram(256)
    a = dawa(x, W, PureDP(0.5), rng=11)
    b = dawa(x, W, PureDP(0.5), rng=11)
    c = dawa(x, W, PureDP(0.5), rng=12)
    assert np.array_equal(a.answers, b.answers) and not np.array_equal(a.answers, c.answers)
    assert a.lower is None and a.noise_scale == pytest.approx(1 / (0.75 * 0.5))
    np.testing.assert_allclose(a.answers, W.matvec(a.x_hat))


def test_explicit_workload_same_release_on_both_routes(monkeypatch):
    """The same ranges given as a matrix (sparse or dense) give DAWA's release of the interval workload, by seed,
    whether the mapped workload goes through the matrix route (chosen) or the dense Gram (forced)."""
    import strategy_opt.programs.greedy_h as gh

    W = random_range(512, 200, 3)
    x = sparse_histogram(512, 1)
    ref = dawa_estimate(x, W, 0.5, rng=4)
    for M in (W.matrix(), W.matrix().toarray()):
        E = from_matrix(M)
        assert MappedWorkload._choose_route(E) == "matrix"
        got = dawa_estimate(x, E, 0.5, rng=4)
        np.testing.assert_array_equal(got.edges, ref.edges)
        np.testing.assert_allclose(got.x_hat, ref.x_hat, rtol=1e-9, atol=1e-9)
        assert E._gram is None  # the matrix route never forms the 512 x 512 Gram
        with monkeypatch.context() as mp:
            mp.setattr(gh.MappedWorkload, "_choose_route", staticmethod(lambda w: "gram"))
            forced = dawa_estimate(x, E, 0.5, rng=4)
        assert E._gram is not None
        np.testing.assert_array_equal(forced.edges, ref.edges)
        np.testing.assert_allclose(forced.hierarchy.weight, got.hierarchy.weight, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(forced.x_hat, got.x_hat, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(dawa(x, E, PureDP(0.5), rng=4).answers, W.matvec(got.x_hat), rtol=1e-9, atol=1e-6)


def test_file_range_workload_at_4096_takes_the_matrix_route(tmp_path):
    """Audit: a file: workload of 2000 random ranges on 4096 cells was sent through the dense 4096 x 4096 Gram
    because its non-zeros were unknown; they are counted now (2.8 M <= n^2/4), like random-range's."""
    import scipy.sparse as sp

    from strategy_opt.matrix_files import read_workload_file

    W = random_range(4096, 2000, 7)
    sp.save_npz(tmp_path / "W.npz", W.matrix())
    F = read_workload_file(tmp_path / "W.npz")
    assert F.nnz() == W.matrix().nnz
    assert MappedWorkload._choose_route(F) == MappedWorkload._choose_route(W) == "matrix"


def test_budget_split_and_options():
    x = sparse_histogram(128)
    W = prefix(128)
    r = dawa_estimate(x, W, 1.0, rng=0)
    assert (r.eps1, r.eps2) == pytest.approx((0.25, 0.75))
    r = dawa_estimate(x, W, 1.0, rng=0, rho=0.5, branching=4, noise="uniform")
    assert (r.eps1, r.eps2) == pytest.approx((0.5, 0.5)) and r.hierarchy.branching == 4
    r = dawa_estimate(x, W, 1.0, rng=0, rho=0.0)  # GreedyH alone
    assert r.buckets == 128 and r.eps2 == 1.0
    r = dawa_estimate(x, W, 1.0, rng=0, all_intervals=True)
    assert r.edges[-1] == 128
    for bad in ({"rho": 1.0}, {"rho": -0.1}, {"branching": 1}, {"noise": "none"}, {"all_intervals": "yes"}):
        with pytest.raises(InputError):
            dawa_estimate(x, W, 1.0, rng=0, **bad)
    with pytest.raises(InputError, match="unknown DAWA option"):
        dawa(x, W, PureDP(1.0), rng=0, ratio=0.5)
    with pytest.raises(InputError, match="pure"):
        dawa(x, W, ApproxDP(1.0, 1e-6), rng=0)


def test_edge_cases():
    W = random_range(64, 40, 0)
    # all zeros: a sensible, finite estimate whose answers are pure noise of the stage-2 scale
    r = dawa(np.zeros(64), W, PureDP(1.0), rng=0)
    assert np.all(np.isfinite(r.answers)) and np.abs(r.x_hat).sum() < 200
    # a single non-zero cell is found to within the noise
    x = np.zeros(64)
    x[17] = 10_000.0
    r = dawa_estimate(x, W, 1.0, rng=0)
    assert 17 in r.edges.tolist() and 18 in r.edges.tolist()
    assert r.x_hat[17] == pytest.approx(10_000, abs=50)
    # negative counts are refused before anything is measured
    with pytest.raises(InputError, match="negative"):
        dawa(np.r_[-1.0, np.ones(63)], W, PureDP(1.0), rng=0)
    with pytest.raises(InputError, match="cells"):
        dawa(np.ones(10), W, PureDP(1.0), rng=0)
    # one cell: stage 1 is skipped and the whole budget measures the cell
    r = dawa_estimate(np.array([42.0]), identity(1), 2.0, rng=0)
    assert r.eps2 == 2.0 and r.buckets == 1 and np.isfinite(r.x_hat[0])


def test_skewed_data_beats_identity():
    """On a sparse histogram DAWA's mean squared error on random ranges is far below identity's."""
    n, eps = 1024, 0.1
    W = random_range(n, 500, 3)
    x = sparse_histogram(n, 5)
    lengths = W.intervals[1] - W.intervals[0] + 1
    identity_mse = 2 / eps**2 * lengths.mean()
    mse = np.mean([np.mean((dawa(x, W, PureDP(eps), rng=s).answers - W.matvec(x)) ** 2) for s in range(5)])
    assert mse < 0.5 * identity_mse


def test_rectangles_workload():
    W = rectangle_workload((4, 5), [[0, 0], [1, 2], [3, 4]], [[3, 4], [2, 3], [3, 4]])
    x = np.arange(20.0)
    X = x.reshape(4, 5)
    np.testing.assert_allclose(W.matvec(x), [X.sum(), X[1:3, 2:4].sum(), X[3, 4]])
    R = random_rectangles((7, 9), 50, seed=2)
    assert R.shape == (50, 63) and R.domain == (7, 9)
    with pytest.raises(InputError):
        rectangle_workload((4, 5), [[2, 0]], [[1, 0]])


@pytest.mark.parametrize("shape", [(16, 16), (13, 7)])
def test_two_dimensional(shape):
    """2-D via the Hilbert order: buckets are runs along the curve; rectangles and Kronecker prefixes work."""
    rng = np.random.default_rng(0)
    n = shape[0] * shape[1]
    x = np.zeros(n)
    x[rng.choice(n, 8, replace=False)] = 500.0
    for W in (random_rectangles(shape, 60, 1), kronecker(prefix(shape[0]), prefix(shape[1]))):
        r = dawa_estimate(x, W, 1.0, rng=3)
        assert r.x_hat.shape == (n,) and np.all(np.isfinite(r.x_hat))
        assert np.abs(r.x_hat.sum() - x.sum()) < 200
        assert sorted(r.order.tolist()) == list(range(n))
        err = np.mean((W.matvec(r.x_hat) - W.matvec(x)) ** 2)
        ident = np.mean((W.matvec(x + rng.laplace(0, 1.0, n)) - W.matvec(x)) ** 2)
        assert err < 20 * ident  # same order as the Laplace mechanism at the full budget


def test_cli_release(tmp_path, capsys):
    """`strategy-opt release --method dawa`: runs as a console command, reproducible by seed, options checked."""
    import logging

    from strategy_opt.cli import main

    data = tmp_path / "x.npy"
    np.save(data, sparse_histogram(64))

    def args(out, *extra):
        return ["-q", "release", "--method", "dawa", "--data", str(data), "--workload", "random-range:64:20:1", "--epsilon", "1",
                "--seed", "5", "--option", "rho=0.25", "--option", "branching=2", *extra, "--out", str(tmp_path / out)]

    res = subprocess.run([sys.executable, "-m", "strategy_opt.cli", *args("a.npy")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    logger = logging.getLogger("strategy_opt")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        assert main(args("b.npy")) == 0
        assert main(args("c.npy", "--option", "bogus=1")) == 2
        assert "bogus" in capsys.readouterr().err
        assert main(args("d.npy", "--estimator", "nnls")) == 2  # DAWA reconstructs its own way: the flag is refused, not ignored
        assert "--estimator applies to strategy methods" in capsys.readouterr().err
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
    assert not (tmp_path / "c.npy").exists() and not (tmp_path / "d.npy").exists()
    a, b = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    assert a.shape == (20,) and np.array_equal(a, b)
    sidecar = json.loads((tmp_path / "a.npy.json").read_text())
    assert sidecar["estimator"] == "dawa" and sidecar["confidence"] is None
    facts = sidecar["method_facts"]  # effective options (typed and defaulted) and the budget split
    assert facts["rho"] == 0.25 and facts["noise"] == "bucket" and facts["all_intervals"] is False
    assert facts["epsilon_partition"] == pytest.approx(0.25) and facts["epsilon_measurement"] == pytest.approx(0.75)
    seeded = dawa_estimate(sparse_histogram(64), parse_spec("random-range:64:20:1"), 1.0, rng=5)
    assert facts["buckets"] == seeded.buckets


DPBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "dpbench"


@pytest.mark.slow
@pytest.mark.skipif(not (DPBENCH / "1D").is_dir(), reason="DPBench histograms not available")
def test_acceptance_dpbench_random_ranges():
    """Issue 6: 1-D n = 4096, 2000 random ranges, eps = 0.1, 10 seeds: DAWA's MSE below identity's
    on skewed/sparse histograms and never above 1.5x identity's (identity's MSE in closed form)."""
    W = random_range(4096, 2000, 0)
    lo, hi = W.intervals
    identity_mse = 2 / 0.1**2 * np.mean(hi - lo + 1)
    for f in sorted((DPBENCH / "1D").glob("*.npy")):
        x = np.load(f).astype(float)
        truth = W.matvec(x)
        mse = np.mean([np.mean((dawa(x, W, PureDP(0.1), rng=s).answers - truth) ** 2) for s in range(10)])
        assert mse <= 1.5 * identity_mse, f.name
        if np.mean(x == 0) >= 0.3:
            assert mse < identity_mse, f.name


def test_both_stages_use_the_chosen_sampler(monkeypatch):
    """Under sampler='opendp' the stage-1 costs and the stage-2 answers are drawn by OpenDP."""
    import strategy_opt.partition as partition
    import strategy_opt.samplers as samplers

    calls = []
    real_perturb, real_release = samplers.opendp_perturb, samplers.opendp_release
    monkeypatch.setattr(partition, "opendp_perturb", lambda v, s, **kw: calls.append("stage1") or real_perturb(v, s, **kw))
    monkeypatch.setattr(samplers, "opendp_release", lambda *a: calls.append("stage2") or real_release(*a))
    x = sparse_histogram(64)
    W = parse_spec("all-range:64")
    dawa_estimate(x, W, 1.0, sampler="opendp")
    assert calls == ["stage1", "stage2"]
    calls.clear()
    dawa_estimate(x, W, 1.0, rng=0)  # the default: seeded simulation, OpenDP not called
    assert calls == []


def test_answers_that_overflow_are_refused_not_released(tmp_path, capsys):
    # a workload of 1e308 entries: two such entries summed overflow, so W x_hat is infinite
    # for any positive estimate (the hierarchical/identity route refuses the same way)
    from strategy_opt.cli import main

    W = np.eye(8)
    W[0, :2] = 1e308
    np.save(tmp_path / "W.npy", W)
    np.save(tmp_path / "x.npy", np.full(8, 100.0))
    # refused up front, as run refuses it (`as_workload`): its squared entries leave float64
    with np.errstate(all="ignore"), pytest.raises(InputError, match=r"entries of workload 'matrix' are too large for float64"):
        assert not np.isfinite(W @ np.ones(8)).all()
        dawa(np.full(8, 100.0), from_matrix(W), PureDP(1.0), rng=0)
    code = main(["-q", "release", "--method", "dawa", "--data", str(tmp_path / "x.npy"), "--workload", f"file:{tmp_path / 'W.npy'}",
                 "--epsilon", "1", "--seed", "1", "--out", str(tmp_path / "a.npy")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "too large for float64" in err[0], err
    assert not (tmp_path / "a.npy").exists()
    assert not (tmp_path / "a.npy").exists()


def test_a_huge_count_is_refused_with_the_data_file_named(tmp_path, capsys):
    # the audit's case at a small size: one count of 1.7e308 among ones; DAWA used to write
    # non-finite answers with exit 0
    from strategy_opt.cli import main

    x = np.ones(64)
    x[20] = 1.7e308
    np.save(tmp_path / "huge.npy", x)
    for sampler in ("simulate", "opendp"):
        seed = ["--seed", "1"] if sampler == "simulate" else []
        code = main(["-q", "release", "--method", "dawa", "--data", str(tmp_path / "huge.npy"), "--workload", "random-range:64:20:5",
                     "--epsilon", "0.1", *seed, "--sampler", sampler, "--out", str(tmp_path / "b.npy")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith(f"strategy-opt: error: {tmp_path / 'huge.npy'}: "), err
        assert not (tmp_path / "b.npy").exists()


def test_file_workload_takes_the_grid_of_two_dimensional_data(tmp_path, capsys):
    """A rectangle workload given as a file, with 2-D data: released as 2-D (Hilbert order), as its Kronecker SPEC is.

    The same queries as ``prefix:8*prefix:8`` written to a file give the same seeded
    answers as the SPEC (independent route: the SPEC's own 2-D domain); flat data
    keep the flat (1-D) order.
    """
    from strategy_opt.cli import main

    x = sparse_histogram(64, seed=3).reshape(8, 8)
    np.save(tmp_path / "grid.npy", x)
    np.save(tmp_path / "flat.npy", x.ravel())
    W = kronecker(prefix(8), prefix(8)).matrix().toarray()
    np.save(tmp_path / "W.npy", W)

    def release(data, workload, out):
        assert main(["-q", "release", "--method", "dawa", "--data", str(tmp_path / data), "--workload", workload,
                     "--epsilon", "1", "--seed", "4", "--out", str(tmp_path / out)]) == 0
        return np.load(tmp_path / out), json.loads((tmp_path / f"{out}.json").read_text())["method_facts"]

    spec, spec_facts = release("grid.npy", "prefix:8*prefix:8", "s.npy")
    grid, grid_facts = release("grid.npy", f"file:{tmp_path / 'W.npy'}", "g.npy")
    flat, _ = release("flat.npy", f"file:{tmp_path / 'W.npy'}", "f.npy")
    np.testing.assert_allclose(grid, spec, rtol=1e-12, atol=1e-9)
    assert grid_facts["buckets"] == spec_facts["buckets"]
    assert not np.allclose(flat, grid)  # the 1-D order partitions (and so answers) differently


def test_release_of_a_large_file_workload_needs_no_dense_matrices(tmp_path):
    """256 x 256 cells, 300 rectangles from a file: DAWA and MWEM work on sparse data (refused before: 206 GB estimated)."""
    import scipy.sparse as sp

    from strategy_opt.resources import operation_bytes
    from strategy_opt.spec import _size, _tree
    from strategy_opt.cli import main

    rng = np.random.default_rng(0)
    rows, cols = [], []
    for k in range(300):
        (a, b), (c, d) = np.sort(rng.integers(0, 256, 2)), np.sort(rng.integers(0, 256, 2))
        cells = (np.arange(a, b + 1)[:, None] * 256 + np.arange(c, d + 1)[None, :]).ravel()
        rows.append(np.full(cells.size, k))
        cols.append(cells)
    W = sp.csr_matrix((np.ones(sum(map(len, cols))), (np.concatenate(rows), np.concatenate(cols))), shape=(300, 65536))
    sp.save_npz(tmp_path / "rect.npz", W)
    spec = f"file:{tmp_path / 'rect.npz'}"
    size = _size(_tree(spec), spec)
    assert operation_bytes(size, "release-data")[0] < 1e9 < operation_bytes(size, "release")[0]
    x = rng.poisson(3, (256, 256)).astype(float)
    np.save(tmp_path / "x.npy", x)
    for method in ("dawa", "mwem"):
        out = tmp_path / f"{method}.npy"
        assert main(["-q", "release", "--method", method, "--data", str(tmp_path / "x.npy"), "--workload", spec,
                     "--epsilon", "1e9", "--seed", "1", "--out", str(out)]) == 0
        if method == "dawa":  # at epsilon 1e9 DAWA's answers are exact
            np.testing.assert_allclose(np.load(out), W @ x.ravel(), rtol=1e-9)
        else:
            assert np.load(out).shape == (300,)


def test_a_workload_greedy_h_cannot_map_is_refused_before_stage_1(monkeypatch):
    # prefix:65536 has 2e9 non-zeros: greedy-h maps it through its 65536 x 65536 Gram, which is refused;
    # that refusal came after stage 1 had drawn its noise (6.8 s, 32095 buckets)
    import strategy_opt.programs.dawa as dawa_module
    from strategy_opt.spec import parse_spec

    def no_stage_1(*args, **kwargs):
        raise AssertionError("stage 1 ran")

    monkeypatch.setattr(dawa_module, "private_partition", no_stage_1)
    with pytest.raises(InputError, match=r"greedy-h maps the workload onto buckets.*65536x65536"):
        dawa_module.dawa_estimate(np.ones(65536), parse_spec("prefix:65536"), 0.1, rng=0)
