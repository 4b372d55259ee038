"""The sampling step's judgement, on a scripted engine whose TTFT depends on the sampler."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.step_sampling import HEAVY, sampling
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

MS = 1_000_000


class ScriptedSampler(DoctorContext):
    """Greedy takes ~40 ms; each request with ``top_k`` 0 pays ``cost_ms`` more."""

    def __init__(self, cost_ms: float, real: list[WorkItem] | None = None, refuse: bool = False):
        super().__init__(
            Target("http://llama:8080", "m", None, "llamacpp"),
            time.monotonic() + 600,
            real_items=real or [],
        )
        self.cost_ms, self.refuse, self.sent = cost_ms, refuse, []  # type: list[dict[str, Any]]
        self.jitter = itertools.cycle([-3.0, 1.0, 4.0, -1.0, 0.0, 2.0, -2.0])

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        records = []
        for item in items:
            self.sent.append(item.body)
            if self.refuse and "dry_multiplier" in item.body:
                error = ErrorInfo("http_4xx", "Field 'dry_multiplier' is not supported", 400)
                records.append(RequestRecord(index=0, sent_ns=0, error=error))
                continue
            ms = 40.0 + next(self.jitter)
            if item.body.get("temperature", 0) != 0:
                ms += self.cost_ms
            first = int(ms * MS)
            records.append(RequestRecord(index=0, sent_ns=0, first_content_ns=first, done_ns=first))
        return Sample(records)


HEAVY_LOG = [WorkItem({"messages": [], "temperature": 1.0, "top_k": 0, "top_p": 0.95})]


def test_logged_settings_that_cost_tens_of_ms_are_a_finding_with_a_ci() -> None:
    ctx = ScriptedSampler(cost_ms=60.0, real=HEAVY_LOG)
    step = sampling(ctx)
    (finding,) = step.findings
    assert finding.rule == "sampling/costly-chain"
    assert finding.expected_gain_ms is not None and 55 < finding.expected_gain_ms < 65
    shown = {e.name: e.value for e in step.evidence}
    assert "your request log" in str(shown["sampling settings"])
    low, high = (
        float(x) for x in str(shown["difference, 95% CI"]).removesuffix(" ms").split(" .. ")
    )
    assert 0 < low <= 60 <= high + 5
    assert "top-k" in finding.action


def test_without_logged_settings_a_heavy_chain_is_a_reference_not_a_finding() -> None:
    step = sampling(ScriptedSampler(cost_ms=60.0))
    assert step.findings == []
    assert "a heavy chain would cost 59 ms" in step.summary
    shown = {e.name: e.value for e in step.evidence}
    assert "heavy default chain" in str(shown["sampling settings"])
    assert "top_k=0" in str(shown["sampling settings"])


def test_a_cheap_chain_is_measured_but_not_a_finding() -> None:
    step = sampling(ScriptedSampler(cost_ms=1.0, real=HEAVY_LOG))
    assert step.findings == [] and "cost" in step.summary


def test_the_users_own_settings_from_the_log_are_the_ones_measured() -> None:
    log = [WorkItem({"messages": [], "temperature": 0.7, "top_p": 0.9, "top_k": 40})]
    ctx = ScriptedSampler(cost_ms=1.0, real=log)
    sampling(ctx)
    assert any(b.get("top_k") == 40 and b.get("top_p") == 0.9 for b in ctx.sent)
    assert not any(b.get("top_k") == 0 for b in ctx.sent)


def test_a_greedy_log_has_nothing_to_make_cheaper() -> None:
    ctx = ScriptedSampler(cost_ms=60.0, real=[WorkItem({"messages": [], "temperature": 0})])
    step = sampling(ctx)
    assert step.status == "skipped" and step.findings == [] and ctx.sent == []


def test_settings_the_engine_refuses_fall_back_to_openai_fields() -> None:
    ctx = ScriptedSampler(cost_ms=30.0, refuse=True)
    step = sampling(ctx)
    assert any("refused" in n for n in step.notes)
    assert "heavy chain would cost" in step.summary
    assert set(HEAVY["llamacpp"]) > {"temperature", "top_p"}
