"""A client that reads nothing of a fast answer: the gateway holds no more than a socket buffer of
it, stops reading the upstream, drops the client after ``write_timeout_s`` and does not blame the
upstream for it (the replica stays healthy, no upstream error is counted, its slot is free), even
with an upstream idle timeout shorter than the write timeout: while the gateway itself does not
read, the upstream's silence is not the upstream's."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from gateway_testkit import gateway_for, scripted

# ~4 MB of events, sent faster than any socket drains them.
HUGE: dict[str, Any] = {
    "first_token_delay_ms": 1.0,
    "n_tokens": 4000,
    "token_interval_ms": 0.25,
    "tokens": ["x" * 1000] * 4000,
}


def _gateway_state(gw: Any) -> dict[str, Any]:
    def read(g: Any) -> dict[str, Any]:
        replica = g.models["m"].replicas[0]
        buffered = [
            c.transport.get_write_buffer_size()
            for c in g.server.connections
            if c.transport is not None
        ]
        return {
            "buffered": max(buffered, default=0),
            "connections": len(g.server.connections),
            "in_flight": replica.admission.in_flight,
            "healthy": replica.healthy,
            "upstream_errors": sum(
                g.metrics.upstream_errors.get(replica.name, kind)
                for kind in ("timeout", "disconnect", "incomplete_stream", "protocol", "connect")
            ),
            "cancelled": g.metrics.cancelled.get("m"),
        }

    return gw.call(read)  # type: ignore[no-any-return]


def test_a_client_that_reads_nothing_is_dropped_without_blaming_the_upstream() -> None:
    with (
        scripted(**HUGE) as up,
        gateway_for(
            [up.base_url], limits={"write_timeout_s": 1.0, "upstream_idle_timeout_s": 0.3}
        ) as gw,
    ):
        host, port = gw.url.removeprefix("http://").split(":")
        body = json.dumps(
            {"messages": [{"role": "user", "content": "hi"}], "stream": True}
        ).encode()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            sock.connect((host, int(port)))
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                % (len(body), body)
            )
            time.sleep(0.5)  # the upstream has written for 0.5 s by now; we read nothing
            during = _gateway_state(gw)
            deadline = time.monotonic() + 5
            state = during
            # The connection goes first; its request's slot is freed when the cancelled
            # exchange unwinds, a loop turn or more later (CI once read the state in between).
            while (state["connections"] or state["in_flight"]) and time.monotonic() < deadline:
                time.sleep(0.05)
                state = _gateway_state(gw)
            received = 0
            sock.settimeout(5)
            try:
                while chunk := sock.recv(65536):
                    received += len(chunk)
            except (ConnectionResetError, TimeoutError):
                pass
        finally:
            sock.close()
    # Back-pressure: the gateway held at most about one socket buffer (asyncio's high-water
    # mark is 64 KiB), not the megabytes the upstream had ready.
    assert during["buffered"] < 512 * 1024, during
    assert during["in_flight"] == 1 and during["connections"] == 1
    # Dropped by the write timeout, with the answer far from complete.
    assert state["connections"] == 0, state
    assert received < 3_000_000
    # The client's fault, not the upstream's: cancelled, slot free, replica healthy.
    assert state["in_flight"] == 0 and state["healthy"], state
    assert state["upstream_errors"] == 0 and state["cancelled"] == 1.0, state
