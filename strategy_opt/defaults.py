"""Library-wide constants: numerical tolerances and size limits.

Solver-specific settings (tolerances, iteration caps, time budgets) live in
the solver profiles of ``solvers/*.toml``; this module holds the few constants
that are not tied to a solver.
"""

#: Relative tolerance of the support check ``||W (I - P_A)||_F^2 <= tol * ||W||_F^2``.
SUPPORT_RTOL = 1e-8

#: Eigenvalues below ``EIG_RTOL * max eigenvalue`` are treated as zero.
EIG_RTOL = 1e-10

#: Largest number of stored entries a workload matrix may have before
#: ``Workload.matrix()`` refuses to build it (use ``gram()`` or ``operator()``).
MAX_MATRIX_ENTRIES = 50_000_000

#: Largest domain size n for which an n x n dense Gram matrix is formed.
MAX_DENSE_N = 20_000

#: Largest dense symmetric eigenvalue problem solved for the Gram spectrum (the SVD bound): min(m, n).
#: One LAPACK call, not interruptible: about 1 min at 8192 on one thread of these machines, ~10 min at 20000.
EIGVALS_MAX_DIM = 8192
#: Methods whose strategy has a diagonal A^T A (no row touches two cells): solved, analysed and
#: run on flat domains of any size, with no n x n matrix (`strategy_opt.error.diagonal_inverse`).
DIAGONAL_METHODS = frozenset({"identity"})

#: Support test on flat domains past `MAX_DENSE_N` (`strategy_opt.executor.probe_support`): rounds of
#: random probes (a direction of the strategy's null space against each query; a random combination
#: of the queries against the strategy's row space), LSMR's iteration cap per solve, the most queries
#: m for which a probe is drawn or answered, the share of a random combination outside the row space
#: refused (a combination can exceed every query's own share, so above `SUPPORT_RTOL`), and the
#: smallest null-space part of a Gaussian vector (relative) taken as a null space.
SUPPORT_PROBES = 2
SUPPORT_PROBE_MAX_ITER = 5_000
SUPPORT_PROBE_MAX_QUERIES = 2**26
SUPPORT_PROBE_MASS_RTOL = 1e-6
SUPPORT_PROBE_NULL_FLOOR = 1e-6

#: Strategies with at most this many entries are reconstructed with dense lstsq;
#: larger or sparse strategies use LSMR.
DENSE_LSTSQ_ENTRIES = 4_000_000

#: Non-negative least squares: sparse systems with at most this many columns are solved exactly by
#: active-set NNLS on an n x n factor of M^T M (hierarchy on 4096 cells: 7-11 s on 2 cores) ...
NNLS_DENSE_MAX_N = 4096
#: ... larger ones by L-BFGS-B with bounds x >= 0 from the clipped least-squares estimate (two sparse
#: products per step; the objective divided by its value at the start): its iteration limit. 8192 cells
#: (SEARCHLOGS + INCOME), H_2 at eps = 1, one BLAS thread: 0.22 s, prefix MSE 356 (ls 533), objective
#: 4.825e6, the optimum's; scipy's trust-region lsq_linear, used before, stopped at its 200 iterations
#: (256 x 256 cells: 12x the objective), and dividing by ||b||^2 instead stopped after one step (400x).
NNLS_MAX_ITER = 20_000

#: Two-sided confidence level of the intervals returned by the executor.
CONFIDENCE = 0.95

#: Format version of files written by this library. Version 2 adds ``meta_sha256``
#: (hash of the metadata itself) to strategy files; version 3 seals the whole file
#: (`strategy_opt.io`); files of versions 1 and 2 are still read.
FILE_FORMAT_VERSION = 3

#: Dense n x n float64 matrices held at the peak of an analysis or a solve (Gram matrix,
#: ``A^T A``, its factorisation, the pseudo-inverse); measured 5.1-5.3 at n = 3000-4000.
DENSE_WORK_COPIES = 6

#: Bytes per workload query held by ``run``/``error`` (answers, intervals, variances,
#: interval bounds); measured about 30.
BYTES_PER_QUERY = 48
#: Bytes per query held while `strategy_opt.api.error_report` enumerates the per-query variances (interval
#: workloads build the sparse rows and their squares): measured 3.09 GB at the peak for all-range:8192's 33.5
#: million queries with an identity strategy, about 90 each (at BYTES_PER_QUERY error ran out of memory under a
#: 3 GB limit instead of reporting the exact total without the largest variance).
VARIANCE_BYTES_PER_QUERY = 96

#: Bytes of one workload object (Python object, dicts, small arrays) in memory estimates.
WORKLOAD_OBJECT_BYTES = 2_000

#: Longest workload SPEC accepted, in characters, and deepest parenthesis nesting.
MAX_SPEC_LENGTH = 10_000
MAX_SPEC_DEPTH = 50

#: delta of (epsilon, delta)-DP when a release under ``approx`` gives none.
DEFAULT_DELTA = 1e-6

#: Noise is added only where float64 resolves it: the spacing of representable values at the
#: size of every noisy value must be at most the noise scale / this (`executor.check_noise_resolution`).
#: 16 steps per scale refuse 1e17 counts under scale 1 (spacing 16) and still let every DPBench
#: histogram (totals up to 2.8e7, spacing 3.7e-9) through at epsilon 1e7 with a sensitivity-1 strategy
#: (scale 1e-7); 1024 refused PATENT at epsilon 1e6 under p-identity.
NOISE_RESOLUTION = 16

#: Squared column norms (strategies) or Gram diagonals (workloads) below this, near the subnormal
#: range where A^T A loses its digits, are refused as too small, with a hint to rescale.
TINY_GRAM = 1e-250
#: ... and sums of squared workload entries above this, too close to float64's limit (1.8e308) for Gram products.
MAX_FLOAT_SQUARED = 1e300

#: A number as users type it on the command line: ASCII decimal or exponent notation (``float`` and
#: ``Decimal`` also read ``1_0`` and other scripts' digits, which are refused).
DECIMAL_PATTERN = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"

#: A Kronecker strategy whose flat matrix has more non-zeros than this stays a product: ``.npz``
#: files store its factors (keys ``factor_0``, ``factor_1``, ..., ``meta.layout = "kronecker-factors"``;
#: the matrix is ``np.kron`` of them in order; ``.mtx`` and ``.csv`` refuse it), and ``run``
#: measures and reconstructs it factor by factor (least squares only).
FLAT_MAX_NONZEROS = 5 * 10**7

#: Largest number of cells (and of queries of a generated workload) a workload SPEC or constructor accepts.
MAX_CELLS = 10**9
