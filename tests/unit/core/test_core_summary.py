"""Per-cell summaries: phases, failures, throughput, goodput, warnings and the JSON schema."""

from __future__ import annotations

import json
import random

import pytest

from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.summary import SCHEMA, BenchSummary, summarize, summarize_run

MS = 1_000_000
S = 1_000 * MS


def _record(
    index: int,
    ttft_ms: float = 100.0,
    *,
    cell: str = "c=1",
    phase: str = "warm",
    wait_ms: float = 0.0,
    error: str | None = None,
    tokens: int = 5,
    start_ms: float | None = None,
) -> RequestRecord:
    scheduled = int((index * 200 if start_ms is None else start_ms) * MS)
    sent = scheduled + int(wait_ms * MS)
    first = sent + int(ttft_ms * MS)
    chunks = [first + k * 10 * MS for k in range(tokens)]
    return RequestRecord(
        index=index,
        cell=cell,
        phase=phase,
        scheduled_ns=scheduled,
        sent_ns=sent,
        headers_ns=sent + MS,
        first_byte_ns=sent + MS,
        first_event_ns=first,
        first_content_ns=None if error else first,
        first_output_ns=None if error else first,
        chunk_ns=[] if error else chunks,
        done_ns=chunks[-1] + MS,
        completion_tokens=None if error else tokens,
        error=ErrorInfo(error, "failed") if error else None,
    )


def _steady(n: int, **kwargs: object) -> list[RequestRecord]:
    rng = random.Random(n)
    return [_record(i, 100 + rng.uniform(-5, 5), **kwargs) for i in range(n)]  # type: ignore[arg-type]


def test_warmup_is_counted_apart_and_cold_is_summarized_apart() -> None:
    records = [_record(0, 900, phase="warmup"), _record(1, 800, phase="warmup")]
    records += [_record(i, 1500, phase="cold") for i in range(2, 4)]
    records += [_record(i, 100) for i in range(4, 14)]
    summary = summarize(records, duration_ns=2 * S)
    assert (summary.phase, summary.n, summary.warmup) == ("warm", 10, 2)
    assert summary.metrics["ttft"].stats.max == pytest.approx(100 * MS)
    assert summary.cold is not None
    assert (summary.cold.phase, summary.cold.n) == ("cold", 2)
    assert summary.cold.metrics["ttft"].stats.p50 == pytest.approx(1500 * MS)


def test_a_cell_of_only_cold_requests_is_the_cold_phase() -> None:
    summary = summarize([_record(i, 1500, phase="cold") for i in range(3)])
    assert summary.phase == "cold" and summary.cold is None and summary.n == 3


def test_failures_are_counted_by_kind_and_kept_out_of_latency_stats() -> None:
    records = [*_steady(8), _record(8, error="timeout"), _record(9, error="http_5xx")]
    records.append(RequestRecord(index=10, sent_ns=0, done_ns=5 * MS))  # stream without content
    summary = summarize(records)
    assert (summary.n, summary.ok, summary.failed) == (11, 8, 3)
    assert summary.errors == {"http_5xx": 1, "no_content": 1, "timeout": 1}
    assert summary.metrics["ttft"].stats.n == 8


def test_throughput_uses_the_given_duration_or_the_records_span() -> None:
    records = [_record(i, 100, tokens=5) for i in range(10)]
    given = summarize(records, duration_ns=4 * S)
    assert given.request_throughput == pytest.approx(2.5)
    assert given.output_token_throughput == pytest.approx(12.5)
    derived = summarize(records)
    # first scheduled at 0, last done at 1800 + 100 + 40 + 1 ms
    assert derived.duration_ns == 1941 * MS
    assert derived.request_throughput == pytest.approx(10 / 1.941)


def test_goodput_counts_failures_and_slow_requests_as_not_good() -> None:
    records = [_record(i, 100) for i in range(7)]
    records.append(_record(7, 900))  # too slow
    records += [_record(8, error="timeout"), _record(9, error="http_5xx")]
    summary = summarize(records, duration_ns=2 * S, slos=parse_slos("ttft:p99<600ms"))
    assert summary.goodput is not None
    assert summary.goodput.good == 7
    assert summary.goodput.fraction == pytest.approx(0.7)
    assert summary.goodput.per_s == pytest.approx(3.5)


def test_no_slo_means_no_goodput() -> None:
    assert summarize(_steady(5)).goodput is None


def test_slo_verdicts_per_cell_and_overall() -> None:
    slos = parse_slos("ttft:p50<200ms,ttft:p99<50ms")
    summary = summarize(_steady(20), slos=slos)
    assert [v.passed for v in summary.slos] == [True, False]
    assert not summary.slos_passed


def test_a_clean_large_cell_has_no_warnings() -> None:
    assert summarize(_steady(200)).warnings == []


def test_errors_warning_says_how_many_failed_and_their_kinds() -> None:
    records = [*_steady(198), _record(198, error="timeout"), _record(199, error="http_5xx")]
    messages = [w.message for w in summarize(records).warnings]
    assert messages == [
        "2 of 200 requests failed (http_5xx 1, timeout 1); they count as not good in goodput"
    ]


def test_client_lag_warning_fires_above_ten_ms_of_client_wait_at_p99() -> None:
    lagging = summarize(_steady(200, wait_ms=25.0))
    kinds = [w.kind for w in lagging.warnings]
    assert kinds == ["client_lag"]
    assert "fell behind its schedule by 25.0 ms at p99" in lagging.warnings[0].message
    assert "lower the rate" in lagging.warnings[0].message
    assert summarize(_steady(200, wait_ms=2.0)).warnings == []


def test_few_samples_warning_covers_reported_and_slo_percentiles() -> None:
    summary = summarize(_steady(20), slos=parse_slos("ttft:p99.9<1s"))
    [notice] = [w for w in summary.warnings if w.kind == "few_samples"]
    assert notice.message == (
        "ttft p99 and p99.9 from 20 samples are in effect the max; "
        "run >= 1000 requests for a real p99.9"
    )


def test_spread_and_outlier_warnings_on_the_headline_metric() -> None:
    records = [_record(i, 25 if i % 2 else 1300) for i in range(200)]
    assert [w.kind for w in summarize(records).warnings] == ["high_spread"]
    spiky = [*_steady(200), _record(200, 5000)]
    outliers = [w for w in summarize(spiky).warnings if w.kind == "outliers"]
    assert len(outliers) == 1 and "1 of 201 samples" in outliers[0].message


def test_summarize_run_groups_cells_in_order_with_per_cell_durations() -> None:
    records = _steady(10, cell="c=1") + _steady(10, cell="c=8")
    run = summarize_run(records, duration_ns={"c=1": 2 * S}, meta={"label": "base"})
    assert [cell.cell for cell in run.cells] == ["c=1", "c=8"]
    assert run.cells[0].request_throughput == pytest.approx(5.0)
    assert run.cells[1].duration_ns is not None
    assert run.meta["label"] == "base" and run.meta["bootstrap_resamples"] == 1000
    assert run.find("c=8") is run.cells[1]
    assert run.find("c=8", "cold") is None


def test_summary_json_round_trips_through_text() -> None:
    records = [*_steady(30), _record(30, error="timeout"), _record(31, 900, phase="cold")]
    run = summarize_run(records, slos=parse_slos("ttft:p99<600ms,tpot:p95<50ms"))
    data = json.loads(json.dumps(run.to_dict()))
    assert data["schema"] == SCHEMA == "ttft.bench.summary/1"
    ttft = data["cells"][0]["metrics"]["ttft"]
    assert ttft["unit"] == "ns"
    assert set(ttft["p50_ci"]) == {"low", "high", "level"}
    assert set(ttft["p95_ci"]) == {"low", "high", "level"}
    assert BenchSummary.from_dict(data) == run


def test_from_json_refuses_another_schema_with_a_fix() -> None:
    with pytest.raises(TtftError) as caught:
        BenchSummary.from_dict({"schema": "something/9", "cells": []})
    assert "something/9" in caught.value.problem
    assert caught.value.fix is not None and "ttft bench" in caught.value.fix


def test_a_cell_where_every_request_failed_fails_its_slos_with_zero_goodput() -> None:
    records = [_record(i, error="http_5xx") for i in range(4)]
    summary = summarize(records, duration_ns=S, slos=parse_slos("ttft:p99<600ms"))
    assert summary.ok == 0 and "ttft" not in summary.metrics
    assert summary.goodput is not None and summary.goodput.good == 0
    assert summary.goodput.fraction == 0.0
    [verdict] = summary.slos
    assert verdict.observed is None and not verdict.passed
    assert [w.kind for w in summary.warnings] == ["errors"]


def test_a_slow_cold_request_is_reported_but_does_not_fail_the_slo() -> None:
    """The first request after a start is shown apart; SLOs speak of the warm service."""
    from ttft.core.records import RequestRecord
    from ttft.core.slo import parse_slos
    from ttft.core.summary import summarize

    ms = 1_000_000
    warm = [
        RequestRecord(index=i, cell="c", sent_ns=0, first_content_ns=100 * ms, done_ns=101 * ms)
        for i in range(20)
    ]
    cold = RequestRecord(
        index=99, cell="c", phase="cold", sent_ns=0, first_content_ns=5000 * ms, done_ns=5001 * ms
    )
    summary = summarize([cold, *warm], slos=parse_slos("ttft:p99<600ms"))
    assert summary.cold is not None and summary.cold.slos and not summary.cold.slos[0].passed
    assert summary.slos_passed
