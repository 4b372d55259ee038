"""The numbers behind a bench page's charts, derived from a summary (and its records).

Raw samples are thinned for drawing only: a CDF keeps at most ``CDF_POINTS`` quantiles per cell
and the timeline at most ``TIMELINE_ROWS`` requests, so a 10,000-request run stays a small page.
Every number printed in a table comes from the summary itself, never from the thinned samples.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.records import RequestRecord
from ttft.core.stats import percentile
from ttft.core.units import NS_PER_MS

CDF_POINTS = 200
TIMELINE_ROWS = 300
KNEE_RATIO = 1.5  # the next load level's p50 more than 1.5x this one's: latency takes off here

_LOAD = re.compile(r"^(?P<bucket>.*?)\s*(?:(?:c=(?P<c>\d+))|(?:rate=(?P<rate>[0-9.eE+-]+)/s))$")


@dataclass(frozen=True, slots=True)
class CellLoad:
    """A cell label split into its prompt bucket and its load: ``"512 tok c=8"``."""

    bucket: str
    kind: str  # "concurrency" or "rate"; "" when the label names no load
    load: float


def parse_cell(label: str) -> CellLoad:
    match = _LOAD.match(label)
    if match is None:
        return CellLoad(label, "", 0.0)
    if match.group("c") is not None:
        return CellLoad(match.group("bucket") or "all", "concurrency", float(match.group("c")))
    return CellLoad(match.group("bucket") or "all", "rate", float(match.group("rate")))


def thin_cdf(sorted_ms: Sequence[float], points: int = CDF_POINTS) -> list[tuple[float, float]]:
    """(value, cumulative fraction) pairs; above ``points`` samples, evenly spaced quantiles."""
    n = len(sorted_ms)
    if n == 0:
        return []
    if n <= points:
        return [(value, (i + 1) / n) for i, value in enumerate(sorted_ms)]
    out = []
    for k in range(points + 1):
        q = 100.0 * k / points
        out.append((percentile(sorted_ms, q), max(q / 100.0, 1.0 / n)))
    return out


def summary_cdf(stats: Mapping[str, Any]) -> list[tuple[float, float]]:
    """A coarse CDF from a summary's percentiles alone (when records.jsonl is not at hand)."""
    marks = [("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)]
    return [(float(stats[k]) / NS_PER_MS, q) for k, q in marks if stats.get(k) is not None]


def records_by_cell(records: Iterable[RequestRecord]) -> dict[str, list[RequestRecord]]:
    by_cell: dict[str, list[RequestRecord]] = {}
    for record in records:
        by_cell.setdefault(record.cell, []).append(record)
    return by_cell


def counted(records: Iterable[RequestRecord], phase: str = "warm") -> list[RequestRecord]:
    """The successful requests of one phase (what the summary's statistics are over)."""
    if phase == "warm":
        return [r for r in records if r.ok and r.phase not in ("warmup", "cold")]
    return [r for r in records if r.ok and r.phase == phase]


def ttft_ms(records: Iterable[RequestRecord]) -> list[float]:
    return sorted(
        (r.first_content_ns - r.sent_ns) / NS_PER_MS
        for r in records
        if r.first_content_ns is not None and r.sent_ns is not None
    )


def itl_ms(records: Iterable[RequestRecord]) -> list[float]:
    gaps = [
        (later - earlier) / NS_PER_MS
        for r in records
        for earlier, later in itertools.pairwise(r.chunk_ns)
    ]
    return sorted(gaps)


def knee(points: Sequence[tuple[float, float]]) -> float | None:
    """The last load before p50 takes off (next level above ``KNEE_RATIO`` times this one)."""
    ordered = sorted(points)
    for (load, p50), (_, next_p50) in itertools.pairwise(ordered):
        if p50 > 0 and next_p50 > KNEE_RATIO * p50:
            return load
    return None


# The ladder's rungs as (name, metric ending the interval); each segment is the difference of
# consecutive rungs' means. Means (unlike medians) add up, so the stack ends at the mean TTFT.
LADDER = (
    ("client wait", "client_wait"),
    ("sent -> headers", "time_to_headers"),
    ("headers -> first byte", "time_to_first_byte"),
    ("first byte -> first event", "time_to_first_event"),
    ("first event -> first content", "ttft"),
)


def ladder_segments(metrics: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(name, start ms, end ms) of each rung from a cell's summary metrics (means)."""
    out: list[tuple[str, float, float]] = []
    position = 0.0
    previous_rung = 0.0
    for name, metric in LADDER:
        entry = metrics.get(metric)
        if entry is None:
            continue
        mean = float(entry["mean"]) / NS_PER_MS
        if metric == "client_wait":
            out.append((name, 0.0, mean))
            position = mean
            continue
        width = max(mean - previous_rung, 0.0)
        out.append((name, position, position + width))
        position += width
        previous_rung = mean
    return out


def server_prefill_ms(metrics: Mapping[str, Any]) -> float | None:
    entry = metrics.get("server_prompt_ms")
    return None if entry is None else float(entry["mean"]) / NS_PER_MS


@dataclass(frozen=True, slots=True)
class TimelineRow:
    index: int
    cell: str
    wait: tuple[float, float] | None  # scheduled -> sent, ms from the run's start
    ttft: tuple[float, float] | None  # sent -> first content (or sent -> end, when it failed)
    decode: tuple[float, float] | None  # first content -> done
    failed: bool


def timeline(records: Sequence[RequestRecord], rows: int = TIMELINE_ROWS) -> list[TimelineRow]:
    """Every request (every k-th above ``rows``) as spans on the run's clock, in send order."""
    sent = sorted((r for r in records if r.sent_ns is not None), key=lambda r: r.sent_ns or 0)
    if len(sent) > rows:
        step = len(sent) / rows
        sent = [sent[int(i * step)] for i in range(rows)]
    out = []
    for r in sent:
        assert r.sent_ns is not None
        start = (r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns) / NS_PER_MS
        at = r.sent_ns / NS_PER_MS
        first = None if r.first_content_ns is None else r.first_content_ns / NS_PER_MS
        end_ns = r.done_ns or (r.chunk_ns[-1] if r.chunk_ns else None) or r.first_content_ns
        end = at if end_ns is None else end_ns / NS_PER_MS
        out.append(
            TimelineRow(
                index=r.index,
                cell=r.cell,
                wait=(start, at) if at > start else None,
                ttft=(at, first) if first is not None else (at, end),
                decode=(first, end) if first is not None and end > first else None,
                failed=not r.ok,
            )
        )
    return out
