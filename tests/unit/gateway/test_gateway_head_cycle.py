"""A parsed request head leaves no reference cycle behind for the garbage collector."""

from __future__ import annotations

import gc

from ttft.gateway.http.wire import HeadParser

HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
    b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n"
)


def _parse() -> tuple[str, str, str, dict[str, str]]:
    head = HeadParser()
    head.feed(HEAD)
    return head.finish()


def test_a_finished_head_is_freed_without_the_collector() -> None:
    # llhttp's parser holds the HeadParser's callbacks; a head that kept its parser was a cycle
    # per request, left for the collector (which then ran every ~100 requests).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        method, target, version, headers = _parse()
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
    assert (method, target, version) == ("POST", "/v1/chat/completions", "HTTP/1.1")
    assert headers["content-length"] == "2"
