"""A keep-alive pool of connections to one origin, with no cap of its own."""

from __future__ import annotations

import asyncio
import socket
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ttft.client import errors
from ttft.client.connection import Connection, Inbox, ProtocolConnection, TcpConnection
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseParser

# Plain TCP is read from the socket itself (for the kernel's receive timestamps) with the loop's
# add_reader, which Windows' proactor loop lacks; there it goes through an asyncio transport.
_OWN_SOCKETS = sys.platform != "win32"
_GIVE_UP_REUSE = 3
_QUICK_CLOSE_NS = 1_000_000_000  # keep-alive timeouts are seconds; this is "right after"


@dataclass(slots=True)
class PoolStats:
    """Connection counts since the pool was made: how many were opened, and how often reused."""

    opened: int = 0
    reused: int = 0
    kernel_stamped: int = 0  # opened connections whose reads carry the kernel's arrival time
    stale: int = 0  # idle connections found closed by the server when about to be reused
    retried: int = 0  # requests sent again because a reused connection failed before answering
    keep_alive: bool = True  # False once the server proved to close every connection it answers
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
        kernel_timestamps: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self._connect_timeout_s = connect_timeout_s
        self._kernel_timestamps = kernel_timestamps
        self._idle: deque[Connection] = deque()
        self._all: set[Connection] = set()
        self._addresses: list[tuple[int, tuple[Any, ...]]] | None = None
        self._limit = asyncio.Semaphore(max_connections) if max_connections else None
        self._inbox = Inbox()
        self._closed = False
        self._quick_closes = 0  # reused connections in a row found closed soon after answering
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
            self.stats.retried += 1
            self._reuse_failed(conn)
            conn, reused = await self._acquire(fresh=True)
            try:
                reusable = await conn.start(parser, payload, on_sent)
            except BaseException:
                self._discard(conn)
                raise
        except BaseException:
            self._discard(conn)  # cancelled or failed mid-response: the connection is out of step
            raise
        if reused:
            self._quick_closes = 0
        self._release(conn, reusable)

    def _reuse_failed(self, conn: Connection) -> None:
        """A reused connection turned out closed. Soon after its answer, three times in a row:
        the server closes every connection after answering without saying so (llama-server's
        streams do). Then stop reusing rather than pay a failed send or a probe each time:
        every request opens its own connection. (A keep-alive timeout, seconds after the last
        answer, is not that.)"""
        if time.perf_counter_ns() - conn.idle_since_ns > _QUICK_CLOSE_NS:
            return
        self._closed_after_answer()

    def _closed_after_answer(self) -> None:
        self._quick_closes += 1
        if self._quick_closes >= _GIVE_UP_REUSE:
            self.stats.keep_alive = False

    async def _acquire(self, fresh: bool = False) -> tuple[Connection, bool]:
        if self._closed:
            raise RequestFailed(errors.CANCELLED, "the client was closed")
        while self._idle and not fresh:
            conn = self._idle.pop()  # the most recently used: least likely to have timed out
            if not conn.usable():
                self._all.discard(conn)
                self.stats.stale += 1
                self._reuse_failed(conn)
                continue
            self.stats.reused += 1
            self._mark_in_use()
            return conn, True
        conn = await self._connect()
        self._all.add(conn)
        self.stats.opened += 1
        self.stats.kernel_stamped += conn.kernel_stamps
        self._mark_in_use()
        return conn, False

    def _mark_in_use(self) -> None:
        stats = self.stats
        stats.in_use += 1
        stats.idle = len(self._idle)
        stats.peak_in_use = max(stats.peak_in_use, stats.in_use)

    def _release(self, conn: Connection, reusable: bool) -> None:
        self.stats.in_use -= 1
        if reusable and self.stats.keep_alive and not conn.closed and not self._closed:
            conn.idle_since_ns = time.perf_counter_ns()
            self._idle.append(conn)
        else:
            if reusable and conn.closed:
                self._closed_after_answer()  # a keep-alive answer, and yet closed at once
            conn.abort()
            self._all.discard(conn)
        self.stats.idle = len(self._idle)

    def _discard(self, conn: Connection) -> None:
        conn.abort()
        self.stats.in_use -= 1
        self._all.discard(conn)

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        addresses = await self._resolve()
        last: OSError | None = None
        for family, address in addresses:
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    if self._ssl is None and _OWN_SOCKETS:
                        return await TcpConnection.open(
                            family, address, self._inbox, self._kernel_timestamps
                        )
                    _, conn = await loop.create_connection(
                        lambda: ProtocolConnection(self._inbox),
                        address[0],
                        address[1],
                        ssl=self._ssl,
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

    async def _resolve(self) -> list[tuple[int, tuple[Any, ...]]]:
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
            seen: list[tuple[int, tuple[Any, ...]]] = []
            for family, _, _, _, sockaddr in infos:
                entry = (int(family), tuple(sockaddr))  # IPv6 addresses have 4 fields
                if entry not in seen:
                    seen.append(entry)
            self._addresses = seen
        return self._addresses

    def take_read_gaps(self) -> list[int]:
        """The kernel-receive -> read gaps (ns) of the reads since the last call."""
        return self._inbox.take_gaps()

    async def aclose(self) -> None:
        """Close every connection, idle or busy; requests still running fail as disconnected."""
        self._closed = True
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()
        self.stats.idle = 0
