"""The highest load a configuration serves within its SLOs: doubling, then bisection.

``search_load``: load is the number of requests kept in flight (closed loop). Doubling from
``start`` finds the first level that breaks an SLO; bisection between the last good and the
first bad level narrows it down to one. The search stops early at saturation: when doubling the
load gained less than ``min_gain`` goodput, the server is already full and more load only adds
queueing.

``search_rate``: load is an open-loop arrival rate (requests/s). The same doubling, then
bisection until the bad rate is within ``tolerance`` (relative) of the good one. Saturation stops
it early too: doubling the rate gained less than ``min_gain`` goodput, or the client fell behind
its own schedule (the median scheduled -> sent above ``max_lag_ms``: half the requests left late,
so the rate asked for was not the rate sent; that level proves nothing and counts as not held).
The median, not the p99: a shared machine's scheduler delays a few sends by tens of ms without
changing the rate offered, and with a few dozen requests the p99 is one such hiccup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttft.core.errors import TtftError
from ttft.tune.trial import LevelResult

Measure = Callable[[int], LevelResult]
RateMeasure = Callable[[float], LevelResult]


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


def _lagged(level: LevelResult, max_lag_ms: float) -> bool:
    lag = level.client_lag_p50_ms
    return lag is not None and lag > max_lag_ms


def _between(low: float, high: float) -> float | None:
    """The midpoint rounded to 3 significant digits (readable labels), if strictly inside."""
    mid = float(f"{(low + high) / 2:.3g}")
    return mid if low < mid < high else None


def search_rate(
    measure: RateMeasure,
    *,
    start: float = 0.5,
    max_rate: float = 16.0,
    tolerance: float = 0.1,
    min_gain: float = 0.05,
    max_lag_ms: float = 10.0,
) -> SearchOutcome:
    """The highest arrival rate whose level holds the SLOs (and the client kept its schedule).

    ``best`` is the highest such rate found, except that at a goodput saturation the level with
    more goodput of the last two is kept, as ``search_load`` does."""
    if start <= 0 or max_rate < start:
        raise TtftError(f"rates must satisfy 0 < start <= max_rate, not {start}, {max_rate}")
    if tolerance <= 0:
        raise TtftError(f"tolerance must be above 0, not {tolerance}")
    levels: list[LevelResult] = []

    def run(rate: float) -> tuple[LevelResult, bool]:
        level = measure(rate)
        levels.append(level)
        return level, level.slo_passed and not _lagged(level, max_lag_ms)

    first, held = run(start)
    if not held:
        return SearchOutcome(levels, None, saturated=_lagged(first, max_lag_ms))
    good, good_rate = first, start
    bad_rate: float | None = None
    saturated = False
    while good_rate < max_rate:
        rate = min(good_rate * 2, max_rate)
        level, held = run(rate)
        if _lagged(level, max_lag_ms):
            saturated = True  # the client cannot send faster: bisect below this rate
            bad_rate = rate
            break
        if not held:
            bad_rate = rate
            break
        if level.goodput_per_s < good.goodput_per_s * (1.0 + min_gain):
            saturated = True
            if level.goodput_per_s > good.goodput_per_s:
                good, good_rate = level, rate
            break
        good, good_rate = level, rate
    if bad_rate is not None:
        low, high = good_rate, bad_rate
        while high - low > tolerance * low and (mid := _between(low, high)) is not None:
            level, held = run(mid)
            if held:
                good, low = level, mid
            else:
                saturated = saturated or _lagged(level, max_lag_ms)
                high = mid
    return SearchOutcome(levels, good, saturated)
