"""A one-token answer whose token carries no text still has a time to first token.

Seen on the real engine: under a `response_format` JSON grammar, Gemma's one allowed token is
sometimes the grammar's leading blank, which llama-server's parser trims, so the stream carries
no text at all. Doctor asks for one token, so such an answer once had no TTFT, and the control
step failed without a word when all three of its real prompts drew the blank.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.target import Target
from ttft.doctor import step_cache
from ttft.doctor.context import DoctorContext, ttft_ms
from ttft.doctor.findings import StepStatus
from ttft.probe.sampler import Sample
from ttft.workload.requests import WorkItem

MS = 1_000_000


def _blank(done_ms: float, tokens: int = 1) -> RequestRecord:
    return RequestRecord(
        index=0, sent_ns=0, done_ns=int(done_ms * MS), status=200, completion_tokens=tokens
    )


def test_a_one_token_answer_without_text_is_timed_at_the_stream_end() -> None:
    assert ttft_ms(_blank(870.0)) == 870.0


def test_a_longer_answer_without_text_has_no_first_token_time() -> None:
    # Its end is many tokens after the first one: no honest first-token time.
    assert ttft_ms(_blank(870.0, tokens=16)) is None


def test_a_failed_request_has_no_first_token_time_even_with_one_token() -> None:
    record = _blank(870.0)
    record.error = ErrorInfo("disconnect", "the server closed the stream")
    assert ttft_ms(record) is None


def test_text_still_times_the_first_token_when_there_is_some() -> None:
    record = _blank(870.0)
    record.first_content_ns, record.output_text_chars = 400 * MS, 3
    assert ttft_ms(record) == 400.0


class Scripted(DoctorContext):
    """The minimal prompt answers with text; the real prompts as the script says."""

    def __init__(self, real: list[RequestRecord]):
        super().__init__(
            Target("http://e:8080", "m", None, "llamacpp"),
            time.monotonic() + 60,
            real_items=[WorkItem({"messages": [{"role": "user", "content": "x"}]})] * 3,
        )
        self.real = real

    def sample(self, items: Sequence[WorkItem], **options: Any) -> Sample:
        if items[0].bucket == "real":
            return Sample(self.real, None, 0, {})
        minimal = RequestRecord(index=0, sent_ns=0, first_content_ns=70 * MS, done_ns=70 * MS)
        return Sample([minimal] * len(items), None, 0, {})


def test_control_times_real_prompts_whose_one_token_is_blank() -> None:
    step = step_cache.control(Scripted([_blank(900.0), _blank(880.0), _blank(910.0)]))
    assert step.status is not StepStatus.FAILED
    shown = {e.name: e.value for e in step.evidence}
    assert shown["your prompts TTFT (p50)"] == 900.0


def test_control_that_cannot_time_says_why() -> None:
    failed = RequestRecord(index=0, sent_ns=0, status=503)
    failed.error = ErrorInfo("http_5xx", "HTTP 503: loading model", 503)
    step = step_cache.control(Scripted([failed] * 3))
    assert step.status is StepStatus.FAILED
    assert step.notes == ["no first token timed for your prompts: HTTP 503: loading model"]
