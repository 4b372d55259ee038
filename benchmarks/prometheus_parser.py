"""Prometheus text parsing: ttft's own parser against prometheus_client's, in the same run.

ttft keeps its own parser (``ttft.engines.prometheus.parse_exposition``) although
``prometheus_client`` (already a dependency, for the gateway's /metrics) ships the reference
one. This measures why: the doctor and bench scrape /metrics every 250 ms during a cell (the
gauge peaks) on the machine that is also sending the load, so parse time is client time taken
from the measurement. Both parse the same real expositions (``tests/data/metrics/*.prom``:
vLLM, SGLang and DCGM scrapes, idle to concurrency 32), and both must agree on every sample
value first, or the timing means nothing.

Prints, per file, the median time of each parser over the repetitions and the ratio.

    python benchmarks/prometheus_parser.py
    python benchmarks/prometheus_parser.py --reps 50
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ttft.engines.prometheus import parse_exposition

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "metrics"


def ours(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return [(s.name, s.labels, s.value) for s in parse_exposition(text).samples]


def reference(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return [
        (s.name, tuple(s.labels.items()), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _same(a: float, b: float) -> bool:
    # The reference parser keeps an integer as an int (DCGM's 2**63 - 14 "blank" value); a
    # delta is taken in floats either way.
    b = float(b)
    return a == b or (math.isnan(a) and math.isnan(b))


def agree(text: str) -> None:
    """Every sample the reference parser reads, ours reads with the same value."""
    mine = {(name, labels): value for name, labels, value in ours(text)}
    for name, labels, value in reference(text):
        # The reference parser adds a _created sample some servers leave implicit; ours keeps
        # what the text says, which is what a delta needs.
        if (name, labels) in mine and not _same(mine[(name, labels)], value):
            raise SystemExit(f"disagree on {name}{dict(labels)}: {mine[(name, labels)]} {value}")


def median_s(parse: Callable[[str], object], text: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        parse(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    print(f"{'file':32} {'lines':>6} {'ttft ms':>9} {'reference ms':>13} {'ratio':>6}")
    ratios = []
    for path in sorted(DATA.glob("*.prom")):
        text = path.read_text()
        agree(text)
        mine = median_s(ours, text, args.reps)
        theirs = median_s(reference, text, args.reps)
        ratios.append(theirs / mine)
        lines = text.count("\n")
        times = f"{mine * 1e3:9.3f} {theirs * 1e3:13.3f}"
        print(f"{path.name:32} {lines:6d} {times} {theirs / mine:5.1f}x")
    print(f"median ratio: the reference parser takes {statistics.median(ratios):.1f}x ttft's time")


if __name__ == "__main__":
    main()
