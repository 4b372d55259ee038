"""The dynamic-prefix step's statistics and its skip rules (the replay itself runs in e2e)."""

from __future__ import annotations

import time

from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.step_dynamic import dynamic_prefix
from ttft.testing.dynamic_logs import BUILDERS
from ttft.workload.requests import WorkItem


def _ctx(bodies: list[dict[str, object]]) -> DoctorContext:
    return DoctorContext(
        target=Target("http://127.0.0.1:9"),
        deadline=time.monotonic() + 60,
        real_items=[WorkItem(dict(b), "chat", "real") for b in bodies],
    )


def test_no_log_is_skipped_and_a_clean_log_measures_nothing() -> None:
    assert dynamic_prefix(_ctx([])).status.value == "skipped"
    clean = dynamic_prefix(_ctx(BUILDERS["clean"](count=3, words=40).bodies))
    assert clean.status.value == "ok" and clean.findings == []


def test_an_unmovable_span_is_reported_without_sending_anything() -> None:
    step = dynamic_prefix(_ctx(BUILDERS["tool-description"](count=3, words=40).bodies))
    assert [f.rule for f in step.findings] == ["cache/dynamic-unmovable"]
    assert step.summary == "dynamic content found, none of it movable"
