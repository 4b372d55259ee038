"""The gateway in front of scripted upstreams: pass-through timing, headers, errors, failover."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from gateway_testkit import gateway_for, read_response, scripted

from ttft.testing.sse_script import Script

_clock = time.perf_counter_ns


def sse_payloads(text: str) -> list[str]:
    return [line[6:] for line in text.split("\n") if line.startswith("data: ")]


def stream_with_times(url: str, body: dict[str, Any], **headers: str) -> list[tuple[int, bytes]]:
    """Raw socket reads of one streamed request, each stamped on arrival."""
    host, port = url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: "
        f"application/json\r\nContent-Length: {len(raw)}\r\nConnection: close\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + "\r\n"
    ).encode()
    reads: list[tuple[int, bytes]] = []
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head + raw)
        sock.settimeout(10)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            reads.append((_clock(), data))
    return reads


def test_each_event_reaches_the_client_when_the_upstream_writes_it(
    chat_body: dict[str, Any],
) -> None:
    script = Script(
        first_token_delay_ms=60,
        token_interval_ms=40,
        n_tokens=6,
        tokens=tuple(f" tok{i}" for i in range(6)),
    )
    with scripted(script) as up, gateway_for([up.base_url]) as gw:
        reads = stream_with_times(gw.url, chat_body, **{"Accept-Encoding": "gzip"})
        log = up.snapshot().logs[-1]
    written = {}
    for kind, t_ns in log.events:
        written.setdefault(kind, []).append(t_ns)
    received = {}
    for t_ns, data in reads:
        for i in range(6):
            if f" tok{i}".encode() in data:
                received.setdefault(i, t_ns)
    assert sorted(received) == list(range(6))
    # Each token is at the client within a few ms of its write, not at the end of the stream.
    for i, t_write in enumerate(written["token"]):
        assert 0 < received[i] - t_write < 15_000_000, (i, (received[i] - t_write) / 1e6)
    head = reads[0][1].split(b"\r\n\r\n")[0].lower()
    assert b"x-accel-buffering: no" in head
    assert b"content-encoding" not in head  # never compressed, whatever the client accepts
    assert b"server-timing: queue;dur=" in head and b"upstream;dur=" in head


def test_the_client_key_is_required_when_keys_are_configured(chat_body: dict[str, Any]) -> None:
    with (
        scripted(first_token_delay_ms=1) as up,
        gateway_for([up.base_url], api_keys=["sk-right"]) as gw,
    ):
        url = gw.url + "/v1/chat/completions"
        missing = httpx.post(url, json=chat_body)
        wrong = httpx.post(url, json=chat_body, headers={"Authorization": "Bearer sk-wrong"})
        basic = httpx.post(url, json=chat_body, headers={"Authorization": "Basic abc"})
        right = httpx.post(url, json=chat_body, headers={"Authorization": "Bearer sk-right"})
        models = httpx.get(gw.url + "/v1/models")
        health = httpx.get(gw.url + "/health")
    for refused in (missing, wrong, basic, models):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    assert "missing API key" in missing.json()["error"]["message"]
    assert "invalid API key" in wrong.json()["error"]["message"]
    assert right.status_code == 200 and "[DONE]" in right.text
    assert health.status_code == 401  # with keys, /health and /metrics need one too


def test_the_upstreams_own_key_goes_upstream_and_the_clients_key_does_not(
    chat_body: dict[str, Any],
) -> None:
    with scripted(first_token_delay_ms=1) as up:
        keyed = {"url": up.base_url, "api_key": "sk-upstream"}
        with gateway_for([keyed], api_keys=["sk-client"]) as gw:
            headers = {"Authorization": "Bearer sk-client"}
            answer = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, headers=headers)
        seen = up.snapshot().logs[-1].headers
    assert answer.status_code == 200 and "[DONE]" in answer.text
    assert seen["authorization"] == "Bearer sk-upstream"


def test_bad_input_gets_a_clear_4xx_and_the_gateway_keeps_serving() -> None:
    bad: list[tuple[bytes, int, str]] = [
        (b"{not json", 400, "not valid JSON"),
        (b"", 400, "no body"),
        (b"\xff\xfe", 400, "not UTF-8"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (json.dumps({"model": "nope", "messages": []}).encode(), 404, "does not exist"),
        (json.dumps({"model": 3, "messages": []}).encode(), 400, "'model' must be a string"),
        (json.dumps({"model": "m"}).encode(), 400, "'messages' is required"),
        (json.dumps({"model": "m", "messages": "hi"}).encode(), 400, "non-empty array"),
        (json.dumps({"model": "m", "messages": [{"content": "x"}]}).encode(), 400, "role"),
        (
            json.dumps({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}).encode(),
            400,
            "expected one of",
        ),
        (
            json.dumps({"model": "m", "messages": [{"role": "user", "content": 5}]}).encode(),
            400,
            "content",
        ),
        (
            json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}
            ).encode(),
            400,
            "'max_tokens' must be an integer",
        ),
        (
            json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": [1]}
            ).encode(),
            400,
            "'temperature' must be a number",
        ),
        (
            json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "x"}], "priority": "high"}
            ).encode(),
            400,
            "'priority' must be an integer",
        ),
        (
            json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}
            ).encode(),
            400,
            "'stream' must be true or false",
        ),
    ]
    with scripted(first_token_delay_ms=1) as up, gateway_for([up.base_url]) as gw:
        with httpx.Client(base_url=gw.url) as client:
            for raw, status, needle in bad:
                r = client.post(
                    "/v1/chat/completions",
                    content=raw,
                    headers={"Content-Type": "application/json"},
                )
                assert r.status_code == status, (raw, r.text)
                error = r.json()["error"]
                assert needle in error["message"], (raw, error)
                assert set(error) == {"message", "type", "param", "code"}
            too_big = client.post("/v1/completions", content=b"x" * (4 * 1024 * 1024 + 1))
            assert too_big.status_code == 413
            assert client.get("/v1/nothing").status_code == 404
            wrong_method = client.get("/v1/chat/completions")
            assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
        ok = httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x"})
        assert ok.status_code == 200 and "[DONE]" in ok.text
        time.sleep(0.1)
        leftovers = gw.call(
            lambda g: (len(g.server.connections), g.models["m"].replicas[0].admission.in_flight)
        )
    assert leftovers == (0, 0)


def test_a_full_queue_answers_429_with_retry_after(chat_body: dict[str, Any]) -> None:
    with (
        scripted(first_token_delay_ms=600, n_tokens=1) as up,
        gateway_for(
            [up.base_url],
            # No per-client share: one client fills the queue here (test_gateway_fairness).
            admission={
                "max_in_flight": 1,
                "queue_size": 1,
                "queue_timeout_s": 8,
                "max_requests_per_client": 0,
            },
        ) as gw,
    ):
        results: list[httpx.Response] = []

        def one() -> None:
            results.append(httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10))

        threads = [threading.Thread(target=one) for _ in range(3)]
        for t in threads:
            t.start()
            time.sleep(0.1)
        for t in threads:
            t.join()
        metrics = httpx.get(gw.url + "/metrics").text
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200, 200, 429]
    refused = next(r for r in results if r.status_code == 429)
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "queue_full"
    assert 'ttft_gateway_shed_total{model="m",reason="queue_full"} 1.0' in metrics


def test_a_request_that_waits_past_the_queue_timeout_gets_503(chat_body: dict[str, Any]) -> None:
    with (
        scripted(first_token_delay_ms=800, n_tokens=1) as up,
        gateway_for(
            [up.base_url],
            admission={"max_in_flight": 1, "queue_timeout_s": 0.2},
        ) as gw,
    ):
        first = threading.Thread(
            target=lambda: httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
        )
        first.start()
        time.sleep(0.1)
        late = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
        first.join()
    assert late.status_code == 503 and late.json()["error"]["code"] == "queue_timeout"
    assert "retry-after" in late.headers


def test_a_client_that_leaves_mid_stream_cancels_the_upstream_request(
    chat_body: dict[str, Any],
) -> None:
    with (
        scripted(first_token_delay_ms=10, token_interval_ms=100, n_tokens=100) as up,
        gateway_for([up.base_url]) as gw,
    ):
        before = up.open_connections
        host, port = gw.url.removeprefix("http://").split(":")
        raw = json.dumps(chat_body).encode()
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (len(raw), raw)
            )
            sock.settimeout(5)
            assert b"data:" in sock.recv(65536)
            during = up.open_connections
        deadline = time.monotonic() + 5
        while up.open_connections >= during and time.monotonic() < deadline:
            time.sleep(0.02)
        after = up.open_connections
        state = gw.call(
            lambda g: (g.models["m"].replicas[0].admission.in_flight, g.metrics.cancelled.get("m"))
        )
    assert during == before + 1 and after == before  # the upstream connection was closed
    assert state == (0, 1.0)


def test_an_upstream_dying_mid_stream_ends_the_stream_with_an_error_event(
    chat_body: dict[str, Any],
) -> None:
    broken = Script(first_token_delay_ms=5, token_interval_ms=5, n_tokens=10, close_after=3)
    with (
        scripted(broken) as bad,
        scripted(first_token_delay_ms=5) as good,
        gateway_for([bad.base_url, good.base_url], routing={"affinity": False}) as gw,
    ):
        # Least-loaded with ties rotating: find the request that lands on the broken one.
        for _ in range(4):
            r = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
            if r.headers["x-ttft-replica"] == "0":
                break
        assert r.headers["x-ttft-replica"] == "0" and r.status_code == 200
        payloads = sse_payloads(r.text)
        assert json.loads(payloads[-1])["error"]["code"] == "upstream_error"
        assert "[DONE]" not in payloads
        after = [
            httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
            for _ in range(3)
        ]
        health = httpx.get(gw.url + "/health").json()
    assert all(a.status_code == 200 and a.headers["x-ttft-replica"] == "1" for a in after)
    assert health["models"]["m"]["upstreams"][0]["healthy"] is False


def test_a_dead_upstream_is_skipped_and_a_refused_connection_is_retried_elsewhere(
    chat_body: dict[str, Any],
) -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{placeholder.getsockname()[1]}"  # nothing listens
    with scripted(first_token_delay_ms=1) as good, gateway_for([dead_url, good.base_url]) as gw:
        # Pretend the dead one passed its last health check: the request finds out itself.
        gw.call(lambda g: setattr(g.models["m"].replicas[0], "healthy", True))
        answers = [
            httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
            for _ in range(4)
        ]
        metrics = httpx.get(gw.url + "/metrics").text
    assert all(a.status_code == 200 and a.headers["x-ttft-replica"] == "1" for a in answers)
    assert "ttft_gateway_upstream_errors_total" in metrics and 'kind="connect"' in metrics


def test_no_healthy_upstream_is_a_503(chat_body: dict[str, Any]) -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{placeholder.getsockname()[1]}"
    with gateway_for([dead_url]) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat_body)
        health = httpx.get(gw.url + "/health")
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_healthy_upstream"
    assert health.status_code == 503 and health.json()["status"] == "degraded"


def test_non_streamed_answers_keep_their_length_and_errors_their_status() -> None:
    with (
        scripted(first_token_delay_ms=1, ignore_stream=True) as up,
        gateway_for([up.base_url]) as gw,
    ):
        r = httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x"})
        assert r.status_code == 200 and r.headers["content-length"] == str(len(r.content))
        assert "server-timing" in r.headers
    with (
        scripted(status=400, error_message="context too long") as up,
        gateway_for([up.base_url]) as gw,
    ):
        r = httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x"})
        assert r.status_code == 400 and r.json()["error"]["message"] == "context too long"


def test_http10_clients_such_as_default_nginx_get_a_close_delimited_stream(
    chat_body: dict[str, Any],
) -> None:
    with scripted(first_token_delay_ms=1, n_tokens=3) as up, gateway_for([up.base_url]) as gw:
        host, port = gw.url.removeprefix("http://").split(":")
        raw = json.dumps(chat_body).encode()
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (len(raw), raw)
            )
            out = read_response(sock)
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding" not in head and b"Connection: close" in head
    assert body.endswith(b"data: [DONE]\n\n")


def test_prerendered_chat_goes_to_completions_and_comes_back_as_chat(tmp_path: Any) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<a>")
    with (
        scripted(first_token_delay_ms=1, n_tokens=3) as up,
        gateway_for(
            [up.base_url],
            model={"prerender": True, "engine": "vllm", "chat_template": str(template)},
        ) as gw,
    ):
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        r = httpx.post(gw.url + "/v1/chat/completions", json=body)
        tools = httpx.post(
            gw.url + "/v1/chat/completions", json={**body, "tools": [{"type": "function"}]}
        )
        paths = [log.path for log in up.snapshot().logs]
        metrics = httpx.get(gw.url + "/metrics").text
    assert r.headers["x-ttft-prerendered"] == "1"
    chunks = [json.loads(p) for p in sse_payloads(r.text) if p != "[DONE]"]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert (
        "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        == " t0 t1 t2"
    )
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    assert "x-ttft-prerendered" not in tools.headers  # tools: the engine's chat endpoint
    assert paths == ["/v1/completions", "/v1/chat/completions"]
    assert 'ttft_gateway_prerender_total{model="m",reason="fields",result="bypass"} 1.0' in metrics


@pytest.mark.parametrize("engine_path", ["/v1"])
def test_upstream_urls_with_a_path_prefix_keep_it(engine_path: str) -> None:
    with scripted(first_token_delay_ms=1) as up, gateway_for([up.base_url + engine_path]) as gw:
        r = httpx.post(gw.url + "/v1/completions", json={"model": "m", "prompt": "x"})
    assert r.status_code == 200  # ".../v1" was taken as the server root, not doubled


def test_a_silent_upstream_times_out_with_504_or_an_error_event(
    chat_body: dict[str, Any],
) -> None:
    limits = {"upstream_idle_timeout_s": 0.3}
    with scripted(headers_delay_ms=3000) as up, gateway_for([up.base_url], limits=limits) as gw:
        started = time.monotonic()
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
        assert r.status_code == 504 and time.monotonic() - started < 2
        assert "(timeout)" in r.json()["error"]["message"]
    with scripted(first_token_delay_ms=3000) as up, gateway_for([up.base_url], limits=limits) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10)
        assert r.status_code == 200  # the head and the role chunk came, then silence
        error = json.loads(sse_payloads(r.text)[-1])["error"]
        assert error["code"] == "upstream_error" and "(timeout)" in error["message"]


def test_health_checks_take_a_dead_replica_out_and_bring_it_back(
    chat_body: dict[str, Any],
) -> None:
    from ttft.engines.process import free_loopback_port
    from ttft.testing.scripted_server import ScriptedServer

    port = free_loopback_port()
    late_url = f"http://127.0.0.1:{port}"
    routing = {"health_interval_s": 0.1, "health_timeout_s": 0.5}
    with (
        scripted(first_token_delay_ms=1) as good,
        gateway_for([late_url, good.base_url], routing=routing) as gw,
    ):

        def healthy() -> list[bool]:
            return list(gw.call(lambda g: [r.healthy for r in g.models["m"].replicas]))

        assert healthy() == [False, True]  # nothing listens there yet
        with ScriptedServer(Script(first_token_delay_ms=1), port=port).in_thread():
            deadline = time.monotonic() + 5
            while healthy() != [True, True] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert healthy() == [True, True]
            served = {
                httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=10).headers[
                    "x-ttft-replica"
                ]
                for _ in range(6)
            }
            assert served == {"0", "1"}  # back in routing
        deadline = time.monotonic() + 5
        while healthy() != [False, True] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert healthy() == [False, True]  # gone again after two failed checks


@contextmanager
def recording(seen: list[tuple[str, dict[str, Any]]], **fields: Any) -> Iterator[Any]:
    """A scripted upstream that records each request's path and JSON body."""
    from ttft.testing.scripted_server import ScriptedServer

    def script(path: str, body: dict[str, Any]) -> Script:
        seen.append((path, body))
        return Script(first_token_delay_ms=1, n_tokens=2).merged(fields)

    with ScriptedServer(script).in_thread() as server:
        yield server


def test_hygiene_moves_dynamic_system_content_and_counts_it(chat_body: dict[str, Any]) -> None:
    body = {
        **chat_body,
        "messages": [
            {"role": "system", "content": "Be brief.\nCurrent time: 2026-03-15 14:22:31"},
            {"role": "user", "content": "hi"},
        ],
    }
    seen: list[tuple[str, dict[str, Any]]] = []
    with recording(seen) as up, gateway_for([up.base_url], model={"hygiene": True}) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", json=body)
        metrics = httpx.get(gw.url + "/metrics").text
    assert r.status_code == 200
    assert seen[-1][1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi\n\nCurrent time: 2026-03-15 14:22:31"},
    ]
    assert 'ttft_gateway_hygiene_moves_total{kind="timestamp",model="m"} 1.0' in metrics


def test_priorities_order_the_queue_but_are_not_forwarded(chat_body: dict[str, Any]) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    with (
        recording(seen) as up,
        gateway_for(
            [up.base_url], model={"upstream_model": "m-7b"}, admission={"max_priority_boost": 5}
        ) as gw,
    ):
        r = httpx.post(gw.url + "/v1/chat/completions", json={**chat_body, "priority": -5})
        raw = httpx.post(gw.url + "/v1/chat/completions", json={**chat_body, "model": "m"})
    assert r.status_code == 200 and raw.status_code == 200
    assert "priority" not in seen[0][1]
    assert seen[0][1]["model"] == "m-7b" and seen[1][1]["model"] == "m-7b"


def test_prerendered_requests_send_the_rendered_prompt(tmp_path: Any) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<a>"
    )
    seen: list[tuple[str, dict[str, Any]]] = []
    with (
        recording(seen, ignore_stream=True) as up,
        gateway_for(
            [up.base_url],
            model={"prerender": True, "engine": "sglang", "chat_template": str(template)},
        ) as gw,
    ):
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
            "max_completion_tokens": 3,
        }
        r = httpx.post(gw.url + "/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.json()["object"] == "chat.completion"
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": " t0 t1"}
    path, sent = seen[-1]
    assert path == "/v1/completions"
    # Not llama.cpp: the BOS stays in the text and the engine is told not to add another.
    assert sent["prompt"] == "<system>s<user>hi<a>" and sent["add_special_tokens"] is False
    assert sent["max_tokens"] == 3 and "messages" not in sent


def test_every_response_carries_server_timing(chat_body: dict[str, Any]) -> None:
    with scripted(first_token_delay_ms=1) as up, gateway_for([up.base_url]) as gw:
        answers = [
            httpx.post(gw.url + "/v1/chat/completions", content=b"{"),
            httpx.post(gw.url + "/v1/chat/completions", json={**chat_body, "model": "x"}),
            httpx.get(gw.url + "/v1/models"),
            httpx.get(gw.url + "/health"),
            httpx.get(gw.url + "/metrics"),
            httpx.get(gw.url + "/nowhere"),
        ]
        proxied = httpx.post(gw.url + "/v1/chat/completions", json=chat_body)
    for answer in answers:
        assert answer.headers["server-timing"].startswith("gateway;dur="), answer.request.url
    assert proxied.headers["server-timing"].startswith("queue;dur=")


def test_several_models_each_with_their_replicas() -> None:
    from ttft.gateway.config import from_mapping
    from ttft.gateway.serve import GatewayThread

    seen_a: list[tuple[str, dict[str, Any]]] = []
    seen_b: list[tuple[str, dict[str, Any]]] = []
    with recording(seen_a) as a, recording(seen_b) as b:
        config = from_mapping(
            {
                "listen": "127.0.0.1:0",
                "model": [
                    {"name": "small", "upstreams": [a.base_url], "prerender": False},
                    {"name": "large", "upstreams": [b.base_url], "prerender": False},
                ],
            }
        )
        with GatewayThread(config) as gw:

            def ask(model: str | None) -> httpx.Response:
                body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
                if model:
                    body["model"] = model
                return httpx.post(gw.url + "/v1/chat/completions", json=body)

            assert ask("large").status_code == 200 and ask("small").status_code == 200
            missing = ask(None)
            models = httpx.get(gw.url + "/v1/models").json()
    assert [body["model"] for _, body in seen_b] == ["large"]
    assert [body["model"] for _, body in seen_a] == ["small"]
    assert (
        missing.status_code == 400 and "'model' is required" in missing.json()["error"]["message"]
    )
    assert [m["id"] for m in models["data"]] == ["small", "large"]
