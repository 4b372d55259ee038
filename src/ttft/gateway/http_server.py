"""A small HTTP/1.1 server on asyncio's Protocol API, made to pass token streams through.

What matters for TTFT: a response body is written to the socket the moment the handler has it
(no response buffer, no compression, ever), the head goes out in the same write as the first body
bytes (one syscall, and ``Server-Timing`` can carry the upstream's time to first byte), and a
client that goes away cancels its handler, so the upstream request is cancelled too.

What matters for safety: request heads and bodies have hard size limits (431, 413), a request must
arrive within ``read_timeout_s`` and an idle keep-alive connection is closed after
``idle_timeout_s``; request bodies need ``Content-Length`` (no chunked uploads, so no smuggling
through disagreeing framings); bytes pipelined behind a request are held, bounded, until it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from ttft.gateway.errors import GatewayError, error_body
from ttft.gateway.http_response import Response
from ttft.gateway.http_wire import Request, parse_head, plain_head

log = logging.getLogger("ttft.gateway")

_clock = time.perf_counter_ns
# While a response is being written the client may already send its next request (pipelining):
# hold at most this much beyond one full request before we stop reading from it.
_PIPELINE_SLACK = 64 * 1024


Handler = Callable[[Request, Response], Awaitable[None]]


class _Connection(asyncio.Protocol):
    """One client connection: parses requests, runs the handler, one request at a time."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.write_paused = False
        self.http11 = True
        self.peer = ""
        self._buf = bytearray()
        self._request_started_ns = 0
        self._task: asyncio.Task[None] | None = None
        self._response: Response | None = None
        self._deadline: float | None = None
        self._on_deadline: Callable[[], None] | None = None
        self._reading_paused = False
        self._refused = False

    @property
    def busy(self) -> bool:
        return self._task is not None

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if not self.server._opened(self):
            body = error_body(
                "too many open connections to the gateway", "server_error", "too_many_connections"
            )
            self._refused = True
            transport.write(plain_head(503, len(body), close=True) + body)
            self.server._lingering.add(self)
            self._linger()
            return
        self._arm(self.server.idle_timeout_s, self._idle_expired)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # we answered and are closing: whatever else arrives is not read
        if not self._buf and self._task is None:
            self._request_started_ns = _clock()
            self._arm(self.server.read_timeout_s, self._read_expired)
        self._buf += data
        if self._task is not None:
            if len(self._buf) > self.server.max_request_bytes + _PIPELINE_SLACK:
                self._pause_reading()
            return
        self._parse()

    def eof_received(self) -> bool | None:
        # The client closed its side. Clients of LLM APIs do not half-close to wait for an
        # answer; they close because they left. Treat it as a disconnect (as nginx does with
        # its 499), so the running request is cancelled upstream.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        self.server._closed(self)
        task = self._task
        if task is not None and not task.done():
            task.cancel()  # the client is gone: the handler stops its upstream request

    def pause_writing(self) -> None:
        self.write_paused = True
        response = self._response
        if response is not None and response.on_pause is not None:
            response.on_pause(True)

    def resume_writing(self) -> None:
        self.write_paused = False
        response = self._response
        if response is not None and response.on_pause is not None:
            response.on_pause(False)

    # -- parsing -------------------------------------------------------------------------

    def _parse(self) -> None:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > self.server.max_header_bytes:
                self._refuse(
                    431,
                    f"request head larger than {self.server.max_header_bytes} bytes",
                    "header_too_large",
                )
            return
        if end > self.server.max_header_bytes:
            self._refuse(
                431,
                f"request head larger than {self.server.max_header_bytes} bytes",
                "header_too_large",
            )
            return
        try:
            method, target, version, headers = parse_head(bytes(buf[:end]))
        except ValueError as exc:
            self._refuse(400, f"malformed HTTP request: {exc}", "bad_http")
            return
        self.http11 = version == "HTTP/1.1"
        if "transfer-encoding" in headers:
            self._refuse(
                411,
                "chunked request bodies are not accepted; send Content-Length",
                "length_required",
            )
            return
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            self._refuse(400, f"bad Content-Length {length_text[:40]!r}", "bad_http")
            return
        length = int(length_text)
        if length > self.server.max_body_bytes:
            self._refuse(
                413,
                f"request body of {length} bytes is over the gateway's limit of "
                f"{self.server.max_body_bytes} bytes",
                "body_too_large",
            )
            return
        total = end + 4 + length
        if len(buf) < total:
            if headers.get("expect", "").lower() == "100-continue" and len(buf) == end + 4:
                assert self.transport is not None
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body = bytes(buf[end + 4 : total])
        del buf[:total]
        conn_tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        keep_alive = ("close" not in conn_tokens) if self.http11 else ("keep-alive" in conn_tokens)
        path, _, query = target.partition("?")
        request = Request(
            method, path, query, version, headers, body, self._request_started_ns, self.peer
        )
        self._disarm()
        response = Response(self, keep_alive)
        self._response = response
        self._task = asyncio.get_running_loop().create_task(self._run(request, response))

    async def _run(self, request: Request, response: Response) -> None:
        try:
            await self.server.handler(request, response)
        except asyncio.CancelledError:
            if not self.closed:
                raise
            return  # the client went away; the handler cleaned up after itself
        except Exception:
            log.exception("unhandled error for %s %s", request.method, request.path)
            if not response.started and not self.closed:
                response.send_error(
                    GatewayError(
                        500, "internal gateway error", type="server_error", code="internal_error"
                    )
                )
            else:
                response.abort()
        finally:
            self._task = None
            self._response = None
        if not response.finished:
            response.abort()  # a handler that forgot to end: never leave a client hanging
            return
        if self.closed or not response.keep_alive:
            return
        self._resume_reading()
        if self._buf:
            self._request_started_ns = _clock()
            self._arm(self.server.read_timeout_s, self._read_expired)
            self._parse()
        else:
            self._arm(self.server.idle_timeout_s, self._idle_expired)

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answer a request we will not read (bad head, too big) and close the connection."""
        self._disarm()
        self._refused = True
        body = error_body(message, "invalid_request_error", code)
        if self.transport is not None and not self.closed:
            self.transport.write(plain_head(status, len(body), close=True) + body)
        self._buf.clear()
        self._linger()

    def _linger(self) -> None:
        """Close after an error answer without losing it: closing a socket with unread request
        bytes sends a reset, which can destroy the answer in flight. So: send our FIN, read and
        drop what the client still sends, and close when it closes (or after a short grace)."""
        transport = self.transport
        if transport is None or self.closed:
            return
        if self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self._arm(2.0, self.abort)

    # -- timers and closing -------------------------------------------------------------

    def _arm(self, delay_s: float, callback: Callable[[], None]) -> None:
        # A deadline the server's sweeper checks, not a timer per request: arming and
        # disarming twice per request would cost more than the request's own parsing.
        self._deadline = self.server.now() + delay_s
        self._on_deadline = callback

    def _disarm(self) -> None:
        self._deadline = None
        self._on_deadline = None

    def sweep(self, now: float) -> None:
        if self._deadline is not None and now >= self._deadline:
            callback = self._on_deadline
            self._deadline = self._on_deadline = None
            if callback is not None:
                callback()

    def _idle_expired(self) -> None:
        if self._task is None and not self._buf:
            self.close_after_write()

    def _read_expired(self) -> None:
        if self._task is None:
            self._refuse(
                408,
                f"the request did not arrive within {self.server.read_timeout_s} s",
                "request_timeout",
            )

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


class HttpServer:
    """Listens on ``host:port`` and runs ``handler`` for each request."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_header_bytes: int = 32 * 1024,
        max_body_bytes: int = 4 * 1024 * 1024,
        max_connections: int = 4096,
        read_timeout_s: float = 30.0,
        idle_timeout_s: float = 75.0,
    ) -> None:
        self.handler = handler
        self.max_header_bytes = max_header_bytes
        self.max_body_bytes = max_body_bytes
        self.max_request_bytes = max_header_bytes + max_body_bytes
        self.max_connections = max_connections
        self.read_timeout_s = read_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.connections: set[_Connection] = set()
        self.refused_connections = 0
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # Refused over the connection limit: not counted, but still closed on time.
        self._lingering: set[_Connection] = set()
        self.host = ""
        self.port = 0

    def _opened(self, conn: _Connection) -> bool:
        if len(self.connections) >= self.max_connections:
            self.refused_connections += 1
            return False
        self.connections.add(conn)
        return True

    def _closed(self, conn: _Connection) -> None:
        self.connections.discard(conn)
        self._lingering.discard(conn)

    def now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    async def _sweep(self) -> None:
        """Close connections whose deadline passed (read, idle, linger), a few times a second."""
        period = max(0.01, min(0.5, self.read_timeout_s / 4, self.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            now = self.now()
            for conn in list(self.connections):
                conn.sweep(now)
            for conn in list(self._lingering):
                conn.sweep(now)

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._sweeper = loop.create_task(self._sweep())
        # A deep backlog: a burst of hundreds of clients must not meet SYN retransmits.
        self._server = await loop.create_server(
            lambda: _Connection(self), host, port, backlog=4096, reuse_address=True
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


__all__ = ["Handler", "HttpServer", "Request", "Response"]
