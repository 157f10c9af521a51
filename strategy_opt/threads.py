"""BLAS thread settings for dense factorizations.

OpenBLAS's threaded LAPACK slows down several-fold when the cores are shared
with other processes (measured on these 2-core machines: Cholesky of a
4096 x 4096 matrix in 1.3 s on one thread, 3.6 s on two threads of a loaded
machine; Cholesky of 2048^2 in 0.25 s vs 1.5-2.3 s), while matrix products
stay efficient when threaded. Factorizations (Cholesky, ``dpotri``,
symmetric eigenvalues) therefore run inside `factorization_threads`.

Set ``STRATEGY_OPT_FACTORIZATION_THREADS`` to change the limit (e.g. 2 on an
otherwise idle machine). Loops of many small products run on one thread
(`one_blas_thread`), and so does every command-line command unless
``STRATEGY_OPT_BLAS_THREADS`` says otherwise (`command_threads`).
"""

from __future__ import annotations

import contextlib
import os

from threadpoolctl import ThreadpoolController

from .exceptions import InputError

__all__ = ["FACTORIZATION_THREADS", "COMMAND_THREADS", "factorization_threads", "one_blas_thread", "command_threads", "blas_threads"]

_FACTORIZATION_TEXT = os.environ.get("STRATEGY_OPT_FACTORIZATION_THREADS", "1").strip()
#: BLAS threads used inside dense factorizations (None when ``STRATEGY_OPT_FACTORIZATION_THREADS`` is not a
#: positive integer: `command_threads` and `factorization_threads` then refuse it with an `InputError`).
FACTORIZATION_THREADS = int(_FACTORIZATION_TEXT) if _FACTORIZATION_TEXT.isdigit() and int(_FACTORIZATION_TEXT) >= 1 else None


def _factorization_limit() -> int:
    if FACTORIZATION_THREADS is None:
        raise InputError(f"STRATEGY_OPT_FACTORIZATION_THREADS must be a positive integer, got {_FACTORIZATION_TEXT!r}")
    return FACTORIZATION_THREADS

#: BLAS threads for a command-line command (environment variable ``STRATEGY_OPT_BLAS_THREADS``; ``all``
#: keeps the process's own setting). One by default: on these shared 2-core machines a second thread
#: made loops of small products 5-100x slower under load (svd-approx on marginals:4x4x4x4:2 120-206 s
#: against 1.1 s; l1-weighting on its Fourier basis 26 s against 4.7 s), and the benchmarks measure
#: on one thread.
COMMAND_THREADS = os.environ.get("STRATEGY_OPT_BLAS_THREADS", "1").strip().lower()

_CONTROLLER = ThreadpoolController()


def blas_threads() -> int:
    """The most threads any loaded BLAS library runs with now (1 when none is found), recorded with every strategy.

    Local searches end where rounding leads them, and the thread count changes the rounding of BLAS
    reductions (l1-weighting, Fourier basis on prefix:200: E_1 11749 on one thread, 20100 on two).

    Examples
    --------
    >>> with one_blas_thread():
    ...     blas_threads()
    1
    """
    return max((p["num_threads"] for p in _CONTROLLER.info() if p["user_api"] == "blas"), default=1)


def factorization_threads():
    """Context manager limiting BLAS to `FACTORIZATION_THREADS` threads.

    Returns
    -------
    threadpoolctl limiter
        Use it in a ``with`` statement; the previous limits come back when the block ends.

    Examples
    --------
    >>> import numpy as np
    >>> with factorization_threads():
    ...     np.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    return _CONTROLLER.limit(limits=_factorization_limit(), user_api="blas")


def one_blas_thread():
    """Context manager limiting BLAS to one thread, for loops of many small dense operations: on these
    2-core machines a second thread makes each one slower (the signed search on prefix:8: 0.5 s on one
    thread, 72 s on two under load).

    Returns
    -------
    threadpoolctl limiter
        Use it in a ``with`` statement; the previous limits come back when the block ends.

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> with one_blas_thread():
    ...     {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} <= {1}
    True
    """
    return _CONTROLLER.limit(limits=1, user_api="blas")


def command_threads():
    """Context manager limiting BLAS to `COMMAND_THREADS` threads for a command (a no-op for ``all``).

    Returns
    -------
    threadpoolctl limiter or contextlib.nullcontext

    Raises
    ------
    InputError
        When ``STRATEGY_OPT_BLAS_THREADS`` is neither a positive integer nor ``all``, or
        ``STRATEGY_OPT_FACTORIZATION_THREADS`` is not a positive integer (checked here, before any work).

    Examples
    --------
    >>> import numpy as np
    >>> with command_threads():  # one BLAS thread unless STRATEGY_OPT_BLAS_THREADS says otherwise
    ...     float(np.ones(3) @ np.ones(3))
    3.0
    """
    _factorization_limit()
    if COMMAND_THREADS == "all":
        return contextlib.nullcontext()
    try:
        limit = int(COMMAND_THREADS)
    except ValueError:
        raise InputError(f"STRATEGY_OPT_BLAS_THREADS must be a positive integer or 'all', got {COMMAND_THREADS!r}") from None
    if limit < 1:
        raise InputError(f"STRATEGY_OPT_BLAS_THREADS must be a positive integer or 'all', got {COMMAND_THREADS!r}")
    return _CONTROLLER.limit(limits=limit, user_api="blas")
