"""The Orthogonal Mechanism (OM) as a strategy method.

Source: D. Huang, S. Han, X. Li, P. S. Yu, "Orthogonal Mechanism for Answering
Batch Queries with Differential Privacy" (seed ``000_*``), Algorithms 1-3,
Theorems 3-5. Extraction, errors and reference values: ``notes/om-wd-bayes.md``
Sec. 1.

OM is a matrix-mechanism instance: the strategy is the set of "orthogonal"
block queries W~ (Algorithm 2), Laplace noise is calibrated to its L1
sensitivity ``S(W~) = max over blocks`` (parallel composition, Prop. 2), and
the answers are ``B (W~ x + noise)`` with ``W = B W~`` (Algorithm 1), which is
exactly the least-squares reconstruction ``B = W W~^+`` of the executor
(W~ has full row rank). Expected total squared error ``2 trace(B B^T) S(W~)^2 /
eps^2`` (Theorem 5) is the compiler's ``E_1`` times ``2/eps^2``.

What Algorithm 2 computes (notes Sec. 1.3): the blocks D~_j are the classes of
cells with the same *support pattern* over the selected independent queries,
taken in decreasing pattern size. We group cells by hashing their patterns
(O(nnz)) instead of the kappa-counting loop; the partition is the same.

What OM reduces to
------------------
* When every cell has its own support pattern -- almost surely for the paper's
  random continuous workloads W_tau, and for every full-rank 0/1 workload such
  as ranges -- each block is one cell and OM **is the identity strategy**
  (permuted). The paper's Example 1 is this case.
* When some cells are never told apart by any query, they are merged: OM is
  then the identity strategy on the *coarsened* cells (one normalised row per
  rank-1 block), e.g. the census example (OM 16/eps^2, identity 32, LM 48).
* Blocks of rank > 1 get a basis of independent restricted queries.

Deviations from the paper, and why
-----------------------------------
1. Algorithm 3 (B from rank-1 tests) is replaced by least squares
   ``B = W W~^+``, done by the executor's reconstruction: Algorithm 3 leaves B
   wrong whenever a block holds several queries (a restricted query is then a
   combination of several block rows, not a multiple of one). Here every block
   is checked: ``W[:, G] = B_G W~_G`` to round-off, else `SolverError`.
2. "Normalized" (Alg. 2 line 17) is unspecified. Each block is scaled to L1
   sensitivity 1, the optimal per-block scaling since ``S(W~)`` is the
   maximum over blocks (notes Sec. 1.3 item 3). Rows inside a block of rank > 1
   are not re-weighted (that would be a small matrix-mechanism sub-problem).
3. Line 1 picks r independent queries "randomly": rows are visited in a
   random order (option ``seed``, default 0, so strategies are reproducible)
   and kept when independent of those kept so far. The choice changes the
   support patterns, hence possibly the blocks.
4. Inside a block the basis rows are chosen by column-pivoted QR (well
   conditioned) instead of arbitrarily.
5. Cells no query touches are dropped first (lines 9-11 are undefined for
   them); the strategy has zero columns there, which the workload never needs.
6. The paper assumes m <= n; any m is accepted (the row selection stops once
   the selected rows span the whole domain).

Options: ``seed`` (int, default 0): order in which independent queries are
picked. Privacy: pure (Laplace) only, as in the paper.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from ..compiler import compile_strategy
from ..defaults import MAX_DENSE_N
from ..exceptions import InputError, SolverError
from ..problem import Problem, is_seed
from ..progress import Progress
from ..registry import register_method

__all__ = ["orthogonal", "om_blocks", "independent_rows"]

log = logging.getLogger("strategy_opt")

#: Relative tolerance for "entry is non-zero" and for linear independence.
_RTOL = 1e-10
#: Rows projected at once in the independent-row selection.
_CHUNK = 256


def _workload_matrix(workload) -> sp.csr_matrix:
    try:
        return sp.csr_matrix(workload.matrix(), dtype=float)
    except InputError as exc:
        raise InputError(f"orthogonal needs the explicit workload matrix: {exc}") from None


def independent_rows(W: sp.csr_matrix, rng: np.random.Generator) -> np.ndarray:
    """Indices of a maximal set of linearly independent rows of W, visited in random order.

    Algorithm 2, line 1 (r = rank(W) independent queries chosen at random).
    Rows are taken in a random permutation and kept when their residual after
    projection on the kept rows exceeds ``_RTOL`` times their norm (classical
    Gram-Schmidt, applied twice). Stops early once n rows are kept.

    Parameters
    ----------
    W : sparse matrix (m, n)
    rng : numpy Generator

    Returns
    -------
    ndarray of int
        Row indices, in the order they were kept.

    Examples
    --------
    Rows 0 and 1 are parallel, so two of the three rows are kept (which of the pair depends on the order):

    >>> W = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    >>> len(independent_rows(W, np.random.default_rng(0)))
    2
    """
    m, n = W.shape
    order = rng.permutation(m)
    basis = np.zeros((n, min(m, n)))
    kept: list[int] = []
    progress = Progress()
    for start in range(0, m, _CHUNK):
        if len(kept) == n:
            break
        progress("orthogonal: %d of %d queries visited, %d independent so far", start, m, len(kept))
        idx = order[start : start + _CHUNK]
        C = W[idx].toarray()
        norms = np.linalg.norm(C, axis=1)
        k_old = len(kept)
        Q_old = basis[:, :k_old]
        for _ in range(2):
            C -= (C @ Q_old) @ Q_old.T
        for row, i, norm in zip(C, idx, norms):
            if len(kept) == n:
                break
            Q_new = basis[:, k_old : len(kept)]
            r = row
            for _ in range(2):
                r = r - Q_new @ (Q_new.T @ r)
            nr = np.linalg.norm(r)
            if nr > _RTOL * norm:
                basis[:, len(kept)] = r / nr
                kept.append(int(i))
    return np.asarray(kept, dtype=int)


def _block_basis(C: np.ndarray) -> np.ndarray:
    """Independent rows of C (column-pivoted QR of C^T), scaled to L1 sensitivity 1."""
    _, R, piv = la.qr(C.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > _RTOL * d[0])) if d.size and d[0] > 0 else 0
    rows = C[np.sort(piv[:rank])]
    return rows / np.abs(rows).sum(axis=0).max()


def om_blocks(W: sp.csr_matrix, rng: np.random.Generator) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """The orthogonal query blocks of Algorithm 2.

    Parameters
    ----------
    W : sparse matrix (m, n)
        The workload.
    rng : numpy Generator
        Order in which independent queries are picked (line 1).

    Returns
    -------
    blocks : list of (cells, rows)
        ``cells``: the block's cell indices D~_j; ``rows``: its tau_j x |cells|
        independent, normalised queries (L1 sensitivity 1), in the paper's
        order (decreasing pattern size, then first cell).
    r : int
        Number of independent queries selected (rank of W).

    Examples
    --------
    >>> W = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    >>> blocks, r = om_blocks(W, np.random.default_rng(0))
    >>> r, [(cells.tolist(), rows.tolist()) for cells, rows in blocks]  # cell 2 is never queried
    (2, [([0], [[1.0]]), ([1], [[1.0]])])
    """
    sel = independent_rows(W, rng)
    Wh = sp.csr_matrix(W[sel])
    # an entry is rounding noise relative to its own query, not to the largest entry of W
    scale = np.repeat(abs(Wh).max(axis=1).toarray().ravel(), np.diff(Wh.indptr))
    Wh.data[np.abs(Wh.data) <= _RTOL * scale] = 0.0
    Wh.eliminate_zeros()
    Wc = Wh.tocsc()
    Wc.sort_indices()
    groups: dict[bytes, list[int]] = {}
    patterns: dict[bytes, np.ndarray] = {}
    for j in range(W.shape[1]):
        pat = Wc.indices[Wc.indptr[j] : Wc.indptr[j + 1]]
        if pat.size:
            key = pat.tobytes()
            groups.setdefault(key, []).append(j)
            patterns.setdefault(key, pat.copy())
    keys = sorted(groups, key=lambda k: (-patterns[k].size, groups[k][0]))
    blocks = []
    for key in keys:
        cells = np.asarray(groups[key], dtype=int)
        C = Wh[patterns[key]][:, cells].toarray()
        blocks.append((cells, _block_basis(C)))
    return blocks, int(sel.size)


def _assemble(blocks, n: int) -> sp.csr_matrix:
    rows, cols, vals = [], [], []
    r0 = 0
    for cells, B in blocks:
        t, k = B.shape
        rows.append(np.repeat(np.arange(r0, r0 + t), k))
        cols.append(np.tile(cells, t))
        vals.append(B.ravel())
        r0 += t
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, n))


def _check_decomposition(W: sp.csr_matrix, blocks) -> float:
    """Largest relative residual of a query under ``W[:, G] = B_G W~_G`` (Theorem 4 with LS B).

    Each query's residual, summed over the blocks, is measured against that
    query's own norm, so a small query cannot hide behind large ones.
    """
    Wc = W.tocsc()
    Wc.sort_indices()
    residual = np.zeros(W.shape[0])
    for cells, B in blocks:
        if B.shape[0] == cells.size:  # a square (invertible) basis reproduces any W[:, G]
            continue
        cols = [slice(Wc.indptr[j], Wc.indptr[j + 1]) for j in cells]
        rows = np.unique(np.concatenate([Wc.indices[c] for c in cols]))
        WG = np.zeros((rows.size, cells.size))  # W[:, G] on the queries that touch G
        for k, c in enumerate(cols):
            WG[np.searchsorted(rows, Wc.indices[c]), k] = Wc.data[c]
        BG = WG @ np.linalg.pinv(B)
        residual[rows] += np.sum((BG @ B - WG) ** 2, axis=1)
    norms = np.asarray(W.multiply(W).sum(axis=1)).ravel()
    share = np.divide(residual, norms, out=np.zeros_like(residual), where=norms > 0)
    return float(np.sqrt(share.max())) if share.size else 0.0


@register_method(
    "orthogonal",
    options=("seed",),
    privacy=("pure",),
    source="Huang, Han, Li, Yu: Orthogonal Mechanism, Algs. 1-2 (B by least squares)",
    summary="OM: cells grouped by query-support pattern, one normalised basis per block",
)
def orthogonal(problem: Problem):
    """The Orthogonal Mechanism's strategy W~ (see the module docstring for deviations).

    Parameters
    ----------
    problem : Problem
        ``problem.options['seed']`` (int >= 0, default 0) orders the random
        choice of independent queries.

    Returns
    -------
    Strategy
        Sparse W~ (s x n, full row rank, L1 sensitivity 1) followed by the
        compiler's eps-DP column-completion rows (``meta['completion_rows']``;
        Li 2013, Sec. 3.4.3: never raises the error, and absent when every
        column of W~ already sums to 1), with meta fields ``om_blocks``,
        ``om_rank1_blocks``, ``om_largest_block``, ``om_independent_queries``,
        ``om_untouched_cells``, ``om_reduces_to``.

    Examples
    --------
    >>> import numpy as np
    >>> from strategy_opt.api import solve
    >>> s = solve(np.array([[1., 1, 0], [0, 0, 2]]), privacy="pure", method="orthogonal")
    >>> s.dense().tolist(), s.meta["om_reduces_to"]
    ([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], 'identity on coarsened cells')
    """
    seed = problem.option("seed", 0, is_seed, "a non-negative integer", "orthogonal")
    n = problem.workload.n
    if n > MAX_DENSE_N:  # before the block search (a minute at 65536 cells), not after it
        raise InputError(f"orthogonal works on at most {MAX_DENSE_N:,} cells (its strategy is analysed with dense n x n matrices); workload {problem.workload.spec!r} has {n:,} cells")
    t0 = time.perf_counter()
    A, extra = om_strategy(problem.workload, int(seed))
    return compile_strategy(A, problem, "orthogonal", status="heuristic", solve_seconds=time.perf_counter() - t0, extra=extra)


def om_strategy(workload, seed: int = 0) -> tuple[sp.csr_matrix, dict]:
    """The OM strategy matrix (before column completion) and its facts, for `orthogonal` and ``auto-pure``.

    Parameters
    ----------
    workload : Workload
        Its explicit matrix is formed.
    seed : int, default 0
        Order in which independent queries are picked.

    Returns
    -------
    (scipy.sparse.csr_matrix, dict)
        The strategy and its facts (``om_blocks``, ``om_reduces_to``, ...).

    Raises
    ------
    InputError
        An all-zero workload, or one whose matrix is too large.
    SolverError
        When the decomposition ``W = B W~`` fails numerically.

    Examples
    --------
    Two queries on disjoint cells: each is its own block, the identity on the coarsened cells {0, 1} and {2}:

    >>> from strategy_opt.workload import from_matrix
    >>> A, facts = om_strategy(from_matrix([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    >>> A.toarray().tolist(), facts["om_blocks"], facts["om_reduces_to"]
    ([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], 2, 'identity on coarsened cells')
    """
    t0 = time.perf_counter()
    W = _workload_matrix(workload)
    if W.nnz == 0:
        raise InputError("orthogonal: the workload matrix is all zeros")
    log.info("orthogonal: choosing independent queries of the %d x %d workload (Algorithm 2)", *W.shape)
    blocks, r = om_blocks(W, np.random.default_rng(seed))
    residual = _check_decomposition(W, blocks)
    if residual > 1e-6:
        raise SolverError(
            f"orthogonal: W = B W~ fails by {residual:.3g} (relative); the workload is numerically "
            "ill-conditioned for OM -- try another seed or the identity method"
        )
    A = _assemble(blocks, W.shape[1])
    seconds = time.perf_counter() - t0
    sizes = np.array([cells.size for cells, _ in blocks])
    ranks = np.array([B.shape[0] for _, B in blocks])
    if np.all(ranks == 1):
        reduces = "identity" if np.all(sizes == 1) else "identity on coarsened cells"
    else:
        reduces = "block bases"
    log.info("orthogonal: %d blocks (%d of rank 1) from %d independent queries in %.3g s", len(blocks), int(np.sum(ranks == 1)), r, seconds)
    extra = {
        "om_blocks": len(blocks),
        "om_rank1_blocks": int(np.sum(ranks == 1)),
        "om_largest_block": int(sizes.max()),
        "om_independent_queries": r,
        "om_untouched_cells": int(W.shape[1] - sizes.sum()),
        "om_reduces_to": reduces,
        "om_decomposition_residual": residual,
        "seed": seed,
    }
    return A, extra
