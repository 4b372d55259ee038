"""Timed cells (--duration) and the live saturation stop, on in-process senders."""

from __future__ import annotations

import asyncio
import itertools
import time

from ttft.core.records import RequestRecord, RunAnchor
from ttft.load.runner import CellPlan, Runner
from ttft.load.timed import SaturationWatch, TimedLoop
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem


class OneSlotSender:
    """A server with one slot: requests queue FIFO and each takes ``seconds`` once served."""

    def __init__(self, anchor: RunAnchor, seconds: float) -> None:
        self.anchor = anchor
        self.seconds = seconds
        self.slot = asyncio.Lock()

    def _now(self) -> int:
        return time.perf_counter_ns() - self.anchor.monotonic_ns

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        record.sent_ns = self._now()
        async with self.slot:
            await asyncio.sleep(self.seconds)
            record.first_content_ns = self._now()
            record.done_ns = self._now()


def _items(n: int, tag: str = "built") -> list[WorkItem]:
    return [
        WorkItem({"messages": [], "max_tokens": 1}, meta={"tag": tag, "i": i}) for i in range(n)
    ]


def _run(
    plan: CellPlan, seconds: float, slots: int = 1
) -> tuple[list[RequestRecord], list[RequestRecord]]:
    anchor = RunAnchor.now()
    seen: list[RequestRecord] = []

    async def go() -> list[RequestRecord]:
        senders = [OneSlotSender(anchor, seconds) for _ in range(slots)]

        class Spread:
            n = 0

            async def send(self, item: WorkItem, record: RequestRecord) -> None:
                Spread.n += 1
                await senders[Spread.n % slots].send(item, record)

        return await Runner(Spread(), anchor, seen.append).run_cell(plan)

    return asyncio.run(go()), seen


def test_a_closed_loop_cell_runs_for_its_duration_and_counts_the_requests_in_flight() -> None:
    """c=2, 50 ms requests, 0.3 s: every request started before the end finishes and counts."""
    plan = CellPlan("c=2", _items(2), ClosedLoop(2), loop=TimedLoop(duration_ns=300_000_000))
    started = time.perf_counter()
    records, seen = _run(plan, 0.05, slots=2)
    elapsed = time.perf_counter() - started
    assert elapsed >= 0.3  # the whole duration, however busy the machine
    assert len(seen) == len(records) and all(r.ok for r in records)
    first = min(r.scheduled_ns or 0 for r in records)
    assert max(r.scheduled_ns or 0 for r in records) - first < 300_000_000  # none after the end
    # The ones in flight at the end were waited for and counted: the last finished past it.
    assert max(r.done_ns or 0 for r in records) - first >= 300_000_000
    # Two streams kept busy for the duration: as many requests as fit, measured by their own
    # service times (a sleep runs late on a busy machine, so the count follows the records).
    served = [(r.done_ns or 0) - (r.sent_ns or 0) for r in records]
    assert 2 * int(300_000_000 // max(served)) <= len(records)
    assert len(records) <= 2 * (int(300_000_000 // min(served)) + 1)


def test_a_timed_closed_loop_builds_more_prompts_instead_of_reusing_them() -> None:
    built: list[int] = []

    def more(i: int) -> WorkItem:
        built.append(i)
        return _items(1, "more")[0]

    plan = CellPlan("c=1", _items(2), ClosedLoop(1), loop=TimedLoop(200_000_000, more=more))
    records, _ = _run(plan, 0.04)
    assert len(records) >= 4
    assert built[:2] == [2, 3]  # the up-front items first, then new ones, each index once
    assert len(built) == len(records) - 2


def test_an_open_loop_cell_schedules_arrivals_only_up_to_its_duration() -> None:
    plan = CellPlan(
        "rate=50/s",
        _items(100),
        OpenLoop(50.0, distribution="constant"),
        loop=TimedLoop(duration_ns=190_000_000),
    )
    records, _ = _run(plan, 0.001, slots=4)
    assert len(records) == 10  # offsets 0, 20, ..., 180 ms
    assert all(r.ok for r in records)


def test_a_load_beyond_capacity_is_stopped_and_its_requests_in_flight_are_recorded() -> None:
    """200/s arrivals against one 10 ms slot (100/s): the queue grows; the watch stops the cell
    well before its 4 s and cancels what is in flight: every scheduled request is recorded,
    including those cancelled before their task first ran."""
    watch = SaturationWatch(interval_s=0.1, min_elapsed_s=0.4)
    loop = TimedLoop(4_000_000_000, watch=watch)
    plan = CellPlan("rate=200/s", _items(800), OpenLoop(200.0, distribution="constant"), loop=loop)
    started = time.perf_counter()
    records, seen = _run(plan, 0.01)
    assert time.perf_counter() - started < 2.5
    assert loop.stopped and watch.verdict is not None and watch.verdict.saturated
    assert len(records) < 800 and len(seen) == len(records)
    cancelled = [r for r in records if r.error is not None]
    assert cancelled and all(r.error.kind == "cancelled" for r in cancelled if r.error)
    assert watch.verdict.slope is not None and watch.verdict.slope > 0.2


def test_a_light_load_is_not_stopped() -> None:
    watch = SaturationWatch(interval_s=0.1, min_elapsed_s=0.3)
    loop = TimedLoop(1_000_000_000, watch=watch)
    plan = CellPlan("rate=40/s", _items(100), OpenLoop(40.0, distribution="constant"), loop=loop)
    records, _ = _run(plan, 0.01)
    assert not loop.stopped and watch.verdict is None
    assert len(records) == 40 and all(r.ok for r in records)


def test_a_timed_open_loop_keeps_the_precomputed_schedule_while_watched() -> None:
    """The live check runs beside the sends: a constant 50/s schedule stays 20 ms apart."""
    watch = SaturationWatch(interval_s=0.05, min_elapsed_s=0.0)
    plan = CellPlan(
        "rate=50/s",
        _items(40),
        OpenLoop(50.0, distribution="constant"),
        loop=TimedLoop(duration_ns=800_000_000, watch=watch),
    )
    records, _ = _run(plan, 0.002, slots=4)
    assert len(records) == 40 and watch.verdict is None
    planned = sorted(r.scheduled_ns or 0 for r in records)
    assert all(abs(b - a - 20_000_000) < 1_000 for a, b in itertools.pairwise(planned))
    lag = sorted((r.sent_ns or 0) - (r.scheduled_ns or 0) for r in records)
    # Sent on time, the check notwithstanding (a check that held the loop would show here; the
    # bound leaves room for a busy machine's scheduling delays).
    assert lag[len(lag) // 2] < 10_000_000, lag


def test_requests_waiting_for_a_max_in_flight_slot_are_recorded_when_the_cell_stops() -> None:
    """With --max-in-flight the queue is in the client: requests cancelled while they wait for
    a slot were never sent, and are recorded as cancelled all the same."""
    watch = SaturationWatch(interval_s=0.1, min_elapsed_s=0.4)
    loop = TimedLoop(4_000_000_000, watch=watch)
    plan = CellPlan(
        "rate=200/s",
        _items(800),
        OpenLoop(200.0, distribution="constant"),
        max_in_flight=2,
        loop=loop,
    )
    records, seen = _run(plan, 0.01)
    assert loop.stopped and len(seen) == len(records) < 800
    unsent = [r for r in records if r.sent_ns is None]
    assert unsent and all(r.error is not None and r.error.kind == "cancelled" for r in unsent)
