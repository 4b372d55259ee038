"""Connections on asyncio's Protocol API, and a keep-alive pool with no cap of its own.

Timestamps: ``data_received`` runs straight from the event loop's select, so the clock is read
before any task switch (a stream reader would stamp bytes only once its task was woken). And it
does nothing else: it stamps the read and queues it in the pool's ``_Inbox``; parsing happens in
one callback after every socket of that select has been stamped. Token streams are bursty (an
engine emits a token to every running stream at each decode step): parsing each read where it
arrives would stamp the 256th stream of a burst only after 255 parses, milliseconds late.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseParser

_clock = time.perf_counter_ns


class _Inbox:
    """Stamped reads waiting to be parsed, in arrival order, across a pool's connections."""

    __slots__ = ("_items", "_scheduled")

    def __init__(self) -> None:
        self._items: list[tuple[_Connection, bytes | None, int, str]] = []
        self._scheduled = False

    def put(self, conn: _Connection, data: bytes | None, t_ns: int, reason: str = "") -> None:
        """Queue a read (``data``) or the peer's close (``None``) stamped ``t_ns``."""
        self._items.append((conn, data, t_ns, reason))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        items, self._items = self._items, []
        for conn, data, t_ns, reason in items:
            if data is None:
                conn._process_close(t_ns, reason)
            else:
                conn._process(data, t_ns)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection carrying one request at a time."""

    def __init__(self, inbox: _Inbox) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.requests = 0
        self._inbox = inbox
        self._parser: ResponseParser | None = None
        self._waiter: asyncio.Future[bool] | None = None

    # -- asyncio callbacks: stamp and queue, nothing more -------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._inbox.put(self, data, _clock())

    def eof_received(self) -> bool:
        self.closed = True
        self._inbox.put(self, None, _clock())
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._inbox.put(self, None, _clock(), str(exc) if exc else "")

    # -- parsing, from the inbox -------------------------------------------------------------

    def _process(self, data: bytes, t_ns: int) -> None:
        parser = self._parser
        if parser is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        try:
            over = parser.feed(data, t_ns)
        except Exception as exc:  # a malformed response, or a bug: wake the request with it
            self._fail(exc)
            return
        if over:
            self._settle(parser.reusable and not parser.stopped)

    def _process_close(self, t_ns: int, reason: str) -> None:
        parser = self._parser
        if parser is None:
            return
        try:
            parser.eof(t_ns, reason)
        except Exception as exc:
            self._fail(exc)
            return
        self._settle(False)

    # -- used by the pool ------------------------------------------------------------------

    def start(self, parser: ResponseParser, payload: bytes, on_sent: Callable[[int], None]) -> (
        asyncio.Future[bool]
    ):
        assert self.transport is not None
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self.closed or self.transport.is_closing():
            raise RequestFailed(errors.DISCONNECT, "the connection was closed before sending")
        self._parser = parser
        self._waiter = waiter
        self.requests += 1
        on_sent(_clock())
        self.transport.write(payload)
        return waiter

    def abort(self) -> None:
        self.closed = True
        self._parser = None
        if self.transport is not None:
            self.transport.abort()

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


@dataclass(slots=True)
class PoolStats:
    """Connection counts since the pool was made: how many were opened, and how often reused."""

    opened: int = 0
    reused: int = 0
    idle: int = 0
    in_use: int = 0
    peak_in_use: int = 0


class ConnectionPool:
    """Keep-alive connections to one origin. Opens one per concurrent request unless capped.

    ``max_connections=None`` (the default) means no cap: the caller's concurrency is the only
    limit, unlike client libraries whose default pool silently queues requests past 100.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_s: float | None = 10.0,
        max_connections: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._connect_timeout_s = connect_timeout_s
        self._idle: deque[_Connection] = deque()
        self._all: set[_Connection] = set()
        self._addresses: list[tuple[str, int]] | None = None
        self._limit = asyncio.Semaphore(max_connections) if max_connections else None
        self._inbox = _Inbox()
        self._closed = False
        self.stats = PoolStats()

    async def request(
        self, payload: bytes, parser: ResponseParser, on_sent: Callable[[int], None]
    ) -> None:
        """Send ``payload`` and feed the response to ``parser`` until it is over.

        A reused connection that the server had already closed (its keep-alive timer ran out
        while we were sending) fails before any response byte: that request is retried once on a
        new connection, as browsers do, and ``on_sent`` is called again.
        """
        if self._limit is None:
            await self._request(payload, parser, on_sent)
            return
        async with self._limit:
            await self._request(payload, parser, on_sent)

    async def _request(
        self, payload: bytes, parser: ResponseParser, on_sent: Callable[[int], None]
    ) -> None:
        conn, reused = await self._acquire()
        try:
            reusable = await conn.start(parser, payload, on_sent)
        except RequestFailed as exc:
            self._discard(conn)
            if not (reused and exc.kind == errors.DISCONNECT and parser.bytes_received == 0):
                raise
            conn, _ = await self._acquire(fresh=True)
            try:
                reusable = await conn.start(parser, payload, on_sent)
            except BaseException:
                self._discard(conn)
                raise
        except BaseException:
            self._discard(conn)  # cancelled or failed mid-response: the connection is out of step
            raise
        self._release(conn, reusable)

    async def _acquire(self, fresh: bool = False) -> tuple[_Connection, bool]:
        if self._closed:
            raise RequestFailed(errors.CANCELLED, "the client was closed")
        while self._idle and not fresh:
            conn = self._idle.pop()  # the most recently used: least likely to have timed out
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                self._all.discard(conn)
                continue
            self.stats.reused += 1
            self._mark_in_use()
            return conn, True
        conn = await self._connect()
        self._all.add(conn)
        self.stats.opened += 1
        self._mark_in_use()
        return conn, False

    def _mark_in_use(self) -> None:
        stats = self.stats
        stats.in_use += 1
        stats.idle = len(self._idle)
        stats.peak_in_use = max(stats.peak_in_use, stats.in_use)

    def _release(self, conn: _Connection, reusable: bool) -> None:
        self.stats.in_use -= 1
        if reusable and not conn.closed and not self._closed:
            self._idle.append(conn)
        else:
            conn.abort()
            self._all.discard(conn)
        self.stats.idle = len(self._idle)

    def _discard(self, conn: _Connection) -> None:
        conn.abort()
        self.stats.in_use -= 1
        self._all.discard(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        addresses = await self._resolve()
        last: OSError | None = None
        for ip, port in addresses:
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    _, conn = await loop.create_connection(
                        lambda: _Connection(self._inbox), ip, port, ssl=self._ssl,
                        server_hostname=self.host if self._ssl is not None else None,
                    )
                return conn
            except TimeoutError:
                raise RequestFailed(
                    errors.TIMEOUT,
                    f"connecting to {self.host}:{self.port} took over {self._connect_timeout_s} s",
                ) from None
            except OSError as exc:
                last = exc
        detail = last.strerror if last is not None and last.strerror else str(last)
        raise RequestFailed(
            errors.CONNECT, f"could not connect to {self.host}:{self.port}: {detail}"
        )

    async def _resolve(self) -> list[tuple[str, int]]:
        # Resolved once per pool: a name lookup per new connection would put the resolver's
        # latency into the first requests of every burst.
        if self._addresses is None:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise RequestFailed(
                    errors.CONNECT, f"could not resolve {self.host}: {exc.strerror or exc}"
                ) from None
            seen: list[tuple[str, int]] = []
            for info in infos:
                address = (str(info[4][0]), int(info[4][1]))
                if address not in seen:
                    seen.append(address)
            self._addresses = seen
        return self._addresses

    async def aclose(self) -> None:
        """Close every connection, idle or busy; requests still running fail as disconnected."""
        self._closed = True
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()
        self.stats.idle = 0
