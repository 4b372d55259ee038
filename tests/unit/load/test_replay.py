"""Trace replay as a cell: the schedule is the trace's offsets scaled by the speed, fixed before
the first send; a trace file becomes one replay cell; reuse is summed against the trace's."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.load.pacing import sleep_until
from ttft.load.runner import CellPlan, Runner
from ttft.load.trace_plan import body_item, measure_reuse, trace_cells
from ttft.workload.arrival import Replay
from ttft.workload.requests import WorkItem
from ttft.workload.run_mark import run_mark
from ttft.workload.spec import WorkloadSpec
from ttft.workload.trace import TraceRequest, TraceSpec

MS = 1_000_000


class StampSender:
    """Stamps sent at once; answers after 30 ms (longer than the gaps: arrivals must not wait)."""

    def __init__(self, anchor: RunAnchor) -> None:
        self.anchor = anchor

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        record.sent_ns = time.perf_counter_ns() - self.anchor.monotonic_ns
        await asyncio.sleep(0.03)
        record.first_content_ns = record.done_ns = record.sent_ns + 30 * MS


def test_speed_scales_every_offset() -> None:
    offsets = (0, 100 * MS, 250 * MS)
    assert Replay(offsets).schedule_ns(3) == [0, 100 * MS, 250 * MS]
    assert Replay(offsets, speed=2).schedule_ns(3) == [0, 50 * MS, 125 * MS]
    assert Replay(offsets, speed=0.5).schedule_ns(2) == [0, 200 * MS]
    assert Replay(offsets).label() == "replay" and Replay(offsets, 2).label() == "replay x2"


@pytest.mark.parametrize("speed", [0.0, -1.0, float("inf"), float("nan")])
def test_a_speed_that_is_not_a_positive_number_is_an_error(speed: float) -> None:
    with pytest.raises(TtftError, match="--speed"):
        Replay((0, 1), speed).schedule_ns(2)


def test_more_requests_than_the_trace_has_arrivals_is_an_error() -> None:
    with pytest.raises(TtftError, match="2 arrivals"):
        Replay((0, 1)).schedule_ns(3)


def test_the_runner_sends_at_the_scaled_offsets_and_keeps_them_as_scheduled_ns() -> None:
    offsets = (0, 20 * MS, 25 * MS, 60 * MS)
    anchor = RunAnchor.now()
    items = [WorkItem({"prompt": str(i)}, "completions") for i in range(4)]
    runner = Runner(StampSender(anchor), anchor, lambda _: None)
    records = asyncio.run(runner.run_cell(CellPlan("t", items, Replay(offsets, speed=2))))
    start = records[0].scheduled_ns or 0
    assert [(r.scheduled_ns or 0) - start for r in records] == [0, 10 * MS, 12_500_000, 30 * MS]
    lag = [(r.sent_ns or 0) - (r.scheduled_ns or 0) for r in records]
    assert all(0 <= x < 20 * MS for x in lag)  # loose: the precise bound is an integration test


def test_sleep_until_never_returns_early() -> None:
    async def scenario() -> list[int]:
        out = []
        for delay in (0, 300_000, 2 * MS, 5 * MS):
            due = time.perf_counter_ns() + delay
            await sleep_until(due, time.perf_counter_ns)
            out.append(time.perf_counter_ns() - due)
        return out

    assert all(late >= 0 for late in asyncio.run(scenario()))


def body(line: int, max_tokens: int | None = None) -> TraceRequest:
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "x"}]}
    if max_tokens is not None:
        payload["max_completion_tokens"] = max_tokens
    return TraceRequest(line, 0, body=payload, api="chat", output_length=max_tokens)


def test_a_body_keeps_its_own_output_length_capped_by_max_tokens_and_1_without_one() -> None:
    assert body_item(body(1, 50), None).body["max_tokens"] == 50
    assert body_item(body(1, 50), 4).body["max_tokens"] == 4
    assert body_item(body(1), None).body["max_tokens"] == 1
    assert body_item(body(1), 16).body["max_tokens"] == 16
    assert "max_completion_tokens" not in body_item(body(1, 50), None).body


def test_a_jsonl_trace_is_one_replay_cell_with_warm_up_requests_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "prod.jsonl"
    lines = [{"arrival_s": t, "prompt": f"p{t}", "max_tokens": 3} for t in (0.0, 0.5, 2.0)]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    spec = WorkloadSpec(trace=TraceSpec(path, speed=4), warmup=2, api="chat")
    cells, warm = trace_cells(spec, None)
    (plan,) = cells
    assert plan.cell == "prod replay x4"
    assert isinstance(plan.arrival, Replay)
    assert plan.arrival.schedule_ns(3) == [0, 125 * MS, 500 * MS]
    mark = run_mark(spec.seed)  # the run's mark first: a log's prompts repeat in every run
    prompts = [item.body["prompt"] for item in plan.items]
    assert prompts == [mark + p for p in ("p0.0", "p0.5", "p2.0")]
    assert len(warm) == 2 and all(w.api == "completions" for w in warm)
    assert not {str(w.body["prompt"]) for w in warm} & {"p0.0", "p0.5", "p2.0"}


def test_a_mooncake_trace_without_a_tokenizer_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    line = {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
    path.write_text(json.dumps(line))
    with pytest.raises(TtftError, match="tokenizer"):
        trace_cells(WorkloadSpec(trace=TraceSpec(path)), None)


def test_reuse_sums_implied_against_reported_cached_tokens() -> None:
    items = [WorkItem({}, meta={"implied_cached_tokens": n}) for n in (0, 128, 64)]
    records = [RequestRecord(0, cached_tokens=1), RequestRecord(1, cached_tokens=129),
               RequestRecord(2, server_timings={"cache_n": 60.0})]  # fmt: skip
    reuse = measure_reuse(items, records)
    assert reuse is not None
    assert (reuse.implied_tokens, reuse.measured_tokens, reuse.measured_requests) == (192, 190, 3)
    assert "implies 192" in reuse.note() and "reported 190 (99%)" in reuse.note()
    assert measure_reuse([WorkItem({})], [RequestRecord(0)]) is None  # not a Mooncake replay
