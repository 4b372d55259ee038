"""Prometheus text parsing and the adapter mapping, on exposition text of each engine's format."""

from __future__ import annotations

import pytest

from ttft.engines.metrics import CommonMetric, histogram_quantile, metric_deltas
from ttft.engines.prometheus import parse_exposition
from ttft.engines.registry import adapter_for, detect_kind

# Shape of vLLM V1 /metrics output (names from vLLM's production-metrics docs).
VLLM_BEFORE = """
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 0.8
vllm:time_to_first_token_seconds_count{model_name="m"} 4.0
vllm:num_preemptions_total{model_name="m"} 1.0
vllm:kv_cache_usage_perc{model_name="m"} 0.5
vllm:num_requests_waiting{model_name="m"} 0.0
"""
VLLM_AFTER = """
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} 8.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 4.8
vllm:time_to_first_token_seconds_count{model_name="m"} 10.0
vllm:num_preemptions_total{model_name="m"} 3.0
vllm:kv_cache_usage_perc{model_name="m"} 0.91
vllm:num_requests_waiting{model_name="m"} 7.0
"""


def test_vllm_window_deltas_map_to_common_names() -> None:
    """Counters and histograms become window deltas, gauges the value at the end."""
    deltas = metric_deltas(
        adapter_for("vllm"), parse_exposition(VLLM_BEFORE), parse_exposition(VLLM_AFTER)
    )
    ttft = deltas[CommonMetric.SERVER_TTFT]
    assert ttft.count == 6.0
    assert ttft.mean == pytest.approx(4.0 / 6.0)
    assert deltas[CommonMetric.PREEMPTIONS].value == 2.0
    assert deltas[CommonMetric.KV_USAGE].value == 0.91
    assert deltas[CommonMetric.WAITING].value == 7.0


def test_histogram_quantile_interpolates_within_the_window_buckets() -> None:
    """Six new observations: 0 below 0.1 s, 4 in (0.1, 0.5], 2 above: p50 lies in (0.1, 0.5]."""
    deltas = metric_deltas(
        adapter_for("vllm"), parse_exposition(VLLM_BEFORE), parse_exposition(VLLM_AFTER)
    )
    p50 = histogram_quantile(deltas[CommonMetric.SERVER_TTFT].buckets, 0.5)
    assert p50 is not None and 0.1 < p50 <= 0.5


def test_labels_with_escapes_and_no_labels_parse() -> None:
    scrape = parse_exposition('a{x="q\\"uote",y="b"} 1.5\nplain 2\n# comment\n')
    assert scrape.total("a", x='q"uote') == 1.5
    assert scrape.total("plain") == 2.0
    assert scrape.total("absent") is None


def test_malformed_line_names_its_line_number() -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_exposition("ok 1\nbroken\n")


def test_engine_kind_is_detected_from_metric_prefixes() -> None:
    assert detect_kind(parse_exposition(VLLM_AFTER)) == "vllm"
    assert detect_kind(parse_exposition("llamacpp:prompt_tokens_total 5\n")) == "llamacpp"
    assert detect_kind(parse_exposition("other_metric 1\n")) is None


def test_each_adapter_says_what_it_cannot_provide() -> None:
    """A common metric is either mapped or explained as unavailable, for every engine."""
    for kind in ("llamacpp", "vllm", "sglang", "tgi"):
        adapter = adapter_for(kind)
        covered = set(adapter.metric_sources()) | set(adapter.unavailable())
        assert covered == set(CommonMetric), kind


def test_unknown_engine_kind_is_a_clear_error() -> None:
    from ttft.core.errors import TtftError

    with pytest.raises(TtftError, match="unknown engine kind 'triton'"):
        adapter_for("triton")
