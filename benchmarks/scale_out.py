"""Scale-out: one client process, N client processes and Ray actors at open-loop rates.

The scripted SSE server runs in a child process and logs ``perf_counter_ns()`` just before each
write; every process here shares Linux's CLOCK_MONOTONIC, so a record's first-token stamp minus
the server's write time of that token is the client's own timing error (plus loopback
delivery). Each request carries its record number as ``ttft_tag``, so records and server log
lines match one to one. The server answers every request the same way (first token after
``--first-token-ms``, then a few tokens 2 ms apart), so any growth in what the client reports
is the client's.

Per configuration and rate it prints: the delivered send rate against the configured one, the
open-loop schedule lag (scheduled -> sent p99: time requests waited inside the client), the
TTFT error against the server's log (p50/p99), TTFT as measured (sent -> first token) and from
the schedule (what a user arriving on schedule would have waited), and the client-health
verdict with its first reason.

    python benchmarks/scale_out.py                       # 1 process, 2 processes, Ray (local)
    python benchmarks/scale_out.py --rates 2000,6000 --seconds 4 --workers 2
    python benchmarks/scale_out.py --ray 127.0.0.1:6379  # an existing cluster
    python benchmarks/scale_out.py --ray none            # skip Ray
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ttft.core.client_health import ClientVerdict
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.bench import run_cells
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.health_verdicts import judge_cells
from ttft.load.results import BenchResult
from ttft.load.runner import CellPlan
from ttft.load.sink import JsonlSink
from ttft.testing.scripted_server import ScriptedServerProcess
from ttft.testing.sse_script import Script
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem

MEASURED = "measured"


@dataclass
class Row:
    config: str
    rate: float
    n: int
    failed: int
    planned: float
    delivered: float
    schedule_lag_p99_ms: float
    err_p50_ms: float
    err_p99_ms: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    sched_ttft_p99_ms: float
    verdict: ClientVerdict
    error_kinds: dict[str, int]


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _items(start: int, n: int) -> list[WorkItem]:
    body = {"prompt": "x", "max_tokens": 4}
    return [WorkItem({**body, "ttft_tag": start + i}, api="completions") for i in range(n)]


def _cells(rate: float, seconds: float, warmup: int) -> list[CellPlan]:
    n = int(rate * seconds)
    return [
        CellPlan("warm-up", _items(0, warmup), ClosedLoop(32), phase="warmup"),
        CellPlan(MEASURED, _items(warmup, n), OpenLoop(rate, seed=1)),
    ]


def _run(
    config: str, server: ScriptedServerProcess, cells: list[CellPlan], ray: str | None
) -> BenchResult:
    target = Target(server.base_url, "scripted")
    anchor = RunAnchor.now()
    with tempfile.TemporaryDirectory() as folder, JsonlSink(Path(folder) / "r.jsonl") as sink:
        setup = None if config == "1 process" else WorkerSetup(int(config.split()[0]), ray)
        run = run_cells(target, cells, sink, anchor=anchor, timeout_s=60, workers=setup)
        return asyncio.run(run)


def measure(
    config: str, server: ScriptedServerProcess, rate: float, args: argparse.Namespace
) -> Row:
    server.snapshot(clear=True)
    cells = _cells(rate, args.seconds, args.warmup)
    ray = args.ray if config.endswith("Ray actors") else None
    bench = _run(config, server, cells, ray)
    logs = {log.tag: log for log in server.snapshot(clear=True).logs}
    measured = [c for c in bench.cells if c.plan.cell == MEASURED]
    records: list[RequestRecord] = [r for c in measured for r in c.records]
    anchor = bench.anchor.monotonic_ns
    errors, ttfts, sched, lags = [], [], [], []
    failed = 0
    for record in records:
        log = logs.get(record.index)
        written = log.first_token_ns if log is not None else None
        if not record.ok or written is None or record.first_content_ns is None:
            failed += 1
            continue
        errors.append((record.first_content_ns + anchor - written) / 1e6)
        ttfts.append((record.first_content_ns - (record.sent_ns or 0)) / 1e6)
        sched.append((record.first_content_ns - (record.scheduled_ns or 0)) / 1e6)
        lags.append(((record.sent_ns or 0) - (record.scheduled_ns or 0)) / 1e6)
    sent = [r for r in records if r.sent_ns is not None and r.scheduled_ns is not None]
    span = max(r.sent_ns or 0 for r in sent) - min(r.scheduled_ns or 0 for r in sent)
    delivered = (len(sent) - 1) * 1e9 / span if span > 0 else float("nan")
    planned_span = max(r.scheduled_ns or 0 for r in sent) - min(r.scheduled_ns or 0 for r in sent)
    planned = (len(sent) - 1) * 1e9 / planned_span if planned_span > 0 else float("nan")
    verdict = judge_cells(bench)[MEASURED]
    kinds = Counter(r.error.kind for r in records if r.error is not None)
    return Row(
        config, rate, len(records), failed, planned, delivered, quantile(lags, 0.99),
        quantile(errors, 0.5), quantile(errors, 0.99), quantile(ttfts, 0.5),
        quantile(ttfts, 0.99), quantile(sched, 0.99), verdict, dict(kinds),
    )  # fmt: skip


def _first_reason(verdict: ClientVerdict) -> str:
    bad = [c for c in verdict.checks if c.level == verdict.level]
    if verdict.level == "healthy" or not bad:
        return ""
    return bad[0].short or bad[0].name


def _median_row(rows: list[Row]) -> Row:
    """The median of each number over repetitions; the verdict of the median-lag repetition."""
    numbers = {
        name: statistics.median(getattr(r, name) for r in rows)
        for name in (
            "planned", "delivered", "schedule_lag_p99_ms", "err_p50_ms", "err_p99_ms",
            "ttft_p50_ms", "ttft_p99_ms", "sched_ttft_p99_ms",
        )
    }  # fmt: skip
    middle = sorted(rows, key=lambda r: r.schedule_lag_p99_ms)[len(rows) // 2]
    kinds: Counter[str] = Counter()
    for row in rows:
        kinds.update(row.error_kinds)
    return Row(
        middle.config, middle.rate, sum(r.n for r in rows), sum(r.failed for r in rows),
        verdict=middle.verdict, error_kinds=dict(kinds), **numbers,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1000,2500,3500", help="open-loop requests/s")
    parser.add_argument("--seconds", type=float, default=3.0, help="schedule length per run")
    parser.add_argument("--workers", type=int, default=2, help="processes / actors for N")
    parser.add_argument("--ray", default="auto", help="auto, HOST:PORT, or none to skip Ray")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, configs interleaved")
    parser.add_argument("--first-token-ms", type=float, default=20.0)
    parser.add_argument("--warmup", type=int, default=64)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    configs = ["1 process", f"{args.workers} processes"]
    if args.ray != "none":
        configs.append(f"{args.workers} Ray actors")
    script = Script(first_token_delay_ms=args.first_token_ms, n_tokens=4, token_interval_ms=2.0)
    runs: dict[tuple[float, str], list[Row]] = {}
    loads = []
    with ScriptedServerProcess(script) as server:
        for rep in range(args.reps):
            for rate in rates:
                for config in configs:
                    runs.setdefault((rate, config), []).append(measure(config, server, rate, args))
                    loads.append(os.getloadavg()[0])
                    print(f"  done: rep {rep + 1}, {config} at {rate:g}/s", flush=True)
    print(
        f"\nscripted server (child process): first token after {args.first_token_ms:g} ms, "
        f"then 3 tokens 2 ms apart; open loop (Poisson) for {args.seconds:g} s per run; "
        f"{os.cpu_count()} CPUs, load average {min(loads):.1f}-{max(loads):.1f} during the runs; "
        f"medians of {args.reps} rep(s)"
    )
    print("error = client's first-token stamp - server's write time of that token (truth)\n")
    head = (
        f"{'client':15} {'rate/s':>7} {'n':>6} {'fail':>5} {'planned/s':>9} {'sent/s':>7} "
        f"{'lag p99':>8} "
        f"{'err p50':>8} {'err p99':>8} {'TTFT p50':>9} {'p99':>7} {'sched p99':>9}  verdict"
    )
    print(head)
    print("-" * len(head))
    for (_, _), reps in runs.items():
        row = _median_row(reps)
        reason = _first_reason(row.verdict)
        levels = "/".join(r.verdict.level for r in reps)
        print(
            f"{row.config:15} {row.rate:>7g} {row.n:>6} {row.failed:>5} {row.planned:>9.0f} "
            f"{row.delivered:>7.0f} "
            f"{row.schedule_lag_p99_ms:>8.2f} {row.err_p50_ms:>8.3f} {row.err_p99_ms:>8.3f} "
            f"{row.ttft_p50_ms:>9.2f} {row.ttft_p99_ms:>7.2f} {row.sched_ttft_p99_ms:>9.1f}  "
            f"{levels}{' (' + reason + ')' if reason else ''}"
        )
        if row.error_kinds:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.error_kinds.items()))
            print(f"{'':15} failed requests: {kinds}")
    print(
        "\n(times in ms; planned/s = the Poisson schedule's own rate, sent/s = what the client "
        "delivered;\n lag = scheduled -> sent; sched p99 = first token - scheduled; verdict: "
        "each rep's, then the median rep's first reason)"
    )


if __name__ == "__main__":
    main()
