"""The capacity step's GPU and KV judgement, on exposition text of vLLM, SGLang and DCGM.

Each load level's scrape (tests/data/metrics, README there) goes through the same adapter mapping,
gauge-peak sampler and DCGM parser that doctor uses on a live service; only the HTTP is left out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ttft.core.records import RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.target import Target
from ttft.doctor import step_server
from ttft.doctor.context import DoctorContext
from ttft.engines.gpu import from_dcgm
from ttft.engines.prometheus import parse_exposition
from ttft.load.gpu_sampler import DcgmSource
from ttft.load.server_metrics import MetricsWatcher, update_gauge_peaks
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

DATA = Path(__file__).parents[2] / "data" / "metrics"
MS = 1_000_000


def _record(ttft_ms: float) -> RequestRecord:
    first = int(ttft_ms * MS)
    return RequestRecord(
        index=0, sent_ns=0, first_content_ns=first, chunk_ns=[first], done_ns=first
    )


class Scripted(DoctorContext):
    """An engine whose /metrics (and GPU exporter) read the recorded text of each level."""

    def __init__(
        self,
        kind: str,
        scenario: str,
        ttft_ms: dict[int, float],
        gpu: str | None = None,
        slo: str | None = None,
    ) -> None:
        super().__init__(
            Target(f"http://{kind}:8000", "m", f"http://{kind}:8000/metrics", kind),
            time.monotonic() + 600,
            levels=sorted(ttft_ms),
            gpu=DcgmSource("http://gpu:9400/metrics") if gpu else None,
            gpu_missing="" if gpu else "no GPU telemetry (test)",
            slos=tuple(parse_slos([slo])) if slo else (),
        )
        self.kind, self.scenario, self.ttft_ms, self.gpu_scenario = kind, scenario, ttft_ms, gpu
        self.previous = parse_exposition((DATA / f"{kind}_idle.prom").read_text())

    def text(self, tokens: int, seed: str) -> str:
        return "x " * tokens

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        level = int(options["concurrency"])
        scrape = parse_exposition((DATA / f"{self.kind}_{self.scenario}_c{level}.prom").read_text())
        server = MetricsWatcher(None, self.kind).deltas(self.previous, scrape)
        self.previous = scrape
        peaks: dict[str, float] = {}
        update_gauge_peaks(self.kind, scrape, peaks)
        readings = []
        if self.gpu_scenario is not None:
            assert options.get("gpu") is self.gpu
            gpus = from_dcgm(
                parse_exposition((DATA / f"dcgm_{self.gpu_scenario}_c{level}.prom").read_text())
            )
            # The exporter's value moves a little between readings, as a live one does.
            readings = [
                [dataclasses.replace(g, util_pct=(g.util_pct or 0) + d) for g in gpus]
                for d in (-2, 0, 2)
            ]
        records = [_record(self.ttft_ms[level]) for _ in items]
        return Sample(records, server, 0, peaks, readings)


def _rules(step: Any) -> list[str]:
    return [f.rule for f in step.findings]


def _evidence(step: Any) -> dict[str, Any]:
    return {e.name: e.value for e in step.evidence}


def test_vllm_preempting_at_concurrency_32_is_capped_at_the_last_clean_level() -> None:
    ctx = Scripted("vllm", "preempting", {1: 180.0, 8: 310.0, 32: 2900.0}, gpu="busy")
    step = step_server.capacity(ctx)
    assert "capacity/preemption" in _rules(step)
    finding = next(f for f in step.findings if f.rule == "capacity/preemption")
    assert "37 preemption" in finding.title and "98%" in finding.title
    assert "--max-num-seqs 8" in finding.action and "--gpu-memory-utilization" in finding.action
    assert finding.change is not None and dict(finding.change.flags) == {"--max-num-seqs": "8"}
    assert finding.change.engine == "vllm"
    kv = _evidence(step)["peak KV-cache usage by concurrency (band 80-90%)"]
    assert "c=8: 27% (below the band)" in kv and "c=32: 98% (above the band)" in kv
    assert _evidence(step)["preemptions by concurrency"] == "c=1: 0, c=8: 0, c=32: 37"
    # The GPU was busy (97% at c=32): not the "utilization low" row.
    assert "gpu/low-utilization" not in _rules(step)


def test_sglang_retractions_name_its_own_knobs() -> None:
    ctx = Scripted("sglang", "preempting", {1: 170.0, 8: 290.0, 32: 2600.0})
    step = step_server.capacity(ctx)
    finding = next(f for f in step.findings if f.rule == "capacity/preemption")
    assert "--max-running-requests 8" in finding.action
    assert "--mem-fraction-static 0.90" in finding.action
    assert finding.change is not None
    assert dict(finding.change.flags) == {"--max-running-requests": "8"}
    assert "12 preemption" in finding.title and "96%" in finding.title


def test_vllm_queueing_with_kv_room_and_an_idle_gpu_points_at_queueing() -> None:
    """--max-num-seqs 8 at concurrency 32: 24 wait, KV at 28%, GPU busy 61% of the time."""
    ctx = Scripted("vllm", "queueing", {1: 180.0, 8: 320.0, 32: 1900.0}, gpu="queueing")
    step = step_server.capacity(ctx)
    rules = _rules(step)
    assert "capacity/queueing" in rules and "gpu/low-utilization" in rules
    assert "capacity/preemption" not in rules
    queueing = next(f for f in step.findings if f.rule == "capacity/queueing")
    assert "room for more running requests" in queueing.message
    assert any("below the 80-90% band" in e.name for e in queueing.evidence)
    assert queueing.change is not None
    assert dict(queueing.change.flags) == {"--max-num-seqs": "32"}
    gpu = next(f for f in step.findings if f.rule == "gpu/low-utilization")
    assert "1900 ms at concurrency 32" in gpu.title and "61%" in gpu.title
    assert "queueing" in gpu.message and "62%" in gpu.message
    shown = _evidence(step)["TTFT p50 / GPU utilization (mean) by concurrency"]
    assert shown == "c=1: 180 ms / 23%, c=8: 320 ms / 58%, c=32: 1900 ms / 61%"
    assert "SM clock (mean) by concurrency" in _evidence(step)


def test_a_busy_gpu_with_high_ttft_is_not_the_low_utilization_row() -> None:
    ctx = Scripted("vllm", "queueing", {1: 180.0, 8: 320.0, 32: 1900.0}, gpu="busy")
    assert "gpu/low-utilization" not in _rules(step_server.capacity(ctx))


def test_low_utilization_with_ttft_that_stays_flat_is_no_finding() -> None:
    ctx = Scripted("vllm", "preempting", {1: 180.0, 8: 200.0}, gpu="queueing")
    ctx.levels = (1, 8)
    step = step_server.capacity(ctx)
    assert step.findings == []


def test_an_slo_failing_at_a_level_counts_as_high_ttft() -> None:
    ctx = Scripted("vllm", "preempting", {1: 180.0, 8: 340.0}, gpu="queueing", slo="ttft:p50<300ms")
    ctx.levels = (1, 8)
    assert "gpu/low-utilization" in _rules(step_server.capacity(ctx))


def test_without_a_gpu_source_the_report_says_what_it_could_not_see() -> None:
    ctx = Scripted("vllm", "queueing", {1: 180.0, 8: 320.0, 32: 1900.0})
    step = step_server.capacity(ctx)
    assert "gpu/low-utilization" not in _rules(step)
    assert "no GPU telemetry (test)" in step.notes


def test_the_preemption_change_becomes_a_plan_step_for_tune_ab() -> None:
    from ttft.core.plan import ServiceSpec, parse_plan, plan_to_toml
    from ttft.doctor.plan import build_plan

    ctx = Scripted("vllm", "preempting", {1: 180.0, 8: 310.0, 32: 2900.0}, gpu="busy")
    step = step_server.capacity(ctx)
    launch = "vllm serve m --max-num-seqs 256 --gpu-memory-utilization 0.95"
    plan = build_plan(
        step.findings, ServiceSpec(url="http://vllm:8000", engine="vllm", launch=launch)
    )
    (only,) = plan.steps
    assert dict(only.change.flags) == {"--max-num-seqs": "8"}
    again = parse_plan(plan_to_toml(plan))
    assert dict(again.steps[0].change.flags) == {"--max-num-seqs": "8"}


def test_a_gpu_source_that_never_changed_lowers_the_confidence() -> None:
    """dcgm-exporter collects every 30 s by default: a short level may see one stale value."""

    class Stale(Scripted):
        def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
            result = super().sample(items, **options)
            result.gpu = [result.gpu[1]] * 5  # five readings, one value
            return result

    ctx = Stale("vllm", "queueing", {1: 180.0, 8: 320.0, 32: 1900.0}, gpu="queueing")
    finding = next(f for f in step_server.capacity(ctx).findings if f.rule == "gpu/low-utilization")
    assert finding.confidence is not None and finding.confidence.label == "low"
    assert "30 s" in finding.message
