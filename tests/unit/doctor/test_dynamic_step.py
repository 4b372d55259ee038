"""The dynamic-prefix step's statistics and its skip rules (the replay itself runs in e2e)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from os.path import commonprefix
from typing import Any

import pytest

import ttft.doctor.context as context_module
from ttft.core.records import RequestRecord
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.doctor.step_dynamic import dynamic_prefix
from ttft.probe.sampler import Sample
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


class _CachingEngine:
    """A fake engine with a prefix cache that outlives one doctor run: a prompt reuses the
    longest start it shares with any prompt sent before (4 characters a token), and its TTFT is
    1 ms per token it computes. Stands in for the network call behind ``ctx.sample``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def sample(self, _: Target, items: Sequence[WorkItem], **__: Any) -> Sample:
        records = []
        for n, item in enumerate(items):
            prompt = json.dumps(item.body["messages"])
            # characters, not path parts, are what two prompts share
            shared = (len(commonprefix([prompt, old])) for old in self.seen)  # noqa: RUF071
            reused = max(shared, default=0) // 4
            self.seen.append(prompt)
            computed = len(prompt) // 4 - reused
            sent = 1_000_000_000 * (len(self.seen) + 1)
            records.append(
                RequestRecord(
                    index=n,
                    sent_ns=sent,
                    first_content_ns=sent + computed * 1_000_000,
                    status=200,
                    cached_tokens=reused,
                )
            )
        return Sample(records=records, duration_ns=10_000_000)


def test_a_second_run_on_the_same_engine_still_finds_the_dynamic_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replays must not read the prefix cache an earlier run left: the same log replayed
    again found every request cached 'as it is' and reported nothing."""
    engine = _CachingEngine()
    monkeypatch.setattr(context_module, "sample", engine.sample)
    bodies = BUILDERS["second-line"](count=5, words=200).bodies
    for _ in range(2):
        step = dynamic_prefix(_ctx(bodies))
        assert [f.rule for f in step.findings] == ["cache/dynamic-prefix"], step.notes
