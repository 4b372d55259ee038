"""``ttft tune`` on the embedded engine, fuller than the e2e test: the article's tuning story.

1. Sweep ``-np {1,2,4} x -ub {128,512}`` on a shared-prefix workload under ``ttft:p99<SLO``:
   per configuration the highest concurrency that holds the SLO (doubling, then bisection),
   ranked by goodput, with the Pareto column and the chosen launch command.
2. A/B chain at concurrency 4: baseline (a timestamp first in a ~600-token system prompt, -np 1)
   -> +timestamp moved last -> +-np 4, each change also alone, interleaved repeats; the
   attribution table with bootstrap CIs and the note on non-additive gains.

Every trial lands in ``--out`` (default results/tune-embedded); run again with ``--resume`` to
finish a killed run. Takes several minutes on 2 cores.

    python benchmarks/tune_embedded.py [--out DIR] [--resume] [--slo-ms 1500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from ttft.core.changes import Change
from ttft.core.slo import parse_slos
from ttft.tune.attribution import overlap_note, total_cut
from ttft.tune.chain import run_chain
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import LlamaCppRunner
from ttft.tune.space import configurations, parse_space
from ttft.tune.sweep import SearchSettings, chosen, run_sweep
from ttft.tune.tables import AB_COLUMNS, SWEEP_COLUMNS, ab_rows, sweep_rows, to_markdown
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TuneWorkload


def overhead(name: str, results: list[TrialResult]) -> str:
    """Each trial's cost beyond its measured requests: engine start to healthy, and warm-up."""
    starts = sorted(r.startup_s for r in results if r.startup_s is not None)
    warms = sorted(lv.warmup_s for r in results for lv in r.levels if lv.warmup_s is not None)
    if not starts:
        return f"{name} overhead: not recorded"
    text = f"{name} overhead per trial: start to healthy {starts[0]:.2f}-{starts[-1]:.2f} s"
    text += f" (median {starts[len(starts) // 2]:.2f})"
    if warms:
        text += f"; warm-up per level {warms[0]:.2f}-{warms[-1]:.2f} s"
        text += f" (median {warms[len(warms) // 2]:.2f})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/tune-embedded"))
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--slo-ms", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args()
    runner = LlamaCppRunner(per_slot_ctx=1024, threads=args.threads)

    started = time.monotonic()
    slos = parse_slos(f"ttft:p99<{args.slo_ms}ms")
    sweep_workload = TuneWorkload(prefix_words=300, suffix_words=12, max_tokens=16, requests=12)
    search = SearchSettings(max_load=8)
    space = parse_space(["-np=1,2,4", "-ub=128,512"])
    spec = {"kind": "sweep", "space": {k: list(v) for k, v in space.items()},
            "slos": [s.text for s in slos], "workload": sweep_workload.describe()}  # fmt: skip
    exp = ExperimentDir.open(args.out / "sweep", spec, resume=args.resume)
    results = run_sweep(
        configurations(space),
        runner,
        exp,
        sweep_workload,
        slos,
        search,
        on_trial=lambda n, total, config, result, resumed: print(
            f"  trial {n + 1}/{total} {dict(config)}: "
            + ("starting" if result is None else "resumed" if resumed else result.status),
            flush=True,
        ),
    )
    print(to_markdown(f"sweep under {slos[0].text}", SWEEP_COLUMNS, sweep_rows(results)))
    best = chosen(results)
    if best is not None:
        print("chosen launch command:", shlex.join(best.launch_command))
    print(overhead("sweep", results))
    print(f"sweep took {time.monotonic() - started:.0f} s\n", flush=True)

    started = time.monotonic()
    baseline = Change("timestamp first, -np 1", {"-np": "1"})
    changes = [
        Change("timestamp moved last", transforms=("move-dynamic",)),
        Change("-np 4", {"-np": "4"}),
    ]
    ab_workload = TuneWorkload(
        shape="timestamp-first", prefix_words=460, suffix_words=8, max_tokens=48, requests=8
    )
    spec = {"kind": "ab", "workload": ab_workload.describe(), "repeats": args.repeats}
    exp = ExperimentDir.open(args.out / "ab", spec, resume=args.resume)
    chain = run_chain(
        baseline,
        changes,
        runner,
        exp,
        ab_workload,
        (),
        concurrency=4,
        repeats=args.repeats,
        on_run=lambda n, total, arm, repeat, result: print(
            f"  run {n + 1}/{total} {arm.name} ({arm.label}) #{repeat + 1}"
            + ("" if result is None else f": {result.status}"),
            flush=True,
        ),
    )
    rows = chain.rows
    print(to_markdown("A/B chain at concurrency 4 (ms)", AB_COLUMNS, ab_rows(rows)))
    print(overlap_note(rows) or "")
    total = total_cut(rows)
    print(total.text() if total else "no total: a step was not measured")
    print(overhead("A/B", [r for runs in chain.by_arm.values() for r in runs]))
    print(f"A/B took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
