"""Progress lines for long loops: at most one log line every few seconds.

Examples
--------
>>> ticks = Progress(every=0.0)
>>> ticks.due()
True
"""

from __future__ import annotations

import logging
import time

__all__ = ["Progress", "PROGRESS_SECONDS", "PROGRESS_MIN_N"]

log = logging.getLogger("strategy_opt")

#: Seconds between two progress lines of one loop.
PROGRESS_SECONDS = 5.0
#: From this many cells on, the compiler and ``run`` say which phase they are in (dense checks take seconds).
PROGRESS_MIN_N = 1024


class Progress:
    """Log an INFO line (logger ``strategy_opt``) when `PROGRESS_SECONDS` have passed since the last one.

    Parameters
    ----------
    every : float, optional
        Seconds between lines (default `PROGRESS_SECONDS`, read when the loop starts).
    """

    def __init__(self, every: float | None = None):
        self.every = PROGRESS_SECONDS if every is None else every
        self._last = time.perf_counter()

    def due(self) -> bool:
        """Whether a line is due (and, if so, restart the clock)."""
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            return True
        return False

    def __call__(self, message: str, *args) -> None:
        """Log ``message % args`` if a line is due."""
        if self.due():
            log.info(message, *args)
