"""What an upstream sends is bounded on every path, and what it says in an error stays in the
log (issue 28): a broken bound is a 502 (or an error event) for that request only."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_testkit import gateway_for, raw_upstream

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
EVENT = b'data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":"hi"}]}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def prerendered(tmp_path: Path) -> dict[str, Any]:
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<a>")
    return {"prerender": True, "engine": "vllm", "chat_template": str(template)}


@pytest.mark.timeout(60)
def test_an_endless_line_on_the_prerendered_path_ends_that_stream_only(tmp_path: Path) -> None:
    """The chat-translation path decodes events; a line that never ends grew its buffer
    without bound (and was copied on every read). Now it is a protocol error at 1 MiB."""
    endless = CHUNKED + chunk(EVENT) + chunk(b"data: " + b"x" * (3 * 1024 * 1024))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with (
        raw_upstream(lambda _: endless) as url,
        gateway_for([url], model=prerendered(tmp_path), routing={"retries": 0}) as gw,
    ):
        r = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)
        counted = gw.call(
            lambda g: g.metrics.upstream_errors.get(g.models["m"].replicas[0].name, "protocol")
        )
        health = httpx.get(gw.url + "/health", timeout=5)
    assert r.headers.get("x-ttft-prerendered") == "1"
    last = [line for line in r.text.splitlines() if line.startswith("data: ")][-1]
    assert json.loads(last[6:])["error"]["code"] == "upstream_error"
    assert counted == 1.0  # a protocol error, at once, not the upstream's close 5 s later
    assert health.status_code == 200  # one replica's bad stream is not a dead replica


def test_an_upstream_error_body_stays_in_the_log_and_the_client_gets_an_openai_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A traceback, file paths and an address in an engine's 500 reached the client verbatim."""
    leak = b'Traceback (most recent call last):\n  File "/srv/engine/app.py", line 3\n10.0.0.7:9000'
    answer = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\n\r\n%b" % (
        len(leak),
        leak,
    )
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with (
        caplog.at_level(logging.WARNING, "ttft.gateway"),
        raw_upstream(lambda _: answer) as url,
        gateway_for([url], routing={"retries": 0}) as gw,
    ):
        answers = [
            httpx.post(
                gw.url + "/v1/chat/completions",
                json=body,
                headers={"X-Request-Id": f"req-{i}"},
                timeout=10,
            )
            for i in range(5)
        ]
    for i, r in enumerate(answers):
        assert r.status_code == 500
        error = r.json()["error"]
        assert error["code"] == "upstream_error" and f"req-{i}" in error["message"]
        for secret in ("Traceback", "/srv/engine", "10.0.0.7", url.rsplit(":", 1)[1]):
            assert secret not in r.text
    logged = [rec.getMessage() for rec in caplog.records if "answered 500" in rec.getMessage()]
    assert len(logged) == 1 and "/srv/engine" in logged[0]  # once per interval, with the body


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("the request exceeds the available context size", True),
        ("could not open /models/secret.gguf", False),
        ("backend 10.0.0.7 refused", False),
        ("see http://internal:9000/x", False),
        ("x" * 300, False),
    ],
)
def test_an_engine_refusal_is_shown_only_when_it_names_nothing(message: str, shown: bool) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    answer = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with raw_upstream(lambda _: answer) as url, gateway_for([url], routing={"retries": 0}) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat, timeout=10)
    assert r.status_code == 400
    assert (r.json()["error"]["message"] == message) is shown
