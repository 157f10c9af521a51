"""Every epsilon-DP strategy file (issue 4): support, stated lower bound, E_1 recomputed from the file.

The files are written through the CLI and read back with plain NumPy / SciPy
(not strategy_opt.io), and E_1 = ||A||_1^2 trace(W^T W (A^T A)^+) is recomputed
with a dense pseudo-inverse, independently of the library's error code.
"""

import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from strategy_opt.cli import main
from strategy_opt.spec import parse_spec

CASES = [
    ("identity", "random-range:12:10:4", []),
    ("hierarchical", "random-range:12:10:4", []),
    ("wavelet", "prefix:12", []),
    ("greedy-h", "random-range:12:10:4", []),
    ("svd-approx", "random-range:12:10:4", []),
    ("p-identity", "all-range:20", []),
    ("auto", "prefix:20", []),
    ("l1-weighting", "all-range:16", ["--option", "basis=wavelet"]),
    ("l1-weighting", "random-range:12:10:4", ["--option", "basis=eigen"]),
    ("l1-weighting", "random-range:12:10:4", ["--option", "basis=hierarchical"]),
    ("l1-weighting", "marginals:2x3x2:2", ["--option", "basis=fourier"]),
    ("fourier", "marginals:2x3x2:2", []),
    ("minerror-l1", "prefix:6", ["--option", "iterations=2"]),
    ("orthogonal", "random-range:12:10:4", []),
    ("workload-division", "random-range:12:10:4", []),
]


def _load(path):
    """Matrix and metadata of a strategy file, by plain NumPy / SciPy."""
    if path.suffix == ".mtx":
        with open(path) as fh:
            fh.readline()
            meta = json.loads(fh.readline()[1:].strip())
        A = scipy.io.mmread(str(path))
        return (A.toarray() if sp.issparse(A) else np.asarray(A)), meta
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if "A" in z:
            return np.asarray(z["A"]), meta
    return sp.load_npz(path).toarray(), meta


@pytest.mark.parametrize(("method", "spec", "extra"), CASES, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("fmt", ["npz", "mtx"])
def test_pure_strategy_file_is_supported_bounded_and_exact(tmp_path, method, spec, extra, fmt, capsys):
    out = tmp_path / f"s.{fmt}"
    assert main(["solve", "--workload", spec, "--privacy", "pure", "--method", method, "--out", str(out), "-q", *extra]) == 0
    capsys.readouterr()
    A, meta = _load(out)
    W = parse_spec(spec).matrix()
    W = W.toarray() if sp.issparse(W) else np.asarray(W)
    Ap = np.linalg.pinv(A)
    assert np.linalg.norm(W @ Ap @ A - W) <= 1e-8 * np.linalg.norm(W)  # A supports W
    e1 = np.abs(A).sum(axis=0).max() ** 2 * np.linalg.norm(W @ Ap, "fro") ** 2
    assert meta["privacy"] == "pure"
    assert meta["unit_total_squared_error"] == pytest.approx(e1, rel=1e-7)
    assert meta["lower_bound_kind"] and 0 < meta["lower_bound"] <= e1 * (1 + 1e-9)
