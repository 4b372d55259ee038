"""Every first-token definition gets its own rung, read from crafted stream chunks.

TTFT stays the first content token (content, reasoning or tool arguments); beside it the record
keeps the role chunk, the first reasoning text, the first tool-call delta and (through
``chunk_ns``) the second token, so a report can show all of them side by side.
"""

from __future__ import annotations

import json
from typing import Any

from ttft.client.openai import ChunkReader
from ttft.client.sse import SseEvent
from ttft.core.metrics import get_metric
from ttft.core.records import RequestRecord


def read(*chunks: dict[str, Any]) -> RequestRecord:
    """Feed chunks at t = 10, 20, 30, ... (the request was sent at t = 0)."""
    record = RequestRecord(index=0, status=200, sent_ns=0)
    reader = ChunkReader(record)
    for i, chunk in enumerate(chunks):
        reader.event(SseEvent(json.dumps(chunk)), (i + 1) * 10)
    return record


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-7", "choices": [{"index": 0, "delta": fields}]}


def metric(name: str, record: RequestRecord) -> list[float]:
    found = get_metric(name)
    assert found is not None, name
    return found.values(record)


def test_a_role_only_first_chunk_is_the_role_rung_and_not_a_token() -> None:
    record = read(delta(role="assistant", content=None), delta(content="Hi"), delta(content="!"))
    assert record.first_event_ns == 10
    assert record.first_role_ns == 10
    assert record.first_content_ns == 20  # TTFT: the role chunk carried no text
    assert metric("time_to_role_chunk", record) == [10]
    assert metric("ttft", record) == [20]
    assert metric("time_to_second_token", record) == [30]


def test_a_role_riding_on_the_first_token_gives_one_time_to_both_rungs() -> None:
    record = read(delta(role="assistant", content="Hi"), delta(content="!"))
    assert record.first_role_ns == record.first_content_ns == 10


def test_reasoning_first_sets_the_reasoning_rung_and_ttft_but_not_the_output_rung() -> None:
    record = read(
        delta(role="assistant", content=None),
        delta(reasoning_content="let me think"),
        delta(reasoning_content=" more"),
        delta(content="42"),
    )
    assert record.first_reasoning_ns == 20
    assert record.first_content_ns == 20
    assert record.first_output_ns == 40
    assert metric("time_to_first_reasoning", record) == [20]
    assert metric("ttft_output", record) == [40]
    assert metric("time_to_second_token", record) == [30]  # reasoning text counts as a token


def test_the_reasoning_field_variant_is_read_too() -> None:
    record = read(delta(reasoning="hmm"), delta(content="ok"))
    assert record.first_reasoning_ns == 10


def test_a_tool_call_first_sets_the_tool_rung_even_before_any_argument_text() -> None:
    name_only = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
    args = {"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}
    record = read(delta(role="assistant", content=None), delta(tool_calls=[name_only]),
                  delta(tool_calls=[args]))  # fmt: skip
    assert record.first_tool_call_ns == 20
    assert record.first_content_ns == 30  # the first argument text is the first token
    assert record.first_reasoning_ns is None
    assert metric("time_to_first_tool_call", record) == [20]
    assert metric("time_to_first_reasoning", record) == []


def test_an_empty_tool_calls_list_is_no_tool_call() -> None:
    record = read(delta(content="x", tool_calls=[]))
    assert record.first_tool_call_ns is None


def test_a_single_text_chunk_has_no_second_token() -> None:
    record = read(delta(content="only"))
    assert metric("time_to_second_token", record) == []


def test_the_stream_id_is_kept_from_the_first_chunk_that_has_one() -> None:
    record = read({"choices": []}, delta(content="a"), {**delta(content="b"), "id": "other"})
    assert record.response_id == "chatcmpl-7"


def test_a_record_written_before_the_new_rungs_still_reads_back() -> None:
    old = RequestRecord(index=3, sent_ns=1, first_content_ns=5).to_dict()
    for name in ("first_role_ns", "first_reasoning_ns", "first_tool_call_ns", "request_id",
                 "server_request_id", "response_id"):  # fmt: skip
        del old[name]
    back = RequestRecord.from_dict(old)
    assert back.first_content_ns == 5 and back.request_id is None and back.first_role_ns is None
