"""The judgement inside doctor steps, on synthetic records: what counts as bunched, queued."""

from __future__ import annotations

import time

from ttft.core.findings import Confidence, CostTier, Finding, Severity, rank_by_cost
from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult
from ttft.doctor.step_server import _queueing_finding
from ttft.doctor.step_transport import shape

MS = 1_000_000


def _stream(
    ttft_ms: float, gaps_ms: list[float], prefill_ms: float, decode_ms: float
) -> RequestRecord:
    first = int(ttft_ms * MS)
    chunks = [first]
    for gap in gaps_ms:
        chunks.append(chunks[-1] + int(gap * MS))
    return RequestRecord(
        index=0,
        sent_ns=0,
        first_content_ns=first,
        chunk_ns=chunks,
        done_ns=chunks[-1],
        server_timings={"prompt_ms": prefill_ms, "predicted_ms": decode_ms},
    )


def test_a_stream_that_arrives_as_generated_is_not_bunched() -> None:
    s = shape(_stream(50, [20.0] * 31, prefill_ms=45, decode_ms=620))
    assert not s.bunched and s.gap_ms is not None and s.gap_ms < 10


def test_every_chunk_in_one_read_after_the_answer_is_bunched() -> None:
    s = shape(_stream(700, [0.01] * 31, prefill_ms=45, decode_ms=620))
    assert s.bunched and s.gap_ms is not None and s.gap_ms > 600


def test_without_server_timings_bunching_is_judged_from_the_gaps_alone() -> None:
    record = _stream(700, [0.01] * 31, prefill_ms=45, decode_ms=620)
    record.server_timings = None
    assert shape(record).bunched


def test_short_answers_are_never_called_bunched() -> None:
    assert not shape(_stream(700, [0.01] * 3, prefill_ms=45, decode_ms=60)).bunched


def _ctx(kind: str | None, slots: int | None) -> DoctorContext:
    props = {"total_slots": slots} if slots is not None else {}
    return DoctorContext(Target("http://x", engine_kind=kind), time.monotonic() + 60, props=props)


def test_queue_time_dominating_ttft_with_waiting_requests_is_queueing() -> None:
    step = StepResult("capacity", "c")
    _queueing_finding(
        _ctx("llamacpp", 1), step, {1: 300.0, 8: 2400.0}, {1: 5.0, 8: 2100.0}, {8: 7.0}, 1
    )
    assert [f.rule for f in step.findings] == ["capacity/queueing"]
    assert "-np 8" in step.findings[0].action
    assert step.findings[0].confidence == Confidence.HIGH


def test_one_slot_with_requests_seen_waiting_is_queueing_at_under_half_of_ttft() -> None:
    """Long, uneven prefills on one slot at c=4: the wait was 49% of TTFT p50 in a real run."""
    step = StepResult("capacity", "c")
    _queueing_finding(
        _ctx("llamacpp", 1), step, {1: 1663.0, 4: 10088.0}, {1: 14.0, 4: 4943.0}, {4: 3.0}, 1
    )
    assert [f.rule for f in step.findings] == ["capacity/queueing"]


def test_a_third_of_ttft_waiting_is_not_enough_without_fewer_slots_than_requests() -> None:
    step = StepResult("capacity", "c")
    _queueing_finding(
        _ctx("llamacpp", 4), step, {1: 300.0, 4: 1200.0}, {1: 5.0, 4: 480.0}, {4: 1.0}, 4
    )
    assert step.findings == []


def test_slower_batched_prefill_without_waiting_is_not_queueing() -> None:
    """Four slots at concurrency 4: prefill itself is slower (compute), nobody waits."""
    step = StepResult("capacity", "c")
    _queueing_finding(
        _ctx("llamacpp", 4), step, {1: 300.0, 4: 1200.0}, {1: 5.0, 4: 30.0}, {4: 0.0}, 4
    )
    assert step.findings == []


def _finding(tier: CostTier, gain: float | None) -> Finding:
    return Finding(
        "r", Severity.WARNING, "s", "c", action="a", tier=tier,
        confidence=Confidence.MEDIUM, step="x", expected_gain_ms=gain,
    )  # fmt: skip


def test_findings_rank_cheapest_tier_first_then_by_gain() -> None:
    cache_big = _finding(CostTier.CACHE, 900.0)
    transport_small = _finding(CostTier.TRANSPORT, 50.0)
    transport_big = _finding(CostTier.TRANSPORT, 400.0)
    assert rank_by_cost([cache_big, transport_small, transport_big]) == [
        transport_big,
        transport_small,
        cache_big,
    ]
