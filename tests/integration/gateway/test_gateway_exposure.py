"""The gateway exposed to a network: keys before bodies, safe defaults, no 500s, no addresses."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from typing import Any

import httpx
import pytest
from gateway_testkit import gateway_for, read_response, scripted


def raw_exchange(url: str, raw: bytes, timeout_s: float = 5.0) -> bytes:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(raw)
        return read_response(sock, timeout_s)


def post(url: str, body: bytes, **headers: str) -> httpx.Response:
    base = {"Content-Type": "application/json", **headers}
    return httpx.post(url + "/v1/chat/completions", content=body, headers=base, timeout=10)


def test_the_key_is_checked_before_a_large_body_is_read() -> None:
    with scripted() as up, gateway_for([up.base_url], api_keys=["sk-right"]) as gw:
        started = time.monotonic()
        out = raw_exchange(
            gw.url,
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 4000000\r\n\r\n",
        )
        assert out.startswith(b"HTTP/1.1 401 ") and b"invalid_api_key" in out
        assert time.monotonic() - started < 3  # not a wait for 4 MB that never come


def test_health_and_metrics_need_the_key_when_keys_are_set() -> None:
    with scripted() as up, gateway_for([up.base_url], api_keys=["sk-right"]) as gw:
        for path in ("/health", "/metrics"):
            assert httpx.get(gw.url + path).status_code == 401
            ok = httpx.get(gw.url + path, headers={"Authorization": "Bearer sk-right"})
            assert ok.status_code == 200
    with (
        scripted() as up,
        gateway_for([up.base_url], api_keys=["sk-right"], public_metrics=True) as gw,
    ):
        assert httpx.get(gw.url + "/health").status_code == 200


def test_without_a_key_an_unknown_route_is_a_401_not_a_404() -> None:
    """The key is checked before routing: a 404 named the gateway's routes to anyone."""
    with scripted() as up, gateway_for([up.base_url], api_keys=["sk-right"]) as gw:
        for method, path in (("GET", "/admin"), ("POST", "/v1/embeddings"), ("GET", "/")):
            anonymous = httpx.request(method, gw.url + path)
            assert anonymous.status_code == 401, (path, anonymous.text[:200])
            assert "/v1/" not in anonymous.text
        keyed = httpx.get(gw.url + "/admin", headers={"Authorization": "Bearer sk-right"})
        assert keyed.status_code == 404


def test_without_keys_only_a_loopback_host_and_json_are_accepted(chat_body: Any) -> None:
    body = json.dumps({**chat_body, "stream": False}).encode()
    with scripted() as up, gateway_for([up.base_url]) as gw:
        port = gw.url.rsplit(":", 1)[1]
        assert post(gw.url, body).status_code == 200
        assert post(gw.url, body, Host=f"localhost:{port}").status_code == 200
        rebound = post(gw.url, body, Host="attacker.example")
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
        assert httpx.get(gw.url + "/health", headers={"Host": "evil.test"}).status_code == 403
        form = post(gw.url, body, **{"Content-Type": "text/plain"})
        assert form.status_code == 415 and form.json()["error"]["code"] == "unsupported_media_type"
    with (
        scripted() as up,
        gateway_for([up.base_url], allowed_hosts=["gateway.internal"]) as gw,
    ):
        assert post(gw.url, body, Host="gateway.internal").status_code == 200


def test_priority_is_limited_per_key(chat_body: Any) -> None:
    def body(priority: int) -> bytes:
        return json.dumps({**chat_body, "stream": False, "priority": priority}).encode()

    keys = ["sk-user", {"key": "sk-ops", "max_priority_boost": 100}]
    with scripted() as up, gateway_for([up.base_url], api_keys=keys) as gw:
        user = {"Authorization": "Bearer sk-user"}
        ops = {"Authorization": "Bearer sk-ops"}
        assert post(gw.url, body(5), **user).status_code == 200  # lowering oneself is fine
        jump = post(gw.url, body(-1_000_000), **user)
        assert jump.status_code == 400 and jump.json()["error"]["param"] == "priority"
        assert post(gw.url, body(-100), **ops).status_code == 200
        assert post(gw.url, body(-101), **ops).status_code == 400


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"messages": [{"role": "user", "content": "\\ud800"}], "priority": 1}',
        b'{"prompt": [1, 2, 1180591620717411303424]}',
        b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
        b'{"messages": [{"role": "user", "content": "x"}], "top_p": 1e999}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 10000000000000}',
        b'{"messages": [{"role": "user", "content": "x"}], "n": 1000000}',
        b'{"messages": [{"role": "user", "content": "x"}], "seed": 1180591620717411303424}',
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 9999999, "max_tokens": 1}',
    ],
    ids=[
        "nesting",
        "surrogate",
        "huge-token-id",
        "nan",
        "infinity",
        "max-tokens",
        "n",
        "seed",
        "duplicate-key",
    ],
)
def test_bad_input_is_a_400_with_an_openai_error_body(raw: bytes) -> None:
    with scripted() as up, gateway_for([up.base_url]) as gw:
        path = "/v1/completions" if b'"prompt"' in raw else "/v1/chat/completions"
        answer = httpx.post(
            gw.url + path, content=raw, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 400, answer.text[:200]
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"]


def test_upstream_failures_do_not_name_the_upstream_address(chat_body: Any) -> None:
    upstream = contextlib.ExitStack()
    up = upstream.enter_context(scripted())
    port = up.base_url.rsplit(":", 1)[1]
    routing = {"retries": 0, "health_interval_s": 60.0}
    with upstream, gateway_for([up.base_url], routing=routing) as gw:
        upstream.close()  # healthy at start, gone when the request comes
        answer = post(gw.url, json.dumps(chat_body).encode())
        assert answer.status_code == 502, answer.text
        assert port not in answer.text and "127.0.0.1" not in answer.text


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n", b"400"),
        (
            b"GET /v1/models HTTP/1.1\r\nHost: [::1]evil.example\r\nConnection: close\r\n\r\n",
            b"403",
        ),
        (b"GET /v1/models HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n", b"200"),
        (
            b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: bogus\r\n"
            b"Connection: close\r\n\r\n",
            b"417",
        ),
        (b"GET /v1/models HTTP/1.0\r\n\r\n", b"200"),  # HTTP/1.0 may leave Host out
    ],
    ids=["http11-without-host", "bracket-junk", "bracket-port", "unknown-expectation", "http10"],
)
def test_host_and_expect_are_checked_as_the_rfc_says(raw: bytes, status: bytes) -> None:
    # Without Host, the DNS-rebinding check was skipped (any HTTP/1.1 request needs one, RFC
    # 9112 3.2); "[::1]" followed by anything was read as loopback; an unknown Expect was
    # ignored (RFC 9110 10.1.1: 417).
    with scripted() as up, gateway_for([up.base_url]) as gw:
        out = raw_exchange(gw.url, raw)
    assert out.startswith(b"HTTP/1.1 " + status + b" "), out[:300]
    if status != b"200":
        assert b'"error"' in out
