"""Every prompt a doctor run sends starts with the run's own mark: an engine keeps what an
earlier run sent in its prefix cache, and a second run that sent the same prompts timed cache
hits where it meant to time prefills (a head-of-line block or a dynamic prefix found by the first
run was not found by the second)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

import ttft.doctor.context as context_module
from ttft.core.target import Target
from ttft.doctor.context import DoctorContext
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem


def _ctx() -> DoctorContext:
    return DoctorContext(target=Target("http://127.0.0.1:9"), deadline=time.monotonic() + 60)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []

    def fake_sample(_: Target, items: Sequence[WorkItem], **__: Any) -> Sample:
        bodies.extend(item.body for item in items)
        return Sample(records=[])

    monkeypatch.setattr(context_module, "sample", fake_sample)
    return bodies


def test_two_runs_send_the_same_items_as_different_prompts(sent: list[dict[str, Any]]) -> None:
    chat = WorkItem({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 1})
    first, second = _ctx(), _ctx()
    first.sample([chat, chat])
    second.sample([chat])
    a, b, c = (body["messages"][0]["content"] for body in sent)
    assert a == b, "one run's prompts share its mark"
    assert a != c and a.endswith("hello") and c.endswith("hello")
    assert chat.body["messages"][0]["content"] == "hello", "the caller's item is not changed"


def test_every_kind_of_prompt_carries_the_mark(sent: list[dict[str, Any]]) -> None:
    ctx = _ctx()
    items = [
        WorkItem({"prompt": "raw text", "max_tokens": 1}, "completions"),
        WorkItem({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}),
        WorkItem({"messages": [{"role": "assistant", "content": None, "tool_calls": []}]}),
    ]
    ctx.sample(items)
    mark = f"[{ctx.run}] "
    assert sent[0]["prompt"] == mark + "raw text"
    assert sent[1]["messages"][0]["content"][0] == {"type": "text", "text": mark}
    assert sent[2]["messages"][0] == {"role": "system", "content": mark}
    assert ctx.marked(items)[0].body == sent[0], "the direct paths mark the same way"
