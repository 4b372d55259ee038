"""A small HTTP/1.1 server on asyncio's Protocol API, made to pass token streams through.

Each connection (``conn``) parses and answers its requests; the server holds what they
share: the connection counts (in all and per client address), the budget for request bodies in
flight, the sweeper that enforces every connection's deadline, and a quiet accept log. What a
connection may use of its server is ``conn.ConnectionHost``: imports point from here to there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ttft.gateway.errors import GatewayError
from ttft.gateway.http.budget import BodyBudget, client_share
from ttft.gateway.http.conn import Connection, Handler, Precheck
from ttft.gateway.http.limits import clamp_connections, file_limit, install_accept_log
from ttft.gateway.http.response import Response
from ttft.gateway.http.wire import Request
from ttft.gateway.log_limit import ThrottledLog

log = logging.getLogger("ttft.gateway")

_Connection = Connection  # the name tests patch


class HttpServer:
    """Listens on ``host:port`` and runs ``handler`` for each request."""

    def __init__(
        self,
        handler: Handler,
        *,
        precheck: Precheck | None = None,
        max_header_bytes: int = 32 * 1024,
        max_body_bytes: int = 4 * 1024 * 1024,
        max_bodies_in_flight_bytes: int = 64 * 1024 * 1024,
        max_bodies_in_flight_bytes_per_client: int | None = None,  # None: a quarter; 0: none
        body_timeout_s: float = 10.0,  # at most this long between two reads of a body
        max_connections: int = 4096,
        max_connections_per_client: int = 0,  # 0: no per-client cap
        first_request_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
        idle_timeout_s: float = 75.0,
        write_timeout_s: float = 60.0,
        stall_timeout_s: float = 10.0,  # a stream holding an engine slot, its client not reading
    ) -> None:
        self.handler = handler
        self.precheck = precheck
        self.max_header_bytes = max_header_bytes
        self.max_body_bytes = max_body_bytes
        total = max(max_bodies_in_flight_bytes, max_body_bytes)
        self.max_bodies_in_flight_bytes = total
        share = max_bodies_in_flight_bytes_per_client
        self.body_budget = BodyBudget(
            total, client_share(total, max_body_bytes) if share is None else share
        )
        self.body_timeout_s = body_timeout_s
        self.max_connections = max_connections
        self.max_connections_per_client = max_connections_per_client
        self.first_request_timeout_s = first_request_timeout_s
        self.read_timeout_s = read_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.write_timeout_s = write_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.connections: set[Connection] = set()
        self.per_client: dict[str, int] = {}
        self.refused_connections = 0
        # Refused over a connection limit and waiting (2 s at most) for their clients to
        # close, so the answer is not lost to a reset: at most ``max_lingering`` at a time.
        self.lingering: set[Connection] = set()
        self.max_lingering = 32
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # Lines clients can cause (a crowd that reads nothing): one per interval, with a count.
        self.quiet_log = ThrottledLog(log)
        self.host = ""
        self.port = 0

    def opened(self, conn: Connection) -> GatewayError | None:
        """Count a new connection, or say why it is refused."""
        if len(self.connections) >= self.max_connections:
            self.refused_connections += 1
            return GatewayError(
                503,
                "too many open connections to the gateway",
                type="server_error",
                code="too_many_connections",
                headers=(("Retry-After", "1"),),
            )
        cap = self.max_connections_per_client
        count = self.per_client.get(conn.client, 0)
        if cap and count >= cap:
            self.refused_connections += 1
            return GatewayError(
                429,
                f"too many open connections from your address (at most {cap})",
                type="rate_limit_error",
                code="too_many_connections",
                headers=(("Retry-After", "1"),),
            )
        self.per_client[conn.client] = count + 1
        self.connections.add(conn)
        return None

    def closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            left = self.per_client.get(conn.client, 1) - 1
            if left > 0:
                self.per_client[conn.client] = left
            else:
                self.per_client.pop(conn.client, None)
        self.lingering.discard(conn)

    @property
    def bodies_in_flight(self) -> int:
        """Bytes held by bodies being received or handled."""
        return self.body_budget.held

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop it serves on, once started."""
        return self._loop

    def now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    async def _sweep(self) -> None:
        """Close connections whose deadline passed (read, idle, linger), a few times a second."""
        period = max(
            0.01,
            min(
                0.5,
                self.read_timeout_s / 4,
                self.idle_timeout_s / 4,
                self.first_request_timeout_s / 4,
                self.write_timeout_s / 4,
                self.stall_timeout_s / 4,
                self.body_timeout_s / 4,
            ),
        )
        while True:
            await asyncio.sleep(period)
            now = self.now()
            for conn in list(self.connections):
                conn.sweep(now)
            for conn in list(self.lingering):
                conn.sweep(now)

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> None:
        """Listen; with ``reuse_port`` beside other processes on the same port (SO_REUSEPORT:
        the kernel spreads new connections over them)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        install_accept_log(loop)
        limit = file_limit()
        clamped = clamp_connections(self.max_connections, limit)
        if clamped < self.max_connections:
            log.warning(
                "max_connections %d lowered to %d: the file limit is %s and each proxied "
                "request needs two descriptors (raise it with ulimit -n)",
                self.max_connections,
                clamped,
                limit,
            )
            self.max_connections = clamped
        self._sweeper = loop.create_task(self._sweep())
        # A deep backlog: a burst of hundreds of clients must not meet SYN retransmits.
        # No TCP_DEFER_ACCEPT (nginx's ``deferred``): it made a connection acceptable only with
        # its first bytes, so in a burst every accept waited until the clients were writing and
        # then ran in series with the reads (256 new requests at once: +153 ms added p99 with
        # it, +35 ms without, in benchmarks/gateway_overhead.py; no difference at 32 streams).
        # Accepting early takes that work off the request's path; a silent connection is held
        # for first_request_timeout_s at most and counts against the per-client cap.
        self._server = await loop.create_server(
            lambda: Connection(self),
            host,
            port,
            backlog=4096,
            reuse_address=True,
            reuse_port=reuse_port or None,
        )
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = str(sock[0]), int(sock[1])

    @property
    def busy(self) -> int:
        """Connections with a request being answered."""
        return sum(1 for conn in self.connections if conn.busy)

    async def drain(self, timeout_s: float) -> None:
        """Stop accepting, close idle connections, and wait for running answers to end."""
        if self._server is not None:
            self._server.close()
        deadline = self.now() + timeout_s
        while True:
            for conn in list(self.connections):
                if not conn.busy:
                    conn.close_after_write()
            if not self.busy or self.now() >= deadline:
                return
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 0.5)
            self._server = None
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        self.per_client.clear()


__all__ = ["Handler", "HttpServer", "Precheck", "Request", "Response"]
