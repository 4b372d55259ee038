"""Prometheus metrics of the gateway, in the text exposition format, with no client library.

Label values come only from the configuration (model and upstream names) and from fixed sets
(lanes, stages, reasons, error kinds), so the number of series is bounded however clients behave.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

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


def _labels(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    inner = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str, by: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + by

    def get(self, *labels: str) -> float:
        return self.values.get(labels, 0.0)

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {_num(v)}"
            for k, v in sorted(self.values.items())
        ]


class Gauge(_Metric):
    """A value read when scraped (``fn``), per label set."""

    kind = "gauge"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.readers: dict[tuple[str, ...], Callable[[], float]] = {}

    def track(self, fn: Callable[[], float], *labels: str) -> None:
        self.readers[labels] = fn

    def lines(self) -> list[str]:
        return [
            f"{self.name}{_labels(self.label_names, k)} {_num(float(fn()))}"
            for k, fn in sorted(self.readers.items(), key=lambda kv: kv[0])
        ]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help, labels)
        self.buckets = tuple(buckets)
        # per label set: [count per bucket (non-cumulative) ..., +Inf], sum
        self.series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe(self, value: float, *labels: str) -> None:
        series = self.series.get(labels)
        if series is None:
            series = ([0] * (len(self.buckets) + 1), [0.0])
            self.series[labels] = series
        series[0][bisect.bisect_left(self.buckets, value)] += 1
        series[1][0] += value

    def count(self, *labels: str) -> int:
        series = self.series.get(labels)
        return sum(series[0]) if series else 0

    def lines(self) -> list[str]:
        out: list[str] = []
        names = (*self.label_names, "le")
        for key, (counts, total) in sorted(self.series.items()):
            running = 0
            for bound, n in zip((*self.buckets, float("inf")), counts, strict=True):
                running += n
                le = "+Inf" if bound == float("inf") else _num(bound)
                out.append(f"{self.name}_bucket{_labels(names, (*key, le))} {running}")
            out.append(f"{self.name}_sum{_labels(self.label_names, key)} {_num(total[0])}")
            out.append(f"{self.name}_count{_labels(self.label_names, key)} {running}")
        return out


class GatewayMetrics:
    """Every metric the gateway exports (names are part of its interface: add, never rename)."""

    def __init__(self) -> None:
        p = "ttft_gateway_"
        self.requests = Counter(
            p + "requests_total",
            "Requests answered, by model, endpoint and status code.",
            ("model", "endpoint", "status"),
        )
        self.ttft = Histogram(
            p + "ttft_seconds",
            "Time from the request's first byte to the first content token written to the client.",
            ("model", "lane"),
        )
        self.queue = Histogram(
            p + "queue_seconds", "Time spent waiting for an upstream slot.", ("model", "lane")
        )
        self.stage = Histogram(
            p + "stage_seconds",
            "Time in each gateway stage: template, "
            "tokenize, upstream_ttfb (to the upstream's first body byte).",
            ("model", "stage"),
        )
        self.prerender = Counter(
            p + "prerender_total",
            "Chat requests by pre-render outcome: "
            "hit/miss of the template cache, full render, or bypass "
            "(sent to the engine's chat endpoint) with the reason.",
            ("model", "result", "reason"),
        )
        self.affinity = Counter(
            p + "affinity_total",
            "Routing decisions: hit (the prefix's "
            "replica), spill (over the load bound or down), none (no key).",
            ("model", "result"),
        )
        self.shed = Counter(
            p + "shed_total", "Requests refused by admission control.", ("model", "reason")
        )
        self.upstream_errors = Counter(
            p + "upstream_errors_total", "Upstream failures by kind.", ("upstream", "kind")
        )
        self.hygiene = Counter(
            p + "hygiene_moves_total",
            "Dynamic spans moved out of system prompts, by detector kind.",
            ("model", "kind"),
        )
        self.retries = Counter(
            p + "retries_total",
            "Requests re-sent to another replica after a failure before any answer.",
            ("model",),
        )
        self.cancelled = Counter(
            p + "client_cancelled_total",
            "Requests whose client went away "
            "before the answer ended (the upstream request is cancelled).",
            ("model",),
        )
        self.in_flight = Gauge(p + "in_flight", "Requests at each upstream.", ("upstream",))
        self.queued = Gauge(
            p + "queue_depth", "Requests waiting per upstream and lane.", ("upstream", "lane")
        )
        self.healthy = Gauge(
            p + "upstream_healthy", "1 when the upstream passes health checks.", ("upstream",)
        )
        self.frames = Gauge(
            p + "prerender_cache_entries", "Static parts cached per model.", ("model",)
        )

    def all(self) -> list[_Metric]:
        return [
            self.requests,
            self.ttft,
            self.queue,
            self.stage,
            self.prerender,
            self.affinity,
            self.shed,
            self.upstream_errors,
            self.hygiene,
            self.retries,
            self.cancelled,
            self.in_flight,
            self.queued,
            self.healthy,
            self.frames,
        ]

    def render(self) -> bytes:
        lines: list[str] = []
        for metric in self.all():
            lines.extend(metric.header())
            lines.extend(metric.lines())
        return ("\n".join(lines) + "\n").encode()
