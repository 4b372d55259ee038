"""An upstream that answers what no engine should: the gateway refuses it, names nothing, and
stays up. Upstreams come from the configuration, but they are reached over a network too."""

from __future__ import annotations

import gzip
import json
import logging
from typing import Any

import httpx
import pytest
from gateway_testkit import gateway_for, raw_upstream

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
BOMB = gzip.compress(b"\0" * 50_000_000)  # 50 KB that decode to 50 MB


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        url + "/v1/chat/completions",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "answer",
    [
        CHUNKED + b"1\r\na\r\n-6\r\n",
        CHUNKED + b"5" + b" " * 200_000,
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(BOMB)
        + BOMB,
    ],
    ids=["negative-chunk-size", "endless-chunk-line", "gzip-bomb"],
)
def test_a_malformed_answer_is_a_502_and_the_gateway_stays_up(
    answer: bytes, chat_body: dict[str, Any]
) -> None:
    with raw_upstream(lambda _: answer) as url, gateway_for([url], routing={"retries": 0}) as gw:
        refused = post(gw.url, chat_body)
        assert refused.status_code == 502, refused.text[:200]
        assert refused.json()["error"]["code"] == "upstream_error"
        assert url.rsplit(":", 1)[1] not in refused.text
        # A negative chunk size used to spin the event loop forever: nothing answered again.
        assert httpx.get(gw.url + "/v1/models", timeout=5).status_code == 200


def test_an_upstream_failing_every_request_is_counted_each_time_but_logged_once(
    chat_body: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A client that can make requests fail must not make the gateway log a line per request:
    one line per replica, error kind and 10 s, and the metric counts every one."""
    answer = CHUNKED + b"1\r\na\r\n-6\r\n"  # a protocol error: the replica stays in routing
    with (
        caplog.at_level(logging.WARNING, "ttft.gateway"),
        raw_upstream(lambda _: answer) as url,
        gateway_for([url], routing={"retries": 0}) as gw,
    ):
        statuses = [post(gw.url, chat_body).status_code for _ in range(20)]
        counted = gw.call(
            lambda g: g.metrics.upstream_errors.get(g.models["m"].replicas[0].name, "protocol")
        )
    assert statuses == [502] * 20 and counted == 20.0
    failed = [r for r in caplog.records if "failed (protocol)" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in failed]
