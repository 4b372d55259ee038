"""One request and its response at a time on a connection: the bookkeeping both pools share.

The measuring client's connections (``client/connection.py``) and the gateway's upstream
connections (``gateway/upstream.py``) read differently (kernel-stamped sockets against asyncio
protocols with pause/resume for back-pressure), but an exchange on either ends the same way: the
parser says the response is over (settle: can the connection carry another?), or the peer closes
or the parser fails (the waiter gets the failure and the connection is dropped).
"""

from __future__ import annotations

import asyncio

from ttft.client.http import ResponseParser


class Exchange:
    """The parser of the response in flight and the future its requester awaits."""

    def __init__(self) -> None:
        self._parser: ResponseParser | None = None
        self._waiter: asyncio.Future[bool] | None = None
        # A connection lives on one loop: looked up once (on Python 3.11 every
        # asyncio.get_running_loop() costs a getpid system call).
        self._futures_loop: asyncio.AbstractEventLoop | None = None

    def abort(self) -> None:
        raise NotImplementedError

    def _begin(self, parser: ResponseParser) -> asyncio.Future[bool]:
        loop = self._futures_loop
        if loop is None:
            loop = self._futures_loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._parser = parser
        self._waiter = waiter
        return waiter

    def _feed(self, data: bytes, t_ns: int) -> None:
        parser = self._parser
        if parser is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        try:
            over = parser.feed(data, t_ns)
        except Exception as exc:  # a malformed response, or the sink failed: end the exchange
            self._fail(exc)
            return
        if over:
            self._settle(parser.reusable and not parser.stopped)

    def _peer_closed(self, t_ns: int, reason: str) -> None:
        parser = self._parser
        if parser is None:
            return
        try:
            parser.eof(t_ns, reason)
        except Exception as exc:
            self._fail(exc)
            return
        self._settle(False)

    def _settle(self, reusable: bool) -> None:
        waiter, self._waiter, self._parser = self._waiter, None, None
        if not reusable:
            self.abort()
        if waiter is not None and not waiter.done():
            waiter.set_result(reusable)

    def _fail(self, exc: BaseException) -> None:
        waiter, self._waiter, self._parser = self._waiter, None, None
        self.abort()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
