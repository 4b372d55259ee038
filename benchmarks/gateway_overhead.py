"""Gateway overhead: TTFT through ``ttft gateway`` versus direct and versus a real nginx.

Three paths to one scripted SSE upstream (a child process with exact delays that logs, per
request, ``perf_counter_ns()`` when the request arrived and when it wrote each token; Linux's
monotonic clock is shared by processes):

- direct: the client talks to the upstream;
- gateway: ``ttft gateway --upstream URL`` in its own process (pass-through: pre-rendering off,
  admission limits far above the load, so only the front door itself is measured), on uvloop
  when it is installed (``gw-asyncio``: the same on asyncio's own loop, to see what uvloop buys);
- nginx: a real nginx (one worker, like the gateway's one event loop) with ``proxy_buffering off``,
  HTTP/1.1 keep-alive to the upstream and ``access_log off``: the classic tuned reverse proxy.

Client modes: ``keepalive`` is ``ttft.client.StreamingClient`` (pooled connections, as SDKs);
``oneshot`` is ``ttft.testing.oneshot_client`` (a new connection per request, as curl and
short-lived scripts; its clock starts before ``connect()``); ``burst`` sends N oneshot requests
at the same instant. Each mode runs a closed loop of N workers at 1 / 32 / 256 concurrent
streams, started spread over one stream's duration; with keep-alive, each worker's first request
opens its connections and is not counted (steady state, not the first instant). Per
request, the *transport time* is (upstream received - client sent) + (client got the first token
- upstream wrote it): TTFT minus the upstream's own scripted delay, so the upstream's timer jitter
under load does not count. The added latency of a proxy is its transport-time quantile minus the
direct one (p50 and p99).

The upstream answers a first token after 20 ms, then 16 tokens spread so each stream lasts
max(40 ms, streams / 300 s): the background token traffic stays near 300 requests/s at every
level (the machine has a few cores; the scripted upstream, the proxy and the client share them).
``--token-ms 5 --tokens 20`` gives a fixed per-event rate instead (20 tokens at 5 ms).

    python benchmarks/gateway_overhead.py
    python benchmarks/gateway_overhead.py --levels 32 --token-ms 5 --reps 3 \
        --paths direct,gateway,gw-asyncio,nginx
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import random
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.engines.process import free_loopback_port
from ttft.testing.gateway_process import gateway_child
from ttft.testing.nginx import run_nginx
from ttft.testing.oneshot_client import OneShot, send_oneshot
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
def gateway_process(upstream: str, loop: str = "auto") -> Iterator[str]:
    """``ttft gateway`` in a child process, as a user would run it (``loop``: "asyncio" keeps
    it off uvloop, which it uses when installed)."""
    port = free_loopback_port()
    args = [
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
    with gateway_child(args, port, env={"TTFT_GATEWAY_LOOP": loop}):
        yield f"http://127.0.0.1:{port}"


@dataclass
class Sample:
    ttft_ms: list[float]
    transport_ms: list[float]
    failed: int


@dataclass(frozen=True)
class Shape:
    """The scripted answer: the first token after ``first_ms``, then ``tokens`` - 1 more."""

    first_ms: float
    tokens: int
    interval_ms: float

    def script(self) -> dict[str, Any]:
        return {
            "first_token_delay_ms": self.first_ms,
            "n_tokens": self.tokens,
            "token_interval_ms": self.interval_ms,
        }

    @property
    def duration_s(self) -> float:
        return (self.first_ms + (self.tokens - 1) * self.interval_ms) / 1000


def shape_for(streams: int, token_ms: float | None, tokens: int) -> Shape:
    """With ``token_ms``: that per-event rate at every level. Without: 16 tokens after 20 ms,
    each stream lasting max(40 ms, streams / 300 s), so background token traffic stays near
    300 requests/s at every level."""
    if token_ms is not None:
        return Shape(20.0, tokens, token_ms)
    duration_ms = max(40.0, streams / 300 * 1000)
    return Shape(20.0, 16, (duration_ms - 20.0) / 15)


_tag = 0


def next_body(shape: Shape) -> dict[str, Any]:
    global _tag
    _tag += 1
    return {
        "model": "bench",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": shape.tokens,
        "stream": True,
        "ttft_tag": _tag,
        "ttft_script": shape.script(),
    }


# Per kept request: (tag, scheduled, sent, first token), absolute perf_counter_ns, or None
# stamps for a failure.
Stamps = tuple[int, int, int | None, int | None]


async def keepalive_loop(url: str, streams: int, per_stream: int, shape: Shape) -> list[Stamps]:
    """``streams`` workers on one keep-alive client, each sending ``per_stream`` + 1 requests
    back to back.

    Workers start spread over one stream's duration, as streams of a live service are, and each
    worker's first request (which opens its connections everywhere) is not kept: what is
    measured is the steady state, not the thundering herd of the first instant.
    """
    kept: list[Stamps] = []
    anchor = RunAnchor.now()
    base = anchor.monotonic_ns
    async with StreamingClient(url, timeout_s=120) as client:

        async def worker(i: int) -> None:
            await asyncio.sleep(shape.duration_s * i / streams)
            for j in range(per_stream + 1):
                body = next_body(shape)
                record = RequestRecord(index=body["ttft_tag"])
                await client.send(body, record, anchor)
                if not j:
                    continue
                ok = record.ok and record.sent_ns is not None and record.scheduled_ns is not None
                kept.append(
                    (
                        body["ttft_tag"],
                        base + (record.scheduled_ns or 0),
                        base + record.sent_ns if ok and record.sent_ns is not None else None,
                        base + record.first_content_ns
                        if ok and record.first_content_ns is not None
                        else None,
                    )
                )

        await asyncio.gather(*(worker(i) for i in range(streams)))
    return kept


def _oneshot_stamps(result: OneShot) -> Stamps:
    if not result.ok:
        return (result.tag, result.started_ns, None, None)
    return (result.tag, result.started_ns, result.started_ns, result.first_token_ns)


async def oneshot_loop(url: str, streams: int, per_stream: int, shape: Shape) -> list[Stamps]:
    """Like ``keepalive_loop``, but every request opens (and closes) its own connection, so the
    proxy's accept and head parsing are inside each TTFT; all requests are kept."""
    endpoint = url + "/v1/chat/completions"
    kept: list[Stamps] = []

    async def worker(i: int) -> None:
        await asyncio.sleep(shape.duration_s * i / streams)
        for _ in range(per_stream):
            body = next_body(shape)
            kept.append(_oneshot_stamps(await send_oneshot(endpoint, body, tag=body["ttft_tag"])))

    await asyncio.gather(*(worker(i) for i in range(streams)))
    return kept


async def burst(url: str, count: int, shape: Shape) -> list[Stamps]:
    """``count`` new requests at the same instant, each on a new connection."""
    endpoint = url + "/v1/chat/completions"
    bodies = [next_body(shape) for _ in range(count)]
    results = await asyncio.gather(*(send_oneshot(endpoint, b, tag=b["ttft_tag"]) for b in bodies))
    return [_oneshot_stamps(r) for r in results]


def score(stamps: list[Stamps], upstream: ServerProcess) -> Sample:
    """TTFT (scheduled -> first token) and transport time per request, from both sides' logs."""
    logs = {log.tag: log for log in upstream.snapshot(clear=True).logs}
    ttft, transport, failed = [], [], 0
    for tag, scheduled, sent, first in stamps:
        log = logs.get(tag)
        written = log.first_token_ns if log is not None else None
        if log is None or written is None or sent is None or first is None:
            failed += 1
            continue
        ttft.append((first - scheduled) / 1e6)
        transport.append(((log.received_ns - sent) + (first - written)) / 1e6)
    return Sample(ttft, transport, failed)


def measure(
    url: str, upstream: ServerProcess, client: str, streams: int, n: int, shape: Shape
) -> Sample:
    gc.collect()
    per_stream = max(1, n // streams)
    if client == "burst":
        stamps = asyncio.run(burst(url, streams, shape))
    elif client == "oneshot":
        stamps = asyncio.run(oneshot_loop(url, streams, per_stream, shape))
    else:
        stamps = asyncio.run(keepalive_loop(url, streams, per_stream, shape))
    return score(stamps, upstream)


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stats(rows: list[Sample]) -> dict[str, float]:
    return {
        "ttft50": statistics.median(quantile(r.ttft_ms, 0.5) for r in rows),
        "ttft99": statistics.median(quantile(r.ttft_ms, 0.99) for r in rows),
        "t50": statistics.median(quantile(r.transport_ms, 0.5) for r in rows),
        "t99": statistics.median(quantile(r.transport_ms, 0.99) for r in rows),
        "n": sum(len(r.ttft_ms) for r in rows),
        "fail": sum(r.failed for r in rows),
    }


def report(
    samples: dict[tuple[str, str, int], list[Sample]],
    cases: list[tuple[str, int]],
    paths: list[str],
) -> dict[tuple[str, str, int], tuple[float, float]]:
    print(
        f"{'client':9} {'streams':>7} {'path':8} {'n':>5} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'trans p50':>10} {'trans p99':>10} {'added p50':>10} {'added p99':>10} {'fail':>5}"
    )
    added: dict[tuple[str, str, int], tuple[float, float]] = {}
    for client, streams in cases:
        stats = {p: _stats(samples[(client, p, streams)]) for p in paths}
        for path in paths:
            s = stats[path]
            a50 = a99 = float("nan")
            if path != "direct" and "direct" in stats:
                a50 = s["t50"] - stats["direct"]["t50"]
                a99 = s["t99"] - stats["direct"]["t99"]
                added[(client, path, streams)] = (a50, a99)
            extra = "" if path == "direct" else f"{a50:>+10.3f} {a99:>+10.3f}"
            print(
                f"{client:9} {streams:>7} {path:8} {s['n']:>5.0f} {s['ttft50']:>9.2f} "
                f"{s['ttft99']:>9.2f} {s['t50']:>10.3f} {s['t99']:>10.3f} {extra:>21} "
                f"{s['fail']:>5.0f}"
            )
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,32,256", help="concurrent streams")
    parser.add_argument(
        "--requests", type=int, default=0, help="requests per run (default: max(256, 4 x streams))"
    )
    parser.add_argument("--reps", type=int, default=1, help="repetitions, paths interleaved")
    parser.add_argument(
        "--paths",
        default="direct,gateway,nginx",
        help="direct, gateway (uvloop when installed), gw-asyncio (the gateway on asyncio's "
        "own loop), nginx",
    )
    parser.add_argument(
        "--clients",
        default="keepalive,oneshot",
        help="keepalive (one pooled client, as SDKs) and/or oneshot (a new connection per "
        "request, as curl and short-lived scripts)",
    )
    parser.add_argument(
        "--burst", type=int, default=256, help="N new requests at once (0: no burst case)"
    )
    parser.add_argument(
        "--token-ms",
        type=float,
        default=None,
        help="a fixed per-event token interval (e.g. 5) instead of the constant-traffic shape",
    )
    parser.add_argument("--tokens", type=int, default=20, help="tokens per answer with --token-ms")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    paths = args.paths.split(",")
    cases = [(c, streams) for c in args.clients.split(",") for streams in levels]
    if args.burst:
        cases.append(("burst", args.burst))
    samples: dict[tuple[str, str, int], list[Sample]] = {}
    with ServerProcess(Script()) as upstream, contextlib.ExitStack() as stack:
        urls = {"direct": upstream.base_url}
        if "gateway" in paths:
            urls["gateway"] = stack.enter_context(gateway_process(upstream.base_url))
        if "gw-asyncio" in paths:
            urls["gw-asyncio"] = stack.enter_context(gateway_process(upstream.base_url, "asyncio"))
        if "nginx" in paths:
            urls["nginx"] = stack.enter_context(run_nginx(NGINX, upstream.base_url))
        rng = random.Random(7)
        for _ in range(args.reps):
            for client, streams in cases:
                shape = shape_for(streams, args.token_ms, args.tokens)
                n = args.requests or max(256, 4 * streams)
                order = list(paths)
                rng.shuffle(order)  # no path always runs first (warm caches, thermal drift)
                for path in order:
                    upstream.snapshot(clear=True)
                    samples.setdefault((client, path, streams), []).append(
                        measure(urls[path], upstream, client, streams, n, shape)
                    )

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    shape_text = (
        f"{args.tokens} tokens at {args.token_ms:g} ms"
        if args.token_ms is not None
        else "16 tokens per stream"
    )
    print(
        f"\nscripted upstream: first token after 20 ms, {shape_text}; "
        f"{os.cpu_count()} CPUs, load average {load:.2f}; {args.reps} rep(s)"
    )
    print(
        "transport = (upstream received - client sent) + (client first token - upstream "
        "wrote it); oneshot and burst count from before connect(); added = path - direct\n"
    )
    added = report(samples, cases, paths)
    print()
    for (client, path, streams), (a50, a99) in sorted(added.items()):
        if path != "gateway":
            continue
        n50, n99 = added.get((client, "nginx", streams), (float("nan"), float("nan")))
        print(
            f"{client:9} {streams:>4}: gateway added p50 {a50:+.3f} ms, p99 {a99:+.3f} ms; "
            f"nginx p50 {n50:+.3f} ms, p99 {n99:+.3f} ms"
        )
    print()
    for (client, path, streams), (a50, a99) in sorted(added.items()):
        if path != "gateway":
            continue
        if client == "burst":
            goal, met = "added p99 < 10 ms", a99 < 10.0
        elif streams == 32:
            goal, met = "added p50 < 1 ms and p99 < 3 ms", a50 < 1.0 and a99 < 3.0
        else:
            continue
        print(f"target ({client}, {streams} streams: {goal}): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
