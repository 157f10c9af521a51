"""MWEM: multiplicative weights with private query selection (data-dependent baseline).

Hardt, Ligett, McSherry, "A Simple and Practical Algorithm for Differentially
Private Data Release", NIPS 2012, Algorithm 1. Starting from the uniform
histogram, each of T rounds

1. selects the workload query worst answered by the current estimate A with
   an eps-DP selection (the paper's exponential mechanism; here
   report-noisy-max, below) on the score ``|q(A) - q(x)|``, sensitivity = the
   largest entry of the workload ``Delta_W`` -- 1 for counting queries,
2. measures it with the Laplace mechanism (`strategy_opt.executor.measure`),
3. updates ``A(i) <- A(i) exp(q_i (m - q(A)) / (2 N))`` and renormalises to N.

As in the paper's practical variant, after each round the update is swept
over all measurements taken so far (``sweeps`` times) and the final estimate
is released rather than the average of the rounds.

Budget: the paper takes the number of records N as public; under add/remove
neighbours it is not, so N is measured too. The 2T + 1 mechanisms (the total,
then T selections and T measurements) each get ``eps / (2T + 1)`` (sequential
composition). The selection is report-noisy-max with exponential noise of
scale ``2 Delta_W / eps'`` (eps'-DP; the law of permute-and-flip, which is
never worse than the exponential mechanism, McKenna & Sheldon 2020). Both the
selections and the measurements use the caller's sampler: OpenDP's
``make_noisy_max`` and Laplace measurement, or NumPy's generator for
``simulate``.

The release records this split in its facts (the answer sidecar's
``method_facts``): ``epsilon_per_mechanism`` = eps / (2T + 1),
``epsilon_per_round`` = 2 eps / (2T + 1) (a selection and a measurement),
``epsilon_total_count`` = eps / (2T + 1) (measuring N), so that
``rounds * epsilon_per_round + epsilon_total_count = eps``; and the noise:
``noise_scale_total`` (Laplace, N), ``selection_noise_scale`` (exponential)
and the release's ``noise_scale``, the largest Laplace scale of the T query
measurements (all equal when the workload's rows share their largest entry,
e.g. counting queries: 1 / epsilon_per_mechanism).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..exceptions import InputError
from ..executor import Release, check_histogram, check_noise_resolution, measure, resolve_sampler
from ..privacy import Privacy, PureDP
from ..samplers import noisy_max_scale, opendp_select_max
from ..progress import Progress
from ..registry import register_release
from ..resources import require_memory
from ..workload import ExplicitWorkload, IntervalWorkload, Kronecker, Union, Workload

__all__ = ["mwem", "mwem_estimate", "DEFAULT_ROUNDS", "DEFAULT_SWEEPS"]

#: Default number of rounds T.
DEFAULT_ROUNDS = 10

#: Default number of sweeps of the update over past measurements per round.
DEFAULT_SWEEPS = 10
#: Most cell updates (``rounds (rounds + 1) / 2 * sweeps * n``) accepted: the work grows with the square of the rounds
#: (an outside audit's rounds=1e11 ran until killed); measured 2e8 updates in 1.6 s on one thread.
MAX_UPDATES = 1e11

#: Bound on the exponent of one multiplicative update (floating-point safety;
#: reached only when a measurement's noise is many times the total N).
_MAX_EXPONENT = 50.0

#: Bytes per workload query at the peak of MWEM whose selection runs through OpenDP (the scores, OpenDP's
#: copy of them and its noisy-max work): measured 170 on all-range:2048 (2.1 million queries), 54 seeded.
OPENDP_BYTES_PER_QUERY = 176


def _max_entry(W: Workload) -> float:
    """Largest absolute entry of W: the sensitivity of one query's answer."""
    if isinstance(W, IntervalWorkload):
        return 1.0
    if isinstance(W, Kronecker):
        return float(np.prod([_max_entry(f) for f in W.factors]))
    if isinstance(W, Union):
        return float(max(w * _max_entry(p) for w, p in zip(W.weights, W.parts)))
    M = W.matrix()
    return float(abs(M).max()) if M.nnz else 0.0


def _row(W: Workload, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-zero positions and values of query i."""
    if isinstance(W, ExplicitWorkload) or not isinstance(W, (IntervalWorkload, Kronecker, Union)):
        r = sp.csr_matrix(W.matrix()[i])
        return r.indices.astype(np.int64), r.data.astype(float)
    if isinstance(W, IntervalWorkload):
        lo, hi = W.intervals
        idx = np.arange(lo[i], hi[i] + 1)
        return idx, np.ones(idx.size)
    e = np.zeros(W.m)
    e[i] = 1.0
    q = W.rmatvec(e)
    idx = np.flatnonzero(q)
    return idx, q[idx]


def _select(score: np.ndarray, sensitivity: float, epsilon: float, gen: np.random.Generator | None, sampler: str) -> int:
    """eps-DP index of the largest score: report-noisy-max with exponential noise."""
    check_noise_resolution(score, noisy_max_scale(sensitivity, epsilon), "MWEM's selection scores (query errors of the estimate)")
    if sampler == "opendp":
        return opendp_select_max(score, sensitivity, epsilon)
    return int(np.argmax(score + gen.exponential(noisy_max_scale(sensitivity, epsilon), size=score.size)))


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def mwem_estimate(
    x,
    workload: Workload,
    epsilon: float,
    *,
    rng=None,
    sampler: str | None = None,
    rounds: int = DEFAULT_ROUNDS,
    sweeps: int = DEFAULT_SWEEPS,
) -> tuple[np.ndarray, float]:
    """Run MWEM; return the estimated histogram and the Laplace scale of the query measurements.

    The scale is the largest of the T query measurements' (each is
    ``max_j |q_ij| / epsilon_per_mechanism``; equal for counting queries).

    Parameters
    ----------
    x : array_like (n,)
        Non-negative histogram.
    workload : Workload
    epsilon : float
        Total budget (eps-DP).
    rng : int or numpy Generator, optional
        Seed of the ``simulate`` sampler (refused with ``'opendp'``).
    sampler : {'opendp', 'simulate'}, optional
        Sampler of the selections and measurements. Default: ``'simulate'`` if
        ``rng`` is given, else the vetted ``'opendp'`` (as `strategy_opt.executor.run`).
    rounds : int
        Number of rounds T.
    sweeps : int
        Passes of the update over all past measurements after each round.

    Returns
    -------
    x_hat : ndarray (n,)
        The estimated (non-negative) histogram.
    scale : float
        The Laplace scale of the query measurements.

    Raises
    ------
    InputError
        For a bad histogram, budget, ``rounds`` or ``sweeps``, or more cell updates than MWEM is allowed.

    Examples
    --------
    Three rounds spend ``2 * 3 + 1 = 7`` equal shares of epsilon = 0.7 (the total count, then one selection and
    one measurement per round), so each counting query is measured with Laplace scale ``1 / 0.1``:

    >>> from strategy_opt.workload import prefix
    >>> x_hat, scale = mwem_estimate(np.array([10.0, 0.0, 0.0, 30.0]), prefix(4), 0.7, rng=0, rounds=3)
    >>> scale, x_hat.shape, bool((x_hat >= 0).all())
    (10.0, (4,), True)
    """
    x, rounds, sweeps = _validated(x, workload, epsilon, rounds, sweeps)
    A, scales = _mwem(x, workload, epsilon, rng, sampler, rounds, sweeps)
    return A, scales["measurement"]


def _validated(x, workload: Workload, epsilon: float, rounds, sweeps) -> tuple[np.ndarray, int, int]:
    x = check_histogram(x, workload.n, workload.domain)
    rounds = _check_count(rounds, "rounds")
    sweeps = _check_count(sweeps, "sweeps")
    work = rounds * (rounds + 1) / 2 * sweeps * workload.n  # cell updates: round t sweeps over its t measurements
    if work > MAX_UPDATES:
        raise InputError(
            f"mwem with rounds={rounds} and sweeps={sweeps} on {workload.n} cells makes about {work:.2g} cell updates "
            f"(limit {MAX_UPDATES:.0e}, about 10 minutes; 2e8 took 1.6 s): lower rounds or sweeps"
        )
    PureDP(epsilon)  # validates epsilon as every privacy setting does
    return x, rounds, sweeps


def _budget_split(epsilon: float, rounds: int) -> dict:
    """The sequential-composition split of `mwem_estimate` (2T + 1 equal shares, summing to at most epsilon).

    >>> _budget_split(0.7, 3)["epsilon_per_mechanism"] * 7 <= 0.7
    True
    """
    k = 2 * rounds + 1
    share = epsilon / k
    while Fraction(share) * k > Fraction(epsilon):  # rounding may put the shares' exact sum an ulp above epsilon
        share = math.nextafter(share, 0.0)
    return {
        "mechanisms": 2 * rounds + 1,
        "epsilon_per_mechanism": share,
        "epsilon_per_round": 2 * share,
        "epsilon_total_count": share,
    }


def _mwem(x: np.ndarray, workload: Workload, epsilon: float, rng, sampler: str | None, rounds: int, sweeps: int) -> tuple[np.ndarray, dict]:
    """MWEM on validated inputs; returns the estimate and the noise scales actually used.

    Scales: ``total`` (Laplace, measuring N), ``selection`` (exponential noise of
    report-noisy-max) and ``measurement`` (the largest Laplace scale of the T query
    measurements).
    """
    sampler = resolve_sampler(sampler, rng)
    gen = np.random.default_rng(rng) if sampler == "simulate" else None  # OpenDP draws its own noise
    if sampler == "opendp":
        require_memory(
            OPENDP_BYTES_PER_QUERY * float(workload.m),
            f"MWEM with OpenDP's selection over {workload.m:,} queries ({OPENDP_BYTES_PER_QUERY} bytes per query)",
            "use fewer queries",
        )
    share = PureDP(_budget_split(epsilon, rounds)["epsilon_per_mechanism"])
    delta_w = _max_entry(workload)
    if delta_w == 0:
        raise InputError("workload has no non-zero entry")
    n = x.size
    total, total_scale = measure(sp.csr_matrix(np.ones((1, n))), x, share, rng=gen, sampler=sampler, what="the total count")
    N = max(float(total[0]), 1.0)
    A = np.full(n, N / n)
    true_answers = workload.matvec(x)
    measured: list[tuple[np.ndarray, np.ndarray, float]] = []
    scale = 0.0
    progress = Progress()
    for t in range(rounds):
        progress("mwem: round %d of %d", t + 1, rounds)
        score = np.abs(workload.matvec(A) - true_answers)
        i = _select(score, delta_w, share.epsilon, gen, sampler)
        idx, val = _row(workload, i)
        y, scale_i = measure(
            sp.csr_matrix((val, (np.zeros(idx.size, dtype=np.int64), idx)), shape=(1, n)), x, share, rng=gen, sampler=sampler,
            what="the selected workload query's answer",
        )
        scale = max(scale, scale_i)
        measured.append((idx, val, float(y[0])))
        for _ in range(sweeps):
            for idx_j, val_j, m_j in measured:
                A[idx_j] *= np.exp(np.clip(val_j * (m_j - val_j @ A[idx_j]) / (2.0 * N), -_MAX_EXPONENT, _MAX_EXPONENT))
                A *= N / A.sum()
    return A, {"total": total_scale, "selection": noisy_max_scale(delta_w, share.epsilon), "measurement": scale}


@register_release(
    "mwem",
    privacy=("pure",),
    source="Hardt, Ligett, McSherry, NIPS 2012, Algorithm 1",
    summary="multiplicative weights + report-noisy-max selection (options rounds=T (10), sweeps=10)",
)
def mwem(x, workload: Workload, privacy: Privacy, *, rng=None, sampler: str | None = None, **options) -> Release:
    """MWEM release: answers from the final multiplicative-weights estimate. Options ``rounds``, ``sweeps``.

    Parameters
    ----------
    x : array_like (n,)
        The histogram.
    workload : Workload, str or array_like
        The queries (a SPEC or a matrix is converted by the registry's wrapper).
    privacy : PureDP
        The budget, split over the rounds.
    rng : int or numpy Generator, optional
        Seed of the ``simulate`` sampler.
    sampler : {'opendp', 'simulate'}, optional
        As in `strategy_opt.executor.measure`.
    **options
        ``rounds`` (`DEFAULT_ROUNDS`), ``sweeps`` (`DEFAULT_SWEEPS`).

    Returns
    -------
    Release
        No confidence intervals.

    Examples
    --------
    The estimate's total is the noisy count N, measured with ``eps / (2T + 1)``
    (here 1e6 / 9): at an epsilon this large the last prefix (the total) is the true 90:

    >>> from strategy_opt.privacy import PureDP
    >>> x = np.array([10.0, 10.0, 10.0, 10.0, 0.0, 0.0, 0.0, 50.0])
    >>> r = mwem(x, "prefix:8", PureDP(1e6), rng=0, rounds=4)
    >>> r.answers.shape, round(float(r.answers[-1]), 3), r.facts["epsilon_total_count"] == 1e6 / 9
    ((8,), 90.0, True)
    """
    unknown = sorted(set(options) - {"rounds", "sweeps"})
    if unknown:
        raise InputError(f"unknown MWEM option(s) {', '.join(unknown)}; available: rounds, sweeps")
    if privacy.notion != "pure":
        raise InputError(f"MWEM is eps-DP (privacy 'pure'), got {privacy.notion!r}")
    effective = {"rounds": DEFAULT_ROUNDS, "sweeps": DEFAULT_SWEEPS, **options}
    x, rounds, sweeps = _validated(x, workload, privacy.epsilon, effective["rounds"], effective["sweeps"])
    x_hat, scales = _mwem(x, workload, privacy.epsilon, rng, sampler, rounds, sweeps)
    facts = effective | _budget_split(privacy.epsilon, rounds) | {"noise_scale_total": scales["total"], "selection_noise_scale": scales["selection"]}
    return Release(workload.matvec(x_hat), None, None, x_hat, scales["measurement"], facts)
