"""The README's example problem file and solver profile load as written and solve (the file formats' documentation)."""

import re
from pathlib import Path

from strategy_opt.api import solve
from strategy_opt.problem import load_problem
from strategy_opt.solvers import load_profile

README = Path(__file__).resolve().parents[1] / "README.md"


def _toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_problem_file_and_profile_load_and_solve(tmp_path):
    problem_text, profile_text = _toml_blocks()
    (tmp_path / "p.toml").write_text(problem_text)
    problem, method = load_problem(tmp_path / "p.toml")
    assert (problem.workload.spec, problem.privacy, method, problem.objective) == ("all-range:2048", "approx", "eigen-design", "total")
    assert problem.options == {"basis": "eigen", "separation": True}
    (tmp_path / "s.toml").write_text(profile_text)
    profile = load_profile(tmp_path / "s.toml")
    assert (profile.backend, profile.solver, profile.max_iters, profile.time_limit, profile.tol) == ("cvxpy", "SCS", 100000, 600.0, 1e-6)
    # the same problem on a smaller domain, as the file gives it otherwise: eigen-design with separation
    (tmp_path / "small.toml").write_text(problem_text.replace('"all-range:2048"', '"all-range:64"'))
    small, method = load_problem(tmp_path / "small.toml")
    s = solve(small.workload, privacy=small.privacy, method=method, **small.options)
    assert s.meta["method"] == "eigen-design" and s.meta["unit_total_squared_error"] >= s.meta["lower_bound"]
