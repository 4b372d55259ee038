"""One client cannot take a model's whole queue: its share is capped, the others still get in.

And a client that leaves while its request waits takes everything it held with it: its ticket,
its share, the queue depth.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import httpx
from gateway_testkit import gateway_for, scripted

ADMISSION = {"max_in_flight": 1, "queue_size": 3, "queue_timeout_s": 20}  # room for 4


def post(url: str, body: dict[str, Any], key: str) -> httpx.Response:
    return httpx.post(
        url + "/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )


def test_one_key_cannot_fill_the_queue_for_everyone(chat_body: dict[str, Any]) -> None:
    """Four slow requests from one key took all four places (1 in flight, 3 queued): another
    key's request was refused with queue_full. Now a key holds at most half (2)."""
    with (
        scripted(first_token_delay_ms=700, n_tokens=1) as up,
        gateway_for([up.base_url], api_keys=["sk-a", "sk-b"], admission=ADMISSION) as gw,
    ):
        greedy: list[httpx.Response] = []
        threads = [
            threading.Thread(target=lambda: greedy.append(post(gw.url, chat_body, "sk-a")))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        time.sleep(0.3)
        other = post(gw.url, chat_body, "sk-b")
        for t in threads:
            t.join()
        assert other.status_code == 200, other.text
        held = gw.call(lambda g: dict(g.shares.held))
        metrics = httpx.get(gw.url + "/metrics", headers={"Authorization": "Bearer sk-a"}).text
    assert sorted(r.status_code for r in greedy) == [200, 200, 429, 429]
    refused = next(r for r in greedy if r.status_code == 429)
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert int(refused.headers["retry-after"]) >= 1
    assert 'ttft_gateway_shed_total{model="m",reason="client_limit"} 2.0' in metrics
    assert held == {}


def test_without_keys_the_share_is_per_address_and_configurable(chat_body: dict[str, Any]) -> None:
    admission = {**ADMISSION, "max_requests_per_client": 1}
    with (
        scripted(first_token_delay_ms=500, n_tokens=1) as up,
        gateway_for([up.base_url], admission=admission) as gw,
    ):
        results: list[httpx.Response] = []

        def one() -> None:
            results.append(httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=30))

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(r.status_code for r in results) == [200, 429]


def test_a_client_that_leaves_while_queued_gives_back_its_place(chat_body: dict[str, Any]) -> None:
    with (
        scripted(first_token_delay_ms=1500, n_tokens=1) as up,
        gateway_for([up.base_url], admission=ADMISSION) as gw,
    ):
        running = threading.Thread(
            target=lambda: httpx.post(gw.url + "/v1/chat/completions", json=chat_body, timeout=30)
        )
        running.start()
        time.sleep(0.3)
        body = httpx.Request("POST", gw.url + "/v1/chat/completions", json=chat_body)
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body.content)}\r\n\r\n"
        ).encode()
        sock = socket.create_connection((gw.gateway.server.host, gw.gateway.server.port))
        sock.sendall(head + body.content)
        time.sleep(0.3)
        queued = gw.call(lambda g: g.models["m"].replicas[0].admission.waiting)
        sock.close()
        time.sleep(0.3)
        admission = gw.call(lambda g: vars(g.models["m"].replicas[0].admission).copy())
        # Counted as cancelled: it was not, having never reached an upstream.
        assert gw.call(lambda g: g.metrics.cancelled.get("m")) == 1.0
        held = gw.call(lambda g: dict(g.shares.held))
        running.join()
    assert queued == 1
    assert admission["in_flight"] == 1 and admission["queued"] == {"short": 0, "long": 0}
    assert held == {("addr:127.0.0.1", "m"): 1}  # only the running one is left


def test_one_key_holds_at_most_half_of_a_replicas_slots(chat_body: dict[str, Any]) -> None:
    """Streams of one key held every in-flight slot, and another key waited for one to end
    (issue 28). With keys, a key holds at most half the slots: its next stream waits, the
    other key's starts at once."""
    admission = {"max_in_flight": 2, "queue_size": 8, "queue_timeout_s": 20}
    first_bytes: dict[str, float] = {}
    started = time.monotonic()

    def stream(url: str, name: str, key: str) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.stream(
            "POST", url + "/v1/chat/completions", json=chat_body, headers=headers, timeout=30
        ) as r:
            assert r.status_code == 200
            for _ in r.iter_bytes():
                first_bytes.setdefault(name, time.monotonic() - started)

    with (
        scripted(first_token_delay_ms=1, token_interval_ms=100, n_tokens=30) as up,
        gateway_for([up.base_url], api_keys=["sk-a", "sk-b"], admission=admission) as gw,
    ):
        threads = [
            threading.Thread(target=stream, args=(gw.url, name, "sk-a")) for name in ("a1", "a2")
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.3)
        other = threading.Thread(target=stream, args=(gw.url, "b1", "sk-b"))
        other.start()
        for thread in [*threads, other]:
            thread.join(30)
    assert set(first_bytes) == {"a1", "a2", "b1"}
    # b1 came 0.3 s after the two streams of key a and started before the second of them,
    # which waited for the first one's slot.
    assert first_bytes["b1"] < max(first_bytes["a1"], first_bytes["a2"]), first_bytes


def test_a_stream_whose_client_reads_too_slowly_is_dropped_and_frees_its_slot(
    chat_body: dict[str, Any],
) -> None:
    """A client reading ~20 KB/s of a long answer was never silent long enough for the write
    timeout and held the replica's only slot: the next request waited for its queue timeout
    (issue 28). Now its socket staying full for stream_stall_timeout_s drops it, and the slot
    goes to the next request. (The kernel still delivers what it had buffered to the dropped
    client, so its end is not seen here: the freed slot is.)"""
    # ~30 MB of events from a request of a few hundred bytes: more than the kernel's socket
    # buffers on loopback (up to 4 MB each way) hold.
    huge = {"n_tokens": 300_000, "token_interval_ms": 0.0}
    body = json.dumps({**chat_body, "ttft_script": huge}).encode()
    admission = {"max_in_flight": 1, "queue_size": 4, "queue_timeout_s": 30}
    stop = threading.Event()

    def slow_reader(port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(5)
        with sock:
            sock.connect(("127.0.0.1", port))
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body)
            while not stop.is_set():
                try:
                    if not sock.recv(4000):  # ~20 KB/s: never silent for long
                        return
                except OSError:
                    return
                time.sleep(0.2)

    with (
        scripted(first_token_delay_ms=1) as up,
        gateway_for(
            [up.base_url], admission=admission, limits={"stream_stall_timeout_s": 1.0}
        ) as gw,
    ):
        port = int(gw.url.rsplit(":", 1)[1])
        reader = threading.Thread(target=slow_reader, args=(port,), daemon=True)
        reader.start()
        time.sleep(0.5)
        started = time.monotonic()
        after = httpx.post(
            gw.url + "/v1/chat/completions", json={**chat_body, "stream": False}, timeout=40
        )
        waited = time.monotonic() - started
        stop.set()
        reader.join(10)
    assert after.status_code == 200, after.text[:200]
    # Far below the queue timeout (30 s) that it waited for before.
    assert waited < 12, waited
