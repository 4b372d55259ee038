"""Prometheus exposition: cumulative buckets, escaped labels, every metric announced."""

from __future__ import annotations

from ttft.gateway.metrics import Counter, GatewayMetrics, Histogram


def test_histograms_are_cumulative_with_sum_and_count() -> None:
    h = Histogram("x_seconds", "help", ("lane",), buckets=(0.1, 1.0))
    for v in (0.05, 0.5, 5.0):
        h.observe(v, "short")
    lines = h.lines()
    assert 'x_seconds_bucket{lane="short",le="0.1"} 1' in lines
    assert 'x_seconds_bucket{lane="short",le="1"} 2' in lines
    assert 'x_seconds_bucket{lane="short",le="+Inf"} 3' in lines
    assert 'x_seconds_count{lane="short"} 3' in lines
    assert any(line.startswith('x_seconds_sum{lane="short"} 5.55') for line in lines)


def test_label_values_are_escaped() -> None:
    c = Counter("c_total", "help", ("model",))
    c.inc('a"b\\c')
    assert c.lines() == ['c_total{model="a\\"b\\\\c"} 1']


def test_the_exposition_announces_every_metric_once() -> None:
    text = GatewayMetrics().render().decode()
    for name in (
        "ttft_gateway_ttft_seconds",
        "ttft_gateway_queue_seconds",
        "ttft_gateway_prerender_total",
        "ttft_gateway_affinity_total",
        "ttft_gateway_shed_total",
        "ttft_gateway_upstream_errors_total",
    ):
        assert text.count(f"# TYPE {name} ") == 1
