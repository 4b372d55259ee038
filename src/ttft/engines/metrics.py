"""Common metric names, where each engine keeps them, and their deltas over a window.

Every engine exports different Prometheus names for the same idea. Adapters map them to the
``CommonMetric`` names below and say plainly which ones the engine cannot provide, so reports can
print "not exported by llama.cpp" instead of a silent blank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from ttft.engines.prometheus import Scrape


class CommonMetric(StrEnum):
    SERVER_TTFT = "server_ttft_s"  # histogram: the engine's own time to first token
    QUEUE_TIME = "queue_time_s"  # histogram, or a counter of seconds
    PREFILL_TIME = "prefill_time_s"  # histogram, or a counter of seconds
    KV_USAGE = "kv_cache_usage"  # gauge, fraction 0..1
    PREEMPTIONS = "preemptions"  # counter
    PREFIX_CACHE_HIT_TOKENS = "prefix_cache_hit_tokens"  # counter
    PROMPT_TOKENS = "prompt_tokens"  # counter
    GENERATION_TOKENS = "generation_tokens"  # counter
    RUNNING = "requests_running"  # gauge
    WAITING = "requests_waiting"  # gauge


Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSource:
    """Where a common metric comes from: the first of ``names`` present in a scrape wins."""

    kind: Kind
    names: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """A common metric over a window: counters and histograms as deltas, gauges as the last value.

    For histograms ``value`` is the sum of observations in the window and ``count`` their number,
    so ``mean`` is the window's mean; ``buckets`` are the window's cumulative (le, count) pairs.
    """

    metric: CommonMetric
    source_name: str
    kind: Kind
    value: float
    count: float | None = None
    buckets: tuple[tuple[float, float], ...] = ()

    @property
    def mean(self) -> float | None:
        if self.count:
            return self.value / self.count
        return None


class HasMetricSources(Protocol):
    """Anything that maps common metrics to an engine's names (an ``EngineAdapter`` does)."""

    def metric_sources(self) -> Mapping[CommonMetric, MetricSource]: ...


def _first_present(scrape: Scrape, source: MetricSource) -> str | None:
    names = scrape.names()
    for name in source.names:
        probe = f"{name}_sum" if source.kind == "histogram" else name
        if probe in names:
            return name
    return None


def metric_deltas(
    adapter: HasMetricSources, before: Scrape, after: Scrape
) -> dict[CommonMetric, MetricDelta]:
    """Map two scrapes of one engine through its adapter into per-window common metrics."""
    out: dict[CommonMetric, MetricDelta] = {}
    for metric, source in adapter.metric_sources().items():
        name = _first_present(after, source)
        if name is None:
            continue
        if source.kind == "gauge":
            value = after.total(name)
            if value is not None:
                out[metric] = MetricDelta(metric, name, "gauge", value)
        elif source.kind == "counter":
            end, start = after.total(name), before.total(name) or 0.0
            if end is not None:
                out[metric] = MetricDelta(metric, name, "counter", end - start)
        else:
            end_sum, end_n = after.total(f"{name}_sum"), after.total(f"{name}_count")
            start_sum = before.total(f"{name}_sum") or 0.0
            start_n = before.total(f"{name}_count") or 0.0
            if end_sum is None or end_n is None:
                continue
            start_buckets = dict(before.buckets(name))
            window = tuple(
                (le, count - start_buckets.get(le, 0.0)) for le, count in after.buckets(name)
            )
            out[metric] = MetricDelta(
                metric, name, "histogram", end_sum - start_sum, end_n - start_n, window
            )
    return out


def histogram_quantile(buckets: tuple[tuple[float, float], ...], q: float) -> float | None:
    """Prometheus-style quantile from cumulative buckets (linear within the bucket)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            span = count - prev_count
            frac = 0.0 if span <= 0 else (rank - prev_count) / span
            return prev_le + (le - prev_le) * frac
        prev_le, prev_count = le, count
    return prev_le
