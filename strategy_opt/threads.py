"""BLAS thread settings for dense factorizations.

OpenBLAS's threaded LAPACK slows down several-fold when the cores are shared
with other processes (measured on these 2-core machines: Cholesky of a
4096 x 4096 matrix in 1.3 s on one thread, 3.6 s on two threads of a loaded
machine; Cholesky of 2048^2 in 0.25 s vs 1.5-2.3 s), while matrix products
stay efficient when threaded. Factorizations (Cholesky, ``dpotri``,
symmetric eigenvalues) therefore run inside `factorization_threads`.

Set ``STRATEGY_OPT_FACTORIZATION_THREADS`` to change the limit (e.g. 2 on an
otherwise idle machine).
"""

from __future__ import annotations

import os

from threadpoolctl import ThreadpoolController

__all__ = ["FACTORIZATION_THREADS", "factorization_threads"]

#: BLAS threads used inside dense factorizations.
FACTORIZATION_THREADS = int(os.environ.get("STRATEGY_OPT_FACTORIZATION_THREADS", "1"))

_CONTROLLER = ThreadpoolController()


def factorization_threads():
    """Context manager limiting BLAS to `FACTORIZATION_THREADS` threads."""
    return _CONTROLLER.limit(limits=FACTORIZATION_THREADS, user_api="blas")
