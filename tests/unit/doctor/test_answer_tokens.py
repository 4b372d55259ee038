"""Doctor's capacity probe asks for the answer lengths of the user's own request log."""

from __future__ import annotations

from ttft.core.target import Target
from ttft.doctor.context import DoctorContext, asked_answer_tokens
from ttft.workload.requests import WorkItem


def _item(**body: object) -> WorkItem:
    return WorkItem({"messages": [{"role": "user", "content": "hi"}], **body}, "chat", "real")


def test_asked_lengths_read_both_spellings_and_skip_the_rest() -> None:
    items = [
        _item(max_tokens=32),
        _item(max_completion_tokens=64),
        _item(),
        _item(max_tokens=True),
        _item(max_tokens=0),
    ]
    assert asked_answer_tokens(items) == (32, 64)


def test_the_median_is_probed_within_the_cap() -> None:
    ctx = DoctorContext(Target("http://x"), deadline=0.0)
    assert ctx.answer_tokens() == 1  # no log: one token, as before
    ctx.asked_answer_tokens = (16, 32, 2000)
    assert ctx.answer_tokens() == 32
    ctx.asked_answer_tokens = (4000, 5000)
    assert ctx.answer_tokens(cap=256) == 256
