"""Cells bounded by time instead of a count, and cells a live saturation check may stop.

How a timed cell ends (``--duration``):

- closed loop: each worker starts requests until the duration has elapsed; the requests in flight
  then finish and are counted, so the cell lasts the duration plus at most one request;
- open loop: arrivals are scheduled (up front, as always) up to the duration; those in flight at
  the end finish and are counted.

With a ``SaturationWatch`` an open-loop cell is checked every ``interval_s`` while it runs; when
the queue is seen growing without bound, no further request is sent and those in flight are
cancelled (recorded with error ``cancelled``, never lost).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.saturation import MIN_POINTS, Saturation, assess, points_from_records
from ttft.load.runner import CellPlan, Runner
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem

LIVE_POINTS = 100  # ~5k pairs: a few ms on the event loop per check


@dataclass
class SaturationWatch:
    """Stops an open-loop cell once ``assess`` calls it saturated; keeps that verdict."""

    interval_s: float = 0.5
    # The check starts once this much of the cell has run and enough requests were sent: a
    # verdict from the first second would judge the start-up, not the steady state.
    min_elapsed_s: float = 2.0
    verdict: Saturation | None = None

    def check(self, records: list[RequestRecord], now_ns: int, elapsed_s: float) -> bool:
        if elapsed_s < self.min_elapsed_s or len(records) < 2 * MIN_POINTS:
            return False
        verdict = assess(
            points_from_records(records, now_ns), max_points=LIVE_POINTS, now_ns=now_ns
        )
        if verdict.saturated:
            self.verdict = verdict
        return verdict.saturated


def _record_unstarted(
    runner: Runner, records: list[RequestRecord], tasks: list[asyncio.Task[RequestRecord]]
) -> None:
    """A task cancelled before it ran (or while it waited for a --max-in-flight slot) never
    reached ``Runner.one``, which records cancellations: record those here, so that every
    scheduled request is on disk."""
    for record, task in zip(records, tasks, strict=True):
        if task.done() and task.cancelled() and record.error is None:
            record.error = ErrorInfo("cancelled", "the cell stopped before this request was sent")
            runner.on_record(record)


@dataclass
class TimedLoop:
    """Send ``plan.items`` for ``duration_ns`` (None: all of them), optionally watched.

    ``more(i)`` builds item ``i`` when a closed-loop cell outlasts the items built up front; it
    runs in a thread between a worker's requests (never while one is being timed), and without
    it the items are reused from the start.
    """

    duration_ns: int | None = None
    more: Callable[[int], WorkItem] | None = None
    watch: SaturationWatch | None = None
    stopped: bool = field(default=False, init=False)
    records: list[RequestRecord] = field(default_factory=list, init=False)  # after ``run``

    async def run(self, runner: Runner, plan: CellPlan) -> list[RequestRecord]:
        if isinstance(plan.arrival, ClosedLoop):
            self.records = await self._closed(runner, plan, plan.arrival)
        elif isinstance(plan.arrival, OpenLoop):
            self.records = await self._open(runner, plan, plan.arrival)
        else:  # a trace replays its own schedule: no duration, no live stop
            self.records = await runner.run_cell(plan)
        return self.records

    async def _item(self, plan: CellPlan, i: int) -> WorkItem:
        if i < len(plan.items):
            return plan.items[i]
        if self.more is not None:
            return await asyncio.to_thread(self.more, i)
        return plan.items[i % len(plan.items)]

    async def _closed(
        self, runner: Runner, plan: CellPlan, arrival: ClosedLoop
    ) -> list[RequestRecord]:
        end = runner.now() + self.duration_ns if self.duration_ns is not None else None
        results: list[RequestRecord] = []
        next_index = 0

        def more_to_send() -> bool:
            if end is None:
                return next_index < len(plan.items)
            return runner.now() < end

        async def worker() -> None:
            nonlocal next_index
            while more_to_send():
                i = next_index
                next_index += 1
                item = await self._item(plan, i)
                record = runner.new_record(plan)
                record.scheduled_ns = runner.now()
                results.append(await runner.one(item, record))

        await asyncio.gather(*(worker() for _ in range(max(1, arrival.concurrency))))
        return results

    async def _open(self, runner: Runner, plan: CellPlan, arrival: OpenLoop) -> list[RequestRecord]:
        offsets = arrival.schedule_ns(len(plan.items))
        limit = asyncio.Semaphore(plan.max_in_flight) if plan.max_in_flight else None
        records: list[RequestRecord] = []
        tasks: list[asyncio.Task[RequestRecord]] = []
        start = runner.now()

        async def gated(item: WorkItem, record: RequestRecord) -> RequestRecord:
            if limit is None:
                return await runner.one(item, record)
            async with limit:
                return await runner.one(item, record)

        watcher = asyncio.create_task(self._watch(runner, records, tasks, start))
        try:
            for item, offset in zip(plan.items, offsets, strict=True):
                if self.duration_ns is not None and offset >= self.duration_ns:
                    break
                delay = (start + offset - runner.now()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if self.stopped:
                    break
                record = runner.new_record(plan)
                record.scheduled_ns = start + offset  # planned: client lag shows as client_wait
                records.append(record)
                tasks.append(asyncio.create_task(gated(item, record)))
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            watcher.cancel()
            _record_unstarted(runner, records, tasks)
        return records

    async def _watch(
        self,
        runner: Runner,
        records: list[RequestRecord],
        tasks: list[asyncio.Task[RequestRecord]],
        start: int,
    ) -> None:
        watch = self.watch
        if watch is None:
            return
        while True:
            await asyncio.sleep(watch.interval_s)
            now = runner.now()
            if watch.check(records, now, (now - start) / 1e9):
                self.stopped = True
                for task in tasks:
                    task.cancel()  # Runner.one records each as cancelled
                return
