"""--duration and --ramp syntax: levels, stage lengths, and clear errors on bad input."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.ramp import count_within, parse_duration, parse_ramp


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60", 60.0), ("60s", 60.0), ("1.5m", 90.0), ("500ms", 0.5), ("1h", 3600.0)],
)
def test_durations_read_with_their_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "10x", "-5s", "0s"])
def test_a_bad_duration_is_a_clear_error(text: str) -> None:
    with pytest.raises(TtftError) as info:
        parse_duration(text)
    assert "--duration" in str(info.value)


def test_a_concurrency_ramp_steps_from_low_to_high() -> None:
    ramp = parse_ramp("concurrency=1..8:step=1,stage=20s")
    assert ramp.levels == (1, 2, 3, 4, 5, 6, 7, 8) and ramp.stage_s == 20.0
    assert ramp.arrivals() == [ClosedLoop(c) for c in range(1, 9)]
    assert parse_ramp("concurrency=2..8:step=3").levels == (2, 5, 8)
    assert parse_ramp("concurrency=1..4").levels == (1, 2, 3, 4)  # step 1 by default


def test_a_rate_ramp_in_stages_is_evenly_spaced_with_both_ends() -> None:
    ramp = parse_ramp("rate=1..10:stages=5,stage=30s")
    assert ramp.levels == (1.0, 3.25, 5.5, 7.75, 10.0)
    arrivals = ramp.arrivals(burstiness=0.5)
    assert all(isinstance(a, OpenLoop) and a.distribution == "gamma" for a in arrivals)
    assert parse_ramp("rate=2..6:step=2").stage_s is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("load=1..8", "concurrency= or rate="),
        ("rate=1-8:step=1", "FROM..TO"),
        ("rate=8..1:step=1", "goes up"),
        ("rate=0..4:step=1", "goes up"),
        ("rate=1..8", "needs step= or stages="),
        ("rate=1..8:step=1,stages=3", "not both"),
        ("rate=1..8:steps=2", "unknown option"),
        ("rate=1..8:stages=1", "at least 2"),
        ("concurrency=1.5..4", "whole numbers"),
        ("rate=1..x:step=1", "TO"),
        ("rate=1..8:step=1,stage=soon", "not a duration"),
        ("rate=1..1000:step=1", "at most"),
    ],
)
def test_bad_ramps_are_clear_errors_with_an_example(text: str, words: str) -> None:
    with pytest.raises(TtftError) as info:
        parse_ramp(text)
    assert words in str(info.value)


def test_arrivals_within_a_duration_are_counted_from_the_schedule_itself() -> None:
    assert count_within(OpenLoop(10.0, distribution="constant"), 2.0) == 20
    poisson = OpenLoop(5.0, seed=3)
    n = count_within(poisson, 30.0)
    offsets = poisson.schedule_ns(n + 1)
    assert offsets[n - 1] < 30e9 <= offsets[n]
