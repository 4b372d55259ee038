"""``tune sweep --predict`` against the full sweep on the embedded engine: same best
configuration, with how many real trials?

1. ``ttft simulate calibrate`` on the embedded engine (skipped with ``--calibration FILE``).
2. ``ttft tune sweep`` over the whole grid (every configuration a real trial).
3. ``ttft tune sweep --predict CAL --measure-top K`` over the same grid.

Both sweeps go through the CLI exactly as a user runs them (``python -m ttft``), each in its own
experiment directory, and are compared from their ``summary.json``: the chosen configuration,
the real trials each ran and their wall time, and the simulator's predicted order next to the
full sweep's measured one. On a shared machine two measurements of the same grid can choose
differently too; read a mismatch together with the goodputs printed.

    python benchmarks/tune_predict.py                          # -np 1,2,4,8, K = half
    python benchmarks/tune_predict.py --calibration cal.json --param -np=1,2,4 --measure-top 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def ttft(*args: str) -> float:
    """Run ``python -m ttft ARGS`` (its output passes through); its wall time."""
    started = time.monotonic()
    print("$ ttft " + " ".join(args), flush=True)
    done = subprocess.run([sys.executable, "-m", "ttft", *args], check=False)
    if done.returncode not in (0, 1):  # 1: no configuration held the SLOs
        sys.exit(f"ttft {args[0]} {args[1]} failed with exit code {done.returncode}")
    return time.monotonic() - started


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return data


def chosen_label(data: dict[str, Any]) -> str:
    choice = data.get("chosen")
    if not choice:
        return "(none held the SLOs)"
    return " ".join(f"{k} {v}" for k, v in choice["config"].items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/tune-predict"))
    parser.add_argument("--calibration", type=Path, default=None)
    parser.add_argument("--param", action="append", default=None, help="default: -np=1,2,4,8")
    parser.add_argument("--slo", default="ttft:p99<2s")
    parser.add_argument("--measure-top", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="llama-server -t of trials")
    parser.add_argument("--max-load", type=int, default=8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%H%M%S")
    cal = args.calibration
    if cal is None:
        cal = args.out / f"cal-{stamp}.json"
        seconds = ttft("simulate", "calibrate", "--out", str(cal))
        print(f"calibration took {seconds:.0f} s\n", flush=True)
    common = [f"--param={p}" for p in (args.param or ["-np=1,2,4,8"])]
    common += ["--slo", args.slo]
    if args.threads is not None:  # the calibration's engine runs with llama-server's default
        common += ["--threads", str(args.threads)]
    common += ["--max-load", str(args.max_load)]
    full_out, predicted_out = args.out / f"full-{stamp}", args.out / f"predicted-{stamp}"
    full_s = ttft("tune", "sweep", *common, "--out", str(full_out))
    extra = ["--predict", str(cal)]
    if args.measure_top is not None:
        extra += ["--measure-top", str(args.measure_top)]
    predicted_s = ttft("tune", "sweep", *common, *extra, "--out", str(predicted_out))

    full, predicted = summary(full_out), summary(predicted_out)
    print("\n== full grid against --predict ==")
    print(f"full sweep:      {full['cost']['trials']} real trials, {full_s:.0f} s wall")
    print(f"predicted sweep: {predicted['cost']['trials']} real trials, {predicted_s:.0f} s wall")
    print(f"full sweep chose:      {chosen_label(full)}")
    print(f"predicted sweep chose: {chosen_label(predicted)}")
    same = chosen_label(full) == chosen_label(predicted)
    print(f"best configuration matches: {'yes' if same else 'no'}")
    print("measured order (full sweep): " + ", ".join(
        f"{row['config']} ({row['goodput_per_s'] or '-'}/s)" for row in full["table"]
    ))  # fmt: skip
    print("predicted order:             " + ", ".join(predicted["predict"]["predicted_order"]))
    print("predicted sweep table: " + ", ".join(
        f"{row['config']} {row['source']} ({row['goodput_per_s'] or '-'}/s)"
        for row in predicted["table"]
    ))  # fmt: skip


if __name__ == "__main__":
    main()
