"""Prometheus metrics of the gateway, exposed through ``prometheus_client``.

The client library checks every label set where it is used: a call with the wrong number of
labels raises there, at the call site, instead of producing an exposition that fails on every
later scrape; escaping and number formatting are Prometheus's own.

Label values come only from the configuration (model and upstream names) and from fixed sets
(lanes, stages, reasons, error kinds), so the number of series is bounded however clients behave.
Each ``GatewayMetrics`` has a registry of its own: several gateways in one process (tests) do not
collide, and the library's process metrics are not mixed in.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

import prometheus_client as prom
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

# ``*_created`` series double the series count for a timestamp no gateway dashboard reads; the
# switch is process-wide, and nothing else in ttft exports through prometheus_client.
prom.disable_created_metrics()  # type: ignore[no-untyped-call]

# Seconds. Fine at the bottom: the gateway's own stages are sub-millisecond.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class Changes:
    """How many times the counters and histograms of one registry have moved: a worker writes
    its snapshot for the other workers only when this has (``metrics_shared.py``)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class _Metric:
    """A family of one registry; children per label set are cached (the hot path is a lookup)."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        registry: prom.CollectorRegistry,
        changes: Changes | None = None,
    ) -> None:
        self.name = name
        self.registry = registry
        self.label_names = tuple(labels)
        self.changes = changes if changes is not None else Changes()

    def _check(self, labels: tuple[str, ...]) -> None:
        """A new label set: the checks ``prometheus_client`` makes, once per set."""
        if len(labels) != len(self.label_names):
            raise ValueError("Incorrect label count")
        if not all(isinstance(v, str) for v in labels):
            raise TypeError(f"{self.name}: label values must be strings, got {labels!r}")

    def _sample(self, suffix: str, labels: Sequence[str]) -> float:
        if len(labels) != len(self.label_names):
            raise ValueError(f"{self.name}: expected labels {self.label_names}, got {labels!r}")
        value = self.registry.get_sample_value(
            self.name + suffix, dict(zip(self.label_names, labels, strict=True))
        )
        return value or 0.0


class Counter(_Metric):
    """Counts kept as plain floats per label set and handed to the registry when it collects:
    ``prometheus_client``'s own counter took a lock and four calls per increment, several
    times per request (the gateway's counters change on its event loop's thread only)."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        registry: prom.CollectorRegistry,
        changes: Changes | None = None,
    ) -> None:
        super().__init__(name, help, labels, registry, changes)
        self.help = help
        self._values: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def inc(self, *labels: str, by: float = 1.0) -> None:
        values = self._values
        value = values.get(labels)
        if value is None:
            self._check(labels)
            value = 0.0
        if by < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        values[labels] = value + by
        self.changes.count += 1

    def get(self, *labels: str) -> float:
        return self._sample("", labels)

    def describe(self) -> Iterator[Metric]:
        # The registry checks names from this when registering: a duplicate is refused.
        yield CounterMetricFamily(self.name, self.help, labels=self.label_names)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.help, labels=self.label_names)
        for labels, value in list(self._values.items()):  # a copy: scrapes may run elsewhere
            family.add_metric(labels, value)
        yield family


class Gauge(_Metric):
    """A value read when scraped (``fn``), per label set."""

    def __init__(
        self, name: str, help: str, labels: Sequence[str], registry: prom.CollectorRegistry
    ) -> None:
        super().__init__(name, help, labels, registry)
        self._family = prom.Gauge(name, help, self.label_names, registry=registry)

    def track(self, fn: Callable[[], float], *labels: str) -> None:
        self._family.labels(*labels).set_function(lambda: float(fn()))


class Histogram(_Metric):
    """Bucket counts kept as plain numbers per label set (as ``Counter``); an observation is a
    bisection and two additions, where ``prometheus_client``'s took two locks and a loop."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        registry: prom.CollectorRegistry,
        buckets: Sequence[float] = LATENCY_BUCKETS,
        changes: Changes | None = None,
    ) -> None:
        super().__init__(name, help, labels, registry, changes)
        self.help = help
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self._bounds = tuple(bounds)
        self._le = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        # Per label set: [sum, count in bucket 0, count in bucket 1, ...] (not cumulative).
        self._values: dict[tuple[str, ...], list[float]] = {}
        registry.register(self)

    def observe(self, value: float, *labels: str) -> None:
        cells = self._values.get(labels)
        if cells is None:
            self._check(labels)
            cells = self._values[labels] = [0.0] * (len(self._bounds) + 1)
        cells[0] += value
        # The first bucket whose bound is >= value ("le"), as prometheus_client counts.
        cells[bisect_left(self._bounds, value) + 1] += 1.0
        self.changes.count += 1

    def count(self, *labels: str) -> int:
        return int(self._sample("_count", labels))

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.help, labels=self.label_names)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.help, labels=self.label_names)
        for labels, cells in list(self._values.items()):
            total, buckets = 0.0, []
            for le, n in zip(self._le, cells[1:], strict=True):
                total += n
                buckets.append((le, total))
            family.add_metric(labels, buckets, cells[0])
        yield family


class GatewayMetrics:
    """Every metric the gateway exports (names are part of its interface: add, never rename)."""

    def __init__(self) -> None:
        self.registry = r = prom.CollectorRegistry(auto_describe=True)
        p = "ttft_gateway_"
        self.requests = Counter(
            p + "requests_total",
            "Requests answered, by model, endpoint and status code.",
            ("model", "endpoint", "status"),
            r,
        )
        self.ttft = Histogram(
            p + "ttft_seconds",
            "Time from the request's first byte to the first content token written to the client.",
            ("model", "lane"),
            r,
        )
        self.queue = Histogram(
            p + "queue_seconds", "Time spent waiting for an upstream slot.", ("model", "lane"), r
        )
        self.stage = Histogram(
            p + "stage_seconds",
            "Time in each gateway stage: template, "
            "tokenize, upstream_ttfb (to the upstream's first body byte).",
            ("model", "stage"),
            r,
        )
        self.prerender = Counter(
            p + "prerender_total",
            "Chat requests by pre-render outcome: "
            "hit/miss of the template cache, full render, or bypass "
            "(sent to the engine's chat endpoint) with the reason.",
            ("model", "result", "reason"),
            r,
        )
        self.affinity = Counter(
            p + "affinity_total",
            "Routing decisions: hit (the prefix's "
            "replica), spill (over the load bound or down), none (no key).",
            ("model", "result"),
            r,
        )
        self.shed = Counter(
            p + "shed_total", "Requests refused by admission control.", ("model", "reason"), r
        )
        self.upstream_errors = Counter(
            p + "upstream_errors_total", "Upstream failures by kind.", ("upstream", "kind"), r
        )
        self.hygiene = Counter(
            p + "hygiene_moves_total",
            "Dynamic spans moved out of system prompts, by detector kind.",
            ("model", "kind"),
            r,
        )
        self.retries = Counter(
            p + "retries_total",
            "Requests re-sent to another replica after a failure before any answer.",
            ("model",),
            r,
        )
        self.cancelled = Counter(
            p + "client_cancelled_total",
            "Requests whose client went away "
            "before the answer ended (the upstream request is cancelled).",
            ("model",),
            r,
        )
        self.in_flight = Gauge(p + "in_flight", "Requests at each upstream.", ("upstream",), r)
        self.queued = Gauge(
            p + "queue_depth", "Requests waiting per upstream and lane.", ("upstream", "lane"), r
        )
        self.healthy = Gauge(
            p + "upstream_healthy", "1 when the upstream passes health checks.", ("upstream",), r
        )
        self.frames = Gauge(
            p + "prerender_cache_entries", "Static parts cached per model.", ("model",), r
        )
        self.frame_bytes = Gauge(
            p + "prerender_cache_bytes",
            "Memory the pre-render cache holds per model (estimate).",
            ("model",),
            r,
        )

        # With --workers N, /metrics merges every worker's series (metrics_shared.py) and this
        # has one series per worker merged; /metrics?worker=self has the answering one only.
        # (Its help text stays as it was: with one worker the output is unchanged.)
        self.worker = Gauge(
            p + "worker",
            "The number of gateway workers; its label is the worker that answered this scrape.",
            ("worker",),
            r,
        )
        self.changes = Changes()
        for metric in vars(self).values():
            if isinstance(metric, Counter | Histogram):
                metric.changes = self.changes

    def render(self) -> bytes:
        return prom.generate_latest(self.registry)
