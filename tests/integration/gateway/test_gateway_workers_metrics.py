"""``/metrics`` of ``ttft gateway --workers 2``: every worker's series merged, on any connection.

Each request goes on a connection of its own, so the kernel spreads them over both workers;
a scrape (also on a fresh connection, so answered by either) must count all of them, and keep
counting them after a worker is killed and replaced. Other workers' counts reach a scrape
within about half a second (their next snapshot): the tests poll with deadlines.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttft.testing.gateway_process import gateway_child
from ttft.testing.proc_cpu import listener_pids
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="--workers needs SO_REUSEPORT (Linux)"
)

BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}
DEADLINE_S = 30.0  # generous: the machine is shared and slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _args(upstream: str, port: int) -> list[str]:
    return [
        *("--upstream", upstream, "--engine", "openai", "--model", "m", "--no-prerender"),
        *("--listen", f"127.0.0.1:{port}", "--workers", "2"),
    ]


def _send(port: int, count: int) -> None:
    for _ in range(count):  # httpx.post: a new client, so a new connection, each time
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY, timeout=60)
        assert answer.status_code == 200, answer.text


def _scrape(port: int, query: str = "") -> dict[str, Any]:
    """One scrape on a new connection: the chat 200s it counts, and its worker series."""
    answer = httpx.get(f"http://127.0.0.1:{port}/metrics{query}", timeout=30)
    assert answer.status_code == 200, answer.text
    served = 0.0
    workers: dict[str, float] = {}
    for family in text_string_to_metric_families(answer.text):  # Prometheus's own parser
        for s in family.samples:
            if s.name == "ttft_gateway_requests_total" and s.labels["status"] == "200":
                served += s.value
            elif s.name == "ttft_gateway_worker":
                workers[s.labels["worker"]] = s.value
    return {"served": served, "workers": workers}


def _until_served(port: int, want: float, at_least: float = 0.0) -> list[float]:
    """Scrape until one counts ``want``; every count seen on the way must be ``at_least``."""
    seen: list[float] = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        served = _scrape(port)["served"]
        seen.append(served)
        assert served >= at_least, seen
        if served == want:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"no scrape counted {want} requests: {seen[-20:]}")


def _workers(port: int, supervisor: int, want: int, gone: int | None = None) -> list[int]:
    deadline = time.monotonic() + DEADLINE_S
    pids: list[int] = []
    while time.monotonic() < deadline:
        pids = [p for p in listener_pids(port) if p != supervisor]
        if len(pids) == want and gone not in pids:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"expected {want} workers on {port} (not {gone}), found {pids}")


def test_metrics_on_any_connection_count_the_requests_of_every_worker() -> None:
    n = 12
    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        port = _free_port()
        with gateway_child(_args(up.base_url, port), port) as gw:
            _workers(port, gw.pid, 2)
            _send(port, n)
            _until_served(port, n)
            # From here on, every scrape (on either worker) counts all of them, no more.
            scrapes = [_scrape(port) for _ in range(8)]
            own = [_scrape(port, "?worker=self") for _ in range(8)]
            bad = httpx.get(f"http://127.0.0.1:{port}/metrics?worker=0", timeout=30)
    assert [s["served"] for s in scrapes] == [n] * 8
    assert all(s["workers"] == {"0": 2.0, "1": 2.0} for s in scrapes), scrapes
    assert all(len(s["workers"]) == 1 and s["served"] <= n for s in own), own
    assert bad.status_code == 400


def test_a_killed_worker_does_not_make_the_counters_go_back() -> None:
    n, more = 10, 4
    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        port = _free_port()
        with gateway_child(_args(up.base_url, port), port) as gw:
            first = _workers(port, gw.pid, 2)
            _send(port, n)
            _until_served(port, n)
            os.kill(first[0], signal.SIGKILL)
            # While one worker serves, and after its replacement is up: never fewer than n.
            seen = _until_served(port, n, at_least=n)
            _workers(port, gw.pid, 2, gone=first[0])
            after = [_scrape(port)["served"] for _ in range(6)]
            _send(port, more)  # the replacement counts from zero, on top of the retired totals
            _until_served(port, n + more, at_least=n)
            log = gw.stderr_text()
    assert "restarting it" in log
    assert after == [n] * 6, (seen, after)


def test_sighup_replacing_both_workers_keeps_their_counts(tmp_path: Path) -> None:
    """Replaced workers drain and exit; their last snapshots join the retired totals."""
    n = 8
    with ScriptedServer(Script(first_token_delay_ms=1, n_tokens=1)).in_thread() as up:
        port = _free_port()
        path = tmp_path / "gateway.toml"
        path.write_text(
            f'listen = "127.0.0.1:{port}"\nworkers = 2\n'
            f'[[model]]\nname = "m"\nengine = "openai"\nprerender = false\n'
            f'upstreams = ["{up.base_url}"]\n'
        )
        temp = tmp_path / "tmp"  # where the supervisor makes its private metrics directory
        temp.mkdir()
        env = {"TMPDIR": str(temp)}
        with gateway_child(["--config", str(path)], port, env=env) as gw:
            before = _workers(port, gw.pid, 2)
            [share] = temp.iterdir()
            assert stat.S_IMODE(share.stat().st_mode) == 0o700
            _send(port, n)  # no scrape first: the old workers' own writes carry the counts
            os.kill(gw.pid, signal.SIGHUP)
            deadline = time.monotonic() + DEADLINE_S
            after = before
            while time.monotonic() < deadline:
                after = [p for p in listener_pids(port) if p != gw.pid]
                gone = all(not os.path.exists(f"/proc/{p}") or _zombie(p) for p in before)
                if len(after) == 2 and not set(after) & set(before) and gone:
                    break
                time.sleep(0.1)
            assert len(after) == 2 and not set(after) & set(before), (before, after)
            _until_served(port, n, at_least=0)
            scrapes = [_scrape(port)["served"] for _ in range(6)]
            files: list[str] = []
            while time.monotonic() < deadline:  # the old snapshots folded and removed
                files = sorted(
                    f.name for f in share.iterdir() if f.name.endswith(".json")
                )  # the slot table (slots-1.bin) lives there too
                if len(files) == 3:
                    break
                time.sleep(0.1)
    assert scrapes == [n] * 6
    assert len(files) == 3 and "retired.json" in files, files  # the two new workers' and it
    assert not share.exists()  # removed when the gateway stopped


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except OSError:
        return True
