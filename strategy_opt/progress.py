"""Progress lines for long loops: at most one log line every few seconds.

Examples
--------
>>> ticks = Progress(every=0.0)
>>> ticks.due()
True
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time

__all__ = ["Progress", "PROGRESS_SECONDS", "PROGRESS_MIN_N", "HEARTBEAT_SECONDS", "heartbeat", "set_aside_during_solves"]

log = logging.getLogger("strategy_opt")

#: Seconds between two progress lines of one loop.
PROGRESS_SECONDS = 5.0
#: Seconds between the lines `heartbeat` logs while an external solver runs.
HEARTBEAT_SECONDS = 10.0
#: From this many cells on, the compiler and ``run`` say which phase they are in (dense checks take seconds).
PROGRESS_MIN_N = 1024


class Progress:
    """Log an INFO line (logger ``strategy_opt``) when `PROGRESS_SECONDS` have passed since the last one.

    Parameters
    ----------
    every : float, optional
        Seconds between lines (default `PROGRESS_SECONDS`, read when the loop starts).

    Examples
    --------
    Call it once per iteration; it logs at most one line every ``every`` seconds (to the logger, not stdout):

    >>> ticks = Progress(every=3600.0)
    >>> for i in range(3):
    ...     ticks("iteration %d", i)  # nothing is due within the hour
    >>> ticks.every
    3600.0
    """

    def __init__(self, every: float | None = None):
        self.every = PROGRESS_SECONDS if every is None else every
        self._last = time.perf_counter()

    def due(self) -> bool:
        """Whether a line is due (and, if so, restart the clock).

        Returns
        -------
        bool

        Examples
        --------
        >>> Progress(every=0.0).due(), Progress(every=3600.0).due()
        (True, False)
        """
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            return True
        return False

    def __call__(self, message: str, *args) -> None:
        """Log ``message % args`` if a line is due."""
        if self.due():
            log.info(message, *args)


#: SIGTERM handlers `heartbeat` sets aside while an external solver runs (`set_aside_during_solves`).
_SET_ASIDE: set = set()


def set_aside_during_solves(handler) -> None:
    """Let SIGTERM end the process at once, while a `heartbeat` block runs, when ``handler`` is the one installed.

    For the CLI's handler, which only makes pending atomic writes clean up: no
    write is pending during a solve. A library caller's own handler is never set aside.

    Parameters
    ----------
    handler : callable
        A signal handler (``handler(signum, frame)``), remembered in a module-level set.

    Returns
    -------
    None

    Examples
    --------
    >>> def cleanup(signum, frame):
    ...     pass
    >>> set_aside_during_solves(cleanup)
    >>> cleanup in _SET_ASIDE
    True
    >>> _SET_ASIDE.discard(cleanup)  # (undo, for this example)
    """
    _SET_ASIDE.add(handler)


@contextlib.contextmanager
def heartbeat(what: str, limit: float | None = None, every: float | None = None):
    """Log ``"<what>: still running (<t> s ...)"`` every `HEARTBEAT_SECONDS` while the block runs.

    For calls into a solver that reports nothing until it returns (cvxpy with
    ``verbose=False``): a long solve then still shows it is alive, and how
    much of its time limit ``limit`` (seconds) it has used. The lines come
    from a daemon thread, which stops when the block ends.

    While the block runs in the main thread, the CLI's SIGTERM handler (which
    lets pending atomic writes clean up; see `set_aside_during_solves`) is set
    aside and SIGTERM ends the process at once: Python runs its handlers only
    between bytecodes, so it would wait until the solver returned (minutes for
    SCS on a large SDP), and nothing is being written during a solve. Any other
    handler (an application's own graceful shutdown) stays in place.

    Examples
    --------
    >>> with heartbeat("SCS", limit=60.0, every=30.0):
    ...     pass
    """
    every = HEARTBEAT_SECONDS if every is None else every
    done = threading.Event()
    t0 = time.perf_counter()

    def beat() -> None:
        while not done.wait(every):
            elapsed = time.perf_counter() - t0
            if limit is not None and limit < float("inf"):
                log.info("%s: still running (%.0f s of its %.4g s time limit)", what, elapsed, limit)
            else:
                log.info("%s: still running (%.0f s)", what, elapsed)

    thread = threading.Thread(target=beat, name="strategy_opt-heartbeat", daemon=True)
    thread.start()
    in_main = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if in_main else None
    aside = handler in _SET_ASIDE
    if aside:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        if aside:
            signal.signal(signal.SIGTERM, handler)
        done.set()
        thread.join()
