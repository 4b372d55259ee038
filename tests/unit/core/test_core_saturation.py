"""Saturation detection on synthetic wait series: flat, noisy flat, rising, rising-then-flat."""

from __future__ import annotations

import random

import pytest

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.saturation import (
    BASIS_OLDEST,
    WaitPoint,
    assess,
    assess_records,
    busy_capacity_per_s,
    kendall_z,
    points_from_records,
    theil_sen,
)

MS = 1_000_000
S = 1_000_000_000


def _series(waits_ms: list[float], rate: float = 4.0) -> list[WaitPoint]:
    """Arrivals at ``rate``/s; each finishes when its first token comes (max_tokens 1)."""
    points = []
    for i, wait in enumerate(waits_ms):
        scheduled = int(i * S / rate)
        points.append(WaitPoint(scheduled, int(wait * MS), scheduled + int(wait * MS)))
    return points


def test_theil_sen_finds_the_slope_despite_an_outlier() -> None:
    xs = [float(i) for i in range(20)]
    ys = [2.0 * x + 1.0 for x in xs]
    ys[7] = 500.0
    assert abs(theil_sen(xs, ys) - 2.0) < 1e-9


def test_kendall_z_is_large_for_a_monotone_series_and_near_zero_for_a_shuffled_one() -> None:
    xs = [float(i) for i in range(40)]
    assert kendall_z(xs, xs) > 5
    shuffled = xs[:]
    random.Random(3).shuffle(shuffled)
    assert abs(kendall_z(xs, shuffled)) < 2.5


def test_a_flat_wait_is_not_saturated() -> None:
    verdict = assess(_series([300.0] * 60))
    assert not verdict.saturated
    assert verdict.completions_per_s is not None and verdict.arrivals_per_s is not None


def test_a_noisy_flat_wait_is_not_saturated() -> None:
    rng = random.Random(1)
    verdict = assess(_series([300.0 * rng.lognormvariate(0, 0.5) for _ in range(80)]))
    assert not verdict.saturated, verdict.reason


def test_a_wait_that_keeps_rising_is_saturated_with_its_slope_and_queue_growth() -> None:
    """Arrivals at 4/s, service at 2/s: each request waits 250 ms longer than the last (1 s of
    wait per s of schedule), completions run at half the arrivals and the queue grows."""
    rng = random.Random(2)
    verdict = assess(_series([300.0 + 250.0 * i + rng.uniform(-40, 40) for i in range(60)]))
    assert verdict.saturated, verdict.reason
    assert verdict.slope is not None and 0.9 < verdict.slope < 1.1
    assert verdict.completions_per_s is not None and verdict.arrivals_per_s is not None
    assert verdict.completions_per_s < 0.9 * verdict.arrivals_per_s
    assert verdict.in_flight_end is not None and verdict.in_flight_start is not None
    assert verdict.in_flight_end > verdict.in_flight_start
    assert "rising" in verdict.reason


def test_a_wait_that_rises_then_settles_is_not_saturated() -> None:
    """A start-up transient (the first half climbs, the second is flat) is a queue that
    stopped growing, not saturation."""
    rng = random.Random(4)
    waits = [300.0 + 40.0 * i for i in range(30)] + [1500.0 + rng.uniform(-50, 50)] * 30
    assert not assess(_series(waits)).saturated


def test_a_tiny_but_steady_drift_is_not_saturation() -> None:
    """Statistically clear, but 1 ms over the window: not a queue growing without bound."""
    verdict = assess(_series([300.0 + 0.02 * i for i in range(60)]))
    assert verdict.z is not None and verdict.z > 3
    assert not verdict.saturated


def test_too_few_points_conclude_nothing() -> None:
    verdict = assess(_series([100.0, 900.0, 2000.0]))
    assert not verdict.saturated and "too few" in verdict.reason


def test_requests_cut_short_count_as_lower_bounds_and_other_failures_are_left_out() -> None:
    ok = RequestRecord(0, scheduled_ns=0, sent_ns=1, first_content_ns=5 * MS, done_ns=6 * MS)
    cancelled = RequestRecord(1, scheduled_ns=S, done_ns=3 * S)
    cancelled.error = ErrorInfo("cancelled", "stopped")
    refused = RequestRecord(2, scheduled_ns=S, done_ns=S + MS)
    refused.error = ErrorInfo("http_5xx", "busy", 503)
    waiting = RequestRecord(3, scheduled_ns=2 * S)
    points = points_from_records([ok, cancelled, refused, waiting], now_ns=4 * S)
    assert [(p.wait_ns, p.censored) for p in points] == [
        (5 * MS, False),
        (2 * S, True),
        (2 * S, True),
    ]


def test_repeats_are_judged_apart_so_their_schedules_never_mix() -> None:
    """Two flat runs whose clocks differ (run 2 later, higher base wait) must not read as a
    trend across the pooled records."""
    records = []
    for repeat, (start, wait) in enumerate(((0, 100 * MS), (100 * S, 900 * MS))):
        for i in range(30):
            t = start + i * S // 4
            r = RequestRecord(len(records), scheduled_ns=t, sent_ns=t, first_content_ns=t + wait)
            r.done_ns, r.repeat = t + wait, repeat
            records.append(r)
    assert not assess_records(records).saturated


def test_cancelled_requests_without_an_end_still_count_as_arrivals_not_completed() -> None:
    """A saturation stop cancels requests before they end (no done_ns): they are arrivals that
    never completed, which is the queue's growth; dropping them would hide it."""
    records = []
    for i in range(40):
        t = i * S // 10
        r = RequestRecord(i, scheduled_ns=t, sent_ns=t)
        if i < 20:
            r.first_content_ns = r.done_ns = t + (i + 1) * 200 * MS
        else:
            r.error = ErrorInfo("cancelled", "stopped")
        records.append(r)
    points = points_from_records(records)
    assert len(points) == 40 and sum(p.censored for p in points) == 20
    verdict = assess(points)
    assert verdict.arrivals_per_s is not None and verdict.arrivals_per_s > 9


def test_a_slow_server_with_few_answers_is_judged_by_its_oldest_unanswered_request() -> None:
    """20/s arrivals for 8 s, answers in batches of 4 every 2 s (2/s): too few answers for a
    trend of their waits, but the oldest unanswered request keeps aging and the queue grows."""
    points = []
    for i in range(160):
        scheduled = i * S // 20
        batch = i // 4
        if batch < 4:  # batches answered at 2, 4, 6, 8 s
            answer = (batch + 1) * 2 * S
            points.append(WaitPoint(scheduled, answer - scheduled, answer))
        else:
            points.append(WaitPoint(scheduled, 0, None, True))
    verdict = assess(points, now_ns=8 * S)
    assert verdict.saturated, verdict.reason
    assert verdict.basis == BASIS_OLDEST and verdict.slope is not None and verdict.slope > 0.5


def test_one_stalled_request_under_a_light_load_is_not_saturation() -> None:
    """1/s arrivals; one request stalls 5 s: the oldest-wait climbs for a while, but the number
    in flight does not grow, so the few answered waits decide (too few: not saturated)."""
    points = []
    for i in range(12):
        scheduled = i * S
        wait = 5 * S if i == 6 else 300 * MS
        points.append(WaitPoint(scheduled, wait, scheduled + wait))
    verdict = assess(points)
    assert not verdict.saturated


def test_a_long_ttft_before_the_first_answers_is_not_saturation() -> None:
    """A server with a 3 s TTFT and plenty of capacity, judged at 2 s: nobody is answered yet,
    so the oldest wait only grows; that is not a queue outgrowing the server."""
    points = [WaitPoint(i * S // 20, 0, None, True) for i in range(40)]
    assert not assess(points, now_ns=2 * S).saturated


def test_a_light_load_that_meets_a_stall_is_not_saturation() -> None:
    """1/s arrivals answered in 170 ms, then the server pauses for 6 s: the queue grows and the
    oldest wait climbs for a while, but the server got through far more per busy second than
    arrives. Judged live at the end of the stall."""
    points = []
    for i in range(16):
        scheduled = i * S
        if i < 10:
            points.append(WaitPoint(scheduled, 170 * MS, scheduled + 170 * MS))
        else:  # the stall: nothing answered from 10 s on
            points.append(WaitPoint(scheduled, 0, None, True))
    verdict = assess(points, now_ns=16 * S)
    assert not verdict.saturated, verdict.reason
    assert verdict.capacity_per_s is not None and verdict.offered_per_s is not None
    assert verdict.capacity_per_s > verdict.offered_per_s


def test_capacity_is_completions_per_busy_second() -> None:
    points = [WaitPoint(0, S, S), WaitPoint(0, 2 * S, 2 * S), WaitPoint(10 * S, S, 11 * S)]
    assert busy_capacity_per_s(points, 11 * S) == pytest.approx(1.0)  # 3 done in 3 busy s
