"""Is a cell's load beyond what the server can serve? A queue that grows without bound, in numbers.

Below capacity, each request waits about as long as the last: the wait (scheduled -> first token)
is flat, however noisy. Beyond capacity the queue grows by (arrivals - completions) every second,
so each request waits longer than the one before and the wait rises without bound. Two pieces of
evidence must agree before a cell is called saturated, both taken over the second half of its
schedule (the first half may hold a start-up transient that settles, which is not saturation):

- a robust upward trend of the wait against the scheduled time: the Theil-Sen slope (median of
  pairwise slopes, unmoved by a few outliers) with Kendall's S significant at ``z >= Z_MIN``, and
  a rise over the half that is material (``MIN_RISE_FRACTION`` of the typical wait and at least
  ``MIN_RISE_NS``), so a statistically clear but negligible drift does not count;
- completions per second falling below arrivals per second in the same window.

A request still in flight (or cut short) has no known wait: it counts as an arrival not yet
completed (queue growth), and the trend is fitted on the requests that did get a first token.
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
MIN_RISE_FRACTION = 0.5  # the wait rises by at least half the typical wait across the half
MIN_RISE_NS = 20_000_000  # and by at least 20 ms: a drift of microseconds is not a queue
MAX_COMPLETION_RATIO = 0.9  # completions below 90% of arrivals: the queue is growing
MIN_POINTS = 8  # requests in the second half below which nothing is concluded
_MAX_PAIRS_POINTS = 400  # Theil-Sen is O(n^2): thin longer series evenly


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


def _thin(points: Sequence[WaitPoint], limit: int) -> list[WaitPoint]:
    if len(points) <= limit:
        return list(points)
    step = len(points) / limit
    return [points[int(i * step)] for i in range(limit)]


def _in_flight(points: Sequence[WaitPoint], t: int) -> int:
    return sum(1 for p in points if p.scheduled_ns <= t and (p.done_ns is None or p.done_ns > t))


def assess(points: Sequence[WaitPoint], *, max_points: int = _MAX_PAIRS_POINTS) -> Saturation:
    """Saturated or not over the second half of the schedule, with the numbers that decided.
    The trend is fitted on at most ``max_points`` evenly spaced requests (a live check keeps it
    small: the fit runs on the event loop)."""
    ordered = sorted(points, key=lambda p: p.scheduled_ns)
    measured = [p for p in ordered if not p.censored]
    if len(measured) < 2:
        return Saturation(False, "too few requests to judge", len(measured))
    # The rates compare the second half of the whole schedule; the trend is fitted on the
    # requests whose wait is known, over the second half of *their* span (live, the queue's
    # tail is still waiting, and its ages so far fall with the schedule: no trend in them).
    first, last = ordered[0].scheduled_ns, ordered[-1].scheduled_ns
    middle = first + (last - first) // 2
    window = last - middle
    m_first, m_last = measured[0].scheduled_ns, measured[-1].scheduled_ns
    m_middle = m_first + (m_last - m_first) // 2
    half = [p for p in measured if p.scheduled_ns >= m_middle]
    if len(half) < MIN_POINTS or window <= 0 or m_last <= m_middle:
        return Saturation(
            False,
            f"too few requests to judge ({len(half)} in the second half, {MIN_POINTS} needed)",
            len(half),
        )
    thinned = _thin(half, max_points)
    xs = [p.scheduled_ns / 1e9 for p in thinned]
    ys = [float(p.wait_ns) for p in thinned]
    slope_ns_per_s = theil_sen(xs, ys)
    z = kendall_z(xs, ys)
    rise = slope_ns_per_s * (m_last - m_middle) / 1e9
    early = [p.wait_ns for p in measured if p.scheduled_ns < m_middle] or [p.wait_ns for p in half]
    typical = float(statistics.median(early))
    arrivals = sum(1 for p in ordered if middle <= p.scheduled_ns <= last)
    completions = sum(1 for p in ordered if p.done_ns is not None and middle <= p.done_ns <= last)
    arrivals_per_s = arrivals * 1e9 / window
    completions_per_s = completions * 1e9 / window
    evidence = Saturation(
        saturated=False,
        reason="",
        points=len(half),
        slope=slope_ns_per_s / 1e9,
        z=z,
        rise_ns=rise,
        typical_wait_ns=typical,
        arrivals_per_s=arrivals_per_s,
        completions_per_s=completions_per_s,
        in_flight_start=_in_flight(ordered, middle),
        in_flight_end=_in_flight(ordered, last),
        window_ns=window,
    )
    rising = z >= Z_MIN and rise >= max(MIN_RISE_FRACTION * typical, MIN_RISE_NS)
    falling_behind = completions_per_s < MAX_COMPLETION_RATIO * arrivals_per_s
    if rising and falling_behind:
        reason = (
            f"the wait keeps rising ({slope_ns_per_s / 1e6:.0f} ms per s, z {z:.1f}) and "
            f"completions ({completions_per_s:.2f}/s) fall behind arrivals "
            f"({arrivals_per_s:.2f}/s): the queue grows without bound"
        )
        return replace(evidence, saturated=True, reason=reason)
    if rising:
        reason = "the wait rises, but completions keep up with arrivals"
    elif falling_behind:
        reason = "completions lag arrivals, but the wait shows no sustained rise"
    else:
        reason = "the wait is flat and completions keep up with arrivals"
    return replace(evidence, reason=reason)


_CENSORING_ERRORS = ("cancelled", "timeout")  # cut short while waiting: the wait is a lower bound


def points_from_records(
    records: Sequence[RequestRecord], now_ns: int | None = None
) -> list[WaitPoint]:
    """The wait of each request: scheduled -> first token; for one cut short (cancelled, timed
    out) or, given ``now_ns``, still waiting, its age so far as a lower bound. Requests that
    failed otherwise (an HTTP error is a fast answer, not a queue) are left out."""
    points = []
    for r in records:
        if r.scheduled_ns is None:
            continue
        if r.first_content_ns is not None:
            points.append(WaitPoint(r.scheduled_ns, r.first_content_ns - r.scheduled_ns, r.done_ns))
        elif r.error is not None and r.error.kind in _CENSORING_ERRORS and r.done_ns is not None:
            points.append(WaitPoint(r.scheduled_ns, r.done_ns - r.scheduled_ns, None, True))
        elif r.error is None and r.done_ns is None and now_ns is not None:
            points.append(WaitPoint(r.scheduled_ns, max(0, now_ns - r.scheduled_ns), None, True))
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
