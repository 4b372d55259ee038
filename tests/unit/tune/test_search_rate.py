"""The open-loop rate search, on fake measurements: doubling, bisection to a relative
tolerance, the two saturation stops (no more goodput, the client behind its schedule)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ttft.core.errors import TtftError
from ttft.tune.search import search_rate
from ttft.tune.trial import LevelResult


def level(rate: float, goodput: float, passed: bool, lag_ms: float = 0.5) -> LevelResult:
    return LevelResult(
        1, 10, 10, 100.0, 200.0, 300.0, None, None, goodput, 1.0, passed,
        rate=rate, client_lag_p50_ms=lag_ms, client_lag_p99_ms=2 * lag_ms,
    )  # fmt: skip


def model(
    limit: float, capacity: float = 1000.0, lag_above: float = 1e9
) -> tuple[list[float], Callable[[float], LevelResult]]:
    """Holds the SLO up to ``limit`` req/s, serves at most ``capacity``, and the client falls
    behind its schedule above ``lag_above``."""
    seen: list[float] = []

    def measure(rate: float) -> LevelResult:
        seen.append(rate)
        lag = 30.0 if rate > lag_above else 0.5
        return level(rate, min(rate, capacity), rate <= limit, lag)

    return seen, measure


def test_doubling_then_bisection_to_the_relative_tolerance() -> None:
    seen, measure = model(limit=5.2)
    outcome = search_rate(measure, start=0.5, max_rate=16, tolerance=0.1)
    # 8 breaks; bisection 4..8: 6 bad, 5 good, 5.5 bad; 5.5 is within 10% of 5: stop.
    assert seen == [0.5, 1, 2, 4, 8, 6, 5, 5.5]
    assert outcome.best is not None and outcome.best.rate == 5
    assert not outcome.saturated


@pytest.mark.parametrize("limit", [0.7, 1.3, 2.9, 3.1, 7.77, 11.0, 15.9])
@pytest.mark.parametrize("tolerance", [0.05, 0.1, 0.25])
def test_the_best_rate_is_within_tolerance_of_the_limit(limit: float, tolerance: float) -> None:
    seen, measure = model(limit=limit)
    outcome = search_rate(measure, start=0.5, max_rate=16, tolerance=tolerance)
    assert outcome.best is not None and outcome.best.rate is not None
    best = outcome.best.rate
    assert best <= limit
    failing = min(r for r in seen if r > limit)
    # Stopped once the failing rate was within the tolerance (or no 3-digit rate fits between).
    assert failing - best <= tolerance * best or float(f"{(best + failing) / 2:.3g}") in (
        best,
        failing,
    )
    assert len(seen) == len(set(seen))  # no rate measured twice


def test_a_first_rate_that_fails_gives_no_best() -> None:
    seen, measure = model(limit=0.1)
    outcome = search_rate(measure, start=0.5)
    assert seen == [0.5] and outcome.best is None and not outcome.saturated


def test_goodput_that_stops_growing_stops_the_doubling() -> None:
    seen, measure = model(limit=100, capacity=3.0)  # loose SLO, server full at 3/s
    outcome = search_rate(measure, start=0.5, max_rate=64)
    assert seen == [0.5, 1, 2, 4, 8]  # 4 -> 8 gained nothing
    assert outcome.saturated
    assert outcome.best is not None and outcome.best.rate == 4


def test_a_client_behind_its_schedule_stops_the_doubling_and_bisects_below() -> None:
    seen, measure = model(limit=100, lag_above=3.3)
    outcome = search_rate(measure, start=0.5, max_rate=16, tolerance=0.1)
    # 4 was not sent on time: bisect 2..4: 3 good, 3.5 behind, 3.25 good; within 10%.
    assert seen == [0.5, 1, 2, 4, 3, 3.5, 3.25]
    assert outcome.saturated
    assert outcome.best is not None and outcome.best.rate == 3.25


def test_a_client_behind_at_the_first_rate_holds_nothing() -> None:
    seen, measure = model(limit=100, lag_above=0.1)
    outcome = search_rate(measure, start=0.5)
    assert seen == [0.5] and outcome.best is None and outcome.saturated


def test_the_search_stops_at_max_rate() -> None:
    seen, measure = model(limit=1000)
    outcome = search_rate(measure, start=1, max_rate=6)
    assert seen == [1, 2, 4, 6]
    assert outcome.best is not None and outcome.best.rate == 6


def test_rates_out_of_order_are_refused() -> None:
    _, measure = model(limit=1)
    with pytest.raises(TtftError):
        search_rate(measure, start=4, max_rate=2)
    with pytest.raises(TtftError):
        search_rate(measure, start=0, max_rate=2)
    with pytest.raises(TtftError):
        search_rate(measure, tolerance=0)


def test_a_late_send_or_two_is_not_a_client_behind() -> None:
    """The p99 lag of a level can be one hiccup; the search judges the median."""
    seen: list[float] = []

    def measure(rate: float) -> LevelResult:
        seen.append(rate)
        lv = level(rate, rate, rate <= 3, lag_ms=1.0)
        return LevelResult(**{**lv.to_dict(), "client_lag_p99_ms": 90.0})

    outcome = search_rate(measure, start=1, max_rate=4, tolerance=0.5)
    assert seen == [1, 2, 4, 3] and not outcome.saturated
    assert outcome.best is not None and outcome.best.rate == 3
