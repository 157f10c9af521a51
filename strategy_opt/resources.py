"""Memory estimates: refuse work that cannot fit *before* allocating it.

A SPEC such as ``all-range:200000`` is a dozen characters, but its dense Gram
matrix alone takes 8 * 200000^2 bytes = 320 GB. Rather than letting the
operating system kill the process half-way (or swap for hours), the CLI and
`strategy_opt.spec.parse_spec` estimate the bytes an operation needs and
refuse it with the estimate when it exceeds the memory available.

Estimates (constants in `strategy_opt.defaults`):

* building a workload: its interval arrays and Python objects (`strategy_opt.spec`);
* dense analysis (error profile, support check, most strategy programs):
  ``DENSE_WORK_COPIES`` dense n x n float64 matrices (the Gram matrix, ``A^T A``,
  its factorisation and the pseudo-inverse; measured peak 5.1-5.3 copies);
* per-query vectors (answers, intervals, variances, interval bounds):
  ``BYTES_PER_QUERY`` bytes per workload query.

Available memory is ``MemAvailable`` of ``/proc/meminfo`` (Linux), else
``os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')``, lowered to
what the limits on the process leave: its address-space limit (``ulimit -v``,
``prlimit --as``) minus the address space already mapped, and its cgroup's
memory limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) minus the
usage that cannot be reclaimed. The environment variable
``STRATEGY_OPT_MEMORY`` (bytes, or with a suffix ``K``/``M``/``G``/``T``,
powers of 1000) overrides all of these, e.g. to cap a job on a shared machine.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from .defaults import BYTES_PER_QUERY, DENSE_WORK_COPIES, MAX_DENSE_N
from .exceptions import InputError

__all__ = ["available_memory", "format_bytes", "format_count", "require_memory", "psd_solver_bytes", "WorkloadSize", "operation_bytes", "OPERATIONS"]

#: Operations whose memory `operation_bytes` estimates (``None``: building only).
OPERATIONS = (None, "solve", "error", "run", "release", "release-data", "solve-diagonal", "error-diagonal", "release-diagonal", "error-factors")

#: Bytes per cell of the work on a strategy with diagonal ``A^T A`` on a flat domain (the
#: identity as a sparse matrix, its checked copies, ``diag(W^T W)`` and the inverse
#: diagonal; measured: 95 bytes per cell at the peak of solving all-range:10000000).
DIAGONAL_BYTES_PER_CELL = 128

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([KMGT]?)B?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise InputError(f"STRATEGY_OPT_MEMORY must be a size such as 8G or 500M, got {text!r}")
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def available_memory() -> int | None:
    """Bytes of memory available to this process, or None if unknown.

    Examples
    --------
    >>> import os
    >>> os.environ["STRATEGY_OPT_MEMORY"] = "2G"
    >>> available_memory()
    2000000000
    >>> del os.environ["STRATEGY_OPT_MEMORY"]
    """
    override = os.environ.get("STRATEGY_OPT_MEMORY")
    if override:
        return _parse_size(override)
    limits = [v for v in (_system_available(), _address_space_left(), _cgroup_left()) if v is not None]
    return max(0, min(limits)) if limits else None


def _system_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo``, else the available physical pages; None if unknown."""
    value = _proc_field("/proc/meminfo", "MemAvailable:")
    if value is not None:
        return value
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _proc_field(path: str, key: str) -> int | None:
    """A ``key: value kB`` field of a /proc file in bytes, or None."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _address_space_left() -> int | None:
    """Bytes the address-space limit (``RLIMIT_AS``) still allows, or None without a limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = _proc_field("/proc/self/status", "VmSize:")
    return int(soft) - (used or 0)


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
        return int(text)
    except (OSError, ValueError):
        return None  # missing, or "max" (no limit)


def _cgroup_left() -> int | None:
    """Bytes the memory limit of this process's cgroup still allows, or None without a (readable) limit.

    The cgroup path of ``/proc/self/cgroup`` is looked up under the mount, then
    the mount's root (inside a container the process's cgroup is usually the
    root of its cgroup namespace).
    """
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, path = parts[1], parts[2].strip().rstrip("/")
        if controllers == "":  # cgroup v2 (or the unified hierarchy of a hybrid setup)
            mounts, files = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"), ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # cgroup v1
            mounts, files = ("/sys/fs/cgroup/memory",), ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        for mount in mounts:
            for base in (mount + path, mount):
                if os.path.exists(f"{base}/{files[0]}"):
                    limit, usage = _read_int(f"{base}/{files[0]}"), _read_int(f"{base}/{files[1]}") or 0
                    if limit is not None and limit < 1 << 60:  # "max", or v1's huge number: no limit
                        return limit - max(0, usage - _stat_field(f"{base}/memory.stat", files[2]))
                    break
    return None


def _stat_field(path: str, key: str) -> int:
    """A ``key value`` line of a cgroup ``memory.stat`` (bytes), 0 if missing: page cache that can be reclaimed."""
    try:
        with open(path) as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def format_count(k: int) -> str:
    """``k`` with thousands separators, or as a power of ten when it has more than 15 digits (all-predicate:1100).

    Examples
    --------
    >>> format_count(2080), format_count(2**1100)
    ('2,080', '~10^331')
    """
    digits = len(str(k))
    return f"{k:,}" if digits <= 15 else f"~10^{digits - 1}"


def format_bytes(nbytes: float) -> str:
    """Human-readable size in powers of 1000 (``'320 GB'``).

    Examples
    --------
    >>> format_bytes(8 * 200000**2)
    '320 GB'
    >>> format_bytes(1.5e3)
    '1.5 kB'
    """
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


def require_memory(nbytes: float, what: str, hint: str = "") -> None:
    """Raise `InputError` when ``nbytes`` exceed the available memory.

    Parameters
    ----------
    nbytes : float
        Estimated peak bytes of the operation.
    what : str
        What needs them, for the message (``"workload SPEC 'all-range:200000'"``).
    hint : str
        What the user can do instead.

    Returns
    -------
    None
        Also when the available memory cannot be determined (nothing is refused then).

    Examples
    --------
    >>> require_memory(1e3, "a small array")
    >>> require_memory(1e30, "the matrix", "use a smaller domain")
    Traceback (most recent call last):
    ...
    strategy_opt.exceptions.InputError: the matrix needs about 1e+12 EB of memory but only ... is available; use a smaller domain
    """
    avail = available_memory()
    if avail is not None and nbytes > avail:
        msg = f"{what} needs about {format_bytes(nbytes)} of memory but only {format_bytes(avail)} is available"
        raise InputError(f"{msg}; {hint}" if hint else msg)


#: Bytes per k^4 of a k x k PSD cone in Clarabel's KKT system (dense cone block of
#: (k(k+1)/2)^2 entries). Peak RSS above the interpreter's (about 130 MB), one BLAS thread:
#: minerror-l2 total on all ranges over 32, 48, 64 cells 13.1-13.5 per k^4 (3.75 GB at 64 cells),
#: its max objective over 16 and 24 cells 15.8 and 13.6, minerror-l1 over 12 and 16 cells 16.0
#: and 15.1. (The earlier constant 2.0 let all ranges over 128 cells start: killed by the
#: kernel at 16 GB.)
CLARABEL_PSD_BYTES_PER_K4 = 16.0


def psd_solver_bytes(solver: str, psd_sizes) -> float:
    """Estimated peak bytes of a conic solver on PSD cones of the given sizes (0 when unknown).

    Clarabel assembles each PSD cone's block densely, so its memory grows as
    ``k^4`` (it aborts the process when the allocation fails); SCS stays near the
    size of the problem data and is not estimated.

    Examples
    --------
    >>> format_bytes(psd_solver_bytes("CLARABEL", [130]))  # all ranges over 64 cells: 3.75 GB measured
    '4.57 GB'
    """
    if (solver or "").upper() != "CLARABEL":
        return 0.0
    return sum(CLARABEL_PSD_BYTES_PER_K4 * float(k) ** 4 for k in psd_sizes)


@dataclass
class WorkloadSize:
    """Sizes of a workload known before it is built (from its SPEC).

    Attributes
    ----------
    n : int
        Number of cells.
    m : int
        Number of queries (a Python int: may be astronomically large).
    build_bytes : float
        Bytes needed to build the workload object.
    kron_blocks : list of int
        Factor domain sizes when every part is a Kronecker product over the
        same factor domains (structured analysis); empty otherwise.

    Examples
    --------
    All ranges over 1024 cells: ``1024 * 1025 / 2`` queries; a solve holds `DENSE_WORK_COPIES` dense
    1024 x 1024 float64 matrices:

    >>> size = WorkloadSize(n=1024, m=1024 * 1025 // 2)
    >>> size.m, size.kron_blocks
    (524800, [])
    >>> nbytes, why = operation_bytes(size, "solve")
    >>> nbytes == DENSE_WORK_COPIES * 8 * 1024**2, why
    (True, '6 dense 1024x1024 matrices (8.39 MB each)')
    """

    n: int
    m: int
    build_bytes: float = 0.0
    kron_blocks: list = field(default_factory=list)


def _dense_bytes(k: int) -> float:
    return DENSE_WORK_COPIES * 8.0 * float(k) ** 2


def operation_bytes(size: WorkloadSize, operation: str | None) -> tuple[float, str]:
    """Estimated peak bytes of an operation on a workload, and what dominates them.

    Parameters
    ----------
    size : WorkloadSize
    operation : {None, 'solve', 'error', 'run', 'release', 'release-data', 'solve-diagonal', 'error-diagonal', 'release-diagonal', 'error-factors'}
        ``None`` counts only building the workload; ``release-data`` is a
        data-dependent release (no dense n x n work); the ``-diagonal``
        operations concern a strategy with diagonal ``A^T A`` (the identity),
        analysed in O(n) memory (`DIAGONAL_BYTES_PER_CELL`) on a flat domain
        and per factor, like any strategy, on a Kronecker one; ``error-factors``
        is ``error`` of a Kronecker strategy, analysed factor by factor on a
        Kronecker workload (its factors' dense matrices, no per-query memory).

    Returns
    -------
    nbytes : float
    reason : str
        The dominant term, for the message.

    Examples
    --------
    >>> b, why = operation_bytes(WorkloadSize(n=200000, m=200000 * 200001 // 2), "error")
    >>> format_bytes(b), why
    ('1.92 TB', '6 dense 200000x200000 matrices (320 GB each)')
    """
    if operation not in OPERATIONS:
        raise InputError(f"unknown operation {operation!r}; one of {', '.join(repr(o) for o in OPERATIONS)}")
    terms = [(size.build_bytes, "building the workload")]
    # error of a Kronecker strategy on a Kronecker workload: factor by factor, no per-query memory; on a flat one, as any
    per_factor = operation == "error-factors" and bool(size.kron_blocks)
    if operation == "error-factors":
        operation = "error"
    if operation is not None:
        n = size.n
        diagonal = operation.endswith("-diagonal") and not size.kron_blocks  # Kronecker: per factor, as any strategy
        operation = operation.removesuffix("-diagonal")
        if diagonal:
            terms.append((DIAGONAL_BYTES_PER_CELL * float(n), f"the {n:,}-cell diagonal strategy ({DIAGONAL_BYTES_PER_CELL} bytes per cell)"))
        # dawa, mwem: sparse or structured work (GreedyH's dense Gram only to 4096 cells); a diagonal strategy: O(n)
        dense = operation != "release-data" and not diagonal
        if dense and not per_factor and (n <= MAX_DENSE_N or (operation != "run" and not size.kron_blocks)):
            # run skips the dense support check above MAX_DENSE_N; solve/error need it
            terms.append((_dense_bytes(n), f"{DENSE_WORK_COPIES} dense {n}x{n} matrices ({format_bytes(8.0 * n * n)} each)"))
        elif dense and size.kron_blocks and operation != "run":
            terms.append((sum(_dense_bytes(k) for k in size.kron_blocks), f"dense factor matrices of sizes {size.kron_blocks}"))
        # (error enumerates the per-query variances only where they fit: `api.error_report`; the total is exact without them)
        if operation in ("run", "release", "release-data"):
            terms.append((BYTES_PER_QUERY * float(size.m), f"{size.m:,} workload queries ({BYTES_PER_QUERY} bytes each)"))
    total = sum(t[0] for t in terms)
    reason = max(terms, key=lambda t: t[0])[1]
    return total, reason
