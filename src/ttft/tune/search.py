"""The highest load a configuration serves within its SLOs: doubling, then bisection.

Load is the number of requests kept in flight (closed loop). Doubling from ``start`` finds the
first level that breaks an SLO; bisection between the last good and the first bad level narrows
it down to one. The search stops early at saturation: when doubling the load gained less than
``min_gain`` goodput, the server is already full and more load only adds queueing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttft.tune.trial import LevelResult

Measure = Callable[[int], LevelResult]


@dataclass
class SearchOutcome:
    levels: list[LevelResult]  # in the order measured
    best: LevelResult | None  # the passing level with the most goodput
    saturated: bool


def search_load(
    measure: Measure, *, start: int = 1, max_load: int = 64, min_gain: float = 0.05
) -> SearchOutcome:
    levels: list[LevelResult] = []

    def run(load: int) -> LevelResult:
        level = measure(load)
        levels.append(level)
        return level

    first = run(start)
    if not first.slo_passed:
        return SearchOutcome(levels, None, saturated=False)
    good, bad = first, None
    saturated = False
    while good.concurrency < max_load:
        level = run(min(good.concurrency * 2, max_load))
        if not level.slo_passed:
            bad = level
            break
        if level.goodput_per_s < good.goodput_per_s * (1.0 + min_gain):
            saturated = True
            good = max(good, level, key=lambda lv: lv.goodput_per_s)
            break
        good = level
    if bad is not None:
        low, high = good.concurrency, bad.concurrency
        while high - low > 1:
            mid = (low + high) // 2
            if run(mid).slo_passed:
                low = mid
            else:
                high = mid
    passing = [lv for lv in levels if lv.slo_passed]
    best = max(passing, key=lambda lv: (lv.goodput_per_s, -lv.concurrency))
    return SearchOutcome(levels, best, saturated)
