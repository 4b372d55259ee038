"""One HTTP response, written as the handler produces it: nothing is buffered here.

The head is held until the first body bytes and goes out in the same write (one syscall, and a
``Server-Timing`` header can still carry what happened before the first byte). Streams are chunked
for HTTP/1.1 clients and close-delimited for HTTP/1.0 ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from ttft.gateway.errors import GatewayError
from ttft.gateway.http.wire import REASONS

# Each status's first two lines, formatted once.
_STATUS_LINES = {
    status: f"HTTP/1.1 {status} {reason}\r\nServer: ttft-gateway\r\n"
    for status, reason in REASONS.items()
}


class Channel(Protocol):
    """The client connection a response is written to."""

    transport: asyncio.Transport | None
    closed: bool
    write_paused: bool
    http11: bool

    def abort(self) -> None: ...

    def close_after_write(self) -> None: ...


class Response:
    """Writes one response. The head is held until the first body bytes, then sent with them."""

    __slots__ = (
        "_chunked",
        "_conn",
        "_head",
        "bytes_written",
        "finished",
        "head_sent",
        "keep_alive",
        "on_pause",
        "server_timing",
        "status",
    )

    def __init__(self, conn: Channel, keep_alive: bool) -> None:
        self._conn = conn
        self._head = b""
        self._chunked = False
        self.keep_alive = keep_alive
        self.status: int | None = None
        self.head_sent = False
        self.finished = False
        self.bytes_written = 0
        # Called with True when the client's socket buffer is full and False when it drained:
        # a proxy stops reading its upstream meanwhile, so nothing piles up in memory.
        self.on_pause: Callable[[bool], None] | None = None
        # For answers the gateway makes itself (errors, /health...): a Server-Timing value,
        # computed when the head is written, unless the handler gives its own header.
        self.server_timing: Callable[[], str] | None = None

    @property
    def started(self) -> bool:
        return self.status is not None

    def relay_target(self) -> Channel | None:
        """The connection a chunked upstream answer may be written to as it came (its chunk
        framing kept): while this response streams in chunks, after its head."""
        if self._chunked and self.head_sent and not self.finished:
            return self._conn
        return None

    @property
    def client_gone(self) -> bool:
        return self._conn.closed

    @property
    def paused(self) -> bool:
        return self._conn.write_paused

    def send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """A complete response with a ``Content-Length``."""
        self.start(status, headers, length=len(body))
        self._write(self._head + body)
        self._head = b""
        self.head_sent = True
        self.bytes_written += len(body)
        self._finish()

    def send_error(self, error: GatewayError) -> None:
        headers = [("Content-Type", "application/json"), *error.headers]
        self.send(error.status, headers, error.body())

    def start(
        self, status: int, headers: list[tuple[str, str]], *, length: int | None = None
    ) -> None:
        """Prepare the head: ``length`` bytes follow, or (None) a streamed body of unknown size.

        A stream is chunked for HTTP/1.1 clients and ends with the connection for HTTP/1.0 ones
        (nginx's default ``proxy_http_version``), which cannot read chunked framing.
        """
        assert self.status is None, "response already started"
        self.status = status
        # Built as one string: this runs for every response.
        head = _STATUS_LINES.get(status) or f"HTTP/1.1 {status} Status\r\nServer: ttft-gateway\r\n"
        head += "".join([f"{k}: {v}\r\n" for k, v in headers])
        if self.server_timing is not None:
            for k, _ in headers:  # a loop: a generator here cost more than the check
                if k.lower() == "server-timing":
                    break
            else:
                head += f"Server-Timing: {self.server_timing()}\r\n"
        if length is not None:
            head += f"Content-Length: {length}\r\n"
        elif self._conn.http11:
            self._chunked = True
            head += "Transfer-Encoding: chunked\r\n"
        else:
            self.keep_alive = False
        if not self.keep_alive:
            head += "Connection: close\r\n"
        elif not self._conn.http11:
            # HTTP/1.0 closes by default: a client that asked to keep the connection (ab -k,
            # old proxies) reads until the close unless the answer says it stays open.
            head += "Connection: keep-alive\r\n"
        self._head = (head + "\r\n").encode("latin-1")

    def write(self, data: bytes) -> None:
        """Send body bytes now (with the head, the first time)."""
        if not data or self.finished:
            return
        self.bytes_written += len(data)
        if self._chunked:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        if not self.head_sent:
            data = self._head + data
            self._head = b""
            self.head_sent = True
        conn = self._conn  # ``_write`` inlined: this runs once per streamed event
        transport = conn.transport
        if transport is not None and not conn.closed:
            transport.write(data)

    def end(self) -> None:
        """The body is complete."""
        if self.finished:
            return
        tail = b"0\r\n\r\n" if self._chunked else b""
        if not self.head_sent:
            tail = self._head + tail
            self._head = b""
            self.head_sent = True
        if tail:
            self._write(tail)
        self._finish()

    def abort(self) -> None:
        """Drop the connection mid-response (the client sees an incomplete body)."""
        self.finished = True
        self.keep_alive = False
        self._conn.abort()

    def _write(self, data: bytes) -> None:
        transport = self._conn.transport
        if transport is not None and not self._conn.closed:
            transport.write(data)

    def _finish(self) -> None:
        self.finished = True
        if not self.keep_alive:
            self._conn.close_after_write()
