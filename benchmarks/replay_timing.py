"""Replay pacing: how late does each replayed request leave, against the trace's own schedule?

A bursty trace (gamma arrivals, shape 0.5, 100 requests/s at speed 1) is replayed against the
scripted SSE server (a child process, its own event loop) by two clients, one after the other:

- ttft: ``ttft.load.runner.Runner`` with the trace's ``Replay`` arrival (the schedule fixed up
  front, each request's ``client_wait`` = sent - scheduled);
- anchor: what a replay script usually does: one asyncio task per request that sleeps until its
  offset (``asyncio.sleep``), then posts with ``aiohttp`` (vLLM's serving benchmark's client);
  its send time is stamped just before the post.

Both are judged by the server's own arrival log on the shared monotonic clock (arrival -
scheduled), and ttft also by its ``client_wait``. Printed: p50 / p99 / max per client and speed,
the machine's load average, and the anchor/ttft ratio of the arrival p99. The tests only hold
relations (never early, the recorded span kept, the lag far below the gaps): these figures
depend on the machine and its neighbours, and belong here.

    python benchmarks/replay_timing.py
    python benchmarks/replay_timing.py --requests 600 --speeds 1,2,4 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.load.runner import CellPlan, Runner
from ttft.load.sender import ClientSender
from ttft.testing.scripted_server import ScriptedServerProcess
from ttft.testing.sse_script import Script
from ttft.workload.arrival import ClosedLoop, Replay
from ttft.workload.requests import WorkItem

MS = 1_000_000


def offsets(n: int, mean_gap_ms: float, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for _ in range(n):
        out.append(round(t * MS))
        t += rng.gammavariate(0.5, mean_gap_ms / 0.5)
    return out


def bodies(n: int, base: int) -> list[dict[str, object]]:
    return [{"prompt": f"r{i}", "max_tokens": 2, "ttft_tag": base + i} for i in range(n)]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Schedule = tuple[dict[int, int], list[float]]  # tag -> due (monotonic ns); client_wait in ms


async def run_ttft(url: str, trace: list[int], speed: float, base: int) -> Schedule:
    anchor = RunAnchor.now()
    items = [WorkItem(b, "completions") for b in bodies(len(trace), base)]
    async with StreamingClient(url) as client:
        runner = Runner(ClientSender(client, anchor), anchor, lambda _: None)
        warm = [WorkItem(b, "completions") for b in bodies(8, base - 100)]
        await runner.run_cell(CellPlan("warmup", warm, ClosedLoop(8), phase="warmup"))
        records: list[RequestRecord] = await runner.run_cell(
            CellPlan("trace", items, Replay(trace, speed))
        )
    waits = [((r.sent_ns or 0) - (r.scheduled_ns or 0)) / MS for r in records]
    # The runner numbers requests across cells: the trace's first request follows the warm-up's.
    first = min(r.index for r in records)
    due = {base + r.index - first: anchor.monotonic_ns + (r.scheduled_ns or 0) for r in records}
    return due, waits


async def run_anchor(url: str, trace: list[int], speed: float, base: int) -> Schedule:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post(body: dict[str, object]) -> None:
            async with session.post(url + "/v1/completions", json=body) as response:
                async for _ in response.content:
                    pass

        await asyncio.gather(*(post(b) for b in bodies(8, base - 100)))  # warm connections
        start = time.perf_counter_ns()
        scheduled: dict[int, int] = {}

        async def one(offset: int, body: dict[str, object]) -> None:
            due = start + round(offset / speed)
            scheduled[int(str(body["ttft_tag"]))] = due
            await asyncio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
            await post(body)

        await asyncio.gather(
            *(one(o, b) for o, b in zip(trace, bodies(len(trace), base), strict=False))
        )
    return scheduled, []  # its send stamp is its own sleep's wake-up: not comparable


def lateness(server: ScriptedServerProcess, scheduled: dict[int, int]) -> list[float]:
    logs = {log.tag: log for log in server.snapshot(clear=True).logs}
    return [(logs[tag].received_ns - due) / MS for tag, due in scheduled.items() if tag in logs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--mean-gap-ms", type=float, default=10.0)
    parser.add_argument("--speeds", default="1,2")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    trace = offsets(args.requests, args.mean_gap_ms)
    rows: list[tuple[str, float, list[float], list[float]]] = []
    script = Script(first_token_delay_ms=2, token_interval_ms=1, n_tokens=2)
    with ScriptedServerProcess(script) as server:
        base = 1_000
        for _ in range(args.reps):
            for speed in (float(s) for s in args.speeds.split(",")):
                runners: dict[str, Callable[..., Awaitable[Schedule]]] = {
                    "ttft": run_ttft,
                    "anchor": run_anchor,
                }
                for name, runner in runners.items():
                    server.snapshot(clear=True)
                    scheduled, waits = asyncio.run(runner(server.base_url, trace, speed, base))
                    late = lateness(server, scheduled)
                    rows.append((name, speed, late, waits))
                    base += args.requests + 1_000
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\nreplay of {args.requests} gamma(0.5) arrivals, mean gap {args.mean_gap_ms:g} ms at "
        f"speed 1; {os.cpu_count()} CPUs, load average {load:.2f}\n"
    )
    head = f"{'client':8} {'speed':>5} {'arrival p50':>12} {'p99':>9} {'max':>9}"
    print(f"{head} {'client_wait p99':>16}")
    p99s: dict[tuple[str, float], list[float]] = {}
    for name, speed, late, waits in rows:
        p99s.setdefault((name, speed), []).append(quantile(late, 0.99))
        wait = f"{quantile(waits, 0.99):.3f} ms" if waits else "-"
        print(
            f"{name:8} {speed:>5g} {quantile(late, 0.5):>9.3f} ms {quantile(late, 0.99):>6.3f} ms "
            f"{max(late):>6.3f} ms {wait:>16}"
        )
    for speed in sorted({s for _, s in p99s}):
        ours = statistics.median(p99s[("ttft", speed)])
        theirs = statistics.median(p99s[("anchor", speed)])
        ratio = theirs / ours if ours > 0 else float("inf")
        print(f"speed {speed:g}: arrival p99, anchor / ttft = x{ratio:.2f}")


if __name__ == "__main__":
    main()
