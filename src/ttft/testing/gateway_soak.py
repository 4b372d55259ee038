"""A bounded soak of ``ttft gateway``: steady streams with hostile clients mixed in, RSS watched.

The gateway runs as a user runs it (``ttft gateway --config FILE`` in a child process, so its
resident memory is its own) in front of a scripted upstream in another child process. For
``duration_s`` this drives:

- ``streams`` well-behaved keep-alive clients, each sending short streamed requests back to back
  (their statuses must all be 2xx);
- every ``slow_every_s`` a *slow reader*: a raw socket with a tiny receive buffer that asks for a
  multi-megabyte answer and reads nothing, so the gateway's socket to it is write-paused (the
  gateway must stop reading the upstream, then drop the client after its write timeout);
- every ``drop_every_s`` a *disconnecting client*: it reads the first bytes of an answer and
  closes (the gateway must cancel the upstream request).

The gateway's RSS (``/proc/PID/status``) is sampled every ``sample_every_s``. At the end it waits
for in-flight work to settle and reads how many upstream connections are still open: the
gateway may keep idle keep-alive connections (at most one per concurrent stream it served), but
not the slow readers' or the disconnected clients'.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.engines.process import free_loopback_port
from ttft.testing.gateway_process import gateway_child
from ttft.testing.scripted_server import ScriptedServerProcess
from ttft.testing.sse_script import Script

_SHORT = {"first_token_delay_ms": 5.0, "n_tokens": 16, "token_interval_ms": 2.0}
# About 4 MB of events, faster than any socket drains them: the stream outruns a reader that
# reads nothing, whatever the kernel's buffer sizes.
_HUGE = {
    "first_token_delay_ms": 1.0,
    "n_tokens": 4000,
    "token_interval_ms": 0.25,
    "tokens": ["x" * 1000] * 4000,
}


@dataclass
class SoakReport:
    duration_s: float
    rss_mb: list[tuple[float, float]]  # (seconds since start, RSS MiB)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    slow_readers: int = 0
    slow_readers_dropped: int = 0  # the gateway closed on them (write timeout), as it must
    disconnects: int = 0
    upstream_open_end: int = 0
    upstream_peak: int = 0
    workers: int = 1
    # with several workers: each sample's RSS per worker process (pid -> MiB); ``rss_mb`` is
    # then the largest worker's, the bound the soak holds per worker
    worker_rss_mb: list[dict[int, float]] = field(default_factory=list)

    @property
    def worker_pids(self) -> set[int]:
        """Every worker process seen (more than ``workers``: one was replaced)."""
        return {pid for sample in self.worker_rss_mb for pid in sample}

    @property
    def start_mb(self) -> float:
        return self.rss_mb[0][1]

    @property
    def peak_mb(self) -> float:
        return max(mb for _, mb in self.rss_mb)

    @property
    def end_mb(self) -> float:
        return self.rss_mb[-1][1]

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def curve(self, points: int = 8) -> str:
        """The RSS curve as ``t:MiB`` pairs, evenly thinned to ``points``."""
        step = max(1, len(self.rss_mb) // points)
        picked = self.rss_mb[::step]
        if picked[-1] != self.rss_mb[-1]:
            picked.append(self.rss_mb[-1])
        return "  ".join(f"{t:.0f}s:{mb:.1f}" for t, mb in picked)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the supervisor's workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")"
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _sample(pid: int, workers: int, report: SoakReport, t: float) -> None:
    """One RSS sample: the gateway process, or with workers each worker (the largest kept)."""
    if workers == 1:
        report.rss_mb.append((t, rss_mb(pid)))
        return
    sizes: dict[int, float] = {}
    for child in _children(pid):
        try:
            sizes[child] = rss_mb(child)
        except (OSError, RuntimeError):
            continue  # exited between the listing and the read
    report.worker_rss_mb.append(sizes)
    report.rss_mb.append((t, max(sizes.values(), default=0.0)))


def gateway_config(upstream: str, port: int, write_timeout_s: float, workers: int = 1) -> str:
    return f"""listen = "127.0.0.1:{port}"
workers = {workers}

[[model]]
name = "m"
upstreams = ["{upstream}"]
prerender = false

[limits]
write_timeout_s = {write_timeout_s}
"""


def _raw_request(port: int, script: dict[str, object]) -> bytes:
    body = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "ttft_script": script,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _slow_reader(port: int, hold_s: float, report: SoakReport) -> None:
    """Ask for a huge answer and read nothing; did the gateway close on us within ``hold_s``?"""
    report.slow_readers += 1
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, _raw_request(port, _HUGE))
        await asyncio.sleep(hold_s)  # read nothing while the gateway's timer runs
        # Now drain: a closed connection ends in EOF (or a reset) well before 4 MB.
        got = 0
        deadline = loop.time() + 10
        while loop.time() < deadline:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
            if not chunk:
                break
            got += len(chunk)
        if got < 3_000_000:
            report.slow_readers_dropped += 1
    except (ConnectionError, TimeoutError):
        report.slow_readers_dropped += 1
    finally:
        sock.close()


async def _disconnecting(port: int, report: SoakReport) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_raw_request(port, {**_SHORT, "n_tokens": 200, "token_interval_ms": 20.0}))
        await asyncio.wait_for(reader.read(200), 10)  # the head and a first event
        report.disconnects += 1
    finally:
        writer.transport.abort()


async def _steady(url: str, stop_at: float, report: SoakReport) -> None:
    anchor = RunAnchor.now()
    async with StreamingClient(url, model="m", timeout_s=30) as client:
        while time.monotonic() < stop_at:
            record = RequestRecord(index=report.requests)
            report.requests += 1
            body = {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": True,
                "ttft_script": _SHORT,
            }
            await client.send(body, record, anchor)
            if record.status is not None:
                report.statuses[record.status] += 1
            if record.error is not None:
                report.errors[record.error.kind] += 1


async def _drive(
    port: int,
    pid: int,
    duration_s: float,
    streams: int,
    slow_every_s: float,
    drop_every_s: float,
    write_timeout_s: float,
    sample_every_s: float,
    report: SoakReport,
) -> None:
    workers = report.workers
    start = time.monotonic()
    stop_at = start + duration_s
    url = f"http://127.0.0.1:{port}"
    background: set[asyncio.Task[None]] = set()

    def spawn(coro: Coroutine[None, None, None]) -> None:
        task = asyncio.create_task(coro)
        background.add(task)
        task.add_done_callback(background.discard)

    steady = [asyncio.create_task(_steady(url, stop_at, report)) for _ in range(streams)]
    next_slow = start + 1.0
    next_drop = start + 0.5
    next_sample = start
    while time.monotonic() < stop_at:
        now = time.monotonic()
        if now >= next_sample:
            _sample(pid, workers, report, now - start)
            next_sample += sample_every_s
        if now >= next_slow and now + write_timeout_s + 2 < stop_at:
            spawn(_slow_reader(port, write_timeout_s + 1.5, report))
            next_slow += slow_every_s
        if now >= next_drop:
            spawn(_disconnecting(port, report))
            next_drop += drop_every_s
        await asyncio.sleep(0.05)
    await asyncio.gather(*steady, return_exceptions=True)
    if background:
        await asyncio.wait(background, timeout=write_timeout_s + 15)


def run_soak(
    workdir: Path,
    *,
    duration_s: float = 90.0,
    streams: int = 16,
    slow_every_s: float = 5.0,
    drop_every_s: float = 1.0,
    write_timeout_s: float = 3.0,
    sample_every_s: float = 1.0,
    workers: int = 1,
) -> SoakReport:
    """Run the soak and return what it saw; the caller asserts (tests) or prints (benchmarks).
    ``workers``: the gateway's ``workers`` (its RSS is then sampled per worker process)."""
    report = SoakReport(duration_s, [], workers=workers)
    with ScriptedServerProcess(Script()) as upstream:
        port = free_loopback_port()
        config = workdir / "gateway.toml"
        config.write_text(gateway_config(upstream.base_url, port, write_timeout_s, workers))
        with gateway_child(["--config", str(config)], port) as proc:
            deadline = time.monotonic() + 15.0
            while workers > 1 and len(_children(proc.pid)) < workers:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the gateway did not start {workers} workers in 15 s")
                time.sleep(0.1)
            time.sleep(0.5)  # settle the import-time allocations before the first sample
            asyncio.run(
                _drive(
                    port,
                    proc.pid,
                    duration_s,
                    streams,
                    slow_every_s,
                    drop_every_s,
                    write_timeout_s,
                    sample_every_s,
                    report,
                )
            )
            time.sleep(1.0)  # cancelled upstream requests close their connections
            last_t = report.rss_mb[-1][0] if report.rss_mb else 0.0
            _sample(proc.pid, workers, report, last_t + 1.0)
            snap = upstream.snapshot()
            report.upstream_open_end = snap.open_connections
            report.upstream_peak = snap.peak_open_connections
    return report


__all__ = ["SoakReport", "run_soak"]
