"""The socket side of a client connection: reading paused or not, closing, one deadline.

``Connection`` (``conn``) frames HTTP on top of this; what is here knows nothing of requests.
A connection has one deadline at a time (the phase it is in: first request, head, body, idle)
plus a write deadline while its socket is full; the server's sweeper checks both, since arming
and disarming an event-loop timer twice per request would cost more than parsing the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class SocketSide(asyncio.Protocol):
    """The transport and the state of its two directions, and the connection's deadline."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now  # the clock deadlines are on (the server's)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.write_paused = False
        self._deadline: float | None = None
        self._on_deadline: Callable[[], None] | None = None
        self._write_deadline: float | None = None
        self._reading_paused = False

    def _arm(self, delay_s: float, callback: Callable[[], None]) -> None:
        # A deadline the server's sweeper checks, not a timer per request: arming and
        # disarming twice per request would cost more than the request's own parsing.
        self._deadline = self.now() + delay_s
        self._on_deadline = callback

    def _disarm(self) -> None:
        self._deadline = None
        self._on_deadline = None

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self.closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def close_after_write(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()  # flushes what is buffered, then closes

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
