"""How far to trust ``ttft simulate``: predicted against measured TTFT on the embedded engine.

One calibration (the embedded llama-server at ``--cal-slots`` slots, ``--threads`` pinned
threads), then points the calibration did not use: other slot counts, rates, prompt lengths and
prefix sharing, a Mooncake-style trace with shared hash blocks, two replicas behind a real
``ttft gateway`` with each of its routing policies (each replica pinned to cores of its own), and
one replica behind the gateway's lanes with a reserve of 1 (short and long prompts).
Each point is simulated and then run for real by ``ttft simulate run --validate``'s own code
(``validate_point``) with the arrivals of replication 0. Printed per point: predicted p50/p95
(with the interval) against measured (with its bootstrap interval), the relative error, and the
error of the simulation of exactly the arrivals that were sent ("same arrivals": the model's
own error, without the sampling spread of a few dozen Poisson arrivals); when the engine's
speed drifted over 10% since the calibration, the same at today's speed. At the end the mean
absolute errors and the machine's load average.

The issue's bar: p50 within 10%, p95 within 15%.

    python benchmarks/simulate_accuracy.py                # ~12 minutes on 2 cores
    python benchmarks/simulate_accuracy.py --points 5,6 --requests 30
    python benchmarks/simulate_accuracy.py --calibration cal.json   # reuse a calibration
    python benchmarks/simulate_accuracy.py --calibration cal.json --points 7   # the lanes point
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from simulate_errors import print_tally, run_point
from ttft.engines.control import ServerTokenizer
from ttft.simulate.calibrate import run_calibration
from ttft.simulate.gateway_sim import Lanes
from ttft.simulate.model import Calibration
from ttft.simulate.targets import engine
from ttft.simulate.whatif import Config
from ttft.simulate.workloads import WorkloadSource
from ttft.workload.trace import TraceSpec


@dataclass(frozen=True)
class Point:
    label: str
    config: Config
    source: WorkloadSource


def mooncake_trace(path: Path, n: int, rate: float) -> Path:
    """A small Mooncake-format trace: 3 system prompts of 2 blocks, a unique block each."""
    import random

    rng = random.Random(5)
    t = 0.0
    lines = []
    for i in range(n):
        group = rng.randrange(3)
        tail = 40 + rng.randrange(120)
        ids = [100 * group, 100 * group + 1, 1000 + i]
        lines.append(
            {
                "timestamp": round(t * 1000),
                "input_length": 256 * 2 + tail,
                "output_length": 4,
                "hash_ids": ids,
            }
        )
        t += rng.expovariate(rate)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def mixed_trace(path: Path, n: int, rate: float) -> Path:
    """A Mooncake-format trace of unique prompts, one in three long: 832 tokens (13 blocks of
    64) against 96 (a block and a half), 4 output tokens, Poisson arrivals at ``rate``."""
    import random

    rng = random.Random(11)
    t = 0.0
    lines = []
    for i in range(n):
        tokens = 832 if i % 3 == 0 else 96
        ids = [1000 * i + k for k in range(-(-tokens // 64))]
        lines.append(
            {
                "timestamp": round(t * 1000),
                "input_length": tokens,
                "output_length": 4,
                "hash_ids": ids,
            }
        )
        t += rng.expovariate(rate)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def solo_s(cal: Calibration, prompt: int, output: int) -> float:
    """One request alone on the engine, by the calibrated model: the unit of load below."""
    c = cal.cost
    prefill = c.step_s(prompt, 0, prompt * prompt / 2000)
    return c.overhead_s + prefill + (output - 1) * c.step_s(0, 1, prompt / 1000)


def points(cal: Calibration, requests: int, tmp: Path) -> list[Point]:
    """Rates are set as a load (0..1) of one request at a time, so the points mean the same on
    a fast machine and on a busy one."""

    def rate(load: float, prompt: int, output: int) -> float:
        return round(load / solo_s(cal, prompt, output), 3)

    def synthetic(load: float, prompt: int, output: int, shared: int = 0, groups: int = 1):  # type: ignore[no-untyped-def]
        return WorkloadSource(
            None, rate(load, prompt, output), requests, prompt, output, shared, groups
        )

    trace = mooncake_trace(tmp / "mooncake.jsonl", requests, rate(0.7, 600, 4))
    # a third of the prompts long (832 tokens), the rest short (96): the mean solo time. Two
    # slots on one pinned thread share its compute, so a load of 1 is the engine's capacity:
    # at 1.1 the queue grew for the whole run (waits ran into the gateway's 30 s timeout), and
    # at 0.8 a neighbour slowing the core by a quarter took it to capacity (measured TTFT 2.5
    # to 3.5x the prediction in three runs on a machine at load 2 to 5)
    mixed_solo = (solo_s(cal, 832, 4) + 2 * solo_s(cal, 96, 4)) / 3
    mixed = mixed_trace(tmp / "mixed.jsonl", requests, round(0.5 / mixed_solo, 3))
    # the second-group prompts share a prefix longer than the gateway's key (8 x 64 tokens)
    return [
        Point("slots=2 load 0.6 prompt=200 out=6", Config(slots=2), synthetic(0.6, 200, 6)),
        Point("slots=4 load 0.9 prompt=150 out=8", Config(slots=4), synthetic(0.9, 150, 8)),
        Point("slots=1 load 0.5 prompt=200 out=4", Config(slots=1), synthetic(0.5, 200, 4)),
        Point(
            "slots=4 load 1.2 prefix 384 of 448, 2 groups, out=4",
            Config(slots=4),
            synthetic(1.2, 448, 4, 384, 2),
        ),
        Point(
            "slots=3 mooncake trace (2 shared blocks of 256) load 0.7 out=4",
            Config(slots=3),
            WorkloadSource(TraceSpec(trace, "mooncake", block_size=256)),
        ),
        Point(
            "2 replicas least-loaded behind ttft gateway, slots=2, load 1.4 prompt=200 out=4",
            Config(replicas=2, policy="least-loaded", slots=2, max_in_flight=2),
            synthetic(1.4, 200, 4),
        ),
        Point(
            "2 replicas prefix-affinity behind ttft gateway, slots=2, prefix 640 of 700, "
            "4 groups, load 0.5 (uncached) out=4",
            Config(replicas=2, policy="prefix-affinity", slots=2, max_in_flight=2),
            synthetic(0.5, 700, 4, 640, 4),
        ),
        Point(
            "slots=2 behind ttft gateway lanes (long > 400 tokens, reserve 1): 1 in 3 prompts "
            "832 tokens, the rest 96, load 0.5 out=4",
            Config(slots=2, max_in_flight=2, lanes=Lanes(long_prompt_tokens=400, long_reserve=1)),
            WorkloadSource(TraceSpec(mixed, "mooncake", block_size=64)),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calibration", type=Path, default=None)
    parser.add_argument("--cal-slots", type=int, default=4)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="engine threads, pinned (each replica of a 2-replica point gets cores of its own)",
    )
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--points", default="all", help="all, or indexes like 0,5,6")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    started = time.time()
    if args.calibration is not None and args.calibration.exists():
        cal = Calibration.load(args.calibration)
    else:
        with engine(None, slots=args.cal_slots, threads=args.threads) as live:
            cal, _ = run_calibration(
                live.target,
                ServerTokenizer(live.target),
                live.settings,
                progress=lambda m: print("  calibrate:", m),
            )
            cal.source["embedded"] = True
            cal.source["threads"] = args.threads
        if args.calibration is not None:
            cal.save(args.calibration)
    c = cal.cost
    print(
        f"calibration: prefill {c.prefill_token_s * 1e3:.2f} ms/token, decode "
        f"{c.decode_seq_s * 1e3:.1f} ms/seq, step {c.step_base_s * 1e3:.1f} ms, overhead "
        f"{c.overhead_s * 1e3:.0f} ms, fit R^2 {cal.fit.r2:.3f}, residual p50 "
        f"{cal.fit.rel_residual_p50:.1%}, threads {cal.source.get('threads')}"
    )
    errors: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen = points(cal, args.requests, Path(tmp))
        if args.points != "all":
            chosen = [chosen[int(i)] for i in args.points.split(",")]
        for point in chosen:
            config = replace(point.config, label=point.label)
            run_point(cal, point.source, config, None, args.runs, errors)
    print()
    print_tally(errors)
    print(
        "bar (issue 29): p50 within 10%, p95 within 15%. 'same arrivals' is the model's error "
        "(the simulation of exactly the sent arrivals); the plain error adds the sampling "
        f"spread of {args.requests} Poisson arrivals against the replications' mean."
    )
    print(f"load average {os.getloadavg()[0]:.1f}, {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
