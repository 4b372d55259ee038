"""One streamed request, synchronously: POST a JSON body, yield its SSE events as they arrive.

For procedures that send one request at a time and want each event with its arrival time, not
a ladder (``ttft verify``: both sides see the same slot scheduling, so an event loop would add
nothing but a second clock). It speaks through the same pieces as ``StreamingClient`` (the
request serializer, the HTTP/1.1 response parser, the SSE decoder), so framing, content coding
and event splitting are read one way in the whole toolkit, and the target's auth headers
(``--api-key``, ``--header``) go with every request.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseHead, ResponseParser, build_request
from ttft.client.sse import SseDecoder, SseEvent
from ttft.core.errors import TtftError

_READ_BYTES = 64 * 1024
_ERROR_BODY_BYTES = 300  # of an error answer, what the message quotes


class StreamRefused(TtftError):
    """The server answered an HTTP error (an engine answers 400 to a prompt over its window)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _Collect:
    """The parser's sink: the head, and body bytes handed on as each read completes them."""

    def __init__(self) -> None:
        self.head: ResponseHead | None = None
        self.pieces: list[bytes] = []
        self.ended = False

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        self.head = head

    def on_body(self, data: bytes, t_ns: int) -> bool:
        self.pieces.append(data)
        return False

    def on_end(self, t_ns: int) -> None:
        self.ended = True


def _connect(url: str, timeout_s: float) -> tuple[socket.socket, str, str]:
    """A connected socket (TLS for https), the Host header, and the request target."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    sock: socket.socket = socket.create_connection((host, port), timeout=timeout_s)
    if https:
        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return sock, parts.netloc, target


def _events(
    sock: socket.socket, parser: ResponseParser, sink: _Collect
) -> Iterator[tuple[int, SseEvent]]:
    decoder = SseDecoder()
    while not sink.ended:
        data = sock.recv(_READ_BYTES)
        now = time.perf_counter_ns()
        if not data:
            parser.eof(now)
        else:
            parser.feed(data, now)
        if sink.head is not None and sink.head.status >= 400:
            continue  # an error body is read whole, then raised by the caller
        for piece in sink.pieces:
            for event in decoder.feed(piece):
                yield now, event
        sink.pieces.clear()
        if not data:
            return


def stream_events(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(perf_counter_ns at arrival, event)`` for each JSON ``data:`` event but ``[DONE]``.

    Raises ``StreamRefused`` for an HTTP error status and ``TtftError`` for an unreachable
    server, a broken stream, a line that is not JSON, or an error event.
    """
    payload = json.dumps(body).encode()
    sink = _Collect()
    parser = ResponseParser(sink)
    try:
        sock, host, path = _connect(url, timeout_s)
    except OSError as exc:
        raise TtftError(f"cannot reach {url}: {exc}") from None
    with sock:
        sent = {"Content-Type": "application/json", **(headers or {}), "Connection": "close"}
        request = build_request("POST", path, host, sent, payload)
        try:
            sock.sendall(request)
            for now, event in _events(sock, parser, sink):
                if event.data == "[DONE]":
                    return
                try:
                    parsed = json.loads(event.data)
                except ValueError:
                    raise TtftError(
                        f"{url} streamed a line that is not JSON: {event.data[:120]!r}"
                    ) from None
                if isinstance(parsed, dict):
                    if "error" in parsed:
                        raise TtftError(f"{url} streamed an error: {str(parsed['error'])[:300]}")
                    yield now, parsed
        except RequestFailed as exc:
            raise TtftError(f"{url}: {exc.message}") from None
        except OSError as exc:
            raise TtftError(f"cannot reach {url}: {exc}") from None
    if sink.head is not None and sink.head.status >= 400:
        detail = b"".join(sink.pieces).decode(errors="replace")[:_ERROR_BODY_BYTES]
        status = sink.head.status
        raise StreamRefused(f"{url} answered HTTP {status}: {detail}", status)
