"""The sans-I/O response parser: framing, content coding, and the times handed to the sink."""

from __future__ import annotations

import gzip
import zlib

import pytest

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseHead, ResponseParser, build_request


class Sink:
    def __init__(self, stop_on: bytes | None = None) -> None:
        self.head: ResponseHead | None = None
        self.head_t: int | None = None
        self.body: list[tuple[bytes, int]] = []
        self.end_t: int | None = None
        self.first_byte_t: int | None = None
        self.stop_on = stop_on

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        self.head, self.head_t = head, t_ns

    def on_first_byte(self, t_ns: int) -> None:
        self.first_byte_t = t_ns

    def on_body(self, data: bytes, t_ns: int) -> bool:
        self.body.append((data, t_ns))
        return self.stop_on is not None and self.stop_on in data

    def on_end(self, t_ns: int) -> None:
        self.end_t = t_ns

    @property
    def text(self) -> bytes:
        return b"".join(d for d, _ in self.body)


def feed_all(raw: bytes, step: int, sink: Sink | None = None) -> tuple[ResponseParser, Sink]:
    sink = sink or Sink()
    parser = ResponseParser(sink)
    for i, start in enumerate(range(0, len(raw), step)):
        if parser.feed(raw[start : start + step], 1000 + i):
            break
    return parser, sink


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"7\r\ndata: a\r\n2\r\n\n\n\r\n10;ext=1\r\ndata: [DONE]\n\n..\r\n0\r\nX-Trailer: 1\r\n\r\n"
)

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, 4096])
def test_chunked_body_is_reassembled_for_any_read_size_and_connection_is_reusable(
    step: int,
) -> None:
    parser, sink = feed_all(CHUNKED, step)
    assert sink.text == b"data: a\n\ndata: [DONE]\n\n.."
    assert parser.done and parser.reusable
    assert sink.end_t is not None
    assert sink.head is not None and sink.head.content_type == "text/event-stream"


def test_each_body_piece_carries_the_time_of_the_read_it_arrived_in() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"
    parser = ResponseParser(sink := Sink())
    assert not parser.feed(head + b"ab", 5)
    assert not parser.feed(b"cd", 9)
    assert parser.feed(b"ef", 12)
    assert sink.head_t == 5
    assert sink.body == [(b"ab", 5), (b"cd", 9), (b"ef", 12)]
    assert sink.end_t == 12 and parser.reusable


def test_content_length_body_ends_at_its_length_and_zero_length_ends_at_the_head() -> None:
    parser, sink = feed_all(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", 4096)
    assert parser.done and sink.head is not None and sink.head.status == 500
    assert sink.body == []


def test_body_until_close_completes_on_eof_and_is_not_reusable() -> None:
    parser, sink = feed_all(b"HTTP/1.1 200 OK\r\n\r\ndata: x\n\n", 4096)
    assert not parser.done
    parser.eof(77)
    assert parser.done and not parser.reusable
    assert sink.text == b"data: x\n\n" and sink.end_t == 77


def test_connection_close_header_and_http10_make_the_connection_not_reusable() -> None:
    parser, _ = feed_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 99)
    assert parser.done and not parser.reusable
    parser, _ = feed_all(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", 99)
    assert parser.done and not parser.reusable


def test_interim_100_continue_is_skipped() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
    _, sink = feed_all(raw, 5)
    assert sink.head is not None and sink.head.status == 201 and sink.text == b"ok"


def test_eof_before_the_status_line_is_a_disconnect() -> None:
    parser = ResponseParser(Sink())
    parser.feed(b"HTTP/1.1 20", 1)
    with pytest.raises(RequestFailed) as caught:
        parser.eof(2, "reset")
    assert caught.value.kind == errors.DISCONNECT


def test_eof_in_the_middle_of_a_framed_body_is_an_incomplete_stream() -> None:
    parser, _ = feed_all(CHUNKED[:120], 4096)
    with pytest.raises(RequestFailed) as caught:
        parser.eof(2)
    assert caught.value.kind == errors.INCOMPLETE_STREAM and caught.value.status == 200


@pytest.mark.parametrize(
    "raw",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n",
        # What int() takes but HTTP does not: a signed, prefixed or underscored size or length.
        CHUNKED_HEAD + b"-5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"+5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"0x5\r\nhello\r\n0\r\n\r\n",
        CHUNKED_HEAD + b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello world",
        b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
        # A bare CR in a value would split the client's head the value is copied into.
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\rX-Injected: 1\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=[
        "not-http",
        "no-colon",
        "bad-chunk",
        "bad-length",
        "br",
        "negative-chunk",
        "plus-chunk",
        "0x-chunk",
        "underscore-chunk",
        "negative-length",
        "plus-length",
        "bare-cr-in-value",
        "nul-in-value",
    ],
)
def test_malformed_or_unsupported_responses_are_protocol_errors(raw: bytes) -> None:
    with pytest.raises(RequestFailed) as caught:
        feed_all(raw, 4096)
    assert caught.value.kind == errors.PROTOCOL


@pytest.mark.timeout(10)
def test_a_negative_chunk_size_cannot_loop_the_parser_forever() -> None:
    # "-6" after a whole chunk moved the parser back onto its own size line: 100 % CPU forever,
    # in the event loop of whoever parsed it (the gateway, for any of its upstreams).
    raw = CHUNKED_HEAD + b"1\r\na\r\n-6\r\n"
    with pytest.raises(RequestFailed) as caught:
        feed_all(raw, 4096)
    assert caught.value.kind == errors.PROTOCOL


@pytest.mark.parametrize(
    "tail",
    [b"5" + b" " * 100_000, b"5;" + b"x" * 100_000, b"0\r\n" + b"X-T: y\r\n" * 20_000],
    ids=["size-line", "extension", "trailers"],
)
def test_chunk_lines_and_trailers_are_bounded(tail: bytes) -> None:
    with pytest.raises(RequestFailed) as caught:
        feed_all(CHUNKED_HEAD + tail, 1024)  # never a newline: held bytes grew without end
    assert caught.value.kind == errors.PROTOCOL


def test_a_parser_that_does_not_decode_refuses_a_coded_body() -> None:
    # The gateway asks its upstreams for identity: 200 KB of gzip decode to 200 MB in one read.
    body = gzip.compress(b"\0" * 1_000_000)
    raw = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
    sink = Sink()
    with pytest.raises(RequestFailed) as caught:
        ResponseParser(sink, decode=False).feed(raw + body, 0)
    assert caught.value.kind == errors.PROTOCOL and not sink.body


def test_gzip_body_is_decoded_incrementally_keeping_each_flush_at_its_read_time() -> None:
    gz = zlib.compressobj(wbits=31)
    parts = [
        gz.compress(b"data: a\n\n") + gz.flush(zlib.Z_SYNC_FLUSH),
        gz.compress(b"data: [DONE]\n\n") + gz.flush(),
    ]
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % sum(
        map(len, parts)
    )
    parser = ResponseParser(sink := Sink())
    parser.feed(head + parts[0], 10)
    parser.feed(parts[1], 20)
    assert sink.body == [(b"data: a\n\n", 10), (b"data: [DONE]\n\n", 20)]
    assert parser.done and parser.reusable


def test_whole_gzip_body_decodes_to_the_original() -> None:
    body = gzip.compress(b"data: x\n\n" * 50)
    raw = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
    _, sink = feed_all(raw + body, 13)
    assert sink.text == b"data: x\n\n" * 50


def test_a_sink_that_stops_ends_the_response_and_the_connection_is_not_reused() -> None:
    parser, sink = feed_all(CHUNKED, 30, Sink(stop_on=b"a"))
    assert parser.stopped and parser.done and not parser.reusable
    assert sink.end_t is None


def test_bytes_after_a_complete_response_make_the_connection_unusable() -> None:
    parser, _ = feed_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxGARBAGE", 4096)
    assert parser.done and not parser.reusable


def test_request_head_has_host_and_length_and_keeps_given_headers_in_order() -> None:
    raw = build_request("POST", "/v1/completions", "h:1", {"A": "1", "host": "evil"}, b"{}")
    assert raw == (
        b"POST /v1/completions HTTP/1.1\r\nHost: h:1\r\nA: 1\r\nContent-Length: 2\r\n\r\n{}"
    )


def test_first_byte_is_the_first_body_byte_on_the_wire_even_before_gzip_yields_text() -> None:
    gz = zlib.compressobj(wbits=31)
    header_only = gz.compress(b"")  # a gzip stream's 10-byte header: no text yet
    rest = gz.compress(b"data: a\n\n") + gz.flush()
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
    parser = ResponseParser(sink := Sink())
    parser.feed(head, 1)
    assert sink.first_byte_t is None  # the head alone is not body
    parser.feed(b"%x\r\n%s\r\n" % (len(header_only), header_only), 2)
    parser.feed(b"%x\r\n%s\r\n0\r\n\r\n" % (len(rest), rest), 3)
    assert sink.first_byte_t == 2
    assert sink.body == [(b"data: a\n\n", 3)]
