"""Gateway overhead: TTFT through ``ttft gateway`` versus direct and versus a real nginx.

Three paths to one scripted SSE upstream (a child process with exact delays that logs, per
request, ``perf_counter_ns()`` when the request arrived and when it wrote each token; Linux's
monotonic clock is shared by processes):

- direct: the client talks to the upstream;
- gateway: ``ttft gateway --upstream URL`` in its own process (pass-through: pre-rendering off,
  admission limits far above the load, so only the front door itself is measured);
- nginx: a real nginx (one worker, like the gateway's one event loop) with ``proxy_buffering off``,
  HTTP/1.1 keep-alive to the upstream and ``access_log off``: the classic tuned reverse proxy.

The client is ``ttft.client.StreamingClient`` in this process, a closed loop of N workers at
1 / 32 / 256 concurrent streams, started spread over one stream's duration; each worker's first
request opens its connections and is not counted (steady state, not the first instant). Per
request, the *transport time* is (upstream received - client sent) + (client got the first token
- upstream wrote it): TTFT minus the upstream's own scripted delay, so the upstream's timer jitter
under load does not count. The added latency of a proxy is its transport-time quantile minus the
direct one (p50 and p99); the last column is the gateway's added p99 over nginx's.

The upstream answers a first token after 20 ms, then 16 tokens spread so each stream lasts
max(40 ms, streams / 300 s): the background token traffic stays near 300 requests/s at every
level (the machine has a few cores; the scripted upstream, the proxy and the client share them).

    python benchmarks/gateway_overhead.py
    python benchmarks/gateway_overhead.py --levels 1,32,256 --reps 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.engines.process import free_loopback_port
from ttft.testing.nginx import run_nginx
from ttft.testing.scripted_server import ServerProcess
from ttft.testing.sse_script import Script

_clock = time.perf_counter_ns

NGINX = """
worker_processes 1;
events { worker_connections 8192; }
http {
    access_log off;
    upstream engine { server {upstream}; keepalive 1024; }
    server {
        listen {listen};
        location / {
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 600s;
        }
    }
}
"""


@contextmanager
def gateway_process(upstream: str) -> Iterator[str]:
    """``ttft gateway`` in a child process, as a user would run it."""
    port = free_loopback_port()
    cmd = [
        sys.executable,
        "-c",
        "from ttft.cli.main import main; main()",
        "gateway",
        "--upstream",
        upstream,
        "--model",
        "bench",
        "--no-prerender",
        "--listen",
        f"127.0.0.1:{port}",
        "--max-in-flight",
        "4096",
        "--queue-size",
        "4096",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                detail = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"the gateway exited: {detail}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the gateway did not listen within 30 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


@dataclass
class Sample:
    ttft_ms: list[float]
    transport_ms: list[float]
    failed: int


def script_for(streams: int) -> dict[str, Any]:
    """16 tokens after 20 ms, each stream lasting max(40 ms, streams / 300 s)."""
    duration_ms = max(40.0, streams / 300 * 1000)
    return {
        "first_token_delay_ms": 20.0,
        "n_tokens": 16,
        "token_interval_ms": (duration_ms - 20.0) / 15,
    }


_tag = 0


def bodies(n: int, script: dict[str, Any]) -> list[dict[str, Any]]:
    global _tag
    out = []
    for _ in range(n):
        _tag += 1
        out.append(
            {
                "model": "bench",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 16,
                "stream": True,
                "ttft_tag": _tag,
                "ttft_script": script,
            }
        )
    return out


async def closed_loop(
    url: str, streams: int, per_stream: int, script: dict[str, Any], anchor: RunAnchor
) -> list[tuple[int, RequestRecord]]:
    """``streams`` workers, each sending ``per_stream`` + 1 requests back to back.

    Workers start spread over one stream's duration, as streams of a live service are, and each
    worker's first request (which opens its connections everywhere) is not kept: what is
    measured is the steady state, not the thundering herd of the first instant.
    """
    kept: list[tuple[int, RequestRecord]] = []
    spread_s = script_duration_s(script)
    async with StreamingClient(url, timeout_s=120) as client:

        async def worker(i: int) -> None:
            await asyncio.sleep(spread_s * i / streams)
            for j, body in enumerate(bodies(per_stream + 1, script)):
                record = RequestRecord(index=body["ttft_tag"])
                await client.send(body, record, anchor)
                if j:
                    kept.append((body["ttft_tag"], record))

        await asyncio.gather(*(worker(i) for i in range(streams)))
    return kept


def script_duration_s(script: dict[str, Any]) -> float:
    return float(script["first_token_delay_ms"] + 15 * script["token_interval_ms"]) / 1000


def measure(url: str, upstream: ServerProcess, streams: int, n: int) -> Sample:
    script = script_for(streams)
    anchor = RunAnchor.now()
    gc.collect()
    per_stream = max(1, n // streams)
    results = asyncio.run(closed_loop(url, streams, per_stream, script, anchor))
    logs = {log.tag: log for log in upstream.snapshot(clear=True).logs}
    ttft, transport, failed = [], [], 0
    base = anchor.monotonic_ns
    for tag, record in results:
        log = logs.get(tag)
        written = log.first_token_ns if log is not None else None
        if (
            not record.ok
            or log is None
            or written is None
            or record.sent_ns is None
            or record.first_content_ns is None
            or record.scheduled_ns is None
        ):
            failed += 1
            continue
        first = base + record.first_content_ns
        ttft.append((record.first_content_ns - record.scheduled_ns) / 1e6)
        transport.append(((log.received_ns - (base + record.sent_ns)) + (first - written)) / 1e6)
    return Sample(ttft, transport, failed)


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,32,256", help="concurrent streams")
    parser.add_argument(
        "--requests", type=int, default=0, help="requests per run (default: max(200, 4 x streams))"
    )
    parser.add_argument("--reps", type=int, default=1, help="repetitions, paths interleaved")
    parser.add_argument("--paths", default="direct,gateway,nginx")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    paths = args.paths.split(",")
    samples: dict[tuple[str, int], list[Sample]] = {}
    with ServerProcess(Script()) as upstream, contextlib.ExitStack() as stack:
        urls = {"direct": upstream.base_url}
        if "gateway" in paths:
            urls["gateway"] = stack.enter_context(gateway_process(upstream.base_url))
        if "nginx" in paths:
            urls["nginx"] = stack.enter_context(run_nginx(NGINX, upstream.base_url))
        rng = random.Random(7)
        for _ in range(args.reps):
            for streams in levels:
                n = args.requests or max(200, 4 * streams)
                order = list(paths)
                rng.shuffle(order)  # no path always runs first (warm caches, thermal drift)
                for path in order:
                    upstream.snapshot(clear=True)
                    samples.setdefault((path, streams), []).append(
                        measure(urls[path], upstream, streams, n)
                    )

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\nscripted upstream: first token after 20 ms, 16 tokens per stream; "
        f"{os.cpu_count()} CPUs, load average {load:.2f}; {args.reps} rep(s)"
    )
    print(
        "transport = (upstream received - client sent) + (client first token - upstream "
        "wrote it); added = path - direct\n"
    )
    print(
        f"{'streams':>7} {'path':8} {'n':>5} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'trans p50':>10} {'trans p99':>10} {'added p50':>10} {'added p99':>10} {'fail':>5}"
    )
    added: dict[tuple[str, int], tuple[float, float]] = {}
    for streams in levels:
        runs = {p: samples[(p, streams)] for p in paths}
        stats = {}
        for path, rows in runs.items():
            stats[path] = {
                "ttft50": statistics.median(quantile(r.ttft_ms, 0.5) for r in rows),
                "ttft99": statistics.median(quantile(r.ttft_ms, 0.99) for r in rows),
                "t50": statistics.median(quantile(r.transport_ms, 0.5) for r in rows),
                "t99": statistics.median(quantile(r.transport_ms, 0.99) for r in rows),
                "n": sum(len(r.ttft_ms) for r in rows),
                "fail": sum(r.failed for r in rows),
            }
        for path in paths:
            s = stats[path]
            a50 = a99 = float("nan")
            if path != "direct" and "direct" in stats:
                a50 = s["t50"] - stats["direct"]["t50"]
                a99 = s["t99"] - stats["direct"]["t99"]
                added[(path, streams)] = (a50, a99)
            extra = "" if path == "direct" else f"{a50:>+10.3f} {a99:>+10.3f}"
            print(
                f"{streams:>7} {path:8} {s['n']:>5} {s['ttft50']:>9.2f} {s['ttft99']:>9.2f} "
                f"{s['t50']:>10.3f} {s['t99']:>10.3f} {extra:>21} {s['fail']:>5}"
            )
    if "gateway" in paths and "nginx" in paths:
        print()
        for streams in levels:
            g50, g99 = added[("gateway", streams)]
            n50, n99 = added[("nginx", streams)]

            def ratio(a: float, b: float) -> str:
                # A difference of p99s is noisy: nginx's can come out at or below zero.
                return f"x{a / b:.1f}" if b > 0.01 else "n/a (nginx added ~0)"

            print(
                f"{streams:>4} streams: gateway added p50 {g50:+.3f} ms, p99 {g99:+.3f} ms; "
                f"nginx p50 {n50:+.3f} ms, p99 {n99:+.3f} ms; gateway/nginx "
                f"p50 {ratio(g50, n50)}, p99 {ratio(g99, n99)}"
            )
    top = max(levels)
    if ("gateway", top) in added:
        verdict = "met" if added[("gateway", top)][1] < 2.0 else "NOT met"
        print(f"\ntarget (gateway added p99 < 2 ms at {top} streams): {verdict}")


if __name__ == "__main__":
    main()
