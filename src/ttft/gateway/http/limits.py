"""Limits the HTTP server shares across connections: the file limit, and a quiet accept log.

Both exist because of what happens when a process runs out of file descriptors. Each proxied
request holds two (the client's socket and the upstream's), so ``max_connections`` above half the
file limit cannot be honoured; and when ``accept()`` fails with EMFILE, asyncio logs the error,
with a traceback, once for every connection waiting in the backlog (measured: ~14k lines/s).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Callable
from typing import Any

from ttft.gateway.log_limit import ThrottledLog

log = logging.getLogger("ttft.gateway")

# Descriptors kept for everything that is not a client connection: listening sockets, the
# event loop's own, log files, health checks, templates being read.
_RESERVED_FDS = 64
_ACCEPT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def file_limit() -> int | None:
    """The soft limit on open files, or None where there is none to read."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def clamp_connections(wanted: int, limit: int | None) -> int:
    """At most half of what the file limit leaves: a client socket and an upstream one each."""
    if limit is None:
        return wanted
    return max(1, min(wanted, (limit - _RESERVED_FDS) // 2))


class AcceptErrorLog:
    """An event-loop exception handler that logs accept() failures at most once per interval
    (``ThrottledLog``, with the count of the rest).

    Everything else goes to the handler that was there before (or the loop's default).
    """

    def __init__(
        self,
        previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.previous = previous
        self._log = ThrottledLog(log, interval_s, clock)

    @staticmethod
    def is_accept_error(context: dict[str, Any]) -> bool:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        return "accept" in message and (not isinstance(exc, OSError) or exc.errno in _ACCEPT_ERRNOS)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if not self.is_accept_error(context):
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        exc = context.get("exception")
        self._log.log(
            "accept",
            logging.ERROR,
            "cannot accept connections: %s; raise the file limit (ulimit -n) or lower "
            "limits.max_connections",
            exc if exc is not None else context.get("message"),
        )


def install_accept_log(loop: asyncio.AbstractEventLoop, interval_s: float = 10.0) -> None:
    previous = loop.get_exception_handler()
    if isinstance(previous, AcceptErrorLog):
        return
    loop.set_exception_handler(AcceptErrorLog(previous, interval_s))
