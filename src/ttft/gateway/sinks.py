"""Where an upstream answer goes: straight through, or translated from completions to chat.

Each sink is fed by the upstream connection's read callback (``ResponseSink`` protocol) and
writes to the client in that same callback: the gateway holds no response buffer. The client's
response head is written together with the first body bytes, so that ``Server-Timing`` can say
how long the upstream took to its first byte; until then nothing is committed, and a failed
upstream can still be retried elsewhere or answered with a proper error status.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseHead
from ttft.client.sse import SseDecoder
from ttft.gateway.http.server import Response
from ttft.gateway.translate import ChatStreamTranslator, chat_response
from ttft.gateway.upstream import UpstreamConnection

_clock = time.perf_counter_ns
# A chunk with text: the first content token of an OpenAI-style stream (chat or completions).
# A role-only chunk ("content":null) or an empty string does not match.
_TEXT = re.compile(rb'"(?:content|text|reasoning_content|reasoning)":"[^"]')

HeadFn = Callable[[int, str, int], list[tuple[str, str]]]
# (status, the first bytes of the upstream's error body) -> the client's error body (logs it).
ErrorFn = Callable[[int, bytes], bytes]
# What is kept of an upstream's error body, for the log only.
_ERROR_SAMPLE_BYTES = 4096
# The most bytes of an event stream without an event completing (a line, or an event of many
# lines). An engine's events are a few hundred bytes; an endless line grew the decoder's
# buffer without bound and was copied again on every read (15 s of CPU in 25 s).
MAX_EVENT_BYTES = 1024 * 1024


class ForwardSink:
    """The engine's bytes as they come. Also used for error answers of the other sinks."""

    def __init__(
        self,
        response: Response,
        make_headers: HeadFn,
        on_first_token: Callable[[int], None],
        on_error: ErrorFn | None = None,
    ) -> None:
        self.response = response
        self.make_headers = make_headers  # (status, content type, upstream ttfb ns) -> headers
        self.on_first_token = on_first_token
        # An upstream error answer (4xx/5xx): its body, which can hold a traceback, file
        # paths or an address, is kept (bounded) for the log, and the client gets ours.
        self.on_error = on_error
        self._error: bytearray | None = None
        self.sent_ns = 0
        self.head: ResponseHead | None = None
        self.first_body_ns: int | None = None
        self._token_seen = False
        self._stream = False
        # The upstream connection (set by the proxy): once the head is out and the first token
        # seen, a chunked answer to a chunked client is relayed as it comes (``offer_relay``).
        self.upstream: UpstreamConnection | None = None
        self._relayable = False

    # -- ResponseSink ----------------------------------------------------------------------

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        self.head = head
        self._stream = head.content_type == "text/event-stream"
        if head.status >= 400 and self.on_error is not None:
            self._error = bytearray()

    def on_first_byte(self, t_ns: int) -> None:
        # The wire's first body byte (before unframing), for the upstream TTFB.
        if self.first_body_ns is None:
            self.first_body_ns = t_ns

    def on_body(self, data: bytes, t_ns: int) -> bool:
        if self.first_body_ns is None:
            self.first_body_ns = t_ns
        error = self._error
        response = self.response
        if error is not None:
            error += data[: _ERROR_SAMPLE_BYTES - len(error)]
            return response.client_gone
        # Once per streamed event: inlined (``_start`` is a no-op after the first event).
        if response.status is None:
            self._start()
        response.write(data)
        if not self._token_seen and self._stream and _TEXT.search(data) is not None:
            self._token_seen = True
            self.on_first_token(_clock())
        if self._relayable and (self._token_seen or not self._stream):
            # Nothing more to look for in this answer: its next whole chunks go as they come.
            self._relayable = False
            target = response.relay_target()
            if target is not None and self.upstream is not None:
                self.upstream.offer_relay(target)
        return response.client_gone

    def on_end(self, t_ns: int) -> None:
        if self._error is not None and self.on_error is not None and not self.response.started:
            assert self.head is not None
            status = self.head.status
            ttfb = (self.first_body_ns or _clock()) - self.sent_ns
            headers = self.make_headers(status, "application/json", ttfb)
            self.response.send(status, headers, self.on_error(status, bytes(self._error)))
            return
        self._start()
        self.response.end()

    # -- helpers ---------------------------------------------------------------------------

    def _start(self) -> None:
        response = self.response
        if response.started:
            return
        head = self.head
        assert head is not None
        status = head.status
        ttfb = (self.first_body_ns or _clock()) - self.sent_ns
        headers = self.make_headers(status, head.headers.get("content-type", ""), ttfb)
        length = head.headers.get("content-length")
        chunked = "chunked" in head.tokens("transfer-encoding")
        # The upstream's length holds only for the bytes it sent: not if we decoded them.
        framed = (
            length is not None
            and length.isdigit()
            and not chunked
            and not head.tokens("content-encoding") - {"identity"}
        )
        response.start(status, headers, length=int(length) if framed and length else None)
        self._relayable = chunked and self._error is None

    @property
    def committed(self) -> bool:
        """Bytes went to the client: the request cannot be retried any more."""
        return self.response.head_sent

    @property
    def streaming(self) -> bool:
        return self._stream and self.response.started


class ChatStreamSink(ForwardSink):
    """A completions event stream rewritten, event by event, as a chat event stream."""

    def __init__(
        self,
        response: Response,
        make_headers: HeadFn,
        on_first_token: Callable[[int], None],
        include_usage: bool,
        on_error: ErrorFn | None = None,
    ) -> None:
        super().__init__(response, make_headers, on_first_token, on_error)
        self._decoder = SseDecoder()
        self._pending = 0  # bytes fed since an event last completed
        self._translator = ChatStreamTranslator(include_usage)
        self._translate = False

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        super().on_head(head, t_ns)
        self._translate = head.status == 200 and self._stream

    def on_body(self, data: bytes, t_ns: int) -> bool:
        if not self._translate:
            return super().on_body(data, t_ns)
        if self.first_body_ns is None:
            self.first_body_ns = t_ns
        self._pending += len(data)
        if self._pending > MAX_EVENT_BYTES:
            raise RequestFailed(
                errors.PROTOCOL, f"an event of the stream is longer than {MAX_EVENT_BYTES} bytes"
            )
        events = self._decoder.feed(data)
        if events:
            # What follows the last line end has not completed an event yet.
            self._pending = len(data) - 1 - max(data.rfind(b"\n"), data.rfind(b"\r"))
        out = b"".join(self._translator.event(e.data) for e in events)
        self._emit(out)
        return self.response.client_gone

    def on_end(self, t_ns: int) -> None:
        if self._translate:
            self._emit(b"".join(self._translator.event(e.data) for e in self._decoder.finish()))
        super().on_end(t_ns)

    def _emit(self, out: bytes) -> None:
        if not out:
            return
        self._start()
        self.response.write(out)
        if not self._token_seen and self._translator.role_sent and _TEXT.search(out):
            self._token_seen = True
            self.on_first_token(_clock())


class ChatJsonSink(ForwardSink):
    """A non-streamed completions answer, collected (bounded) and sent as a chat completion."""

    def __init__(
        self,
        response: Response,
        make_headers: HeadFn,
        on_first_token: Callable[[int], None],
        limit: int,
        on_error: ErrorFn | None = None,
    ) -> None:
        super().__init__(response, make_headers, on_first_token, on_error)
        self._body = bytearray()
        self._limit = limit
        self._translate = False

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        super().on_head(head, t_ns)
        self._translate = head.status == 200 and head.content_type == "application/json"

    def on_body(self, data: bytes, t_ns: int) -> bool:
        if not self._translate:
            return super().on_body(data, t_ns)
        if self.first_body_ns is None:
            self.first_body_ns = t_ns
        if len(self._body) + len(data) > self._limit:
            raise RequestFailed(errors.PROTOCOL, f"answer larger than {self._limit} bytes")
        self._body += data
        return self.response.client_gone

    def on_end(self, t_ns: int) -> None:
        if not self._translate:
            super().on_end(t_ns)
            return
        try:
            body = chat_response(bytes(self._body))
        except ValueError:
            body = bytes(self._body)
        assert self.head is not None
        ttfb = (self.first_body_ns or _clock()) - self.sent_ns
        headers = self.make_headers(200, "application/json", ttfb)
        self.response.send(200, headers, body)
