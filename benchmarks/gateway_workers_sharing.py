"""How long a crowd of clients takes through ``ttft gateway --workers N``, against one worker.

Every client opens its own connection (the kernel spreads those over the workers) and sends
one streamed request to a scripted upstream with a fixed number of slots and a fixed answer
time. With the slots used fully, K clients take ceil(K / slots) answer times; a gateway whose
workers split the slots (each admitting only its part) leaves slots idle while another
worker's part has a queue, and the crowd takes longer. Anchor: one worker, same run.

    python benchmarks/gateway_workers_sharing.py --slots 3 --clients 16 --reps 3
    python benchmarks/gateway_workers_sharing.py --base-src /path/to/other/checkout/src

``--base-src`` adds the same runs of a gateway from another source tree (before and after in
one run). Prints the median time to serve the whole crowd, the slowest client's wait, the
upstream's peak of requests held at once (more than ``--slots`` would break the limit), and
every run's raw numbers.

``--loop SECONDS`` measures fairness across workers instead: each client a closed loop on its
own keep-alive connection, and the fewest and most answers any client got:

    python benchmarks/gateway_workers_sharing.py --slots 1 --clients 6 --answer-ms 100 \
        --loop 12 --queue-timeout 10 --reps 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from ttft.engines.process import free_loopback_port
from ttft.testing.gateway_process import gateway_child
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def _crowd(port: int, clients: int) -> tuple[float, float, list[int]]:
    """Wall seconds until every client has its whole answer, the slowest one's, statuses."""

    async def one() -> tuple[float, int]:
        start = time.perf_counter()
        async with httpx.AsyncClient(timeout=120) as client:
            answer = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY)
            return time.perf_counter() - start, answer.status_code

    start = time.perf_counter()
    done = await asyncio.gather(*(one() for _ in range(clients)))
    return time.perf_counter() - start, max(t for t, _ in done), [c for _, c in done]


async def _closed_loops(port: int, clients: int, seconds: float) -> list[tuple[int, int, float]]:
    """Each client on one keep-alive connection, sending its next request as its answer ends,
    for ``seconds``: per client, answers, refusals and its longest wait."""

    async def one(stop: float) -> tuple[int, int, float]:
        answered = refused = 0
        longest = 0.0
        async with httpx.AsyncClient(timeout=120) as client:
            while time.monotonic() < stop:
                start = time.perf_counter()
                answer = await client.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions", json=BODY
                )
                longest = max(longest, time.perf_counter() - start)
                answered += answer.status_code == 200
                refused += answer.status_code != 200
        return answered, refused, longest

    stop = time.monotonic() + seconds
    return list(await asyncio.gather(*(one(stop) for _ in range(clients))))


def _run(
    src: str | None, workers: int, args: argparse.Namespace, up: ScriptedServer
) -> dict[str, float]:
    port = free_loopback_port()
    cli = [
        "--upstream", up.base_url, "--engine", "openai", "--model", "m", "--no-prerender",
        "--listen", f"127.0.0.1:{port}", "--workers", str(workers),
        "--max-in-flight", str(args.slots), "--queue-timeout", str(args.queue_timeout),
    ]  # fmt: skip
    env = {}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    before = len(up.snapshot().logs)
    with gateway_child(cli, port, env=env):
        time.sleep(0.5)  # every worker listening and done with its start-up checks
        if args.loop:
            loops = asyncio.run(_closed_loops(port, args.clients, args.loop))
        else:
            total, slowest, codes = asyncio.run(_crowd(port, args.clients))
    snap = up.snapshot()
    snap.logs = snap.logs[before:]
    if args.loop:
        return {
            "fewest": min(a for a, _, _ in loops),
            "most": max(a for a, _, _ in loops),
            "refused": sum(r for _, r, _ in loops),
            "slowest": max(w for _, _, w in loops),
            "peak": snap.peak_requests(),
        }
    bad = [c for c in codes if c != 200]
    return {"total": total, "slowest": slowest, "peak": snap.peak_requests(), "refused": len(bad)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=3, help="the upstream's slots (default 3)")
    parser.add_argument("--clients", type=int, default=16, help="clients at once (default 16)")
    parser.add_argument("--answer-ms", type=float, default=400, help="each answer's time")
    parser.add_argument("--workers", default="1,2", help="worker counts to run (default 1,2)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, interleaved")
    parser.add_argument("--base-src", help="also run a gateway from this source tree")
    parser.add_argument(
        "--loop",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="instead of one crowd: each client a closed loop on one keep-alive connection "
        "for SECONDS; prints the fewest and most answers a client got (fairness across "
        "workers), refusals and the longest wait",
    )
    parser.add_argument(
        "--queue-timeout", type=float, default=120.0, help="the gateway's --queue-timeout"
    )
    args = parser.parse_args()
    if args.base_src is not None and not Path(args.base_src, "ttft").is_dir():
        parser.error(f"--base-src {args.base_src}: no ttft package there")
    counts = [int(w) for w in args.workers.split(",")]
    cases = [(None, w) for w in counts]
    if args.base_src:
        cases += [(args.base_src, w) for w in counts if w > 1]
    results: dict[tuple[str | None, int], list[dict[str, float]]] = {c: [] for c in cases}
    script = Script(first_token_delay_ms=args.answer_ms, n_tokens=2, token_interval_ms=1)
    with ScriptedServer(script).in_thread() as up:
        for rep in range(args.reps):
            for case in cases:
                results[case].append(_run(case[0], case[1], args, up))
                print(f"rep {rep + 1} {_name(case)}: {results[case][-1]}", file=sys.stderr)
    if args.loop:
        _print_loops(args, cases, results)
        return 0
    ideal = -(-args.clients // args.slots) * args.answer_ms / 1000
    print(f"{args.clients} clients, {args.slots} slots, {args.answer_ms:g} ms answers "
          f"(ideal {ideal:.2f} s); medians of {args.reps}:")  # fmt: skip
    anchor = statistics.median(r["total"] for r in results[(None, counts[0])])
    print(
        f"{'gateway':<24} {'crowd s':>8} {'slowest s':>10} {'peak':>5} {'refused':>8} {'ratio':>6}"
    )
    for case in cases:
        runs = results[case]
        total = statistics.median(r["total"] for r in runs)
        slowest = statistics.median(r["slowest"] for r in runs)
        print(
            f"{_name(case):<24} {total:>8.2f} {slowest:>10.2f}"
            f" {max(r['peak'] for r in runs):>5.0f} {sum(r['refused'] for r in runs):>8.0f}"
            f" {total / anchor:>6.2f}"
        )
    print(f"ratio: crowd time over {_name((None, counts[0]))}'s, same run")
    return 0


def _print_loops(
    args: argparse.Namespace,
    cases: list[tuple[str | None, int]],
    results: dict[tuple[str | None, int], list[dict[str, float]]],
) -> None:
    print(f"{args.clients} closed-loop clients for {args.loop:g} s, {args.slots} slots, "
          f"{args.answer_ms:g} ms answers; every repetition:")  # fmt: skip
    print(
        f"{'gateway':<24} {'answers per client, fewest-most':>32} {'refused':>8} {'longest s':>10}"
    )
    for case in cases:
        for run in results[case]:
            spread = f"{run['fewest']:.0f}-{run['most']:.0f}"
            print(f"{_name(case):<24} {spread:>32} {run['refused']:>8.0f} {run['slowest']:>10.2f}")


def _name(case: tuple[str | None, int]) -> str:
    return f"{'base' if case[0] else 'this'}, {case[1]} worker{'s' if case[1] > 1 else ''}"


if __name__ == "__main__":
    sys.exit(main())
