"""Is a cell's load beyond what the server can serve? A queue that grows without bound, in numbers.

Below capacity, each request waits about as long as the last: the wait (scheduled -> first token)
is flat, however noisy. Beyond capacity the queue grows by (arrivals - completions) every second,
so each request waits longer than the one before and the wait rises without bound. Three pieces of
evidence must agree before a cell is called saturated, the first two taken over the second half
of its schedule (the first half may hold a start-up transient that settles, which is not
saturation):

- a robust upward trend of the wait against the scheduled time: the Theil-Sen slope (median of
  pairwise slopes, unmoved by a few outliers) with the Mann-Kendall z at least ``Z_MIN``, and a
  rise over the half that is material (``MIN_RISE_FRACTION`` of the typical wait and at least
  ``MIN_RISE_NS``), so a statistically clear but negligible drift does not count;
- completions per second falling below arrivals per second in the same window,
- and the arrivals faster than the server's capacity as measured in the cell (completions per
  second of busy time): a light load that met a stall (the machine paused the server for a few
  seconds) shows the first two for a while, but not this.

The wait trend is read from the requests that got their first token. A slow server under a heavy
load answers few of them, and a batching one answers them in groups whose waits fall within each
group; when those show no trend but the number in flight grows, the trend is read instead from
the age of the oldest request still waiting, sampled over time (a lower bound on its TTFT, known
long before it answers). Requests in flight or cut short count as arrivals not completed.
Pure: points in, verdict out; durations in ns.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ttft.core.records import RequestRecord

Z_MIN = 3.0  # one-sided, about p < 0.0015: the trend is not noise
MIN_RISE_FRACTION = 1.0  # the wait at least doubles across the half (a queue from nothing)
MIN_RISE_NS = 20_000_000  # and by at least 20 ms: a drift of microseconds is not a queue
MAX_COMPLETION_RATIO = 0.9  # completions below 90% of arrivals: the queue is growing
MIN_POINTS = 8  # requests in the second half below which nothing is concluded
_MAX_PAIRS_POINTS = 200  # Theil-Sen and Mann-Kendall are O(n^2): fit on this many, evenly spaced


@dataclass(frozen=True, slots=True)
class WaitPoint:
    """One request: when it was scheduled, how long it waited for its first token (or how long
    it had waited when last seen without one: ``censored``), and when it finished (None: not
    yet)."""

    scheduled_ns: int
    wait_ns: int
    done_ns: int | None = None
    censored: bool = False


@dataclass(frozen=True, slots=True)
class Saturation:
    """The verdict and its evidence. ``slope`` is seconds of extra wait per second of schedule
    (dimensionless); ``rise_ns`` is that slope over the span it was fitted on."""

    saturated: bool
    reason: str
    points: int
    slope: float | None = None
    z: float | None = None
    rise_ns: float | None = None
    typical_wait_ns: float | None = None
    arrivals_per_s: float | None = None
    completions_per_s: float | None = None
    in_flight_start: int | None = None
    in_flight_end: int | None = None
    window_ns: int | None = None
    basis: str | None = None  # what the trend was read from (BASIS_WAITS or BASIS_OLDEST)
    offered_per_s: float | None = None  # arrivals per second over the whole cell
    capacity_per_s: float | None = None  # completions per second of busy time

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Saturation:
        return cls(**data)


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of the slopes between every pair of points with distinct x."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    ]
    return statistics.median(slopes) if slopes else 0.0


def kendall_z(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Mann-Kendall z of an upward trend of ``ys`` in ``xs`` order (continuity-corrected, no
    tie correction: waits are nanosecond readings and rarely tie)."""
    n = len(xs)
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[j] - xs[i], ys[j] - ys[i]
            if dx and dy:
                s += 1 if (dx > 0) == (dy > 0) else -1
    variance = n * (n - 1) * (2 * n + 5) / 18.0
    if variance <= 0 or s == 0:
        return 0.0
    return (s - 1 if s > 0 else s + 1) / math.sqrt(variance)


def busy_capacity_per_s(points: Sequence[WaitPoint], end_ns: int) -> float:
    """Completions per second of busy time (at least one request in flight, from its schedule
    to its end, or ``end_ns`` for those still open): what the server got through while it had
    work. A load beyond capacity keeps it busy and arrives faster than this; a light load that
    met a stall (the machine paused the server for a few seconds) arrives slower."""
    intervals = sorted(
        (p.scheduled_ns, p.done_ns if p.done_ns is not None else max(end_ns, p.scheduled_ns))
        for p in points
    )
    busy, start, stop = 0, None, None
    for begin, end in intervals:
        if stop is None or begin > stop:
            if start is not None and stop is not None:
                busy += stop - start
            start, stop = begin, end
        else:
            stop = max(stop, end)
    if start is not None and stop is not None:
        busy += stop - start
    completions = sum(1 for p in points if p.done_ns is not None)
    return completions * 1e9 / busy if busy > 0 else 0.0


def _in_flight(points: Sequence[WaitPoint], t: int) -> int:
    return sum(1 for p in points if p.scheduled_ns <= t and (p.done_ns is None or p.done_ns > t))


def oldest_wait_series(
    points: Sequence[WaitPoint], end_ns: int, samples: int = 40
) -> list[tuple[int, int]]:
    """``(t, age)`` at ``samples`` even times from the first arrival to ``end_ns``: how long the
    oldest request still without a first token had waited at ``t`` (0 when none was). A lower
    bound on that request's TTFT, known long before it answers: it keeps growing when the
    queue does, and falls back whenever the queue empties."""
    if not points:
        return []
    first = min(p.scheduled_ns for p in points)
    if end_ns <= first:
        return []
    ordered = sorted(
        (p.scheduled_ns, None if p.censored else p.scheduled_ns + p.wait_ns) for p in points
    )
    series = []
    for k in range(1, samples + 1):
        t = first + (end_ns - first) * k // samples
        age = 0
        for scheduled, answer in ordered:  # the oldest first: stop at the first still waiting
            if scheduled > t:
                break
            if answer is None or answer > t:
                age = t - scheduled
                break
        series.append((t, age))
    return series


@dataclass(frozen=True, slots=True)
class _Trend:
    basis: str
    n: int
    slope_ns_per_s: float
    z: float
    rise_ns: float
    typical_ns: float
    last_ns: float  # the last value of the series

    @property
    def rising(self) -> bool:
        return self.z >= Z_MIN and self.rise_ns >= max(
            MIN_RISE_FRACTION * self.typical_ns, MIN_RISE_NS
        )


def _trend(
    basis: str, xs_ns: Sequence[int], ys: Sequence[float], typical: float, max_points: int
) -> _Trend | None:
    """Theil-Sen slope and Mann-Kendall z of ``ys`` over ``xs_ns`` (None: too few points)."""
    if len(xs_ns) < MIN_POINTS or xs_ns[-1] <= xs_ns[0]:
        return None
    step = max(1.0, len(xs_ns) / max_points)
    picked = [int(i * step) for i in range(min(len(xs_ns), max_points))]
    xs = [xs_ns[i] / 1e9 for i in picked]
    values = [ys[i] for i in picked]
    slope = theil_sen(xs, values)
    rise = slope * (xs_ns[-1] - xs_ns[0]) / 1e9
    return _Trend(basis, len(xs_ns), slope, kendall_z(xs, values), rise, typical, ys[-1])


def _wait_trend(points: Sequence[WaitPoint], max_points: int) -> _Trend | None:
    # Over the second half of the answered requests' own span: live, the queue's tail has no
    # answer yet, and its ages so far fall with the schedule (no trend in them).
    measured = [p for p in points if not p.censored]
    if len(measured) < 2:
        return None
    m_first, m_last = measured[0].scheduled_ns, measured[-1].scheduled_ns
    m_middle = m_first + (m_last - m_first) // 2
    half = [p for p in measured if p.scheduled_ns >= m_middle]
    early = [p.wait_ns for p in measured if p.scheduled_ns < m_middle] or [p.wait_ns for p in half]
    return _trend(
        BASIS_WAITS,
        [p.scheduled_ns for p in half],
        [float(p.wait_ns) for p in half],
        float(statistics.median(early)),
        max_points,
    )


def _oldest_trend(points: Sequence[WaitPoint], end_ns: int) -> _Trend | None:
    series = oldest_wait_series(points, end_ns)
    half = series[len(series) // 2 :]
    early = [age for _, age in series[: len(series) // 2]] or [age for _, age in half]
    return _trend(
        BASIS_OLDEST,
        [t for t, _ in half],
        [float(age) for _, age in half],
        float(statistics.median(early)),
        len(half),
    )


def _outgrown(points: Sequence[WaitPoint], oldest: _Trend) -> bool:
    """Whether the oldest wait has outgrown what the first answered requests took (the server
    before a queue formed): until a few answers came every load looks like a queue that only
    grows, and a server with a long TTFT but plenty of capacity keeps its oldest wait near that
    TTFT."""
    answered = [p.wait_ns for p in points if not p.censored]  # in schedule order
    if len(answered) < MIN_POINTS // 2:
        return False
    baseline = statistics.median(answered[:MIN_POINTS])
    return oldest.last_ns > OUTGROWN_FACTOR * baseline


OUTGROWN_FACTOR = 2.0
BASIS_WAITS = "wait of the answered requests"
BASIS_OLDEST = "age of the oldest unanswered request"
MIN_QUEUE_GROWTH = 4  # the oldest-wait basis also needs this many more requests in flight


def assess(
    points: Sequence[WaitPoint],
    *,
    max_points: int = _MAX_PAIRS_POINTS,
    now_ns: int | None = None,
) -> Saturation:
    """Saturated or not over the second half of the schedule, with the numbers that decided.

    The trend is read from the answered requests' waits; when they show none (too few answers
    from a slow server under a heavy load, or answers in batches) but the number in flight
    grows, from the age of the oldest unanswered request over time. ``now_ns`` is the end of
    what is known (live); without it, the last event. The fit uses at most ``max_points``
    evenly spaced requests (a live check keeps it small: it runs on the event loop)."""
    ordered = sorted(points, key=lambda p: p.scheduled_ns)
    if len(ordered) < 2:
        return Saturation(False, "too few requests to judge", len(ordered))
    first, last = ordered[0].scheduled_ns, ordered[-1].scheduled_ns
    middle = first + (last - first) // 2
    window = last - middle
    if window <= 0:
        return Saturation(False, "too few requests to judge", len(ordered))
    # Arrivals against the completions one typical wait later: a request that arrived just now
    # cannot have completed yet, which is no backlog (live, that bias alone would "lag").
    answered = [p.wait_ns for p in ordered if not p.censored]
    lag = min(int(statistics.median(answered)) if answered else 0, window // 2)
    span = window - lag
    arrivals = sum(1 for p in ordered if middle <= p.scheduled_ns <= last - lag)
    completions = sum(
        1 for p in ordered if p.done_ns is not None and middle + lag <= p.done_ns <= last
    )
    arrivals_per_s = arrivals * 1e9 / span
    completions_per_s = completions * 1e9 / span
    in_flight_start, in_flight_end = _in_flight(ordered, middle), _in_flight(ordered, last)
    events = [p.done_ns or 0 for p in ordered] + [p.scheduled_ns + p.wait_ns for p in ordered]
    end = now_ns if now_ns is not None else max(events)
    capacity = busy_capacity_per_s(ordered, end)
    offered = (len(ordered) - 1) * 1e9 / (last - first)
    trend = _wait_trend(ordered, max_points)
    growing = in_flight_end - in_flight_start >= MIN_QUEUE_GROWTH
    if (trend is None or not trend.rising) and growing:
        # Few answers, or answers in batches (waits fall within each batch): the queue's
        # growth shows better in how long its oldest member has been waiting.
        oldest = _oldest_trend(ordered, end)
        if oldest is not None and (trend is None or oldest.rising) and _outgrown(ordered, oldest):
            trend = oldest
    if trend is None:
        half = sum(1 for p in ordered if not p.censored and p.scheduled_ns >= middle)
        queue = (
            "; in flight grows, but its oldest wait is still within what the first answers took"
            if growing
            else ""
        )
        return Saturation(
            False,
            f"too few answered requests to judge ({half} in the second half, {MIN_POINTS} "
            f"needed){queue}",
            half,
            arrivals_per_s=arrivals_per_s,
            completions_per_s=completions_per_s,
            in_flight_start=in_flight_start,
            in_flight_end=in_flight_end,
            window_ns=window,
            offered_per_s=offered,
            capacity_per_s=capacity,
        )
    evidence = Saturation(
        saturated=False,
        reason="",
        points=trend.n,
        slope=trend.slope_ns_per_s / 1e9,
        z=trend.z,
        rise_ns=trend.rise_ns,
        typical_wait_ns=trend.typical_ns,
        arrivals_per_s=arrivals_per_s,
        completions_per_s=completions_per_s,
        in_flight_start=in_flight_start,
        in_flight_end=in_flight_end,
        window_ns=window,
        basis=trend.basis,
        offered_per_s=offered,
        capacity_per_s=capacity,
    )
    rates = (arrivals_per_s, completions_per_s, offered, capacity)
    return _judged(evidence, trend, *rates)


_CENSORING_ERRORS = ("cancelled", "timeout")  # cut short while waiting: the wait is a lower bound


def points_from_records(
    records: Sequence[RequestRecord], now_ns: int | None = None
) -> list[WaitPoint]:
    """The wait of each request: scheduled -> first token. One cut short (cancelled, timed out)
    or still waiting is an arrival that has not completed (``censored``; its age so far, when
    known, is a lower bound on its wait). Requests that failed otherwise (an HTTP error is a
    fast answer, not a queue) are left out."""
    points = []
    for r in records:
        if r.scheduled_ns is None:
            continue
        if r.first_content_ns is not None:
            points.append(WaitPoint(r.scheduled_ns, r.first_content_ns - r.scheduled_ns, r.done_ns))
        elif r.error is not None and r.error.kind in _CENSORING_ERRORS:
            end = r.done_ns if r.done_ns is not None else now_ns
            age = max(0, end - r.scheduled_ns) if end is not None else 0
            points.append(WaitPoint(r.scheduled_ns, age, None, True))
        elif r.error is None and r.done_ns is None:
            age = max(0, now_ns - r.scheduled_ns) if now_ns is not None else 0
            points.append(WaitPoint(r.scheduled_ns, age, None, True))
    return points


def assess_records(records: Sequence[RequestRecord]) -> Saturation:
    """``assess`` per repeat of the cell (repeats are separate runs, interleaved with other
    cells: their schedules must not be mixed); a saturated run decides, else the last one."""
    runs: dict[int | None, list[RequestRecord]] = {}
    for record in records:
        runs.setdefault(record.repeat, []).append(record)
    verdicts = [assess(points_from_records(group)) for group in runs.values()]
    saturated = [v for v in verdicts if v.saturated]
    if saturated:
        return saturated[0]
    return verdicts[-1] if verdicts else Saturation(False, "no requests", 0)


__all__ = [
    "Saturation",
    "WaitPoint",
    "assess",
    "assess_records",
    "kendall_z",
    "points_from_records",
    "theil_sen",
]


def _judged(
    evidence: Saturation,
    trend: _Trend,
    arrivals_per_s: float,
    completions_per_s: float,
    offered: float,
    capacity: float,
) -> Saturation:
    """The verdict on the evidence: saturated only when the trend rises, completions fall
    behind arrivals and more arrives than the server completes per busy second; otherwise the
    reason says which of the three is missing."""
    falling_behind = completions_per_s < MAX_COMPLETION_RATIO * arrivals_per_s
    beyond = offered > capacity
    if trend.rising and falling_behind and beyond:
        reason = (
            f"the {trend.basis} keeps rising ({trend.slope_ns_per_s / 1e6:.0f} ms per s, z "
            f"{trend.z:.1f}) and completions ({completions_per_s:.2f}/s) fall behind arrivals "
            f"({arrivals_per_s:.2f}/s); {offered:.2f} requests/s arrive, the server completes "
            f"{capacity:.2f} per busy second: the queue grows without bound"
        )
        return replace(evidence, saturated=True, reason=reason)
    near = (
        f"; {offered:.2f} requests/s arrive and the server completes {capacity:.2f} per busy "
        "second: at or near capacity"
        if beyond
        else ""
    )
    if trend.rising and falling_behind:
        reason = (
            f"the queue grew for a while, but the server completes {capacity:.2f} requests per "
            f"busy second, more than the {offered:.2f}/s arriving: a stall, not saturation"
        )
    elif trend.rising:
        reason = f"the {trend.basis} rises, but completions keep up with arrivals{near}"
    elif falling_behind:
        reason = f"completions lag arrivals, but the {trend.basis} shows no sustained rise{near}"
    else:
        reason = f"the {trend.basis} is flat and completions keep up with arrivals{near}"
    return replace(evidence, reason=reason)
