"""Log lines that clients can cause, at most one per kind and interval, with a count of the rest.

A failing upstream or a crowd of clients that read nothing must not turn into one log line per
request: an attacker who can make requests fail could otherwise fill the disk and drown the one
line that matters. Each kind (an upstream and an error kind, a timeout) logs its first event at
once, then at most once per ``interval_s``, saying how many like it were not logged since.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

_MAX_KINDS = 1024  # kinds come from configuration and fixed sets; a bound all the same


class ThrottledLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._next_at: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}

    def log(
        self, kind: Hashable, level: int, message: str, *args: object, exc_info: bool = False
    ) -> bool:
        """Log ``message % args`` unless ``kind`` logged within the interval; True if logged.
        ``exc_info``: with the traceback of the exception being handled (once per interval,
        like the line)."""
        if not self.logger.isEnabledFor(level):
            return False
        now = self.clock()
        if now < self._next_at.get(kind, 0.0):
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return False
        if kind not in self._next_at and len(self._next_at) >= _MAX_KINDS:
            self._next_at.clear()
            self._suppressed.clear()
        self._next_at[kind] = now + self.interval_s
        more = self._suppressed.pop(kind, 0)
        if more:
            message += f" ({more} more like it in the last {self.interval_s:g} s, not logged)"
        self.logger.log(level, message, *args, exc_info=exc_info)
        return True


__all__ = ["ThrottledLog"]
