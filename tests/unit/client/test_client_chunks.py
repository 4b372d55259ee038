"""Which stream chunks count as tokens, and where usage, timings and errors are read from."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ttft.client import errors
from ttft.client.openai import ChatRequest, ChunkReader, CompletionRequest, error_message, prepare
from ttft.client.sse import SseEvent
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord


def read(
    *chunks: dict[str, Any] | str, event: str = "message"
) -> tuple[RequestRecord, ChunkReader]:
    """Feed chunks at t = 10, 20, 30, ... and return the record and the reader."""
    record = RequestRecord(index=0, status=200)
    reader = ChunkReader(record)
    for i, chunk in enumerate(chunks):
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        reader.event(SseEvent(data, event=event), (i + 1) * 10)
    return record, reader


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def test_role_only_first_chunk_with_null_content_is_an_event_but_not_a_token() -> None:
    record, _ = read(delta(role="assistant", content=None), delta(content="Hi"))
    assert record.first_event_ns == 10
    assert record.first_content_ns == 20 and record.first_output_ns == 20
    assert record.chunk_ns == [20]


def test_role_chunk_with_empty_string_content_is_not_a_token() -> None:
    record, _ = read(delta(role="assistant", content=""), delta(content=""), delta(content="x"))
    assert record.first_content_ns == 30 and record.chunk_ns == [30]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_text_is_first_content_but_not_first_output(field: str) -> None:
    record, _ = read(delta(role="assistant"), delta(**{field: "think"}), delta(content="answer"))
    assert record.first_content_ns == 20
    assert record.first_output_ns == 30
    assert record.chunk_ns == [20, 30]
    assert record.output_text_chars == len("think") + len("answer")


def test_tool_call_arguments_count_as_output() -> None:
    call = {"index": 0, "function": {"name": "f", "arguments": '{"a"'}}
    record, _ = read(delta(tool_calls=[call]))
    assert record.first_output_ns == 10


def test_completions_text_counts_and_empty_text_does_not() -> None:
    record, _ = read({"choices": [{"text": ""}]}, {"choices": [{"text": "Once"}]})
    assert record.first_content_ns == 20 and record.first_output_ns == 20


def test_done_marks_the_done_rung_and_later_events_are_ignored() -> None:
    record, reader = read(delta(content="a"), "[DONE]", delta(content="late"))
    assert reader.done and record.done_ns == 20 and record.chunk_ns == [10]


def test_usage_and_timings_on_the_finish_chunk_are_read() -> None:
    finish = {
        "choices": [{"delta": {}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 610,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 574},
        },
        "timings": {"cache_n": 574, "prompt_n": 36, "prompt_ms": 80.5, "note": "x"},
    }
    record, _ = read(delta(content="a"), finish, "[DONE]")
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (610, 5, 574)
    assert record.server_timings == {"cache_n": 574.0, "prompt_n": 36.0, "prompt_ms": 80.5}


def test_usage_and_timings_on_an_extra_final_chunk_with_no_choices_are_read() -> None:
    final = {
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2},
        "timings": {"predicted_n": 2, "predicted_ms": 33.0},
    }
    record, _ = read(
        delta(content="a"), {"choices": [{"delta": {}, "finish_reason": "stop"}]}, final, "[DONE]"
    )
    assert record.prompt_tokens == 9 and record.cached_tokens is None
    assert record.server_timings == {"predicted_n": 2.0, "predicted_ms": 33.0}
    assert record.chunk_ns == [10]


def test_json_error_object_mid_stream_is_a_stream_error_keeping_earlier_rungs() -> None:
    record, reader = read(delta(content="a"), {"error": {"message": "KV cache full", "code": 500}})
    assert reader.error is not None
    assert (reader.error.kind, reader.error.message) == (errors.STREAM_ERROR, "KV cache full")
    assert record.first_content_ns == 10 and record.done_ns == 20


def test_sse_error_event_is_a_stream_error_with_its_message() -> None:
    _, reader = read('{"error": {"message": "boom"}}', event="error")
    assert reader.error is not None and reader.error.kind == errors.STREAM_ERROR
    assert reader.error.message == "boom"


def test_data_that_is_not_json_is_a_protocol_error() -> None:
    _, reader = read("not json")
    assert reader.error is not None and reader.error.kind == errors.PROTOCOL


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"error": {"message": "too long", "code": 400}}, "too long"),
        ({"error": "rate limited"}, "rate limited"),
        ({"detail": [{"msg": "field required"}]}, '{"msg": "field required"}'),
        ({"message": "nope"}, "nope"),
    ],
)
def test_error_message_finds_the_message_in_the_usual_shapes(payload: Any, message: str) -> None:
    assert error_message(payload) == message


def test_typed_requests_stream_with_usage_and_raw_bodies_are_routed_by_their_keys() -> None:
    api, body = prepare(ChatRequest([{"role": "user", "content": "hi"}], max_tokens=8), "m")
    assert api == "chat"
    assert body == {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "model": "m",
    }
    api, body = prepare(CompletionRequest("x", model="own", include_usage=False), "m")
    assert api == "completions" and body == {"prompt": "x", "model": "own", "stream": True}
    api, body = prepare({"prompt": "x", "ttft_tag": 3})
    assert api == "completions" and body == {"prompt": "x", "ttft_tag": 3, "stream": True}
    with pytest.raises(TtftError):
        prepare({"input": "x"})
