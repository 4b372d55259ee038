"""Splitting a cell between workers: the union is the single-process schedule, numbered the
same; closed-loop streams are split; a dead worker's unfinished requests become records."""

from __future__ import annotations

import asyncio
import time

import pytest

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.load.clock_sync import measure_offset
from ttft.load.runner import CellPlan, max_overlap
from ttft.load.worker_shares import lost_records, run_share, split_cell
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem


def _items(n: int) -> list[WorkItem]:
    return [WorkItem({"prompt": str(i), "max_tokens": 1}) for i in range(n)]


def test_open_loop_parts_add_up_to_the_one_schedule_and_its_numbering() -> None:
    arrival = OpenLoop(50.0, seed=3)
    plan = CellPlan("rate", _items(31), arrival)
    shares = split_cell(plan, 3, first_index=100)
    assert [len(s.entries) for s in shares] == [11, 10, 10]
    merged = sorted((e.index, e.offset_ns) for s in shares for e in s.entries)
    assert merged == list(zip(range(100, 131), arrival.schedule_ns(31), strict=True))
    # Round-robin: every worker's part spans the whole cell.
    assert all((s.entries[-1].offset_ns or 0) >= arrival.schedule_ns(31)[-3] for s in shares)


def test_closed_loop_streams_are_split_and_requests_follow_them() -> None:
    shares = split_cell(CellPlan("c=8", _items(40), ClosedLoop(8)), 3, first_index=0)
    assert [s.concurrency for s in shares] == [3, 3, 2]
    assert [len(s.entries) for s in shares] == [15, 15, 10]
    assert sorted(e.index for s in shares for e in s.entries) == list(range(40))


def test_more_workers_than_streams_leaves_the_extra_workers_idle() -> None:
    shares = split_cell(CellPlan("c=1", _items(5), ClosedLoop(1)), 4, first_index=0)
    assert len(shares) == 1 and shares[0].concurrency == 1


def test_a_max_in_flight_cap_is_split_too() -> None:
    plan = CellPlan("rate", _items(10), OpenLoop(10.0), max_in_flight=5)
    assert [s.max_in_flight for s in split_cell(plan, 2, 0)] == [3, 2]


def test_zero_workers_is_refused() -> None:
    with pytest.raises(TtftError, match="at least 1"):
        split_cell(CellPlan("c", _items(2), ClosedLoop(1)), 0, 0)


class _Sleep:
    def __init__(self, anchor_ns: int) -> None:
        self.anchor_ns = anchor_ns

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        record.sent_ns = time.perf_counter_ns() - self.anchor_ns
        await asyncio.sleep(0.02)
        record.first_content_ns = record.done_ns = time.perf_counter_ns() - self.anchor_ns


def test_a_share_runs_at_its_offsets_from_the_common_start() -> None:
    anchor = time.perf_counter_ns()
    plan = CellPlan("rate", _items(8), OpenLoop(100.0, distribution="constant"))
    share = split_cell(plan, 2, 0)[1]
    share.start_ns = 50_000_000  # 50 ms after the anchor
    seen: list[RequestRecord] = []
    records = asyncio.run(run_share(_Sleep(anchor), share, anchor, seen.append))
    assert [r.index for r in records] == [1, 3, 5, 7] and len(seen) == 4
    assert [r.scheduled_ns for r in records] == [60_000_000, 80_000_000, 100_000_000, 120_000_000]
    for record in records:
        assert record.sent_ns is not None and record.scheduled_ns is not None
        # Never early; late by a scheduler's wake-up at most (generous: neighbours share the CPU).
        assert 0 <= record.sent_ns - record.scheduled_ns < 50_000_000


def test_a_closed_share_keeps_its_own_streams_in_flight() -> None:
    anchor = time.perf_counter_ns()
    share = split_cell(CellPlan("c=4", _items(12), ClosedLoop(4)), 2, 0)[0]
    records = asyncio.run(run_share(_Sleep(anchor), share, anchor, lambda r: None))
    assert len(records) == 6 and max_overlap(records) == 2


def test_a_lost_workers_unfinished_requests_become_worker_lost_records() -> None:
    share = split_cell(CellPlan("rate", _items(6), OpenLoop(10.0)), 2, 0)[0]
    share.start_ns = 1_000
    lost = lost_records(share, finished=[0], why="client worker w0 was lost")
    assert [r.index for r in lost] == [2, 4]
    assert all(r.error is not None and r.error.kind == "worker_lost" for r in lost)
    assert [r.scheduled_ns for r in lost] == [1_000 + e.offset_ns for e in share.entries[1:]]  # type: ignore[operator]


def test_the_clock_offset_is_the_min_trip_midpoint_within_half_the_trip() -> None:
    offset = 5_000_000_000

    def remote() -> int:
        return time.perf_counter_ns() + offset

    measured = measure_offset(remote, rounds=10)
    assert abs(measured.offset_ns - offset) <= measured.bound_ns
    # A local call: its round trip is microseconds when quiet; bounded here for a busy machine.
    assert measured.bound_ns < 50_000_000 and measured.rounds == 10
