"""Bodies whose cost a client chooses (issue 28): counted before parsing, charged to the body
budget as what they hold once parsed, and parsed where they cannot stall other connections."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from gateway_testkit import gateway_for, scripted

from ttft.engines.process import free_loopback_port

HEAD = b'{"model":"m","messages":[{"role":"user","content":"x"}],"x":['


def objects(n: int) -> bytes:
    return HEAD + b",".join([b'{"a":1}'] * n) + b"]}"


def post(url: str, raw: bytes) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return httpx.post(url + "/v1/chat/completions", content=raw, headers=headers, timeout=30)


def test_a_body_of_half_a_million_small_objects_is_a_413_without_being_parsed() -> None:
    """3.8 MB of small objects cost 0.4-0.8 s of the loop and ~100 MB once parsed."""
    raw = objects(470_000)
    with scripted() as up, gateway_for([up.base_url]) as gw:
        refused = post(gw.url, raw)
        fine = post(gw.url, HEAD + b"1]}")
    assert refused.status_code == 413, refused.text[:200]
    assert refused.json()["error"]["code"] == "body_too_complex"
    assert fine.status_code == 200


def test_what_a_parsed_body_holds_is_charged_to_the_clients_body_budget() -> None:
    """The budget counted wire bytes: 300 KB of objects holds ~7 MB once parsed."""
    limits = {
        "max_body_bytes": 1 << 20,
        "max_bodies_in_flight_bytes": 4 << 20,  # a client's share: 1 MiB
        "max_body_cost": 10_000_000,
    }
    with scripted() as up, gateway_for([up.base_url], limits=limits) as gw:
        heavy = post(gw.url, objects(37_000))  # ~300 KB of text
        light = post(gw.url, HEAD + b"1]}")
        held = gw.call(lambda g: g.server.bodies_in_flight)
    assert heavy.status_code == 503 and heavy.json()["error"]["code"] == "server_busy"
    assert light.status_code == 200
    assert held == 0  # released with its request


@contextlib.contextmanager
def gateway_process(upstream: str) -> Iterator[str]:
    port = free_loopback_port()
    run = [sys.executable, "-c", "from ttft.cli.main import main; main()", "gateway"]
    proc = subprocess.Popen(
        [*run, "--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--no-prerender"],
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TTFT_GATEWAY_LOOP": "asyncio"},
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def health_times(url: str, n: int) -> list[float]:
    times = []
    with httpx.Client(timeout=30) as client:
        for _ in range(n):
            started = time.perf_counter()
            assert client.get(url + "/health").status_code == 200
            times.append(time.perf_counter() - started)
            time.sleep(0.02)
    return sorted(times)


# The attacker runs in a process of its own: in the test's process its uploads would take
# the GIL from the thread that times /health, and the client's delay would be counted.
ATTACKER = """
import http.client, sys, time
host, port = sys.argv[1], int(sys.argv[2])
head = b'{"model":"m","messages":[{"role":"user","content":"x"}],"x":['
bodies = [head + b",".join([b'{"a":1}'] * n) + b"]}" for n in (470_000, 25_000, 30_000)]
sent = 0
while True:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("POST", "/v1/chat/completions", bodies[sent % 3],
                 {"Content-Type": "application/json"})
    conn.getresponse().read()
    conn.close()
    sent += 1
    print(sent, flush=True)
"""


def test_health_stays_quick_while_one_client_sends_costly_bodies() -> None:
    """One connection sending 3.8 MB bodies of small objects pushed /health to 1.15 s. Now
    such a body is refused from its count, and one just under the cost limit is parsed in
    the parser thread."""
    with scripted() as up, gateway_process(up.base_url) as url:
        quiet = health_times(url, 30)
        host, port = url.removeprefix("http://").split(":")
        attacker = subprocess.Popen(
            [sys.executable, "-c", ATTACKER, host, port], stdout=subprocess.PIPE, text=True
        )
        try:
            assert attacker.stdout is not None
            attacker.stdout.readline()  # its first body was answered: the attack is on
            busy = health_times(url, 60)
        finally:
            attacker.kill()
            out, _ = attacker.communicate(timeout=10)
    sent = len(out.split()) + 1
    p99 = busy[int(len(busy) * 0.99) - 1]
    print(f"/health max quiet {quiet[-1] * 1e3:.1f} ms, p99 under attack {p99 * 1e3:.1f} ms")
    assert sent >= 3
    # Generous: the machine is shared. Before, one such body held the loop for 0.4-0.8 s.
    assert p99 < max(0.3, 5 * quiet[-1]), (p99, quiet[-1], sent)


def test_a_parsed_body_is_dropped_once_it_went_upstream() -> None:
    """A parsed body lived (and held ~25x its size) for as long as its answer streamed. Now
    what went upstream is built once, the parsed body dropped, and its charge given back."""
    import gc

    from ttft.gateway.plan import Plan

    raw = objects(5_000)  # 40 KB of text, ~1 MB once parsed

    def plans(_: object) -> list[dict[str, object]]:
        return [o.body for o in gc.get_objects() if isinstance(o, Plan)]

    with (
        scripted(first_token_delay_ms=1, token_interval_ms=100, n_tokens=20) as up,
        gateway_for([up.base_url]) as gw,
    ):
        headers = {"Content-Type": "application/json"}
        with httpx.stream(
            "POST", gw.url + "/v1/chat/completions", content=raw, headers=headers, timeout=30
        ) as r:
            chunks = r.iter_bytes()
            next(chunks)  # streaming now
            bodies = gw.call(plans)
            held = gw.call(lambda g: g.server.bodies_in_flight)
            for _ in chunks:
                pass
    assert bodies and all("x" not in body and "messages" not in body for body in bodies)
    assert held == len(raw)  # its bytes, not what its parsed objects were charged


def test_with_keys_the_body_share_is_the_keys_not_the_addresss(
    chat_body: dict[str, object],
) -> None:
    """Every client of this test has one address; the share follows the key."""
    import json

    limits = {"max_body_bytes": 64 * 1024, "max_bodies_in_flight_bytes": 256 * 1024}
    raw = json.dumps({**chat_body, "stream": False, "pad": "p" * 60_000}).encode()
    with (
        scripted() as up,
        gateway_for([up.base_url], api_keys=["sk-a", "sk-b"], limits=limits) as gw,
    ):
        port = int(gw.url.rsplit(":", 1)[1])
        holder = socket.create_connection(("127.0.0.1", port))
        try:
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                "Authorization: Bearer sk-a\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(raw)}\r\n\r\n"
            )
            holder.sendall(head.encode() + raw[:-10])  # holds ~60 KB of key a's 64 KiB share
            time.sleep(0.2)
            headers = {"Content-Type": "application/json"}
            a = httpx.post(
                gw.url + "/v1/chat/completions",
                content=raw,
                headers={**headers, "Authorization": "Bearer sk-a"},
                timeout=30,
            )
            b = httpx.post(
                gw.url + "/v1/chat/completions",
                content=raw,
                headers={**headers, "Authorization": "Bearer sk-b"},
                timeout=30,
            )
        finally:
            holder.close()
    assert a.status_code == 503 and a.json()["error"]["code"] == "server_busy"
    assert b.status_code == 200, b.text[:200]
