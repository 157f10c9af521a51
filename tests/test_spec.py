"""SPEC parsing: every form of CLI.md, and clear errors for malformed SPECs."""

import numpy as np
import pytest

from strategy_opt.exceptions import InputError
from strategy_opt.spec import parse_spec


@pytest.mark.parametrize(
    "spec, shape",
    [
        ("identity:5", (5, 5)),
        ("total:7", (1, 7)),
        ("prefix:4", (4, 4)),
        ("all-range:4", (10, 4)),
        ("random-range:100:20", (20, 100)),
        ("random-range:100:20:9", (20, 100)),
        ("marginals:2x3x4:1", (9, 24)),
        ("prefix:4*all-range:3", (24, 12)),
        ("identity:6+total:6", (7, 6)),
        ("(identity:2+total:2)*prefix:3", (9, 6)),
    ],
)
def test_shapes(spec, shape):
    assert parse_spec(spec).shape == shape


def test_union_binds_looser_than_kronecker():
    W = parse_spec("identity:2*identity:3+total:6")
    assert W.m == 7
    np.testing.assert_allclose(W.gram(), np.eye(6) + np.ones((6, 6)))


def test_file_spec(tmp_path):
    W = np.array([[1.0, 0, 1], [0, 2, 0]])
    f = tmp_path / "w.npy"
    np.save(f, W)
    parsed = parse_spec(f"file:{f}")
    np.testing.assert_allclose(parsed.matrix().toarray(), W)
    both = parse_spec(f"file:{f}+total:3")
    assert both.m == 3


@pytest.mark.parametrize(
    "spec",
    ["", "foo:3", "all-range:", "all-range:-3", "all-range:0", "all-range:3.5", "random-range:10", "marginals:2x2", "prefix:3+", "(prefix:3", "prefix:3)", "identity:3+identity:4", "file:/nonexistent.npy"],
)
def test_malformed(spec):
    with pytest.raises(InputError):
        parse_spec(spec)
