"""Reading timed traces: the arrival-time rules, format detection, and every bad input named by
file:line with a fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ttft.core.errors import TtftError
from ttft.workload.trace import read_trace

MS = 1_000_000


def write(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def chat(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hi"}], **fields}


def mooncake(t: float, length: int = 700, ids: list[int] | None = None) -> dict[str, Any]:
    return {"timestamp": t, "input_length": length, "output_length": 5, "hash_ids": ids or [1, 2]}


def test_absolute_epoch_ms_timestamps_become_offsets_from_the_first_arrival(tmp_path: Path) -> None:
    t0 = 1_764_000_000_000
    trace = read_trace(write(tmp_path, chat(timestamp=t0), chat(timestamp=t0 + 250.5)))
    assert trace.format == "jsonl"
    assert trace.offsets_ns == (0, 250_500_000)


def test_relative_seconds_in_arrival_s_are_read_as_seconds(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, chat(arrival_s=1.5), chat(arrival_s=2.0)))
    assert trace.offsets_ns == (0, 500 * MS)


def test_the_timestamp_field_and_streaming_settings_are_not_sent(tmp_path: Path) -> None:
    line = chat(timestamp=0, stream=False, model="m", max_tokens=7)
    request = read_trace(write(tmp_path, line)).requests[0]
    assert request.body == {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}
    assert request.api == "chat" and request.output_length == 7


def test_a_completions_body_is_detected_by_its_prompt(tmp_path: Path) -> None:
    request = read_trace(write(tmp_path, {"timestamp": 0, "prompt": "abc"})).requests[0]
    assert request.api == "completions" and request.output_length is None


def test_lines_out_of_time_order_are_replayed_sorted_with_a_note(tmp_path: Path) -> None:
    path = write(tmp_path, chat(timestamp=100, n=0), chat(timestamp=0, n=1), chat(timestamp=50))
    trace = read_trace(path)
    assert trace.offsets_ns == (0, 50 * MS, 100 * MS)
    assert [r.line for r in trace.requests] == [2, 3, 1]
    assert "2 of 3 lines" in trace.notes[0] and "arrival-time order" in trace.notes[0]


def test_equal_timestamps_keep_their_line_order_and_need_no_note(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, chat(timestamp=5), chat(timestamp=5)))
    assert [r.line for r in trace.requests] == [1, 2] and trace.notes == []


def test_limit_keeps_the_first_requests_in_time_order(tmp_path: Path) -> None:
    path = write(tmp_path, chat(timestamp=30), chat(timestamp=10), chat(timestamp=20))
    trace = read_trace(path, limit=2)
    assert [r.line for r in trace.requests] == [2, 3]
    assert trace.offsets_ns == (0, 10 * MS)


def test_a_mooncake_line_is_detected_and_read(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path, mooncake(0, 700, [4, 9]), mooncake(1000, 512, [4])))
    assert trace.format == "mooncake"
    first = trace.requests[0]
    assert (first.input_length, first.output_length, first.hash_ids) == (700, 5, (4, 9))
    assert trace.offsets_ns == (0, 1000 * MS)
    assert trace.longest_prompt == 700


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ([""], ["holds no requests"]),
        (["", "   "], ["holds no requests"]),
        (['{"timestamp": 0, "messages": ['], ["trace.jsonl:1", "not valid JSON"]),
        ([json.dumps(chat(timestamp=0)), "[1, 2]"], ["trace.jsonl:2", "JSON object"]),
        ([json.dumps({"timestamp": 0, "foo": 1})], ["cannot tell the trace format"]),
        ([json.dumps(chat())], ["trace.jsonl:1", "no arrival time"]),
        ([json.dumps(chat(timestamp=0, arrival_s=0))], ["both 'timestamp'", "arrival_s"]),
        (
            [json.dumps(chat(timestamp=0)), json.dumps(chat(arrival_s=1))],
            ["trace.jsonl:2", "one arrival field"],
        ),
        ([json.dumps(chat(timestamp=1_764_000_000))], ["looks like epoch seconds"]),
        ([json.dumps(chat(arrival_s=1_764_000_000_000))], ["looks like epoch milliseconds"]),
        ([json.dumps(chat(timestamp=-5))], ["at least 0"]),
        ([json.dumps(chat(timestamp="soon"))], ["must be a number"]),
        ([json.dumps({"timestamp": 0, "messages": "hi"})], ["trace.jsonl:1"]),
        ([json.dumps({"timestamp": 0, "input_length": 10})], ["missing output_length, hash_ids"]),
        (
            [json.dumps({**mooncake(0), "hash_ids": [1, "a"]})],
            ["'hash_ids' must be a list of whole numbers"],
        ),
        ([json.dumps({**mooncake(0), "input_length": 0})], ["'input_length'", "at least 1"]),
        ([json.dumps(mooncake(0, 700, [1, 2, 3]))], ["2 blocks of 512", "has 3", "--block-size"]),
    ],
)
def test_bad_traces_are_errors_that_name_the_problem(
    tmp_path: Path, lines: list[str], words: list[str]
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(TtftError) as caught:
        read_trace(path)
    text = str(caught.value) + " " + (caught.value.fix or "")
    for word in words:
        assert word in text


def test_the_block_size_decides_how_many_hash_ids_a_line_needs(tmp_path: Path) -> None:
    path = write(tmp_path, mooncake(0, 130, [1, 2, 3]))
    assert read_trace(path, block_size=64).requests[0].hash_ids == (1, 2, 3)
    with pytest.raises(TtftError, match="1 blocks of 512"):
        read_trace(path)


def test_a_forced_format_that_does_not_fit_the_lines_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="missing input_length"):
        read_trace(write(tmp_path, chat(timestamp=0)), "mooncake")
    with pytest.raises(TtftError, match="'messages' list or a 'prompt'"):
        read_trace(write(tmp_path, mooncake(0)), "jsonl")


def test_a_missing_file_and_bad_settings_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="trace not found"):
        read_trace(tmp_path / "nope.jsonl")
    path = write(tmp_path, chat(timestamp=0))
    with pytest.raises(TtftError, match="--trace-limit"):
        read_trace(path, limit=0)
    with pytest.raises(TtftError, match="--block-size"):
        read_trace(path, block_size=0)
