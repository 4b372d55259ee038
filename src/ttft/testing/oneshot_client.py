"""A second, independent measuring client: one new TCP connection per streamed request.

``StreamingClient`` keeps connections alive, as SDKs do; many real clients (curl, scripts,
browsers behind some proxies, short-lived workers) open a connection per request, and then the
proxy's accept path, its head parsing and its upstream connection handling are inside every
TTFT. This client is deliberately plain (asyncio Protocol, no shared code with the measured
paths' client) so the two client modes check each other.

Per request it stamps, on ``time.perf_counter_ns()``:
- ``started_ns`` before ``connect()`` (the connection is part of what this client pays),
- ``first_token_ns`` when the bytes holding the first non-empty ``content`` (or reasoning)
  text arrive,
- ``done_ns`` when the response ended: the chunked body's last chunk after ``data: [DONE]``
  (then this client closes, as curl does, without waiting for the server to honour
  ``Connection: close``), or the server closed the connection.
It reads the stream's text loosely (a regex on the raw bytes): it is meant for scripted servers
and proxies of them, whose event shapes are known, not as a general SSE client.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

_clock = time.perf_counter_ns
# A delta with text: `"content": "x` or `"reasoning_content": "x` (not null, not empty).
_TEXT = re.compile(rb'"(?:content|reasoning_content|reasoning|text)"\s*:\s*"[^"]')
_TAIL = 64  # bytes kept from the previous read, so a match split across reads is still found


@dataclass(slots=True)
class OneShot:
    """One request's stamps; ``error`` says why it did not complete."""

    tag: Any
    started_ns: int = 0
    first_token_ns: int | None = None
    done_ns: int | None = None
    status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_token_ns is not None and self.status == 200


class _Reader(asyncio.Protocol):
    def __init__(self, result: OneShot, request: bytes, done: asyncio.Future[None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.result = result
        self.request = request
        self.done = done
        self.window = b""
        self.head = bytearray()
        self.in_body = False
        self.seen_done = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports are not asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = _clock()
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            status_line = bytes(self.head[: self.head.find(b"\r\n")])
            try:
                self.result.status = int(status_line.split()[1])
            except (IndexError, ValueError):
                self.result.error = f"bad status line {status_line[:80]!r}"
            data = bytes(self.head[end + 4 :])
            self.in_body = True
        scan = self.window + data
        if self.result.first_token_ns is None and _TEXT.search(scan):
            self.result.first_token_ns = now
        self.window = scan[-_TAIL:]
        if b"[DONE]" in scan:
            self.seen_done = True
        if self.seen_done and scan.endswith(b"0\r\n\r\n"):
            self._finish(now)
            if self.transport is not None:
                self.transport.close()

    def _finish(self, now: int) -> None:
        if self.result.done_ns is None:
            self.result.done_ns = now
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.result.done_ns is None and self.result.error is None:
            self.result.error = f"connection lost before [DONE]: {exc or 'closed by the server'}"
        self._finish(_clock())


def request_bytes(host: str, port: int, path: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nConnection: close\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode("latin-1") + payload


async def send_oneshot(
    url: str, body: dict[str, Any], *, tag: Any = None, timeout_s: float = 60.0
) -> OneShot:
    """POST ``body`` to ``url`` (``http://host:port/path``) on a new connection and wait for the
    server to close it. Never raises for a failed request: the reason is in ``error``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    result = OneShot(tag=tag)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    request = request_bytes(host, port, parts.path or "/", body)
    result.started_ns = _clock()
    try:
        transport, _ = await loop.create_connection(
            lambda: _Reader(result, request, done), host, port
        )
    except OSError as exc:
        result.error = f"connect failed: {exc}"
        return result
    try:
        await asyncio.wait_for(done, timeout_s)
    except TimeoutError:
        result.error = f"no end within {timeout_s:g} s"
    finally:
        transport.close()
    return result


__all__ = ["OneShot", "request_bytes", "send_oneshot"]
