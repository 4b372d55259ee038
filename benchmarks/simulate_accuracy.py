"""How far to trust ``ttft simulate``: predicted against measured TTFT on the embedded engine.

One calibration (the embedded llama-server at ``--cal-slots`` slots), then points the
calibration did not use: other slot counts, rates, prompt lengths and prefix sharing, and a
Mooncake-style trace with shared hash blocks. Each point is simulated (replication 0's arrivals)
and then sent to a fresh embedded engine with those settings through ttft's load runner, with
the same arrivals. Printed per point: predicted p50/p95 (with the interval) against measured
(with its bootstrap interval) and the relative error; at the end the mean absolute error and the
machine's load average, since neighbours on a shared machine move every measured number.

The issue's bar: p50 within 10%, p95 within 15%.

    python benchmarks/simulate_accuracy.py                # ~6 minutes on 2 cores
    python benchmarks/simulate_accuracy.py --points 2 --requests 30
    python benchmarks/simulate_accuracy.py --calibration cal.json   # reuse a calibration
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ttft.engines.control import ServerTokenizer
from ttft.simulate.calibrate import run_calibration
from ttft.simulate.model import Calibration
from ttft.simulate.targets import engine
from ttft.simulate.validate import compare, measure, speed_now
from ttft.simulate.whatif import Config, predict
from ttft.simulate.workloads import WorkloadSource
from ttft.workload.trace import TraceSpec


@dataclass(frozen=True)
class Point:
    label: str
    slots: int
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

    trace = mooncake_trace(tmp / "mooncake.jsonl", requests, rate(0.7, 600, 4))
    return [
        Point(
            "slots=2 load 0.6 prompt=300 out=6",
            2,
            WorkloadSource(None, rate(0.6, 300, 6), requests, 300, 6),
        ),
        Point(
            "slots=4 load 0.9 prompt=200 out=8",
            4,
            WorkloadSource(None, rate(0.9, 200, 8), requests, 200, 8),
        ),
        Point(
            "slots=1 load 0.5 prompt=250 out=4",
            1,
            WorkloadSource(None, rate(0.5, 250, 4), requests, 250, 4),
        ),
        Point(
            "slots=4 load 1.2 prefix 384 of 448, 2 groups, out=4",
            4,
            WorkloadSource(None, rate(1.2, 448, 4), requests, 448, 4, 384, 2),
        ),
        Point(
            "slots=3 mooncake trace (2 shared blocks of 256) load 0.7 out=4",
            3,
            WorkloadSource(TraceSpec(trace, "mooncake", block_size=256)),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calibration", type=Path, default=None)
    parser.add_argument("--cal-slots", type=int, default=4)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--points", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    started = time.time()
    if args.calibration is not None and args.calibration.exists():
        cal = Calibration.load(args.calibration)
    else:
        with engine(None, slots=args.cal_slots) as live:
            cal, _ = run_calibration(
                live.target,
                ServerTokenizer(live.target),
                live.settings,
                progress=lambda m: print("  calibrate:", m),
            )
            cal.source["embedded"] = True
        if args.calibration is not None:
            cal.save(args.calibration)
    c = cal.cost
    print(
        f"calibration: prefill {c.prefill_token_s * 1e3:.2f} ms/token, decode "
        f"{c.decode_seq_s * 1e3:.1f} ms/seq, step {c.step_base_s * 1e3:.1f} ms, overhead "
        f"{c.overhead_s * 1e3:.0f} ms, fit R^2 {cal.fit.r2:.3f}, residual p50 "
        f"{cal.fit.rel_residual_p50:.1%}"
    )
    errors: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for point in points(cal, args.requests, Path(tmp))[: args.points]:
            source = point.source

            def workload(seed: int, source: WorkloadSource = source) -> list:  # type: ignore[type-arg]
                return source.requests(0 if source.trace is not None else seed)

            config = Config(slots=point.slots)
            prediction = predict(cal, workload, config, runs=args.runs)
            with engine(None, slots=point.slots) as live:
                tokenizer = ServerTokenizer(live.target)
                items, arrival = source.real(workload(0), tokenizer)
                speed = speed_now(live.target, tokenizer, cal.cost)
                records = measure(live.target, items, arrival)
            results = [("as calibrated", compare(point.label, prediction, records))]
            if speed is not None:
                moved = replace(cal, cost=cal.cost.scaled(speed))
                again = predict(moved, workload, config, runs=args.runs)
                results.append(
                    (f"at today's speed x{speed:.2f}", compare(point.label, again, records))
                )
            print(
                f"{point.label}: {results[0][1].measured_ok} ok, "
                f"{results[0][1].measured_failed} failed"
            )
            for label, result in results:
                print(f"  {label}")
                for cmp in result.comparisons:
                    if cmp.quantile in (50.0, 95.0):
                        key = f"{label.split(' x')[0]} p{cmp.quantile:g}"
                        errors.setdefault(key, []).append(abs(cmp.error))
                        if cmp.same_arrivals_error is not None:
                            same = errors.setdefault(key + " (same arrivals)", [])
                            same.append(abs(cmp.same_arrivals_error))
                    print(
                        f"    p{cmp.quantile:g}: predicted {cmp.predicted_s * 1e3:7.0f} ms "
                        f"[{cmp.predicted_interval.low * 1e3:.0f}-"
                        f"{cmp.predicted_interval.high * 1e3:.0f}]  measured "
                        f"{cmp.measured_s * 1e3:7.0f} ms [{cmp.measured_interval.low * 1e3:.0f}-"
                        f"{cmp.measured_interval.high * 1e3:.0f}]  error {cmp.error:+.1%}"
                        + (
                            ""
                            if cmp.same_arrivals_s is None or cmp.same_arrivals_error is None
                            else f"  same arrivals {cmp.same_arrivals_s * 1e3:.0f} ms "
                            f"({cmp.same_arrivals_error:+.1%})"
                        )
                    )
            sys.stdout.flush()
    for key, errs in errors.items():
        print(
            f"mean |error| {key}: {statistics.fmean(errs):.1%} over {len(errs)} points "
            f"(max {max(errs):.1%})"
        )
    print(f"load average {os.getloadavg()[0]:.1f}, {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
