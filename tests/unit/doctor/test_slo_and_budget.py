"""Doctor with SLOs (where do they stop holding?) and a budget (cut steps: no clean bill)."""

from __future__ import annotations

import time

from ttft.core.records import RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult
from ttft.doctor.run import run_doctor
from ttft.doctor.slo_check import check_slos

MS = 1_000_000


def _records(ttft_ms: float, n: int = 10) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i,
            sent_ns=0,
            first_content_ns=int((ttft_ms + i) * MS),
            done_ns=int((ttft_ms + i + 1) * MS),
        )
        for i in range(n)
    ]


def test_an_slo_that_breaks_under_load_names_the_last_level_it_held() -> None:
    step = StepResult("capacity", "c")
    check_slos(step, parse_slos("ttft:p99<600ms"), {1: _records(300), 8: _records(2400)})
    (finding,) = step.findings
    assert finding.rule == "capacity/slo-limit"
    assert "--max-in-flight 1" in finding.action
    assert any("c=1" in str(e.value) and "FAIL" in str(e.value) for e in step.evidence)


def test_an_slo_missed_without_load_is_not_blamed_on_load() -> None:
    step = StepResult("capacity", "c")
    check_slos(step, parse_slos("ttft:p50<100ms"), {1: _records(300), 8: _records(900)})
    assert [f.rule for f in step.findings] == ["capacity/slo-unmet-unloaded"]


def test_an_slo_that_holds_everywhere_adds_evidence_and_no_finding() -> None:
    step = StepResult("capacity", "c")
    check_slos(step, parse_slos("ttft:p99<5s"), {1: _records(300), 8: _records(900)})
    assert step.findings == [] and step.evidence


def test_steps_cut_by_the_budget_make_the_report_incomplete() -> None:
    ctx = DoctorContext(Target("http://127.0.0.1:9"), deadline=time.monotonic() - 1)
    report = run_doctor(ctx)
    assert {s.status for s in report.steps} == {"out_of_budget"}
    assert not report.healthy and report.findings == []
    assert report.to_dict()["unfinished_steps"]


def test_a_step_that_crashes_is_reported_failed_and_the_others_still_run() -> None:
    def broken(ctx: DoctorContext) -> StepResult:
        raise KeyError("surprise")

    def fine(ctx: DoctorContext) -> StepResult:
        return StepResult("fine", "fine", summary="measured")

    ctx = DoctorContext(Target("http://127.0.0.1:9"), deadline=time.monotonic() + 60)
    report = run_doctor(ctx, steps=[("broken", broken), ("fine", fine)])
    assert [s.status for s in report.steps] == ["failed", "ok"]
    assert "internal error" in report.steps[0].notes[0] and not report.healthy
