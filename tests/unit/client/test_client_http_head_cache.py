"""Response heads parsed once per distinct bytes (``client.http.parse_head``)."""

from __future__ import annotations

import pytest

from ttft.client import http
from ttft.client.errors import RequestFailed
from ttft.client.http import parse_head

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"


def test_the_same_head_bytes_give_the_same_parsed_head() -> None:
    first = parse_head(HEAD)
    again = parse_head(bytes(bytearray(HEAD)))  # equal bytes, another object
    assert again is first
    assert first.status == 200 and first.headers["transfer-encoding"] == "chunked"
    other = parse_head(HEAD.replace(b"200 OK", b"201 Created"))
    assert other.status == 201 and other is not first


def test_a_malformed_head_is_refused_every_time() -> None:
    bad = b"HTTP/1.1 200 OK\r\nX-Bad: a\x00b"
    for _ in range(3):
        with pytest.raises(RequestFailed):
            parse_head(bad)
    assert bad not in http._PARSED_HEADS


def test_the_cache_is_bounded_in_count_and_head_size() -> None:
    for i in range(3 * http._PARSED_HEADS_MAX):
        parse_head(HEAD + b"\r\nX-N: %d" % i)
        assert len(http._PARSED_HEADS) <= http._PARSED_HEADS_MAX
    big = HEAD + b"\r\nX-Pad: " + b"a" * http._PARSED_HEAD_MAX_BYTES
    assert parse_head(big).headers["x-pad"].startswith("a")
    assert big not in http._PARSED_HEADS
    # Not bytes (a bytearray): parsed, never kept (it could change under the key).
    assert parse_head(bytearray(HEAD + b"\r\nX-Array: 1")).headers["x-array"] == "1"  # type: ignore[arg-type]
