"""The parser's shortcut for a read that holds exactly one whole chunk (a streamed event)."""

from __future__ import annotations

import pytest

from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseHead, ResponseParser


class Sink:
    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.end_t: int | None = None

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        pass

    def on_body(self, data: bytes, t_ns: int) -> bool:
        self.body.append(data)
        return False

    def on_end(self, t_ns: int) -> None:
        self.end_t = t_ns

    @property
    def text(self) -> bytes:
        return b"".join(self.body)


HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def _started() -> tuple[ResponseParser, Sink]:
    sink = Sink()
    parser = ResponseParser(sink)
    assert parser.feed(HEAD, 1) is False
    return parser, sink


@pytest.mark.parametrize(
    "read, body",
    [
        (b"5\r\nhello\r\n", b"hello"),
        (b"A\r\n0123456789\r\n", b"0123456789"),  # upper-case hex
        (b"00005\r\nhello\r\n", b"hello"),  # leading zeros
        (b"5;ext=1\r\nhello\r\n", b"hello"),  # an extension: the general path
        (b"5\r\nhello\r\n3\r\nabc\r\n", b"helloabc"),  # two chunks in one read
        (b"5\r\nhel", b"hel"),  # a chunk cut by the read
    ],
)
def test_one_read_gives_the_chunk_data(read: bytes, body: bytes) -> None:
    parser, sink = _started()
    assert parser.feed(read, 2) is False
    assert sink.text == body


@pytest.mark.parametrize(
    "read",
    [
        b"0x5\r\nhello\r\n",  # int(..., 16) takes a 0x prefix; HTTP does not
        b"+5\r\nhello\r\n",
        b"5_0\r\nhello\r\n",
        b"5\r\nhelloXY\r\n",  # the chunk's data not followed by CRLF
        b"11111111111111111\r\n",  # 17 hex digits
    ],
)
def test_bad_framing_still_fails(read: bytes) -> None:
    parser, _ = _started()
    with pytest.raises(RequestFailed):
        parser.feed(read, 2)


def test_the_last_chunk_ends_the_response_after_the_shortcut() -> None:
    parser, sink = _started()
    assert parser.feed(b"5\r\nhello\r\n", 2) is False
    assert parser.feed(b"0\r\n\r\n", 3) is True
    assert parser.done and parser.reusable
    assert sink.text == b"hello" and sink.end_t == 3
