from __future__ import annotations

from ttft.tune.search import search_load
from ttft.tune.trial import LevelResult


def level(c: int, goodput: float, passed: bool) -> LevelResult:
    return LevelResult(c, 10, 10, 100.0, 200.0, 300.0, None, None, goodput, 1.0, passed)


def model(limit: int, per_slot: float = 1.0, slots: int = 64) -> tuple[list[int], object]:
    seen: list[int] = []

    def measure(c: int) -> LevelResult:
        seen.append(c)
        return level(c, per_slot * min(c, slots), c <= limit)

    return seen, measure


def test_doubling_then_bisection_finds_the_highest_passing_load() -> None:
    seen, measure = model(limit=11)
    outcome = search_load(measure, start=1, max_load=64)  # type: ignore[arg-type]
    assert seen == [1, 2, 4, 8, 16, 12, 10, 11]
    assert outcome.best is not None and outcome.best.concurrency == 11
    assert not outcome.saturated


def test_a_first_level_that_fails_gives_no_best() -> None:
    seen, measure = model(limit=0)
    outcome = search_load(measure)  # type: ignore[arg-type]
    assert seen == [1] and outcome.best is None


def test_saturation_stops_the_doubling_early() -> None:
    seen, measure = model(limit=64, slots=4)  # goodput stops growing after 4 in flight
    outcome = search_load(measure, max_load=64)  # type: ignore[arg-type]
    assert seen == [1, 2, 4, 8]
    assert outcome.saturated
    assert outcome.best is not None and outcome.best.concurrency == 4


def test_the_search_stops_at_max_load() -> None:
    seen, measure = model(limit=1000)
    outcome = search_load(measure, max_load=6)  # type: ignore[arg-type]
    assert seen == [1, 2, 4, 6]
    assert outcome.best is not None and outcome.best.concurrency == 6
