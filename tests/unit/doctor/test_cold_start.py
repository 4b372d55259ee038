"""The cold-start verdict on scripted records: the first request after start against warm ones.

The real engine on this project's CPUs cannot produce a slow first request (it reads every weight
at load; tests/e2e/test_doctor_verdicts_e2e.py has the measurement), so the positive verdict is
checked here, with the numbers of the article's symptom (page faults, kernel autotune on a GPU).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.step_latency import cold_start
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

MS = 1_000_000


def _record(ms: float) -> RequestRecord:
    return RequestRecord(index=0, sent_ns=0, first_content_ns=int(ms * MS), done_ns=int(ms * MS))


class Warm(DoctorContext):
    def __init__(self, cold_ms: float, warm_ms: float, managed: bool = True) -> None:
        super().__init__(
            Target("http://llama:8080", engine_kind="llamacpp"),
            time.monotonic() + 60,
            managed=managed,
            cold_record=_record(cold_ms),
        )
        self.warm_ms = warm_ms

    def text(self, tokens: int, seed: str) -> str:
        return "x " * tokens

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        return Sample([_record(self.warm_ms) for _ in items])


def test_a_first_request_far_above_warm_ones_is_a_cold_start() -> None:
    step = cold_start(Warm(cold_ms=2461.0, warm_ms=319.0))
    (finding,) = step.findings
    assert finding.rule == "latency/cold-start"
    assert finding.expected_gain_ms == 2461.0 - 319.0
    assert "warm-up" in finding.action and "mlock" in finding.action


def test_a_first_request_within_the_margin_is_not() -> None:
    # 2 x warm + 200 ms is the line: page-cache noise and a busy machine stay below it.
    assert cold_start(Warm(cold_ms=800.0, warm_ms=319.0)).findings == []


def test_a_service_doctor_did_not_start_has_no_first_request() -> None:
    step = cold_start(Warm(cold_ms=2461.0, warm_ms=319.0, managed=False))
    assert step.status == "skipped" and step.findings == []
