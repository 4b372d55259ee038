"""``ttft gateway`` in front of the real embedded llama-server (two one-slot engines).

Prompts stay a few hundred tokens and answers a few tokens: two cores, shared.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded
from ttft.gateway.config import from_mapping
from ttft.gateway.serve import GatewayThread

pytestmark = pytest.mark.e2e

_clock = time.perf_counter_ns
WORDS = (
    "river stone cloud maple quartz harbor lantern meadow copper violet falcon ember "
    "willow tundra saffron orbit glacier thistle cobalt juniper"
).split()


def words(n: int, seed: str) -> str:
    """``n`` words in an order fixed by ``seed``: prompts that share no prefix with others."""
    import random

    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def engines(engine_threads: int) -> Iterator[list[RunningEngine]]:
    """Two replicas of the real engine, one slot each (so queueing is the engine's too).

    ``--swa-full``: Gemma 3 has sliding-window attention, and without a full-size SWA cache
    llama-server reuses a shared prefix only for chat requests (a checkpoint at the last user
    message), not for the completions requests that pre-rendering sends.
    """
    started: list[RunningEngine] = []
    try:
        for _ in range(2):
            started.append(
                launch_embedded(
                    ctx_size=2048, parallel=1, threads=engine_threads, extra_args=("--swa-full",)
                )
            )
        yield started
    finally:
        for engine in started:
            engine.stop()


@contextmanager
def gateway(upstreams: list[str], **top: Any) -> Iterator[GatewayThread]:
    model = {"name": "gemma", "upstreams": upstreams, **top.pop("model", {})}
    config = from_mapping({"listen": "127.0.0.1:0", "model": [model], **top})
    with GatewayThread(config) as gw:
        yield gw


def chat(messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    return {"model": "gemma", "messages": messages, "temperature": 0, **extra}


def stream_text(response_text: str) -> tuple[str, list[dict[str, Any]]]:
    chunks = [
        json.loads(line[6:])
        for line in response_text.split("\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    text = "".join(
        (c["choices"][0]["delta"].get("content") or "") for c in chunks if c.get("choices")
    )
    return text, chunks


def test_streamed_tokens_arrive_as_the_engine_sends_them_and_a_leaving_client_frees_the_slot(
    engines: list[RunningEngine],
) -> None:
    engine = engines[0]
    with gateway([engine.base_url]) as gw:
        body = chat(
            [{"role": "user", "content": "Write a long story about a river."}],
            max_tokens=20,
            stream=True,
        )
        host, port = gw.url.removeprefix("http://").split(":")
        raw = json.dumps(body).encode()
        stamps: list[int] = []
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%b" % (len(raw), raw)
            )
            sock.settimeout(60)
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                stamps.extend(_clock() for _ in range(data.count(b'"content":"')))
        assert len(stamps) >= 15
        gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]
        # Decode runs at ~50 tokens/s: tokens arrive one by one, spread over the answer, not
        # in one burst at the end (which is what a buffering proxy would produce).
        assert (stamps[-1] - stamps[0]) / 1e6 > 100
        assert sum(1 for g in gaps if g > 3) >= len(gaps) // 2

        # A client that leaves mid-answer: the engine's slot stops working on it.
        long_body = chat(
            [{"role": "user", "content": "Tell me everything about clouds."}],
            max_tokens=400,
            stream=True,
        )
        raw = json.dumps(long_body).encode()
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (len(raw), raw)
            )
            sock.settimeout(60)
            while b'"content":"' not in sock.recv(65536):
                pass
        deadline = time.monotonic() + 5
        busy = True
        while busy and time.monotonic() < deadline:
            busy = httpx.get(engine.base_url + "/slots").json()[0]["is_processing"]
            time.sleep(0.05)
        assert not busy, "the engine kept generating for a client that left"


def test_prerendered_requests_give_the_engine_chat_endpoints_answer(
    engines: list[RunningEngine],
) -> None:
    engine = engines[0]
    conversations = [
        [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Name three colors."},
        ],
        [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "Quatre."},
            {"role": "user", "content": "  And 3+3? ünïcödé ✓\n"},
        ],
        [{"role": "user", "content": "Say <|im_start|> please"}],
    ]
    with gateway([engine.base_url]) as gw:
        assert gw.call(lambda g: g.models["gemma"].prerender_state) == "on"
        for messages in conversations:
            body = chat(messages, max_tokens=12)
            direct = httpx.post(
                engine.base_url + "/v1/chat/completions", json=body, timeout=60
            ).json()
            via = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=60)
            assert via.headers["x-ttft-prerendered"] == "1"
            ours = via.json()
            assert ours["object"] == "chat.completion"
            assert ours["choices"][0]["message"] == direct["choices"][0]["message"]
            assert ours["choices"][0]["finish_reason"] == direct["choices"][0]["finish_reason"]
            assert ours["usage"]["prompt_tokens"] == direct["usage"]["prompt_tokens"]
            streamed = httpx.post(
                gw.url + "/v1/chat/completions",
                json={**body, "stream": True, "stream_options": {"include_usage": True}},
                timeout=60,
            )
            text, chunks = stream_text(streamed.text)
            assert text == direct["choices"][0]["message"]["content"]
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
            assert chunks[-1]["usage"]["prompt_tokens"] == direct["usage"]["prompt_tokens"]
            timing = streamed.headers["server-timing"]
            assert "template;dur=" in timing and "upstream;dur=" in timing
        metrics = httpx.get(gw.url + "/metrics").text
    assert 'ttft_gateway_prerender_total{model="gemma",reason="",result="hit"}' in metrics


def test_prefix_affinity_sends_a_repeated_system_prompt_to_the_replica_that_cached_it(
    engines: list[RunningEngine],
) -> None:
    system = "You answer questions about this catalogue. " + words(220, str(uuid.uuid4()))
    with gateway([e.base_url for e in engines]) as gw:
        replicas, cached, prompt = [], [], []
        for question in ("Which item is first?", "Which item is last?", "How many items?"):
            r = httpx.post(
                gw.url + "/v1/chat/completions",
                timeout=60,
                json=chat(
                    [{"role": "system", "content": system}, {"role": "user", "content": question}],
                    max_tokens=2,
                ),
            )
            assert r.status_code == 200, r.text
            replicas.append(r.headers["x-ttft-replica"])
            usage = r.json()["usage"]
            cached.append(usage["prompt_tokens_details"]["cached_tokens"])
            prompt.append(usage["prompt_tokens"])
        metrics = httpx.get(gw.url + "/metrics").text
    assert len(set(replicas)) == 1
    assert cached[0] < 10
    # The whole system prompt (~250 tokens) is reused by the later requests.
    assert min(cached[1:]) > 0.8 * prompt[0] - 20
    assert 'ttft_gateway_affinity_total{model="gemma",result="hit"} 3.0' in metrics


def _short_ttft_behind_long_prompts(url: str, tag: str) -> float:
    """One long prompt in flight and two waiting, then a short one: its TTFT in seconds."""

    def long_body(i: int) -> dict[str, Any]:
        return chat([{"role": "user", "content": words(190, f"{tag}-{i}")}], max_tokens=1)

    threads = []
    for i in range(3):
        t = threading.Thread(
            target=lambda i=i: httpx.post(
                url + "/v1/chat/completions", json=long_body(i), timeout=120
            )
        )
        t.start()
        threads.append(t)
        time.sleep(0.15)
    start = time.perf_counter()
    first: float | None = None
    body = chat([{"role": "user", "content": f"Hi {tag}"}], max_tokens=2, stream=True)
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if first is None and '"content":"' in line:
                first = time.perf_counter() - start
    for t in threads:
        t.join()
    assert first is not None
    return first


def test_the_short_lane_lets_a_short_request_pass_long_prefills(
    engines: list[RunningEngine],
) -> None:
    engine = engines[1]
    admission = {"max_in_flight": 1, "long_prompt_tokens": 100}
    with gateway([engine.base_url], admission={**admission, "split_lanes": False}) as gw:
        fifo = _short_ttft_behind_long_prompts(gw.url, f"fifo-{uuid.uuid4()}")
    with gateway([engine.base_url], admission=admission) as gw:
        lanes = _short_ttft_behind_long_prompts(gw.url, f"lanes-{uuid.uuid4()}")
        metrics = httpx.get(gw.url + "/metrics").text
    print(f"short request TTFT behind 3 long prompts: FIFO {fifo:.2f} s, lanes {lanes:.2f} s")
    # FIFO: behind the rest of the first prefill and two more; lanes: behind the first only.
    assert lanes < 0.7 * fifo, (lanes, fifo)
    assert 'ttft_gateway_queue_seconds_count{lane="long",model="gemma"} 3.0' in metrics


def test_killing_an_upstream_mid_stream_gives_an_error_event_and_the_next_request_fails_over(
    engines: list[RunningEngine],
    engine_threads: int,
) -> None:
    # Without --swa-full: pre-rendering must switch itself off (it would lose prefix reuse),
    # and chat requests keep the engine's own reuse through its chat endpoint.
    victim = launch_embedded(ctx_size=2048, parallel=1, threads=engine_threads)
    try:
        with gateway([victim.base_url]) as gw:
            state = gw.call(lambda g: g.models["gemma"].prerender_state)
            assert state.startswith("disabled") and "--swa-full" in state
            system = "Catalogue: " + words(90, str(uuid.uuid4()))
            cached = []
            for question in ("First?", "Last?"):
                r = httpx.post(
                    gw.url + "/v1/chat/completions",
                    timeout=60,
                    json=chat(
                        [
                            {"role": "system", "content": system},
                            {"role": "user", "content": question},
                        ],
                        max_tokens=1,
                    ),
                )
                assert "x-ttft-prerendered" not in r.headers
                cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
            assert cached[0] < 10 < cached[1]
        with gateway([victim.base_url, engines[0].base_url], routing={"affinity": False}) as gw:
            # Route the stream to the victim: the other replica sits out for one request.
            gw.call(lambda g: setattr(g.models["gemma"].replicas[1], "healthy", False))
            body = chat(
                [{"role": "user", "content": "Tell me a long story."}], max_tokens=300, stream=True
            )
            lines: list[str] = []
            with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=60) as r:
                assert r.headers["x-ttft-replica"] == "0"
                gw.call(lambda g: setattr(g.models["gemma"].replicas[1], "healthy", True))
                for line in r.iter_lines():
                    lines.append(line)
                    if sum('"content":"' in x for x in lines) == 3:
                        assert victim.process.proc is not None
                        os.kill(victim.process.proc.pid, signal.SIGKILL)
            data = [x[6:] for x in lines if x.startswith("data: ")]
            error = json.loads(data[-1])["error"]
            assert error["code"] == "upstream_error" and "middle of the answer" in error["message"]
            assert "[DONE]" not in data
            after = httpx.post(
                gw.url + "/v1/chat/completions",
                timeout=60,
                json=chat([{"role": "user", "content": "Still there?"}], max_tokens=2),
            )
            assert after.status_code == 200 and after.headers["x-ttft-replica"] == "1"
            health = httpx.get(gw.url + "/health").json()["models"]["gemma"]
            assert health["upstreams"][0]["healthy"] is False
    finally:
        victim.stop()


def test_bad_requests_get_4xx_and_the_engines_own_errors_pass_through(
    engines: list[RunningEngine],
) -> None:
    with (
        gateway([engines[0].base_url], api_keys=["sk-e2e"]) as gw,
        httpx.Client(base_url=gw.url, timeout=60) as client,
    ):
        auth = {"Authorization": "Bearer sk-e2e"}
        assert client.post("/v1/chat/completions", json=chat([])).status_code == 401
        assert client.post("/v1/chat/completions", content=b"{", headers=auth).status_code == 400
        unknown = client.post(
            "/v1/chat/completions",
            headers=auth,
            json={**chat([{"role": "user", "content": "x"}]), "model": "gpt"},
        )
        assert unknown.status_code == 404
        # 2048 tokens of context per slot: a longer prompt is the engine's 400, passed through.
        huge = client.post(
            "/v1/completions",
            headers=auth,
            json={"model": "gemma", "prompt": words(3000, "huge"), "max_tokens": 1},
        )
        assert huge.status_code == 400 and huge.json()["error"]["message"]
        ok = client.post(
            "/v1/chat/completions",
            headers=auth,
            json=chat([{"role": "user", "content": "Hello"}], max_tokens=2),
        )
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]
