"""Prometheus exposition through prometheus_client: parseable, label errors at the call site."""

from __future__ import annotations

import prometheus_client as prom
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttft.gateway.metrics import Counter, GatewayMetrics, Histogram


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_histograms_are_cumulative_with_sum_and_count() -> None:
    registry = prom.CollectorRegistry()
    h = Histogram("x_seconds", "help", ("lane",), registry, buckets=(0.1, 1.0))
    for v in (0.05, 0.5, 5.0):
        h.observe(v, "short")
    samples = _samples(prom.generate_latest(registry).decode())
    assert samples[("x_seconds_bucket", (("lane", "short"), ("le", "0.1")))] == 1
    assert samples[("x_seconds_bucket", (("lane", "short"), ("le", "1.0")))] == 2
    assert samples[("x_seconds_bucket", (("lane", "short"), ("le", "+Inf")))] == 3
    assert samples[("x_seconds_count", (("lane", "short"),))] == 3
    assert samples[("x_seconds_sum", (("lane", "short"),))] == pytest.approx(5.55)
    assert h.count("short") == 3


def test_label_values_are_escaped_and_read_back() -> None:
    registry = prom.CollectorRegistry()
    c = Counter("c_total", "help", ("model",), registry)
    c.inc('a"b\\c\nd')
    assert _samples(prom.generate_latest(registry).decode()) == {
        ("c_total", (("model", 'a"b\\c\nd'),)): 1.0
    }
    assert c.get('a"b\\c\nd') == 1.0


def test_a_label_count_mismatch_fails_at_the_call_site_and_later_scrapes_still_work() -> None:
    metrics = GatewayMetrics()
    with pytest.raises(ValueError):
        metrics.shed.inc("m")  # (model, reason) expected
    with pytest.raises(ValueError):
        metrics.ttft.observe(0.1, "m", "short", "extra")
    metrics.shed.inc("m", "queue_full")
    samples = _samples(metrics.render().decode())
    assert samples[("ttft_gateway_shed_total", (("model", "m"), ("reason", "queue_full")))] == 1


def test_the_exposition_parses_and_keeps_the_documented_names_and_labels() -> None:
    metrics = GatewayMetrics()
    metrics.requests.inc("m", "chat", "200")
    metrics.ttft.observe(0.02, "m", "short")
    metrics.in_flight.track(lambda: 3, "http://u:1")
    metrics.queued.track(lambda: 2, "http://u:1", "long")
    text = metrics.render().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # the parser names counter families without their _total suffix
    for name, kind in (
        ("ttft_gateway_ttft_seconds", "histogram"),
        ("ttft_gateway_queue_seconds", "histogram"),
        ("ttft_gateway_stage_seconds", "histogram"),
        ("ttft_gateway_requests", "counter"),
        ("ttft_gateway_prerender", "counter"),
        ("ttft_gateway_affinity", "counter"),
        ("ttft_gateway_shed", "counter"),
        ("ttft_gateway_upstream_errors", "counter"),
        ("ttft_gateway_retries", "counter"),
        ("ttft_gateway_client_cancelled", "counter"),
        ("ttft_gateway_hygiene_moves", "counter"),
        ("ttft_gateway_in_flight", "gauge"),
        ("ttft_gateway_queue_depth", "gauge"),
        ("ttft_gateway_upstream_healthy", "gauge"),
        ("ttft_gateway_prerender_cache_entries", "gauge"),
    ):
        assert families[name].type == kind, name
    samples = _samples(text)
    key = (("endpoint", "chat"), ("model", "m"), ("status", "200"))
    assert samples[("ttft_gateway_requests_total", key)] == 1
    assert (
        samples[("ttft_gateway_queue_depth", (("lane", "long"), ("upstream", "http://u:1")))] == 2
    )
    assert not any(name.endswith("_created") for name, _ in samples)
