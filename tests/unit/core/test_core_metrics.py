"""Each metric reads the right rungs of a RequestRecord, in ns or tokens."""

from __future__ import annotations

import pytest

from ttft.core.metrics import METRICS, ListMetric, get_metric, metric_names
from ttft.core.records import RequestRecord

MS = 1_000_000


def _value(name: str, record: RequestRecord) -> list[float]:
    metric = get_metric(name)
    assert metric is not None
    return metric.values(record)


def _ladder(**overrides: object) -> RequestRecord:
    fields: dict[str, object] = {
        "index": 0,
        "scheduled_ns": 0,
        "sent_ns": 2 * MS,
        "headers_ns": 5 * MS,
        "first_byte_ns": 6 * MS,
        "first_event_ns": 7 * MS,
        "first_content_ns": 100 * MS,
        "first_output_ns": 150 * MS,
        "chunk_ns": [100 * MS, 120 * MS, 150 * MS, 190 * MS],
        "done_ns": 200 * MS,
    }
    fields.update(overrides)
    return RequestRecord(**fields)  # type: ignore[arg-type]


def test_the_issue_metric_set_is_registered_with_units() -> None:
    expected = {
        "ttft",
        "ttft_output",
        "time_to_headers",
        "time_to_first_byte",
        "time_to_first_event",
        "client_wait",
        "ttft_from_scheduled",
        "e2e",
        "tpot",
        "itl",
        "server_prompt_ms",
        "server_cache_n",
        "server_prompt_n",
        "prompt_tokens",
        "cached_tokens",
    }
    assert expected <= set(metric_names())
    assert metric_names()[0] == "ttft"
    assert all(metric.unit in ("ns", "tokens") and metric.description for metric in METRICS)
    assert get_metric("nope") is None


@pytest.mark.parametrize(
    ("name", "expected_ms"),
    [
        ("ttft", 98),
        ("ttft_output", 148),
        ("time_to_headers", 3),
        ("time_to_first_byte", 4),
        ("time_to_first_event", 5),
        ("client_wait", 2),
        ("ttft_from_scheduled", 100),
        ("e2e", 198),
    ],
)
def test_interval_metrics_are_differences_of_rungs(name: str, expected_ms: int) -> None:
    assert _value(name, _ladder()) == [expected_ms * MS]


def test_a_missing_rung_gives_no_value() -> None:
    record = _ladder(first_content_ns=None, scheduled_ns=None)
    assert _value("ttft", record) == []
    assert _value("client_wait", record) == []
    assert _value("ttft_from_scheduled", record) == []


def test_tpot_uses_completion_tokens_then_chunk_count() -> None:
    # last chunk 190 ms - first content 100 ms = 90 ms
    assert _value("tpot", _ladder(completion_tokens=10)) == [pytest.approx(10 * MS)]
    assert _value("tpot", _ladder()) == [pytest.approx(30 * MS)]  # 4 chunks -> 3 gaps


def test_tpot_falls_back_to_done_when_one_chunk_carries_every_token() -> None:
    record = _ladder(chunk_ns=[100 * MS], completion_tokens=11)
    assert _value("tpot", record) == [pytest.approx(10 * MS)]  # (200 - 100) / 10


def test_tpot_of_a_one_token_answer_is_undefined() -> None:
    assert _value("tpot", _ladder(chunk_ns=[100 * MS], completion_tokens=1)) == []


def test_itl_lists_every_gap_between_chunks() -> None:
    metric = get_metric("itl")
    assert isinstance(metric, ListMetric)
    assert metric.values(_ladder()) == [20 * MS, 30 * MS, 40 * MS]
    assert metric.values(_ladder(chunk_ns=[100 * MS])) == []


def test_server_timings_convert_prompt_ms_to_ns_and_read_token_counts() -> None:
    record = _ladder(server_timings={"prompt_ms": 12.5, "cache_n": 574, "prompt_n": 36})
    assert _value("server_prompt_ms", record) == [pytest.approx(12.5 * MS)]
    assert _value("server_cache_n", record) == [574]
    assert _value("server_prompt_n", record) == [36]
    assert _value("server_prompt_ms", _ladder()) == []
    assert _value("server_cache_n", _ladder(server_timings={"prompt_ms": 1.0})) == []


def test_token_counts_come_from_usage() -> None:
    record = _ladder(prompt_tokens=610, cached_tokens=574, completion_tokens=48)
    assert _value("prompt_tokens", record) == [610]
    assert _value("cached_tokens", record) == [574]
    assert _value("completion_tokens", record) == [48]
    assert _value("completion_tokens", _ladder()) == [4]  # chunk count without usage
