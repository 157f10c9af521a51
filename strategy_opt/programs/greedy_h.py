"""GreedyH: a workload-aware weighted hierarchy (DAWA stage 2).

Li 2013 (dissertation), Sec. 6.4, Program 6.4.1; Li, Hay, Miklau, Wang
(PVLDB 2014), Sec. 4, Algorithm 2 ("GreedyH" is the name later code gives it).

Given buckets ``b_1..b_k`` of an ordered domain, the workload W is mapped
onto the buckets (Prop. 6.2): ``W_hat = W P`` with ``P[i, j] = 1/|b_j|`` for
the cells i of bucket j, so that ``W expand(s) = W_hat s``. A tree Y of
interval queries over the buckets is built bottom-up with branching t (every
t consecutive nodes get a parent; a lone last node is carried up unchanged
instead of getting a one-child parent that would repeat its interval). Node
weights are normalised budgets ``c_q = eps_q / eps2`` with every leaf-to-root
path summing to 1, so the weighted strategy has L1 sensitivity 1 (Thm 6.3).

Greedy allocation, bottom-up (Sec. 6.4.3): at node q with children's blocks
``B^-1 = blockdiag(M_c^-1)``, ``u = B^-1 1``, ``d = 1^T u``, choose
``lambda_q in [0, 1)``, give q the weight lambda and scale its subtree by
``1 - lambda``. Sherman-Morrison gives (normalised budgets)::

    M_q^-1 = (B^-1 - beta u u^T) / (1-lambda)^2,   beta = lambda^2 / ((1-lambda)^2 + lambda^2 d)

and the objective (Eq. 6.11)::

    f(lambda) = (e - (mu a + (1-mu) a') beta) / (1-lambda)^2

with ``e = sum_c tr(W_c^T W_c M_c^-1)`` (the children's errors),
``a = ||W_hat_q u||^2``, ``a' = sum_c ||W_hat_c M_c^-1 1||^2`` and the decay
``mu = t^(-depth/2)`` (root depth 0; Eq. 6.10). With ``s = lambda/(1-lambda)``
the objective is ``(1+s)^2 (e + c s^2)/(1 + d s^2)``, ``c = e d - A``, whose
stationary points are the roots of ``c d s^4 + 2 c s^2 - A s + e``; we take
the best of those roots and the ends of ``[0, 0.99]`` (the sources only say
"numerically find"; the cap keeps every leaf measured, as in the reference
grid 0..0.99). The error carried up is the undecayed trace
``(e - a beta)/(1-lambda)^2`` (Program 6.4.1, line 4).

Nothing of size k x k is formed: ``M_q^-1 1 = gamma u`` with
``gamma = (1 - beta d)/(1-lambda)^2`` (derived from the update above), so one
length-k vector carries every ``M^-1 1`` of the current level, and the least
squares estimate ``s = M_root^-1 A^T y`` is applied level by level with the
same update in ``O(k log k)``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..compiler import compile_strategy
from ..defaults import DENSE_WORK_COPIES, MAX_DENSE_N, MAX_MATRIX_ENTRIES
from ..exceptions import InputError, OptionError
from ..partition import hilbert_order
from ..problem import Problem
from ..registry import register_method
from ..resources import format_bytes, require_memory
from ..workload import ExplicitWorkload, IntervalWorkload, Kronecker, Union, Workload, _require_dense

__all__ = ["MappedWorkload", "Hierarchy", "build_hierarchy", "greedy_hierarchy", "greedy_h", "greedy_h_matrix", "greedy_h_bytes", "check_size", "LAMBDA_MAX"]

log = logging.getLogger("strategy_opt")

#: Largest node weight lambda the greedy search may choose.
LAMBDA_MAX = 0.99

#: Ways of evaluating the mapped workload (see `MappedWorkload`).
ROUTES = ("gram", "matrix", "structured")

#: Domains up to this size map the workload through its dense Gram matrix.
GRAM_ROUTE_MAX_N = 4096

#: Entries of a dense block of columns processed at once (memory bound).
_BLOCK_ENTRIES = 4_000_000

#: Cost model of the structured route (seconds, measured with OpenBLAS on 2 cores): per cell pair and
#: factor of the pairwise sum, per multiply-add of the factor Grams applied to a dense run, per entry
#: of the prefix-sum application.
_COST_PAIR = 4e-8
_COST_APPLY = 2e-10
_COST_INTERVAL = 2e-8

#: Seconds between progress lines of the long loops (logger ``strategy_opt``, level info).
_LOG_SECONDS = 5.0


def check_branching(branching) -> int:
    """The branching factor as an int >= 2, else `InputError`.

    Parameters
    ----------
    branching : int
        The option's value (a bool is refused).

    Returns
    -------
    int

    Raises
    ------
    OptionError
        (an `InputError`) if it is not an integer >= 2.

    Examples
    --------
    >>> check_branching(3)
    3
    >>> check_branching(1)
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.OptionError: branching must be an integer >= 2, got 1
    """
    if isinstance(branching, bool) or not isinstance(branching, (int, np.integer)) or branching < 2:
        raise OptionError(f"branching must be an integer >= 2, got {branching!r}")
    return int(branching)


def _interval_factor(W: Workload) -> bool:
    return isinstance(W, IntervalWorkload) or (isinstance(W, Kronecker) and all(isinstance(f, IntervalWorkload) for f in W.factors))


def _matrix_nnz(W: Workload) -> float | None:
    """Non-zeros of W's matrix when known without building it (interval structure, explicit matrices), else None."""
    if isinstance(W, IntervalWorkload):
        lo, hi = W.intervals
        return float(np.sum(hi - lo + 1))
    if isinstance(W, ExplicitWorkload):
        return float(W.nnz())
    if isinstance(W, Kronecker):
        parts = [_matrix_nnz(f) for f in W.factors]
        return None if None in parts else float(np.prod(parts))
    if isinstance(W, Union):
        parts = [_matrix_nnz(p) for p in W.parts]
        return None if None in parts else float(sum(parts))
    return None


def _interval_entries(W: Workload) -> float:
    """Largest intermediate (entries per column) of `_apply_structured` on W."""
    if isinstance(W, IntervalWorkload):
        return float(max(W.m, W.n) + 1)
    sizes = [float(f.n) for f in W.factors]
    best = float(W.n)
    for axis, f in enumerate(W.factors):
        sizes[axis] = float(max(f.m, f.n) + 1)
        best = max(best, float(np.prod(sizes)))
        sizes[axis] = float(f.m)
    return best


def _dense_way(n: int, factor_grams, rows: float) -> tuple[float, bool]:
    """Cost (`_COST_*` seconds) of one dense column of a part, and whether its prefix sums (not its factor Grams) give it.

    Prefix sums need ``rows`` entries per column and are used only within `_BLOCK_ENTRIES`.
    """
    apply = _COST_APPLY * n * sum(G.shape[0] for G in factor_grams)
    interval = _COST_INTERVAL * rows if rows <= _BLOCK_ENTRIES else math.inf
    return min(apply, interval), interval < apply


def _apply_intervals(W: IntervalWorkload, X: np.ndarray) -> np.ndarray:
    """``W X`` along axis 0 of X by prefix sums."""
    lo, hi = W.intervals
    cs = np.concatenate([np.zeros((1,) + X.shape[1:]), np.cumsum(X, axis=0)])
    return cs[hi + 1] - cs[lo]


def _apply_structured(W: Workload, X: np.ndarray) -> np.ndarray:
    """``W X`` for an interval workload or a Kronecker product of them (X: n x c)."""
    if isinstance(W, IntervalWorkload):
        return _apply_intervals(W, X)
    c = X.shape[1]
    Y = X.reshape(tuple(W.domain) + (c,))
    for axis, f in enumerate(W.factors):
        Y = np.moveaxis(_apply_intervals(f, np.moveaxis(Y, axis, 0)), 0, axis)
    return Y.reshape(-1, c)


class MappedWorkload:
    """The workload mapped onto buckets, ``W_hat = W P`` (Li 2013, Prop. 6.2).

    Answers the only question the greedy allocation asks of the workload:
    ``||W_hat v||^2`` for vectors v supported on contiguous runs of buckets.
    Three routes, chosen by size:

    * ``gram``: ``G_hat = P^T (W^T W) P`` by block sums of the dense Gram
      matrix (domains up to `GRAM_ROUTE_MAX_N` cells whose workload matrix
      has more than ``n^2/4`` non-zeros or an unknown count, e.g. all ranges);
    * ``matrix``: ``W_hat`` as a sparse product (workloads whose matrix fits);
    * ``structured``: interval workloads and Kronecker products / unions of
      them whose matrix is too large (e.g. 2-D prefix on 256 x 256): short
      runs by ``v^T G v`` over cell pairs with G from the factor Grams, long
      runs by prefix sums on dense blocks of columns.

    Parameters
    ----------
    workload : Workload
    order : ndarray of int
        Cell ids in domain order (identity for 1-D, Hilbert order for 2-D).
    edges : ndarray of int
        Bucket boundaries in that order, ``0 = e_0 < ... < e_k = n``.
    route : {'gram', 'matrix', 'structured'}, optional
        Forces a route; by default the cheapest that applies.

    Examples
    --------
    prefix:4 on two buckets of two cells: ``P`` averages each bucket, so ``W_hat`` has rows
    (1/2, 0), (1, 0), (1, 1/2), (1, 1):

    >>> from strategy_opt.workload import prefix
    >>> mw = MappedWorkload(prefix(4), np.arange(4), np.array([0, 2, 4]))
    >>> mw.route, mw.k
    ('gram', 2)
    """

    def __init__(self, workload: Workload, order: np.ndarray, edges: np.ndarray, route: str | None = None):
        self.workload = workload
        self.order = np.asarray(order, dtype=np.int64)
        self.edges = np.asarray(edges, dtype=np.int64)
        self.k = self.edges.size - 1
        self.sizes = np.diff(self.edges)
        n = workload.n
        if self.order.size != n or self.edges[-1] != n:
            raise InputError(f"ordering/partition cover {self.edges[-1]} cells but the workload has {n}")
        self._bucket_of_pos = np.repeat(np.arange(self.k), self.sizes)
        self._P = sp.csr_matrix((1.0 / self.sizes[self._bucket_of_pos], (self.order, self._bucket_of_pos)), shape=(n, self.k))
        if route is None:
            route = self._choose_route(workload)
        if route not in ROUTES:
            raise InputError(f"unknown route {route!r}; use one of {', '.join(ROUTES)}")
        self.route = route
        if route == "gram":
            G = workload.gram()
            if not np.array_equal(self.order, np.arange(n)):
                G = G[np.ix_(self.order, self.order)]
            starts = self.edges[:-1]
            self._G = np.add.reduceat(np.add.reduceat(G, starts, axis=0), starts, axis=1) / np.outer(self.sizes, self.sizes)
        elif route == "matrix":
            try:
                self._W_hat = sp.csc_matrix(workload.matrix() @ self._P)
            except InputError:
                raise InputError(
                    f"cannot map workload {workload.spec!r} onto buckets: its matrix is too large and it is not "
                    "built from interval workloads; use fewer queries"
                ) from None
        else:
            parts = workload.parts if isinstance(workload, Union) else [workload]
            if not all(_interval_factor(p) for p in parts):
                raise InputError(f"the structured route needs interval workloads (or Kronecker products/unions of them), not {workload.spec!r}")
            weights = workload.weights if isinstance(workload, Union) else np.ones(1)
            self._parts = list(zip(weights, parts))
            self._factor_grams = None

    @staticmethod
    def check(workload: Workload) -> None:
        """Refuse (`InputError`) a workload whose mapping onto buckets needs a Gram matrix it cannot have,
        before any bucket is known: the structured route forms every factor's Gram (a 1-D interval workload
        on more than `MAX_DENSE_N` cells has one factor, itself), so DAWA refuses before drawing noise.

        Examples
        --------
        >>> from strategy_opt.workload import prefix
        >>> MappedWorkload.check(prefix(4))  # passes silently
        """
        if MappedWorkload._choose_route(workload) != "structured":
            return
        for part in workload.parts if isinstance(workload, Union) else [workload]:
            for f in part.factors if isinstance(part, Kronecker) else [part]:
                _require_dense(f.n, "the Gram matrix (greedy-h maps the workload onto buckets through it)", 1, f.spec)

    @staticmethod
    def _choose_route(workload: Workload) -> str:
        n = workload.n
        nnz = _matrix_nnz(workload)
        if n <= GRAM_ROUTE_MAX_N and (nnz is None or nnz > n * n / 4):
            return "gram"
        parts = workload.parts if isinstance(workload, Union) else [workload]
        if nnz is not None and nnz > MAX_MATRIX_ENTRIES and all(_interval_factor(p) for p in parts):
            return "structured"
        return "matrix"

    def norms_sq(self, lo: np.ndarray, hi: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``||W_hat v_r||^2`` for each run r, where ``v_r = w`` on buckets ``[lo_r, hi_r)`` and 0 elsewhere.

        Runs must be disjoint.

        Parameters
        ----------
        lo, hi : array_like of int
            Bucket bounds of each run, ``[lo_r, hi_r)``.
        w : ndarray, shape (k,)
            The values on the buckets.

        Returns
        -------
        ndarray, shape (len(lo),)

        Examples
        --------
        With ``W_hat`` rows (1/2, 0), (1, 0), (1, 1/2), (1, 1) (prefix:4 on two buckets, see the class):

        >>> from strategy_opt.workload import prefix
        >>> mw = MappedWorkload(prefix(4), np.arange(4), np.array([0, 2, 4]))
        >>> mw.norms_sq(np.array([0]), np.array([2]), np.ones(2)).tolist()  # v = (1, 1): 0.5^2 + 1 + 1.5^2 + 2^2
        [7.5]
        >>> mw.norms_sq(np.array([0, 1]), np.array([1, 2]), np.ones(2)).tolist()  # the two columns: 0.25 + 3, 0.25 + 1
        [3.25, 1.25]
        """
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        if self.route == "gram":
            if np.all(hi - lo == 1):
                return self._G[lo, lo] * w[lo] ** 2
            out = np.empty(lo.size)
            for r, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
                u = w[a:b]
                out[r] = u @ self._G[a:b, a:b] @ u
            return out
        lengths = hi - lo
        run = np.repeat(np.arange(lo.size), lengths)
        pos = np.arange(run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(lo, lengths)
        U = sp.csc_matrix((w[pos], (pos, run)), shape=(self.k, lo.size))
        if self.route == "matrix":
            Y = self._W_hat @ U
            return np.asarray(Y.multiply(Y).sum(axis=0)).ravel()
        cells = (self.edges[hi] - self.edges[lo]).astype(float)
        grams = self._grams()
        n = self.workload.n
        out = np.zeros(lo.size)
        for index, ((weight, part), (_, factor_grams, _)) in enumerate(zip(self._parts, grams)):
            # cost of each way (seconds, `_COST_*`): pairs of cells, the factor Grams on the
            # dense run, or the part's prefix sums on a dense column (memory-bounded parts only)
            rows = _interval_entries(part)
            dense_cost, by_intervals = _dense_way(n, factor_grams, rows)
            by_pairs = _COST_PAIR * len(factor_grams) * cells**2 <= dense_cost
            if by_pairs.any():
                out[by_pairs] += self._pairwise_norms_sq(lo[by_pairs], hi[by_pairs], w, parts=[index])
            dense = np.flatnonzero(~by_pairs)
            if dense.size:
                out[dense] += weight**2 * self._dense_norms_sq(part, factor_grams, U[:, dense], rows, by_intervals)
        return out

    def _grams(self):
        """``(weight, factor Grams, factor sizes)`` of every part (computed once)."""
        if self._factor_grams is None:
            self._factor_grams = [
                (weight, [f.gram() for f in (part.factors if isinstance(part, Kronecker) else [part])], part.domain)
                for weight, part in self._parts
            ]
        return self._factor_grams

    def _dense_norms_sq(self, part: Workload, factor_grams, U: sp.csc_matrix, rows: float, by_intervals: bool) -> np.ndarray:
        """``||W_part P u||^2`` per column u of U, on dense blocks of columns (at most `_BLOCK_ENTRIES` entries each).

        By the part's prefix sums when its intermediate results are small
        (``rows`` entries per column), else as ``x^T (G_1 x ... x G_N) x`` with
        the factor Grams applied along the axes of the cell tensor.
        """
        n = self.workload.n
        V = sp.csc_matrix(self._P @ U)
        out = np.empty(U.shape[1])
        step = max(1, _BLOCK_ENTRIES // int(max(rows if by_intervals else n, 1)))
        sizes = [G.shape[0] for G in factor_grams]
        last = time.perf_counter()
        for s in range(0, out.size, step):
            X = V[:, s : s + step].toarray()
            if by_intervals:
                Y = _apply_structured(part, X)
                out[s : s + step] = np.einsum("ij,ij->j", Y, Y)
            else:
                T = X.T.reshape([X.shape[1]] + sizes)
                Y = T
                for axis, G in enumerate(factor_grams):
                    Y = np.moveaxis(np.tensordot(G, Y, axes=([1], [axis + 1])), 0, axis + 1)
                out[s : s + step] = np.einsum("ij,ij->i", T.reshape(T.shape[0], -1), Y.reshape(Y.shape[0], -1))
            if time.perf_counter() - last > _LOG_SECONDS:
                last = time.perf_counter()
                log.info("greedy-h: %d of %d long runs of %d cells evaluated", min(s + step, out.size), out.size, n)
        return out

    def _pairwise_norms_sq(self, lo: np.ndarray, hi: np.ndarray, w: np.ndarray, parts=None) -> np.ndarray:
        """``v^T G v`` over the cell pairs of each run, with G from the factor Grams of the parts (indices; default all).

        The pairs are enumerated in blocks of at most `_BLOCK_ENTRIES`, a long
        run spanning several blocks.
        """
        grams = self._grams()
        grams = grams if parts is None else [grams[i] for i in parts]
        value = (w / self.sizes)[self._bucket_of_pos]
        start = self.edges[lo]
        cells = self.edges[hi] - start
        pairs = cells.astype(np.int64) ** 2
        cum = np.cumsum(pairs)
        total = int(cum[-1]) if cum.size else 0
        out = np.zeros(lo.size)
        last = time.perf_counter()
        for b0 in range(0, total, _BLOCK_ENTRIES):
            q = np.arange(b0, min(total, b0 + _BLOCK_ENTRIES), dtype=np.int64)
            run = np.searchsorted(cum, q, side="right")
            p = q - (cum[run] - pairs[run])
            L = cells[run]
            i = start[run] + p // L
            j = start[run] + p % L
            g = np.zeros(i.size)
            for weight, factor_grams, domain in grams:
                term = np.full(i.size, weight**2)
                for G, a, b in zip(factor_grams, np.unravel_index(self.order[i], domain), np.unravel_index(self.order[j], domain)):
                    term *= G[a, b]
                g += term
            out += np.bincount(run, weights=value[i] * value[j] * g, minlength=lo.size)
            if time.perf_counter() - last > _LOG_SECONDS:
                last = time.perf_counter()
                log.info("greedy-h: %.3g of %.3g cell pairs evaluated", min(total, b0 + _BLOCK_ENTRIES), total)
        return out


@dataclass
class Hierarchy:
    """A tree of bucket intervals and, after `greedy_hierarchy`, its weights.

    Nodes ``0..k-1`` are the leaves (single buckets); internal nodes follow in
    creation order. ``rounds[r]`` lists the parents created in round r of the
    bottom-up construction with, for each, its children.

    Attributes
    ----------
    k, branching : int
    lo, hi : ndarray of int
        Node q covers buckets ``[lo[q], hi[q])``.
    depth : ndarray of int
        Root depth 0.
    rounds : list of (parents, children, child_parent)
        ``children`` are node ids, ``child_parent`` the index in ``parents`` of each child's parent.
    lam, beta, gamma : ndarray
        Greedy choice lambda, Sherman-Morrison factor beta and the ``M^-1 1``
        factor gamma of every internal node (0 for leaves).
    weight : ndarray
        Final weight ``c_q`` of every node (0 where not asked).
    unit_error : float
        ``tr(W_hat^T W_hat (A^T A)^-1)`` of the weighted strategy A (sensitivity 1):
        the expected total squared error on the buckets at unit noise variance 1.

    Examples
    --------
    >>> h = build_hierarchy(2)  # two leaves (nodes 0, 1) and their root (node 2)
    >>> h.k, h.lo.tolist(), h.hi.tolist(), h.depth.tolist()
    (2, [0, 1, 0], [1, 2, 2], [1, 1, 0])
    """

    k: int
    branching: int
    lo: np.ndarray
    hi: np.ndarray
    depth: np.ndarray
    rounds: list
    lam: np.ndarray | None = None
    beta: np.ndarray | None = None
    gamma: np.ndarray | None = None
    weight: np.ndarray | None = None
    unit_error: float | None = None

    @property
    def asked(self) -> np.ndarray:
        """Ids of the nodes with a positive weight (the strategy rows), in node order.

        Examples
        --------
        On the identity workload the root is useless (lambda 0, weight 0):

        >>> from strategy_opt.workload import identity
        >>> greedy_hierarchy(MappedWorkload(identity(2), np.arange(2), np.arange(3))).asked.tolist()
        [0, 1]
        """
        return np.flatnonzero(self.weight > 0)

    def strategy(self) -> sp.csr_matrix:
        """The weighted strategy over the buckets: row ``c_q 1_[lo_q, hi_q)`` per asked node.

        Examples
        --------
        On the total workload the root gets weight ``LAMBDA_MAX = 0.99``, each leaf what is left of its column's unit norm:

        >>> from strategy_opt.workload import total
        >>> h = greedy_hierarchy(MappedWorkload(total(2), np.arange(2), np.arange(3)))
        >>> np.round(h.strategy().toarray(), 6).tolist()
        [[0.01, 0.0], [0.0, 0.01], [0.99, 0.99]]
        """
        q = self.asked
        lengths = self.hi[q] - self.lo[q]
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        indices = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths) + np.repeat(self.lo[q], lengths)
        return sp.csr_matrix((np.repeat(self.weight[q], lengths), indices, indptr), shape=(q.size, self.k))

    def _runs(self, parents):
        lo, hi = self.lo[parents], self.hi[parents]
        lengths = hi - lo
        run = np.repeat(np.arange(parents.size), lengths)
        pos = np.arange(run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(lo, lengths)
        return run, pos

    def least_squares(self, y: np.ndarray) -> np.ndarray:
        """OLS bucket estimate ``(A^T A)^-1 A^T y`` for answers y to `strategy` rows.

        Applies ``M_root^-1`` round by round with the Sherman-Morrison update:
        ``M_q^-1 v = (B^-1 v - beta u (1^T B^-1 v)) / (1-lambda)^2``.

        Parameters
        ----------
        y : ndarray, shape (len(asked),)
            Answers to the strategy rows, in `asked` order.

        Returns
        -------
        ndarray, shape (k,)

        Examples
        --------
        Exact answers give back the bucket values:

        >>> from strategy_opt.workload import total
        >>> h = greedy_hierarchy(MappedWorkload(total(2), np.arange(2), np.arange(3)))
        >>> np.round(h.least_squares(h.strategy() @ np.array([3.0, 5.0])), 6).tolist()
        [3.0, 5.0]
        """
        q = self.asked
        diff = np.zeros(self.k + 1)
        np.add.at(diff, self.lo[q], self.weight[q] * y)
        np.add.at(diff, self.hi[q], -self.weight[q] * y)
        z = np.cumsum(diff)[: self.k]
        w = np.ones(self.k)
        for parents, _, _ in self.rounds:
            run, pos = self._runs(parents)
            lam, beta, gamma = self.lam[parents][run], self.beta[parents][run], self.gamma[parents][run]
            total = np.bincount(run, weights=z[pos], minlength=parents.size)[run]
            z[pos] = (z[pos] - beta * w[pos] * total) / (1.0 - lam) ** 2
            w[pos] *= gamma
        return z


def build_hierarchy(k: int, branching: int = 2) -> Hierarchy:
    """Tree over k buckets, built bottom-up (Li 2013, Sec. 6.4.2).

    Every ``branching`` consecutive nodes of a level get a parent; a last
    group of one node is carried up to the next level unchanged.

    Examples
    --------
    >>> h = build_hierarchy(5, 2)
    >>> [(int(a), int(b)) for a, b in zip(h.lo[5:], h.hi[5:])]
    [(0, 2), (2, 4), (0, 4), (0, 5)]
    """
    branching = check_branching(branching)
    lo, hi = list(range(k)), list(range(1, k + 1))
    parent = [-1] * k
    frontier = list(range(k))
    rounds = []
    while len(frontier) > 1:
        nxt, parents, children, child_parent = [], [], [], []
        for g in range(0, len(frontier), branching):
            group = frontier[g : g + branching]
            if len(group) == 1:
                nxt.append(group[0])
                continue
            pid = len(lo)
            lo.append(lo[group[0]])
            hi.append(hi[group[-1]])
            parent.append(-1)
            for c in group:
                parent[c] = pid
            children.extend(group)
            child_parent.extend([len(parents)] * len(group))
            parents.append(pid)
            nxt.append(pid)
        rounds.append((np.array(parents), np.array(children), np.array(child_parent)))
        frontier = nxt
    depth = np.zeros(len(lo), dtype=np.int64)
    for q in range(len(lo) - 1, -1, -1):
        if parent[q] >= 0:
            depth[q] = depth[parent[q]] + 1
    return Hierarchy(k, branching, np.array(lo), np.array(hi), depth, rounds)


def _objective(s, e, c, d):
    return (1.0 + s) ** 2 * (e + c * s * s) / (1.0 + d * s * s)


def best_lambda(e: np.ndarray, A: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``argmin_{0 <= lambda <= LAMBDA_MAX} (e - A beta(lambda)) / (1-lambda)^2`` per node (Eq. 6.11).

    Candidates: both ends and the stationary points (real roots of the quartic
    ``c d s^4 + 2 c s^2 - A s + e`` in ``s = lambda/(1-lambda)``, and ``e/A``
    for the degenerate ``c = 0``).

    Parameters
    ----------
    e : ndarray
        Per node: the error of the subtree below it without it (its children's errors, summed).
    A : ndarray
        Per node: the squared norm of ``W_hat`` on its bucket run weighted by the leaf weights
        (`greedy_hierarchy` passes a depth-dependent blend with its children's).
    d : ndarray
        Per node: the sum of the leaf weights under it.

    Returns
    -------
    ndarray
        lambda per node, in ``[0, LAMBDA_MAX]``.

    Examples
    --------
    A node no query needs (A = 0) gets nothing; one the queries all need gets the maximum:

    >>> best_lambda(np.array([2.0, 2.0]), np.array([0.0, 4.0]), np.array([2.0, 2.0])).tolist()
    [0.0, 0.99]
    """
    e, A, d = (np.asarray(v, dtype=float) for v in (e, A, d))
    s_max = LAMBDA_MAX / (1.0 - LAMBDA_MAX)
    c = np.maximum(e * d - A, 0.0)
    cands = [np.zeros_like(e), np.full_like(e, s_max), np.where(A > 0, e / np.where(A > 0, A, 1.0), 0.0)]
    quartic = c > 1e-12 * e * d
    roots = np.full((e.size, 4), np.nan)
    if quartic.any():
        cd = (c * d)[quartic]
        comp = np.zeros((cd.size, 4, 4))
        comp[:, 0, 1] = -2.0 / d[quartic]
        comp[:, 0, 2] = A[quartic] / cd
        comp[:, 0, 3] = -e[quartic] / cd
        comp[:, 1, 0] = comp[:, 2, 1] = comp[:, 3, 2] = 1.0
        z = np.linalg.eigvals(comp)
        real = np.abs(z.imag) <= 1e-8 * np.maximum(1.0, np.abs(z.real))
        roots[quartic] = np.where(real, z.real, np.nan)
    s = np.column_stack(cands + [roots])
    s = np.where(np.isfinite(s), np.clip(s, 0.0, s_max), 0.0)
    f = _objective(s, e[:, None], c[:, None], d[:, None])
    best = s[np.arange(e.size), np.argmin(f, axis=1)]
    return best / (1.0 + best)


def greedy_hierarchy(mapped: MappedWorkload, branching: int = 2) -> Hierarchy:
    """Greedy bottom-up weights of the bucket hierarchy for the mapped workload (Program 6.4.1).

    Parameters
    ----------
    mapped : MappedWorkload
    branching : int

    Returns
    -------
    Hierarchy
        With ``lam``, ``beta``, ``gamma``, ``weight`` and ``unit_error`` set.

    Examples
    --------
    For the total of two cells: error ``2 / (2 * 0.99^2 + 0.01^2)`` (the constant direction of ``A^T A``):

    >>> from strategy_opt.workload import total
    >>> h = greedy_hierarchy(MappedWorkload(total(2), np.arange(2), np.arange(3)))
    >>> np.round(h.weight, 6).tolist(), round(h.unit_error, 6)
    ([0.01, 0.01, 0.99], 1.020252)
    """
    tree = build_hierarchy(mapped.k, branching)
    k, nodes = tree.k, tree.lo.size
    lam, beta, gamma = np.zeros(nodes), np.zeros(nodes), np.zeros(nodes)
    err, h = np.zeros(nodes), np.zeros(nodes)
    w = np.ones(k)
    leaves = np.arange(k)
    err[:k] = h[:k] = mapped.norms_sq(leaves, leaves + 1, w)
    t0 = last = time.perf_counter()
    for level, (parents, children, child_parent) in enumerate(tree.rounds):
        if time.perf_counter() - last > _LOG_SECONDS:
            last = time.perf_counter()
            log.info("greedy-h: level %d of %d (%d nodes) after %.1f s", level + 1, len(tree.rounds), parents.size, last - t0)
        run, pos = tree._runs(parents)
        e = np.bincount(child_parent, weights=err[children], minlength=parents.size)
        a_prime = np.bincount(child_parent, weights=h[children], minlength=parents.size)
        d = np.bincount(run, weights=w[pos], minlength=parents.size)
        a = mapped.norms_sq(tree.lo[parents], tree.hi[parents], w)
        mu = float(branching) ** (-tree.depth[parents] / 2.0)
        lq = best_lambda(e, mu * a + (1.0 - mu) * a_prime, d)
        bq = lq**2 / ((1.0 - lq) ** 2 + lq**2 * d)
        gq = (1.0 - bq * d) / (1.0 - lq) ** 2
        lam[parents], beta[parents], gamma[parents] = lq, bq, gq
        err[parents] = (e - a * bq) / (1.0 - lq) ** 2
        h[parents] = gq**2 * a
        w[pos] *= gq[run]
    scale = np.ones(nodes)
    for parents, children, child_parent in reversed(tree.rounds):
        scale[children] = scale[parents][child_parent] * (1.0 - lam[parents][child_parent])
    weight = scale.copy()
    weight[k:] *= lam[k:]
    tree.lam, tree.beta, tree.gamma, tree.weight = lam, beta, gamma, weight
    tree.unit_error = float(err[nodes - 1])
    return tree


def domain_order(domain) -> np.ndarray:
    """Cell ids in the order the hierarchy runs over: natural (1-D) or Hilbert (2-D).

    Parameters
    ----------
    domain : sequence of int
        One or two attribute sizes.

    Returns
    -------
    ndarray of int, shape (n,)

    Raises
    ------
    InputError
        For three or more attributes.

    Examples
    --------
    >>> domain_order((4,)).tolist(), domain_order((2, 2)).tolist()  # Hilbert: (0, 0), (0, 1), (1, 1), (1, 0)
    ([0, 1, 2, 3], [0, 1, 3, 2])
    """
    if len(domain) > 2:
        raise InputError(f"greedy-h and DAWA order 1-D or 2-D domains; got {len(domain)} attributes {tuple(domain)}")
    return hilbert_order(domain)


@register_method(
    "greedy-h",
    options=("branching",),
    privacy=("pure",),
    source="Li 2013, Sec. 6.4, Program 6.4.1; Li et al. PVLDB 2014, Algorithm 2",
    summary="workload-aware weighted hierarchy over single cells, greedy bottom-up (option branching, default 2; 2-D in Hilbert order; up to 20000 cells: it needs the dense Gram -- dawa applies it to its buckets)",
)
def greedy_h(problem: Problem):
    """GreedyH on single cells: DAWA's stage 2 as a data-independent strategy.

    Options: ``branching`` (default 2).

    Examples
    --------
    For the one total query GreedyH puts almost all weight on the root, close to the optimum ``E = 1``:

    >>> from strategy_opt import solve
    >>> s = solve("total:4", privacy="pure", method="greedy-h")
    >>> s.shape, round(s.meta["unit_total_squared_error"], 4), s.meta["lower_bound"]
    ((5, 4), 1.0203, 1.0)
    """
    t0 = time.perf_counter()
    branching = check_branching(problem.options.get("branching", 2))
    A, tree = greedy_h_matrix(problem.workload, branching)
    log.info("greedy-h: hierarchy of %d cells in %.2f s; analysing the strategy", problem.workload.n, time.perf_counter() - t0)
    extra = {"branching": branching, "greedy_unit_error": tree.unit_error, "internal_nodes_asked": int(np.count_nonzero(tree.weight[tree.k :]))}
    return compile_strategy(A, problem, "greedy-h", solver="greedy", status="heuristic", solve_seconds=time.perf_counter() - t0, extra=extra)


def greedy_h_bytes(W: Workload) -> tuple[float, str]:
    """Estimated peak bytes of GreedyH on the cells of W and the analysis of its strategy, and what dominates them.

    The strategy (a weighted hierarchy, not a Kronecker product) is analysed
    with ``DENSE_WORK_COPIES`` dense n x n matrices; mapping the workload takes
    at most as much on the Gram route, the factor Grams (three copies while
    they are built) and blocks of `_BLOCK_ENTRIES` entries on the structured
    route, the sparse ``W P`` (three copies of its non-zeros) on the matrix route.

    Parameters
    ----------
    W : Workload

    Returns
    -------
    (float, str)
        The bytes and a description of the largest term.

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> greedy_h_bytes(prefix(4))  # DENSE_WORK_COPIES = 6 matrices of 4 * 4 * 8 bytes
    (768.0, '6 dense 4x4 matrices of 128 B')
    """
    n = W.n
    one = 8.0 * n * n
    terms = [(DENSE_WORK_COPIES * one, f"{DENSE_WORK_COPIES} dense {n}x{n} matrices of {format_bytes(one)}")]
    route = MappedWorkload._choose_route(W)
    if route == "structured":
        parts = W.parts if isinstance(W, Union) else [W]
        grams = sum(8.0 * f.n**2 for p in parts for f in (p.factors if isinstance(p, Kronecker) else [p]))
        terms.append((3 * grams + 16 * 8.0 * _BLOCK_ENTRIES, "the factor Gram matrices and blocks of cell pairs"))
    elif route == "matrix":
        nnz = _matrix_nnz(W)
        if nnz is not None:
            terms.append((3 * 16.0 * nnz, f"the {nnz:,.0f} non-zeros of the workload matrix"))
    return max(terms, key=lambda t: t[0])


def check_size(W: Workload) -> None:
    """Refuse (`InputError`), before any work, a domain GreedyH on single cells cannot handle.

    Above ``defaults.MAX_DENSE_N`` cells its strategy cannot be analysed
    (dense n x n matrices); below, when `greedy_h_bytes` exceeds the available
    memory (`strategy_opt.resources.require_memory`).

    Examples
    --------
    >>> from strategy_opt.workload import prefix
    >>> check_size(prefix(4))  # passes silently
    """
    n = W.n
    if n > MAX_DENSE_N:
        raise InputError(
            f"greedy-h works on at most {MAX_DENSE_N:,} cells (its strategy is analysed with dense n x n matrices, "
            f"{format_bytes(8.0 * n * n)} each here); workload {W.spec!r} has {n:,} cells: use dawa, which applies "
            "GreedyH to buckets, or hierarchical"
        )
    nbytes, why = greedy_h_bytes(W)
    require_memory(nbytes, f"greedy-h on workload {W.spec!r} ({n:,} cells)", f"mostly for {why}; use a smaller domain, dawa or hierarchical")


def greedy_h_matrix(W: Workload, branching: int = 2) -> tuple[sp.csr_matrix, Hierarchy]:
    """GreedyH's strategy over single cells (columns in the workload's cell order) and its hierarchy, without compiling.

    Raises
    ------
    InputError
        The domain is too large (`check_size`), before any work.

    Parameters
    ----------
    W : Workload
        Over a 1-D or 2-D domain.
    branching : int, default 2

    Returns
    -------
    A : scipy.sparse.csr_matrix, shape (rows, n)
        The weighted hierarchy over the cells (unit L1 column norms).
    tree : Hierarchy

    Examples
    --------
    >>> from strategy_opt.workload import total
    >>> A, tree = greedy_h_matrix(total(2))
    >>> np.round(A.toarray(), 6).tolist(), round(tree.unit_error, 6)
    ([[0.01, 0.0], [0.0, 0.01], [0.99, 0.99]], 1.020252)
    """
    check_size(W)
    order = domain_order(W.domain)
    tree = greedy_hierarchy(MappedWorkload(W, order, np.arange(W.n + 1)), branching)
    A = tree.strategy().tocoo()
    return sp.csr_matrix((A.data, (A.row, order[A.col])), shape=(A.shape[0], W.n)), tree
