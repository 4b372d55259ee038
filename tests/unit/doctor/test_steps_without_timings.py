"""Engines without per-response timings (vLLM, SGLang): doctor reads their metric histograms.

The samples here stand in for measurements of a vLLM server (no `timings` in responses; queue
time and TTFT as Prometheus histograms, mapped through the vLLM adapter's common names).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.doctor import step_server, step_transport
from ttft.doctor.context import DoctorContext
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

MS = 1_000_000


def _record(ttft_ms: float, gap_ms: float = 20.0, chunks: int = 1) -> RequestRecord:
    first = int(ttft_ms * MS)
    chunk_ns = [first + int(i * gap_ms * MS) for i in range(chunks)]
    return RequestRecord(
        index=0, sent_ns=0, first_content_ns=first, chunk_ns=chunk_ns, done_ns=chunk_ns[-1]
    )


class FakeVllm(DoctorContext):
    """A context whose measurements are scripted per concurrency level."""

    def __init__(self, per_level: dict[int, tuple[float, dict[str, Any], dict[str, float]]]):
        super().__init__(
            Target("http://vllm:8000", "m", "http://vllm:8000/metrics", "vllm"),
            time.monotonic() + 600,
            levels=sorted(per_level),
        )
        self.per_level = per_level

    def text(self, tokens: int, seed: str) -> str:
        return "x " * tokens

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        level = int(options.get("concurrency", 1))
        ttft, metrics, peaks = self.per_level[level]
        chunks = 32 if items and items[0].body.get("max_tokens", 1) > 1 else 1
        records = [_record(ttft, chunks=chunks) for _ in items]
        return Sample(records, {"engine": "vllm", "metrics": metrics, "unavailable": {}}, 0, peaks)


def test_vllm_queue_histogram_reveals_queueing_at_load() -> None:
    ctx = FakeVllm(
        {
            1: (120.0, {"queue_time_s": {"mean": 0.002}}, {"requests_waiting": 0.0}),
            8: (2400.0, {"queue_time_s": {"mean": 2.1}}, {"requests_waiting": 6.0}),
        }
    )
    step = step_server.capacity(ctx)
    (finding,) = step.findings
    assert finding.rule == "capacity/queueing"
    assert "--max-num-seqs" in finding.action and finding.expected_gain_ms == 2100.0


def test_vllm_without_queueing_gives_no_finding() -> None:
    ctx = FakeVllm(
        {
            1: (120.0, {"queue_time_s": {"mean": 0.002}}, {"requests_waiting": 0.0}),
            8: (300.0, {"queue_time_s": {"mean": 0.01}}, {"requests_waiting": 0.0}),
        }
    )
    assert step_server.capacity(ctx).findings == []


def test_client_ttft_far_above_the_engines_own_ttft_is_transport() -> None:
    """vLLM says 100 ms to first token, the client sees 900 ms: the gap is in between."""
    ctx = FakeVllm({1: (900.0, {"server_ttft_s": {"mean": 0.1}}, {})})
    step = step_transport.run(ctx)
    assert [f.rule for f in step.findings] == ["transport/slow-first-byte"]
    assert step.findings[0].expected_gain_ms is not None
    assert 790 < step.findings[0].expected_gain_ms < 810


def test_client_ttft_matching_the_engines_own_ttft_is_healthy() -> None:
    ctx = FakeVllm({1: (130.0, {"server_ttft_s": {"mean": 0.12}}, {})})
    assert step_transport.run(ctx).findings == []
