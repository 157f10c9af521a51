"""Per-query weights of the ``weighted`` and ``relative`` objectives: option ``weights``, parsed, checked and recorded.

The option is one positive weight per query, given as a sequence, a string of
numbers (``weights=1,2,0.5`` or ``[1, 2, 0.5]``) or a ``.npy`` file. `query_weights`
returns the validated vector (``relative`` gets ``1 / ||w_i||^2``) and
`weights_meta` what the strategy metadata records about it (the list up to
`WEIGHTS_INLINE_MAX` entries, count, SHA-256, file).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from .defaults import DECIMAL_PATTERN
from .exceptions import InputError, OptionError
from .matrix_files import read_npy
from .problem import Problem

__all__ = ["query_weights", "weights_meta", "check_weights_objective", "UNWEIGHTED_OBJECTIVES", "WEIGHTS_INLINE_MAX", "WEIGHTS_MAX"]


#: Up to this many query weights are written into the strategy metadata (above: digest, count and file only).
WEIGHTS_INLINE_MAX = 1000

#: Built-in objectives that take no user weights (``relative`` computes its own).
UNWEIGHTED_OBJECTIVES = ("total", "max", "relative")
_WEIGHT_FORMS = "one positive number per query: weights=1,2,0.5, a list [1, 2, 0.5] or a .npy file"


#: Largest weight, and largest ratio of two weights, option ``weights`` accepts (beyond, float64 overflows in the weighted Gram).
WEIGHTS_MAX = 1e150


def check_weights_objective(problem: Problem) -> None:
    """Refuse option ``weights`` with a built-in objective that takes none (total, max, relative).

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    None

    Raises
    ------
    OptionError
        When ``weights`` is given and the objective is one of `UNWEIGHTED_OBJECTIVES`.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> check_weights_objective(Problem(prefix(3), objective="weighted", options={"weights": [1, 1, 2]}))
    >>> check_weights_objective(Problem(prefix(3), objective="total", options={"weights": [1, 1, 2]}))
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.OptionError: option weights applies to objective 'weighted' (or a user objective), not 'total'
    """
    if "weights" in problem.options and problem.objective in UNWEIGHTED_OBJECTIVES:
        raise OptionError(f"option weights applies to objective 'weighted' (or a user objective), not {problem.objective!r}")


def _parse_weight_list(text: str) -> list[float]:
    """Numbers separated by commas, semicolons or blanks, optionally in one pair of brackets; `OptionError` otherwise.

    >>> _parse_weight_list("[1, 2; 0.5]")
    [1.0, 2.0, 0.5]
    """
    body = text.strip()
    opened, closed = body[:1] in "[(" and body != "", body[-1:] in "])" and body != ""
    if opened != closed or (opened and body[0] + body[-1] not in ("[]", "()")):
        raise OptionError(f"option weights={text:.60}: unbalanced brackets; expected {_WEIGHT_FORMS}")
    if opened:
        body = body[1:-1].strip()
    tokens = re.split(r"\s*[,;]\s*|\s+", body)
    try:
        # decimals (and inf/nan, which the value check below names); refuses 1_0 and nested brackets
        if any(not re.fullmatch(rf"{DECIMAL_PATTERN}|[+-]?(?:inf|infinity|nan)", t, re.IGNORECASE) for t in tokens):
            raise ValueError
        return [float(t) for t in tokens]
    except ValueError:
        raise OptionError(f"option weights={text:.60}: expected {_WEIGHT_FORMS} (an empty or non-numeric entry)") from None


def query_weights(problem: Problem) -> np.ndarray | None:
    """The ``weights`` option as a validated vector of one positive weight per query.

    Accepts a sequence, a string of numbers separated by commas, semicolons or
    spaces, or a path to a ``.npy`` file. None when the option is absent and the
    objective needs none; ``relative`` gets ``1 / ||w_i||^2`` (zero for empty
    queries). Refused: weights for ``total``/``max``/``relative`` (they would be
    ignored or change the objective), ``weighted`` without weights, and zero
    weights (the strategy must still answer that query; give it a small weight).

    Parameters
    ----------
    problem : Problem
        Its ``objective``, ``workload`` and option ``weights``.

    Returns
    -------
    ndarray of float, shape (m,), or None

    Raises
    ------
    OptionError
        For any refused or malformed ``weights``.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> query_weights(Problem(prefix(3), objective="weighted", options={"weights": "1, 2, 0.5"})).tolist()
    [1.0, 2.0, 0.5]

    Prefix query i sums i + 1 cells, so ``relative`` weighs it ``1 / (i + 1)``:

    >>> np.round(query_weights(Problem(prefix(3), objective="relative")), 6).tolist()
    [1.0, 0.5, 0.333333]
    >>> query_weights(Problem(prefix(3))) is None
    True
    """
    W = problem.workload
    raw = problem.options.get("weights")
    check_weights_objective(problem)
    if raw is None:
        if problem.objective == "weighted":
            raise OptionError(f"objective 'weighted' needs option weights ({_WEIGHT_FORMS})")
        if problem.objective == "relative":
            norms = np.asarray(W.matrix().multiply(W.matrix()).sum(axis=1)).ravel()
            return np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        return None
    if isinstance(raw, (str, Path)):
        text = str(raw).strip()
        if text.endswith(".npy"):
            path = Path(text).expanduser()
            if not path.is_file():
                raise OptionError(f"option weights={text}: no such .npy file")
            try:
                raw = read_npy(path, "option weights")
            except InputError as exc:
                raise OptionError(f"option weights={path}: {exc}") from None
            if raw.ndim != 1:
                raise OptionError(f"option weights={path}: a vector of one weight per query is needed, got an array of shape {raw.shape}")
        else:
            raw = _parse_weight_list(text)
    try:
        w = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise OptionError(f"option weights must be numbers ({_WEIGHT_FORMS}), got {raw!r:.60}") from None
    if w.ndim > 1:
        raise OptionError(f"option weights must be a flat list of numbers ({_WEIGHT_FORMS}), got nested lists of shape {w.shape}")
    w = w.ravel()
    if w.shape != (W.m,):
        raise OptionError(f"option weights has {w.size} entries but the workload has {W.m} queries; give one weight per query")
    bad = np.flatnonzero(~np.isfinite(w) | (w <= 0))
    if bad.size:
        raise OptionError(
            f"option weights must be finite and positive, got {float(w[bad[0]])!r} for query {bad[0]} (0-based; "
            f"{bad.size} such {'entry' if bad.size == 1 else 'entries'})"
            " (a query of weight 0 must still be answered by the strategy: give it a small weight)"
        )
    if w.max() > WEIGHTS_MAX or w.max() / w.min() > WEIGHTS_MAX:
        raise OptionError(
            f"option weights span {w.min():.3g} to {w.max():.3g}: beyond {WEIGHTS_MAX:.0e} (largest, or largest over smallest) the "
            "weighted Gram matrix and its error overflow float64; rescale the weights (only their ratios change the strategy)"
        )
    return w


def weights_meta(problem: Problem, weights: np.ndarray | None) -> dict:
    """What the strategy metadata records about the ``weights`` option (empty when it was not given).

    ``weights`` (the list, when at most `WEIGHTS_INLINE_MAX`), ``weights_count``,
    ``weights_sha256`` (of the float64 little-endian vector, so a file's weights
    can be checked against it) and ``weights_file`` (when given as a ``.npy`` path: its absolute path).

    Examples
    --------
    >>> from strategy_opt.api import solve
    >>> s = solve("prefix:3", method="minerror-l2", objective="weighted", weights=[1, 2, 3])
    >>> s.meta["weights"], s.meta["weights_count"], len(s.meta["weights_sha256"])
    ([1.0, 2.0, 3.0], 3, 64)
    """
    raw = problem.options.get("weights")
    if raw is None or weights is None:
        return {}
    w = np.ascontiguousarray(weights, dtype="<f8")
    out = {
        "weights": [float(v) for v in w] if w.size <= WEIGHTS_INLINE_MAX else None,
        "weights_count": int(w.size),
        "weights_sha256": hashlib.sha256(w.tobytes()).hexdigest(),
    }
    if isinstance(raw, (str, Path)) and str(raw).strip().endswith(".npy"):
        out["weights_file"] = str(Path(str(raw).strip()).absolute())  # absolute, as file: workloads are recorded
    if out["weights"] is None:
        out["weights_omitted"] = f"{w.size} weights (more than {WEIGHTS_INLINE_MAX}): see weights_sha256 and weights_file"
    return out
