"""The gateway's own counters and histograms export exactly what prometheus_client's would."""

from __future__ import annotations

import prometheus_client as prom
import pytest

from ttft.gateway.metrics import LATENCY_BUCKETS, Counter, Histogram


def _samples(
    registry: prom.CollectorRegistry,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
    }


def test_histogram_buckets_match_prometheus_client_at_the_edges() -> None:
    ours, theirs = prom.CollectorRegistry(), prom.CollectorRegistry()
    mine = Histogram("t_seconds", "help", ("model",), ours)
    reference = prom.Histogram(
        "t_seconds", "help", ("model",), registry=theirs, buckets=LATENCY_BUCKETS
    )
    # On a bound (counted in that bucket: "le"), between bounds, below the first, past the last.
    values = [0.0, 0.0005, 0.00050001, 0.001, 0.7, 60.0, 61.0, 1e9, -1.0]
    for v in values:
        mine.observe(v, "m")
        reference.labels("m").observe(v)
    assert _samples(ours) == _samples(theirs)
    assert mine.count("m") == len(values)
    assert prom.generate_latest(ours) == prom.generate_latest(theirs)


def test_counter_matches_prometheus_client_and_keeps_its_checks() -> None:
    ours, theirs = prom.CollectorRegistry(), prom.CollectorRegistry()
    mine = Counter("r_total", "help", ("model", "status"), ours)
    reference = prom.Counter("r_total", "help", ("model", "status"), registry=theirs)
    for labels, by in [(("a", "200"), 1.0), (("a", "200"), 1.0), (("b", "503"), 2.5)]:
        mine.inc(*labels, by=by)
        reference.labels(*labels).inc(by)
    assert prom.generate_latest(ours) == prom.generate_latest(theirs)
    assert mine.get("a", "200") == 2.0
    with pytest.raises(ValueError):
        mine.inc("a")  # a label set of the wrong size fails where it is used
    with pytest.raises(ValueError):
        mine.inc("a", "200", by=-1.0)
    with pytest.raises(ValueError):
        Histogram("h", "help", ("model",), ours).observe(1.0, "a", "b")


def test_a_name_registered_twice_is_refused() -> None:
    registry = prom.CollectorRegistry()
    Counter("dup_total", "help", ("model",), registry)
    with pytest.raises(ValueError):
        Counter("dup_total", "help", ("model",), registry)
