"""``StreamingClient``: sends one streamed request and fills its timestamp ladder.

The glue between the pool (bytes and the times they arrived), the SSE decoder and the chunk
reader. Every rung is ``time.perf_counter_ns()`` minus the run anchor, read in the event loop's
read callback; failures land in ``record.error`` with a stable kind and never raise, except
cancellation, which is recorded and then re-raised.
"""

from __future__ import annotations

import asyncio
import enum
import json
import secrets
import ssl
import time
from collections.abc import Mapping
from types import TracebackType
from urllib.parse import urlsplit

from ttft.client import errors
from ttft.client.answer_text import TextReader
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseHead, ResponseParser, request_head, with_body
from ttft.client.openai import PATHS, ChunkReader, Request, error_message, prepare
from ttft.client.pool import ConnectionPool, PoolStats
from ttft.client.sse import SseDecoder
from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord, RunAnchor

_MAX_ERROR_BODY = 64 * 1024
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class _Unset(enum.Enum):
    UNSET = 0  # "use the client's timeout" (None already means "no limit")


class _LadderSink:
    """Receives one response from the parser and writes rungs into the record."""

    __slots__ = (
        "_anchor",
        "_collected",
        "_decoder",
        "_reader",
        "_record",
        "_require_done",
        "error",
    )

    def __init__(
        self,
        record: RequestRecord,
        anchor_ns: int,
        require_done: bool,
        text_out: list[str] | None = None,
    ) -> None:
        self._record = record
        self._require_done = require_done
        self._anchor = anchor_ns
        self._decoder = SseDecoder()
        self._reader = ChunkReader(record) if text_out is None else TextReader(record, text_out)
        self._collected: bytearray | None = None  # set when the body is an error, not a stream
        self.error: ErrorInfo | None = None

    def on_sent(self, t_ns: int) -> None:
        self._record.sent_ns = t_ns - self._anchor

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        record = self._record
        record.status = head.status
        record.headers_ns = t_ns - self._anchor
        echoed = head.headers.get("x-request-id")
        if echoed:
            record.server_request_id = echoed.strip()
        encoding = head.headers.get("content-encoding")
        if encoding:
            record.content_encoding = encoding.strip().lower()
        if not 200 <= head.status < 300 or head.content_type == "application/json":
            self._collected = bytearray()

    def on_first_byte(self, t_ns: int) -> None:
        self._record.first_byte_ns = t_ns - self._anchor

    def on_body(self, data: bytes, t_ns: int) -> bool:
        t_rel = t_ns - self._anchor
        collected = self._collected
        if collected is not None:
            if len(collected) < _MAX_ERROR_BODY:
                collected += data[: _MAX_ERROR_BODY - len(collected)]
            return False
        reader = self._reader
        for event in self._decoder.feed(data):
            reader.event(event, t_rel)
            if reader.error is not None:
                self.error = reader.error
                return True  # the stream failed: stop reading, the connection is dropped
        return False

    def on_end(self, t_ns: int) -> None:
        t_rel = t_ns - self._anchor
        record = self._record
        if self._collected is not None:
            record.done_ns = t_rel
            self.error = _body_error(record.status, bytes(self._collected))
            return
        reader = self._reader
        for event in self._decoder.finish():
            reader.event(event, t_rel)
        if reader.error is not None:
            self.error = reader.error
        elif not reader.done:
            record.done_ns = t_rel
            if self._require_done:
                self.error = ErrorInfo(
                    errors.INCOMPLETE_STREAM,
                    "the stream ended without 'data: [DONE]'",
                    record.status,
                )

    def failure(self, exc: RequestFailed) -> ErrorInfo:
        """The error for a request the transport could not finish, keeping what we learnt."""
        status = self._record.status
        if self._collected is not None and status is not None and status >= 300:
            body = bytes(self._collected)
            message = error_message(_json_or_text(body)) if body else exc.message
            return ErrorInfo(errors.kind_for_status(status), message, status)
        return ErrorInfo(exc.kind, exc.message, exc.status if exc.status is not None else status)


def new_id_prefix() -> str:
    """A run-scoped request-id prefix: unlikely to repeat across runs or processes."""
    return f"ttft-{secrets.token_hex(4)}"


def _id_header(request_id: str) -> bytes:
    """The ``X-Request-Id`` header line; an id that cannot be a header value is an input error."""
    try:
        line = f"X-Request-Id: {request_id}\r\n".encode("ascii")
    except UnicodeEncodeError:
        line = b""
    if not line or not request_id.isprintable() or len(request_id) > 200:
        raise TtftError(
            f"request id {request_id[:60]!r} cannot be sent as an X-Request-Id header",
            "use printable ASCII of at most 200 characters",
        )
    return line


def _json_or_text(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace").strip()[:500]


def _body_error(status: int | None, body: bytes) -> ErrorInfo | None:
    payload = _json_or_text(body)
    if status is not None and not 200 <= status < 300:
        message = error_message(payload) if body else f"HTTP {status} with an empty body"
        return ErrorInfo(errors.kind_for_status(status), message, status)
    if isinstance(payload, dict) and payload.get("error"):
        return ErrorInfo(errors.STREAM_ERROR, error_message(payload), status)
    return ErrorInfo(
        errors.PROTOCOL,
        "the server answered application/json, not an event stream: it ignored stream=true "
        f"({str(payload)[:200]})",
        status,
    )


class StreamingClient:
    """Streams OpenAI-style requests to one server; owns a keep-alive connection pool.

    ``base_url`` is the server root (``http://host:8080``) or its API root (``.../v1``); request
    paths are ``/v1/chat/completions`` and ``/v1/completions`` below the root. ``headers`` replace
    same-named defaults (``Accept-Encoding: identity`` unless you ask for ``gzip``).
    ``max_connections=None`` sets no cap: one connection per concurrent request.
    ``kernel_timestamps`` (Linux, plain http): stamp each read with the time the kernel received
    it rather than the time Python read it; off, reads are stamped in the read callback.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = 600.0,
        connect_timeout_s: float | None = 10.0,
        max_connections: int | None = None,
        require_done: bool = True,
        verify_tls: bool = True,
        kernel_timestamps: bool = True,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TtftError(
                f"not an http(s) URL: {base_url!r}",
                "give the server's base URL, e.g. http://127.0.0.1:8080 or http://host:8000/v1",
            )
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise TtftError(f"bad port in {base_url!r}", "use host:port with a number") from None
        host = parts.hostname
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        root = parts.path.rstrip("/")
        self._root = root if root.endswith("/v1") else root + "/v1"
        host_header = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            host_header += f":{port}"
        self._host_header = host_header
        defaults = {
            "User-Agent": "ttft",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if api_key:
            defaults["Authorization"] = f"Bearer {api_key}"
        given = {k.lower(): (k, v) for k, v in (headers or {}).items()}
        merged = {k: v for k, v in defaults.items() if k.lower() not in given}
        merged.update(dict(given.values()))
        self._headers = merged
        self._heads: dict[str, bytes] = {}  # per API: the request head before Content-Length
        self._require_done = require_done
        self._id_prefix = new_id_prefix()
        # A user's own X-Request-Id header wins; records then carry that id.
        self._user_id = given["x-request-id"][1] if "x-request-id" in given else None
        self._sent = 0
        context: ssl.SSLContext | None = None
        if parts.scheme == "https":
            context = ssl.create_default_context()
            if not verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        self._pool = ConnectionPool(
            host,
            port,
            ssl_context=context,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
            kernel_timestamps=kernel_timestamps,
        )

    @property
    def stats(self) -> PoolStats:
        """Connections opened and reused so far (what the keep-alive checks read)."""
        return self._pool.stats

    def take_read_gaps(self) -> list[int]:
        """How long each kernel-stamped read waited in its socket before this process read it
        (ns), since the last call: a client-health signal. Empty without kernel stamps."""
        return self._pool.take_read_gaps()

    def path_for(self, api: str) -> str:
        return self._root + PATHS[api]

    async def __aenter__(self) -> StreamingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def send(
        self,
        request: Request,
        record: RequestRecord,
        anchor: RunAnchor,
        *,
        timeout_s: float | _Unset | None = _Unset.UNSET,
        text_out: list[str] | None = None,
    ) -> RequestRecord:
        """Send one request, fill ``record``'s ladder, return it. Failures go to ``record.error``.

        ``text_out``, when given, receives the answer's content text piece by piece (for
        multi-turn runs, which send it back; other runs leave it out and pay nothing).

        ``record.scheduled_ns`` is the caller's; when left ``None`` it is set to now, so that
        ``sent - scheduled`` still shows the client's own preparation time. The request carries
        ``X-Request-Id: record.request_id``; a record without one gets this client's prefix and
        a counter, so every request can be found in the server's logs.
        """
        anchor_ns = anchor.monotonic_ns
        if record.scheduled_ns is None:
            record.scheduled_ns = time.perf_counter_ns() - anchor_ns
        if self._user_id is not None:
            record.request_id = self._user_id
        elif record.request_id is None:
            self._sent += 1
            record.request_id = f"{self._id_prefix}-x{self._sent}"
        api, body = prepare(request, self.model)
        head = self._heads.get(api)
        if head is None:
            head = self._heads[api] = request_head(
                "POST", self.path_for(api), self._host_header, self._headers
            )
        id_line = b"" if self._user_id is not None else _id_header(record.request_id)
        payload = with_body(head + id_line, _dumps(body).encode())
        sink = _LadderSink(record, anchor_ns, self._require_done, text_out)
        parser = ResponseParser(sink)
        limit = self.timeout_s if isinstance(timeout_s, _Unset) else timeout_s
        try:
            if limit is None:
                await self._pool.request(payload, parser, sink.on_sent)
            else:
                async with asyncio.timeout(limit):
                    await self._pool.request(payload, parser, sink.on_sent)
        except RequestFailed as exc:
            record.error = sink.error or sink.failure(exc)
        except TimeoutError:
            record.error = ErrorInfo(
                errors.TIMEOUT, f"no complete response within {limit} s", record.status
            )
        except asyncio.CancelledError:
            record.error = ErrorInfo(errors.CANCELLED, "the request was cancelled", record.status)
            raise
        else:
            record.error = sink.error
        return record
