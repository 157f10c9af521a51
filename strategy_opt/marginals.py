"""Stacks of weighted marginals on a product domain, analysed without any n x n matrix.

A marginal ``M_S`` on a set S of attributes of the domain ``d_1 x ... x d_k`` is
the Kronecker product of ``I_{d_i}`` for i in S and of the ones row ``1_{d_i}^T``
for the other attributes. A strategy ``A = [theta_S M_S]_S`` (HDMM's marginals
template, McKenna et al. PVLDB 2018, Sec. 6) measures every cell once in each
marginal, so

    ||A||_1 = sum_S theta_S,      ||A||_2 = sqrt(sum_S theta_S^2),

and ``A^T A = sum_S theta_S^2 (x)_{i in S} I (x)_{i not in S} J`` lies in the
algebra of Kronecker products of I and J. That algebra is diagonalised by one
basis whose eigenspaces are indexed by subsets U of the attributes, of
multiplicity ``mult(U) = prod_{i in U} (d_i - 1)``; with ``out(S) = prod_{i not
in S} d_i`` the eigenvalue of ``A^T A`` on U is ``x(U) = sum_{S ⊇ U} theta_S^2
out(S)``. A marginal workload (a weighted union of marginals, weights ``w_T``)
has Gram eigenvalues ``g(U) = sum_{T ⊇ U} w_T^2 out(T)`` on the same
eigenspaces, so

    trace(W^T W (A^T A)^+) = sum_U mult(U) g(U) / x(U),

and A supports W exactly when ``x(U) > 0`` wherever ``g(U) > 0``: O(k 2^k)
work for any domain size. Subsets are bit masks, attribute i on bit ``k - 1 - i``
(the most significant bit is attribute 0).
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import scipy.sparse as sp

from .defaults import EIG_RTOL
from .exceptions import InputError
from .resources import require_memory
from .workload import Union, Workload, _factors_on, _Identity, _Total

__all__ = ["MarginalsMatrix", "marginal_attribute_sets", "marginal_gram", "marginal_spectrum", "subset_mask", "marginals_trace", "marginals_query_variances", "marginal_variance_terms", "superset_sums", "subset_sums"]

#: `MarginalsMatrix.from_meta`: largest entry difference from the stored product, relative to its largest entry.
PRODUCT_RTOL = 1e-12


def marginal_attribute_sets(workload: Workload) -> list[tuple[int, ...]] | None:
    """Attribute sets of a marginal workload (a union of Kronecker products of identity and total factors), else None.

    Examples
    --------
    >>> from strategy_opt.spec import parse_spec
    >>> marginal_attribute_sets(parse_spec("marginals:2x3x4:2"))
    [(0, 1), (0, 2), (1, 2)]
    >>> marginal_attribute_sets(parse_spec("prefix:4")) is None
    True
    >>> marginal_attribute_sets(parse_spec("identity:12+identity:3*total:4"))  # a flat identity: the full table
    [(0, 1), (0,)]
    """
    parts = workload.parts if isinstance(workload, Union) else [workload]
    domain = tuple(workload.domain)
    sets = []
    for part in parts:
        factors = _factors_on(part, domain)  # a flat identity (total) over a product domain: the full table (empty marginal)
        if tuple(f.n for f in factors) != domain or not all(isinstance(f, (_Identity, _Total)) for f in factors):
            return None
        sets.append(tuple(i for i, f in enumerate(factors) if isinstance(f, _Identity)))
    return sets


#: `marginal_gram` fills this many Gram entries at a time ...
MARGINAL_GRAM_BLOCK_ENTRIES = 4_000_000
#: ... and is used for at most this many attributes (a table of 2^d subsets).
MARGINAL_GRAM_MAX_ATTRIBUTES = 20


def marginal_gram(workload: Workload) -> np.ndarray | None:
    """``W^T W`` of a marginal workload (`marginal_attribute_sets`) without a Kronecker product; None for others.

    Entry (x, y) of marginal S's Gram is 1 when cells x and y agree on every
    attribute of S, else 0. So the weighted sum depends only on the set U of
    attributes where x and y agree: one lookup per entry in the table
    ``sum_{S ⊆ U} w_S^2`` (`subset_sums`) (marginals over 12 binary attributes:
    0.9 s where the 66 Kronecker Grams took 24 s).

    Examples
    --------
    >>> from strategy_opt.workload import marginals
    >>> W = marginals((2, 3), 1)
    >>> bool(np.array_equal(marginal_gram(W), (W.matrix().T @ W.matrix()).toarray()))
    True
    """
    sets = marginal_attribute_sets(workload)
    d = len(workload.domain)
    if sets is None or d > MARGINAL_GRAM_MAX_ATTRIBUTES:
        return None
    weights = workload.weights if isinstance(workload, Union) else np.ones(1)
    b = np.zeros(2**d)
    for S, w in zip(sets, weights):
        b[subset_mask(S, d)] += float(w) ** 2
    table = subset_sums(b, d)
    n = workload.n
    coords = np.unravel_index(np.arange(n), tuple(workload.domain))  # each cell's value on each attribute (C order)
    G = np.empty((n, n))
    step = max(1, MARGINAL_GRAM_BLOCK_ENTRIES // max(n, 1))
    for r0 in range(0, n, step):
        rows = slice(r0, min(n, r0 + step))
        agree = np.zeros((rows.stop - r0, n), dtype=np.int64)  # bit d - 1 - i: the cells agree on attribute i
        for i, c in enumerate(coords):
            agree |= (c[rows, None] == c[None, :]).astype(np.int64) << (d - 1 - i)
        G[rows] = table[agree]
    return G


def superset_sums(a: np.ndarray, d: int) -> np.ndarray:
    """``out[U] = sum_{S ⊇ U} a[S]`` over bit-mask-indexed arrays (zeta transform, O(d 2^d)).

    Parameters
    ----------
    a : array_like, shape (2^d,)
        Values indexed by subset bit mask.
    d : int
        Number of attributes.

    Returns
    -------
    ndarray, shape (2^d,)

    Examples
    --------
    With d = 2, masks 0, 1, 2, 3 are {}, {1}, {0}, {0, 1}:

    >>> superset_sums(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist()  # 1+2+3+4, 2+4, 3+4, 4
    [10.0, 6.0, 7.0, 4.0]
    """
    return _zeta(a, d, into=0)


def subset_sums(b: np.ndarray, d: int) -> np.ndarray:
    """``out[S] = sum_{U ⊆ S} b[U]`` (the transpose of `superset_sums`).

    Parameters
    ----------
    b : array_like, shape (2^d,)
        Values indexed by subset bit mask.
    d : int
        Number of attributes.

    Returns
    -------
    ndarray, shape (2^d,)

    Examples
    --------
    >>> subset_sums(np.array([1.0, 2.0, 3.0, 4.0]), 2).tolist()  # 1, 1+2, 1+3, 1+2+3+4
    [1.0, 3.0, 4.0, 10.0]
    """
    return _zeta(b, d, into=1)


def _zeta(a: np.ndarray, d: int, into: int) -> np.ndarray:
    """Along each attribute, add the entries with its bit ``1 - into`` to those with bit ``into``."""
    x = np.array(a, dtype=float).reshape((2,) * d)
    for axis in range(d):
        to = [slice(None)] * d
        frm = [slice(None)] * d
        to[axis], frm[axis] = into, 1 - into
        x[tuple(to)] += x[tuple(frm)]
    return x.reshape(-1)


def subset_bits(d: int) -> np.ndarray:
    """``bits[mask, i]``: whether attribute i is in the subset ``mask``, shape ``(2^d, d)``.

    Parameters
    ----------
    d : int
        Number of attributes.

    Returns
    -------
    ndarray of int, shape (2^d, d)
        Row ``mask``: bit ``d - 1 - i`` of ``mask`` in column i.

    Examples
    --------
    >>> subset_bits(2).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    masks = np.arange(2**d)
    return (masks[:, None] >> np.arange(d)[::-1][None, :]) & 1


def _outside_and_multiplicity(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``out(S) = prod_{i not in S} d_i`` and ``mult(U) = prod_{i in U} (d_i - 1)`` for every subset."""
    bits = subset_bits(sizes.size)
    out = np.prod(np.where(bits == 1, 1.0, sizes[None, :]), axis=1)
    mult = np.prod(np.where(bits == 1, sizes[None, :] - 1.0, 1.0), axis=1)
    return out, mult


def subset_mask(attributes, k: int) -> int:
    """The bit mask of a set of attributes among k (attribute i on bit ``k - 1 - i``).

    Parameters
    ----------
    attributes : iterable of int
        Attribute indices, each in ``range(k)``.
    k : int
        Number of attributes.

    Returns
    -------
    int

    Examples
    --------
    >>> subset_mask((0, 2), 3)  # binary 101
    5
    """
    return sum(1 << (k - 1 - i) for i in attributes)


def marginal_spectrum(W: Workload, part_weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(mult, g, out)`` of a marginal workload over its domain (see the module docstring), or None.

    ``g[U]`` is the eigenvalue of ``W^T W`` on eigenspace U (``workload.log_scale`` excluded);
    with ``part_weights`` (one per marginal of the workload, `marginal_attribute_sets` order),
    of the workload whose t-th marginal's rows are scaled by ``sqrt(part_weights[t])``.

    Parameters
    ----------
    W : Workload
        A marginal workload (`marginal_attribute_sets` is not None).
    part_weights : array_like, optional
        One factor per marginal of W (see above).

    Returns
    -------
    tuple of ndarray, each shape (2^k,), or None
        ``mult[U]`` (multiplicity of eigenspace U), ``g[U]`` and ``out[U]``, indexed by bit mask;
        None when W is not a marginal workload.

    Examples
    --------
    The two 1-way marginals of a 2 x 3 table, ``W^T W = I_2 (x) J_3 + J_2 (x) I_3``; masks {}, {1}, {0}, {0, 1}:

    >>> from strategy_opt.spec import parse_spec
    >>> mult, g, out = marginal_spectrum(parse_spec("marginals:2x3:1"))
    >>> mult.tolist(), g.tolist(), out.tolist()  # g[{}] = 3 + 2 on the constant vector
    ([1.0, 2.0, 1.0, 2.0], [5.0, 2.0, 3.0, 0.0], [6.0, 2.0, 3.0, 1.0])
    """
    sets = marginal_attribute_sets(W)
    if sets is None or len(W.domain) < 1:
        return None
    d = len(W.domain)
    sizes = np.asarray(W.domain, dtype=float)
    out, mult = _outside_and_multiplicity(sizes)
    weights = W.weights if isinstance(W, Union) else np.ones(1)
    scales = np.ones(len(sets)) if part_weights is None else np.asarray(part_weights, dtype=float)
    wt = np.zeros(2**d)
    for c, w, T in zip(scales, weights, sets):
        wt[subset_mask(T, d)] += float(c) * float(w) ** 2
    return mult, superset_sums(wt * out, d), out


#: Peak bytes per non-zero while `MarginalsMatrix.tocsr` builds the matrix (its Kronecker blocks, their
#: stack and the result; measured: 0.7 GB for the 2.4e7 non-zeros of marginals:200x200x200:2).
MARGINALS_CSR_BYTES_PER_NONZERO = 32.0


class MarginalsMatrix:
    """A strategy stacking weighted marginals ``theta_S M_S`` on a product domain (see the module docstring).

    Parameters
    ----------
    domain : sequence of int
        The attribute sizes.
    theta : array_like, shape (2^k,)
        Weight of the marginal on each attribute subset (bit mask); zero weights
        give no rows.
    product : sparse matrix, optional
        The product as stored in a file, when read back (`from_meta`):
        `tocsr` returns it bit for bit.

    Examples
    --------
    The two 1-way marginals of a 2 x 3 table, each at weight 1/2: L1 sensitivity 1.
    Mask 1 (binary 01) is the marginal on attribute 1, whose first row sums cells
    (0, 0) and (1, 0), cells 0 and 3 in row-major order.

    >>> A = MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0])
    >>> A.shape, A.tocsr().toarray()[0].tolist(), A.sensitivity(1)
    ((5, 6), [0.5, 0.0, 0.0, 0.5, 0.0, 0.0], 1.0)
    """

    def __init__(self, domain, theta, product=None):
        self.domain = tuple(int(d) for d in domain)
        k = len(self.domain)
        theta = np.asarray(theta, dtype=float).ravel()
        if k < 1 or any(d < 1 for d in self.domain):
            raise InputError(f"marginals strategy: domain must be positive attribute sizes, got {domain!r}")
        if theta.size != 2**k:
            raise InputError(f"marginals strategy: {theta.size} weights for {k} attributes (one per subset: {2**k} needed)")
        if not np.all(np.isfinite(theta)) or np.any(theta < 0) or not np.any(theta > 0):
            raise InputError("marginals strategy: weights must be finite, >= 0 and not all zero")
        self.theta = theta
        self.product = product
        bits = subset_bits(k)
        rows = sum(int(np.prod([d for d, b in zip(self.domain, bits[m]) if b])) for m in np.flatnonzero(theta > 0))
        self.shape = (rows, int(np.prod(self.domain)))

    def marginals(self) -> list[tuple[tuple[int, ...], float]]:
        """``[(attribute set, weight)]`` of the marginals with a positive weight, in row order.

        Examples
        --------
        >>> MarginalsMatrix((2, 3), [0.0, 0.5, 0.25, 0.0]).marginals()  # mask 1 is attribute 1, mask 2 attribute 0
        [((1,), 0.5), ((0,), 0.25)]
        """
        bits = subset_bits(len(self.domain))
        return [(tuple(int(i) for i in np.flatnonzero(bits[m])), float(self.theta[m])) for m in np.flatnonzero(self.theta > 0)]

    def weights_by_subset(self) -> dict[str, float]:
        """``{bit string: weight}`` of the positive weights, as recorded in ``meta['marginal_weights']``.

        Examples
        --------
        >>> MarginalsMatrix((2, 3), [0.0, 0.5, 0.25, 0.0]).weights_by_subset()
        {'01': 0.5, '10': 0.25}
        """
        bits = subset_bits(len(self.domain))
        return {"".join(map(str, bits[m])): float(self.theta[m]) for m in np.flatnonzero(self.theta > 0)}

    def sensitivity(self, p: int) -> float:
        """``sum theta`` (p = 1) or ``sqrt(sum theta^2)`` (p = 2): every cell lies in one row of each marginal.

        Parameters
        ----------
        p : {1, 2}
            The column norm.

        Returns
        -------
        float

        Raises
        ------
        InputError
            For another p.

        Examples
        --------
        >>> A = MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0])
        >>> A.sensitivity(1), round(A.sensitivity(2), 6)  # 0.5 + 0.5, sqrt(0.25 + 0.25)
        (1.0, 0.707107)
        """
        if p not in (1, 2):
            raise InputError(f"sensitivity norm must be 1 or 2, got {p!r}")
        return float(self.theta.sum()) if p == 1 else float(np.sqrt((self.theta**2).sum()))

    @property
    def nnz(self) -> int:
        """Non-zeros of the stacked matrix: every cell lies in one row of each weighted marginal.

        Examples
        --------
        >>> MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0]).nnz  # 2 marginals x 6 cells
        12
        """
        return int(np.count_nonzero(self.theta)) * self.shape[1]

    def tocsr(self) -> sp.csr_matrix:
        """The stacked rows as a sparse CSR matrix.

        Refused (`InputError`) when its `MARGINALS_CSR_BYTES_PER_NONZERO` bytes per
        non-zero exceed the available memory: ``marginals:1000x1000x1000:2``
        (3e9 non-zeros) was killed by the kernel at 22 GB.

        Examples
        --------
        >>> A = MarginalsMatrix((2, 3), [0.0, 1.0, 1.0, 0.0]).tocsr().toarray()
        >>> A.astype(int).tolist()  # the marginal on attribute 1 (3 rows), then on attribute 0 (2 rows)
        [[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 1], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]]
        """
        if self.product is not None:
            return sp.csr_matrix(self.product)
        require_memory(
            MARGINALS_CSR_BYTES_PER_NONZERO * self.nnz,
            f"the {self.shape[0]:,} x {self.shape[1]:,} marginals strategy as a matrix ({self.nnz:,} non-zeros; files and runs need it)",
            "use a method whose strategy is a Kronecker product (hierarchical, identity, wavelet, p-identity), kept as its factors",
        )
        blocks = []
        for attrs, weight in self.marginals():
            factors = [sp.identity(d, format="csr") if i in attrs else sp.csr_matrix(np.ones((1, d))) for i, d in enumerate(self.domain)]
            blocks.append(weight * reduce(lambda a, b: sp.kron(a, b, format="csr"), factors))
        return sp.vstack(blocks, format="csr")

    def eigenvalues(self) -> np.ndarray:
        """``x(U)``: the eigenvalue of ``A^T A`` on each eigenspace U.

        Returns
        -------
        ndarray, shape (2^k,)
            Indexed by bit mask U.

        Examples
        --------
        ``A^T A = 0.25 (J_2 (x) I_3) + 0.25 (I_2 (x) J_3)``; on the constant vector (U = {}) ``0.25 * 2 + 0.25 * 3``:

        >>> MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0]).eigenvalues().tolist()
        [1.25, 0.5, 0.75, 0.0]
        """
        out, _ = _outside_and_multiplicity(np.asarray(self.domain, dtype=float))
        return superset_sums(self.theta**2 * out, len(self.domain))

    @classmethod
    def from_meta(cls, A, meta: dict) -> MarginalsMatrix | None:
        """The stacked marginals a stored matrix is, read off ``meta['marginal_weights']`` and ``meta['domain']``; None if it is not.

        The weights are checked against the stored product (same pattern, entries
        within `PRODUCT_RTOL` of the largest), which is kept as the ``product``.

        Parameters
        ----------
        A : matrix or sparse matrix
            The stored strategy matrix.
        meta : dict
            The strategy metadata.

        Returns
        -------
        MarginalsMatrix or None

        Examples
        --------
        >>> M = MarginalsMatrix((2, 3), [0.0, 0.5, 0.5, 0.0])
        >>> meta = {"marginal_weights": M.weights_by_subset(), "domain": [2, 3]}
        >>> MarginalsMatrix.from_meta(M.tocsr(), meta).theta.tolist()
        [0.0, 0.5, 0.5, 0.0]
        >>> MarginalsMatrix.from_meta(np.eye(6), meta) is None  # not those marginals
        True
        """
        weights, domain = meta.get("marginal_weights"), meta.get("domain")
        if not isinstance(weights, dict) or not isinstance(domain, list) or not domain:
            return None
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in domain):
            return None
        k = len(domain)
        theta = np.zeros(2**k)
        for key, value in weights.items():
            if not (isinstance(key, str) and len(key) == k and set(key) <= {"0", "1"}) or isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            theta[int(key, 2)] = float(value)
        try:
            M = cls(domain, theta, product=None)
        except InputError:
            return None
        stored = sp.csr_matrix(A)
        if M.shape != stored.shape:
            return None
        built = M.tocsr()
        diff = abs(built - stored)
        scale = max(abs(stored).max(), 1e-300)
        if diff.nnz and diff.max() > PRODUCT_RTOL * scale:
            return None
        return cls(domain, theta, product=A)


def marginals_trace(A: MarginalsMatrix, W: Workload) -> float | None:
    """``trace(W^T W (A^T A)^+)`` for a marginal workload on A's domain (None for another workload).

    Raises
    ------
    InputError
        If A does not support W: an eigenspace the workload needs has no
        measured direction (``g(U) > 0 = x(U)``).

    Examples
    --------
    Measuring the 1-way marginals themselves: ``A = W``, so the trace is rank(W^T W) = 2 + 3 - 1
    (the two marginals share their total):

    >>> from strategy_opt.spec import parse_spec
    >>> marginals_trace(MarginalsMatrix((2, 3), [0.0, 1.0, 1.0, 0.0]), parse_spec("marginals:2x3:1"))
    4.0
    """
    if tuple(W.domain) != A.domain:
        return None
    spectrum = marginal_spectrum(W)
    if spectrum is None:
        return None
    mult, g, _ = spectrum
    x = A.eigenvalues()
    need = (g > 0) & (mult > 0)
    tiny = x <= EIG_RTOL * x.max()  # the rank cutoff of the generic analysis (ErrorProfile)
    if np.any(need & tiny):
        missing = ", ".join(str(list(map(int, np.flatnonzero(subset_bits(len(A.domain))[u])))) for u in np.flatnonzero(need & tiny)[:3])
        raise InputError(f"strategy does not support the workload (W A+ A != W): the workload's interactions of attributes {missing} are never measured")
    return float(np.sum(mult[need] * g[need] / x[need]))


def marginals_query_variances(A: MarginalsMatrix, W: Workload) -> np.ndarray | None:
    """``w_i (A^T A)^+ w_i^T`` for every query of a marginal workload on A's domain (None for another workload).

    A query of the marginal on T is ``(x)_{i in T} e_k (x)_{i not in T} 1^T``; on
    eigenspace U its quadratic form is ``prod_{i in U} (1 - 1/d_i) prod_{i in T - U}
    1/d_i prod_{i not in T} d_i`` for U inside T and 0 otherwise, the same for every
    query of the marginal, so

        variance(T) = w_T^2 sum_{U ⊆ T} term(U, T) / x(U),

    in the workload's row order. `InputError` (from `marginals_trace`) if A does
    not support W.

    Examples
    --------
    The 1-way marginals of a 2 x 3 table measured at weight 1 each: least squares
    spreads the rank, 4, over the 5 queries (the two marginals share their total).

    >>> from strategy_opt.spec import parse_spec
    >>> v = marginals_query_variances(MarginalsMatrix((2, 3), [0.0, 1.0, 1.0, 0.0]), parse_spec("marginals:2x3:1"))
    >>> [round(float(t), 6) for t in v]
    [0.8, 0.8, 0.8, 0.8, 0.8]
    """
    if marginals_trace(A, W) is None:  # also the support check
        return None
    terms, sizes = marginal_variance_terms(W)
    x = A.eigenvalues()
    inverse = np.divide(1.0, x, out=np.zeros_like(x), where=x > 0)  # eigenspaces no query needs (support is checked above)
    return np.repeat(terms @ inverse, sizes)


def marginal_variance_terms(W: Workload) -> tuple[sp.csr_matrix, np.ndarray]:
    """Per-marginal variance coefficients of a marginal workload: ``(V, m)``.

    ``V[t, U] = w_T^2 term(U, T)`` for the workload's t-th marginal T (the
    quadratic form of any of its queries on eigenspace U, `marginals_query_variances`),
    so every query of marginal t has variance ``(V @ (1 / x))[t]`` under a stack of
    eigenvalues x; ``m[t] = prod_{i in T} d_i`` is its number of queries, and
    ``m @ V = mult * g`` (`marginal_spectrum`). W must be a marginal workload.

    Examples
    --------
    >>> from strategy_opt.spec import parse_spec
    >>> V, m = marginal_variance_terms(parse_spec("marginals:2x3:1"))
    >>> V.toarray().round(4).tolist(), m.tolist()
    ([[1.5, 0.0, 1.5, 0.0], [0.6667, 1.3333, 0.0, 0.0]], [2, 3])
    """
    sizes = np.asarray(W.domain, dtype=float)
    k = sizes.size
    bits = subset_bits(k).astype(bool)
    weights = W.weights if isinstance(W, Union) else np.ones(1)
    rows, cols, vals, counts = [], [], [], []
    for t, (w, T) in enumerate(zip(weights, marginal_attribute_sets(W))):
        in_t = np.zeros(k, dtype=bool)
        in_t[list(T)] = True
        inside = np.flatnonzero(~np.any(bits & ~in_t, axis=1))  # U ⊆ T
        factor = np.where(bits[inside], 1.0 - 1.0 / sizes, np.where(in_t, 1.0 / sizes, sizes))
        rows.append(np.full(inside.size, t))
        cols.append(inside)
        vals.append(float(w) ** 2 * np.prod(factor, axis=1))
        counts.append(int(np.prod(sizes[in_t])))
    V = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(counts), 2**k))
    return V, np.asarray(counts, dtype=np.int64)
