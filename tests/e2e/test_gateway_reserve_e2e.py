"""The short lane's reserved slot on the real engine: a short request under saturating long
prompts is at the engine at once instead of waiting for a slot that long prompts hold, and, pinned
to the lowest slot (``id_slot``), its tokens go into the very next batch, so with small batches
(``-b 64``, the engine-side half of the lever) it starts within about one batch of its idle TTFT.

One llama-server with 2 slots, and no cap configured: the gateway must read the 2 from /props
(else it would let 4 requests in and the engine would queue them itself). The client names the
model as the engine does, not as the gateway is configured: it must be served, not 404.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from ttft.engines.llamacpp.embedded import EMBEDDED_MODEL_NAME, RunningEngine, launch_embedded
from ttft.engines.process import free_loopback_port
from ttft.gateway.config import from_mapping
from ttft.gateway.serve import GatewayThread
from ttft.testing.gateway_process import gateway_child

pytestmark = pytest.mark.e2e

PROMPT_TOKENS: list[int] = []  # of the long prompts, for the printed summary
WORDS = "river stone cloud maple quartz harbor lantern meadow copper violet falcon ember".split()


@pytest.fixture(scope="module")
def engine(engine_threads: int) -> Iterator[RunningEngine]:
    # Small batches: llama-server fills each batch slot by slot, so a pinned short request waits
    # for the batch being computed, and a batch of 64 tokens is a few hundred ms here.
    running = launch_embedded(
        ctx_size=8192, parallel=2, threads=engine_threads, batch_size=64, ubatch_size=64
    )
    try:
        yield running
    finally:
        running.stop()


def _long_prompt(seed: str) -> str:
    # ~1,300 tokens, no prefix shared with any other prompt (no cache reuse between runs).
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(1300))


def _short_ttft(url: str, tag: str) -> float:
    """Seconds to the first token of a short streamed request, on a connection of its own."""
    with httpx.Client(base_url=url, timeout=180) as client:
        return _send(client, f"Hi {tag}", 2)


def _short_ttft_under_long_traffic(url: str, tag: str) -> float:
    """Two long prompts (one per slot without a reserve), then a short one: its TTFT in s."""

    def send_long(i: int) -> None:
        body = {
            "model": EMBEDDED_MODEL_NAME,
            "messages": [{"role": "user", "content": _long_prompt(f"{tag}-{i}")}],
            "max_tokens": 1,
        }
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=180)
        assert r.status_code == 200, r.text
        PROMPT_TOKENS.append(r.json()["usage"]["prompt_tokens"])

    threads = [threading.Thread(target=send_long, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.2)
    first = _short_ttft(url, tag)
    for t in threads:
        t.join()
    return first


@pytest.mark.timeout(300)
def test_a_short_request_under_saturating_long_prompts_takes_the_reserved_slot(
    engine: RunningEngine,
) -> None:
    results: dict[int, float] = {}
    idle = 0.0
    for reserve in (0, None):  # None: the default, one slot kept for short requests
        admission = {} if reserve is None else {"long_reserve": reserve}
        model = {"name": "default", "upstreams": [engine.base_url]}
        raw = {"listen": "127.0.0.1:0", "model": [model], "admission": admission}
        with GatewayThread(from_mapping(raw)) as gw:
            caps = gw.call(
                lambda g: [
                    (r.admission.max_in_flight, r.admission.long_reserve, r.slot_pins is not None)
                    for r in g.models["default"].replicas
                ]
            )
            # From /props total_slots; slots are pinned only with a reserve.
            assert caps == [(2, 1, True) if reserve is None else (2, 0, False)]
            if reserve is None:
                idle = _short_ttft(gw.url, f"idle-{uuid.uuid4()}")
            ttft = _short_ttft_under_long_traffic(gw.url, f"r{reserve}-{uuid.uuid4()}")
        results[1 if reserve is None else 0] = ttft
    print(
        f"short TTFT under 2 long prompts on 2 slots: no reserve {results[0]:.2f} s, "
        f"reserve 1 {results[1]:.2f} s; idle engine {idle:.2f} s; "
        f"long prompts {min(PROMPT_TOKENS)}-{max(PROMPT_TOKENS)} tokens"
    )
    # Without a reserve the short request waits until one of two long prompts that share the
    # engine finished prefilling (~2 prefills of compute); with it (and the default pinning) it
    # is at the engine at once, in slot 0, whose tokens each batch takes first: it waits for the
    # batch in flight and its own, not for the long prefill.
    assert results[1] < 0.5 * results[0], results
    assert results[1] < idle + 1.0, (results, idle)


def _client_on_worker(url: str, worker: int, tries: int = 64) -> httpx.Client:
    """A keep-alive client whose connection the kernel gave to ``worker`` (it says which in
    ``/metrics?worker=self``); connections that landed elsewhere are closed and tried again."""
    for _ in range(tries):
        client = httpx.Client(base_url=url, timeout=180)
        text = client.get("/metrics?worker=self").text
        found = re.search(r'ttft_gateway_worker\{worker="(\d+)"\}', text)
        if found and int(found.group(1)) == worker:
            return client
        client.close()
    raise AssertionError(f"no connection landed on worker {worker} in {tries} tries")


def _send(client: httpx.Client, content: str, max_tokens: int) -> float:
    """Seconds to the first content token of a streamed chat request on ``client``."""
    body = {
        "model": EMBEDDED_MODEL_NAME,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    start = time.perf_counter()
    first: float | None = None
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if first is None and '"content":"' in line:
                first = time.perf_counter() - start
    assert first is not None
    return first


@pytest.mark.timeout(300)
def test_the_reserved_slot_holds_across_two_gateway_workers(engine: RunningEngine) -> None:
    """``ttft gateway --workers 2`` (the default on two cores: one worker per core) in front of
    the 2-slot engine. One long prompt arrives on each worker, then a short one: the workers share
    the slots, the long lanes' cap (one slot) and the slot pins, so the second long prompt
    waits and the short one runs at once in slot 0. With the slots split between the workers
    (each its own one slot, no reserve, no pins) the short one waited for a long prefill."""
    port = free_loopback_port()
    args = ["--upstream", engine.base_url, "--engine", "llamacpp", "--model", "default",
            "--listen", f"127.0.0.1:{port}", "--no-prerender", "--workers", "2"]  # fmt: skip
    with gateway_child(args, port):
        url = f"http://127.0.0.1:{port}"
        clients = [_client_on_worker(url, w) for w in (0, 1, 1)]
        try:
            idle = _send(clients[2], f"Hi idle {uuid.uuid4()}", 2)
            tag = uuid.uuid4()
            longs = [
                threading.Thread(target=_send, args=(clients[i], _long_prompt(f"{tag}-{i}"), 1))
                for i in (0, 1)
            ]
            for thread in longs:
                thread.start()
                time.sleep(0.2)
            short = _send(clients[2], f"Hi short {tag}", 2)
            for thread in longs:
                thread.join()
        finally:
            for client in clients:
                client.close()
    print(f"2 workers: short TTFT {short:.2f} s under 2 long prompts, idle {idle:.2f} s")
    assert short < idle + 1.0, (short, idle)
