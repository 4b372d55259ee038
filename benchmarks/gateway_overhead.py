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
short-lived scripts; its clock starts before ``connect()``); ``burst`` sends N oneshot requests at
the same instant (``--requests`` / N such bursts per run, 4 by default). Each other mode runs a
closed loop of N workers at 1 / 32 / 256 concurrent streams, started spread over one stream's
duration; with keep-alive, each worker's first request opens its connections and is not counted
(steady state, not the first instant). Per request, the *transport time* is (upstream received -
client sent) + (client got the first token - upstream wrote it): TTFT minus the upstream's own
scripted delay, so the upstream's timer jitter under load does not count. The added latency of a
proxy is its transport-time quantile minus the direct one (p50 and p99).

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
from urllib.parse import urlsplit

from gateway_load import Shape, Stamps, burst, keepalive_loop, oneshot_loop, shape_for
from ttft.engines.process import free_loopback_port
from ttft.testing.gateway_process import gateway_child
from ttft.testing.nginx import run_nginx
from ttft.testing.proc_cpu import cpu_ns, listener_pids
from ttft.testing.scripted_server import ScriptedServerProcess
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
def gateway_process(
    upstream: str, loop: str = "auto", workers: int | None = 1, src: str | None = None
) -> Iterator[str]:
    """``ttft gateway`` in a child process, as a user would run it (``loop``: "asyncio" keeps
    it off uvloop, which it uses when installed; ``workers``: its ``--workers``, None for the
    default; ``src``: the ``ttft`` source tree to run it from, for a before/after in the same
    run)."""
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
        *(["--workers", str(workers)] if workers is not None else []),
    ]
    env = {"TTFT_GATEWAY_LOOP": loop}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    with gateway_child(args, port, env=env):
        yield f"http://127.0.0.1:{port}"


def gateway_options(path: str, base_src: str | None) -> dict[str, Any] | str:
    """``gateway_process``'s arguments for a gateway path name, or why the name is refused:
    gateway, gw-asyncio, gw-default (no --workers: its default), gw-wN, gw-base, gw-base-wN."""
    name = path.removeprefix("gw-")
    options: dict[str, Any] = {}
    if name.startswith("base"):
        if base_src is None:
            return f"the {path} path needs --base-src"
        options["src"], name = base_src, name.removeprefix("base").removeprefix("-")
    if name in ("gateway", ""):
        return options
    if name == "asyncio":
        return {**options, "loop": "asyncio"}
    if name == "default":
        return {**options, "workers": None}
    if name.startswith("w") and name[1:].isdigit():
        return {**options, "workers": int(name[1:])}
    return (
        f"unknown path {path!r}: direct, gateway, gw-asyncio, gw-default, gw-wN, gw-base, "
        "gw-base-wN, nginx"
    )


def pin_threads(pids: list[int], cpus: set[int]) -> None:
    """Every thread of ``pids`` onto ``cpus`` (threads started later inherit it)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(tid), cpus)


def parse_pin(text: str | None) -> tuple[set[int], set[int]] | str:
    """``--pin``'s proxy cores and the cores left to the client and upstream, or the error."""
    if text is None:
        return set(), set()
    usable = os.sched_getaffinity(0)
    try:
        proxy = {int(c) for c in text.split(",")}
    except ValueError:
        return f"--pin takes core numbers such as 0 or 0,1, not {text!r}"
    if not proxy <= usable or not usable - proxy:
        return (
            f"--pin {text}: the proxy cores must be among this process's {sorted(usable)} and "
            "leave at least one for the client and the upstream"
        )
    return proxy, usable - proxy


@dataclass
class Sample:
    ttft_ms: list[float]
    transport_ms: list[float]
    failed: int
    sent: int = 0  # requests sent, counted or not (keep-alive warm-ups cost CPU too)
    cpu_ns: int | None = None  # the proxy's CPU time over the run (None: direct, or no /proc)


def score(stamps: list[Stamps], upstream: ScriptedServerProcess) -> Sample:
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
    url: str, upstream: ScriptedServerProcess, client: str, streams: int, n: int, shape: Shape
) -> Sample:
    gc.collect()
    per_stream = max(1, n // streams)
    if client == "burst":
        bursts = max(1, n // streams)
        stamps = asyncio.run(burst(url, streams, shape, bursts))
        sent = streams * bursts
    elif client == "oneshot":
        stamps = asyncio.run(oneshot_loop(url, streams, per_stream, shape))
        sent = streams * per_stream
    else:
        stamps = asyncio.run(keepalive_loop(url, streams, per_stream, shape))
        sent = streams * (per_stream + 1)
    sample = score(stamps, upstream)
    sample.sent = sent
    return sample


def measure_with_cpu(
    url: str,
    upstream: ScriptedServerProcess,
    client: str,
    streams: int,
    n: int,
    shape: Shape,
    pids: list[int],
) -> Sample:
    """``measure``, with the CPU time the proxy's processes (``pids``) spent meanwhile."""
    before = cpu_ns(pids) if pids else None
    sample = measure(url, upstream, client, streams, n, shape)
    after = cpu_ns(pids) if pids else None
    if before is not None and after is not None:
        sample.cpu_ns = after - before
    return sample


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stats(rows: list[Sample]) -> dict[str, float]:
    cpu = [r.cpu_ns / r.sent / 1000 for r in rows if r.cpu_ns is not None and r.sent]
    return {
        "cpu_us": statistics.median(cpu) if cpu else float("nan"),
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
        f"{'trans p50':>10} {'trans p99':>10} {'added p50':>10} {'added p99':>10} {'fail':>5} "
        f"{'CPU/req':>8}"
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
            cpu = "" if path == "direct" else f"{s['cpu_us']:.0f} us"
            print(
                f"{client:9} {streams:>7} {path:8} {s['n']:>5.0f} {s['ttft50']:>9.2f} "
                f"{s['ttft99']:>9.2f} {s['t50']:>10.3f} {s['t99']:>10.3f} {extra:>21} "
                f"{s['fail']:>5.0f} {cpu:>8}"
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
        "own loop), gw-default (--workers left at its default: one per core), gw-wN (the gateway "
        "with --workers N, e.g. gw-w2), gw-base (the gateway run "
        "from --base-src), gw-base-wN (that one with --workers N), nginx",
    )
    parser.add_argument(
        "--base-src",
        default=None,
        help="another ttft source tree (e.g. a checkout of main: /path/src) that the gw-base "
        "path runs the gateway from: before and after in the same run",
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
    parser.add_argument(
        "--pin",
        default=None,
        help="cores for the proxy under test (e.g. 0): every proxy runs there and the client "
        "and the scripted upstream on the other cores, so each proxy's CPU per request is its "
        "own work, not also the caches it shares with the two Python load processes",
    )
    args = parser.parse_args()
    pinned = parse_pin(args.pin)
    if isinstance(pinned, str):
        parser.error(pinned)
    proxy_cores, load_cores = pinned
    if load_cores:
        os.sched_setaffinity(0, load_cores)  # the upstream and the proxies start from here
    levels = [int(x) for x in args.levels.split(",")]
    paths = args.paths.split(",")
    cases = [(c, streams) for c in args.clients.split(",") for streams in levels]
    if args.burst:
        cases.append(("burst", args.burst))
    samples: dict[tuple[str, str, int], list[Sample]] = {}
    with ScriptedServerProcess(Script()) as upstream, contextlib.ExitStack() as stack:
        urls = {"direct": upstream.base_url}
        for path in paths:
            if path in ("direct", "nginx"):
                continue
            options = gateway_options(path, args.base_src)
            if isinstance(options, str):
                parser.error(options)
            urls[path] = stack.enter_context(gateway_process(upstream.base_url, **options))
        if "nginx" in paths:
            urls["nginx"] = stack.enter_context(run_nginx(NGINX, upstream.base_url))
        # The proxies' processes (an nginx master and worker, a gateway), for their CPU time.
        pids = {p: listener_pids(urlsplit(u).port or 0) for p, u in urls.items() if p != "direct"}
        if proxy_cores:
            for proxy_pids in pids.values():
                pin_threads(proxy_pids, proxy_cores)
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
                        measure_with_cpu(
                            urls[path], upstream, client, streams, n, shape, pids.get(path, [])
                        )
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
        + (
            f"; proxies pinned to cores {sorted(proxy_cores)}, client and upstream to "
            f"{sorted(load_cores)}"
            if proxy_cores
            else ""
        )
    )
    print(
        "transport = (upstream received - client sent) + (client first token - upstream "
        "wrote it); oneshot and burst count from before connect(); added = path - direct;\n"
        "CPU/req = the proxy's CPU time per request sent (every thread of its processes)\n"
    )
    added = report(samples, cases, paths)
    gateways = [p for p in paths if p == "gateway" or p.startswith("gw-")]
    nan = float("nan")
    print()
    for (client, path, streams), (a50, a99) in sorted(added.items()):
        if path not in gateways:
            continue
        n50, n99 = added.get((client, "nginx", streams), (nan, nan))
        cpu = _stats(samples[(client, path, streams)])["cpu_us"]
        nginx = (
            _stats(samples[(client, "nginx", streams)])["cpu_us"]
            if (client, "nginx", streams) in samples
            else nan
        )
        print(
            f"{client:9} {streams:>4} {path}: added p50 {a50:+.3f} ms, p99 {a99:+.3f} ms; "
            f"nginx p50 {n50:+.3f} ms, p99 {n99:+.3f} ms; CPU per request {cpu:.0f} us, "
            f"nginx {nginx:.0f} us (x{cpu / nginx:.2f} nginx's)"
        )
    print()
    for (client, path, streams), (a50, a99) in sorted(added.items()):
        if path not in gateways:
            continue
        if client == "burst":
            goal, met = "added p99 < 10 ms", a99 < 10.0
        elif streams == 32:
            goal, met = "added p50 < 1 ms and p99 < 3 ms", a50 < 1.0 and a99 < 3.0
        else:
            continue
        print(f"target {path} ({client}, {streams} streams: {goal}): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
