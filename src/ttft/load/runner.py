"""When to send: run one cell of a workload closed-loop or open-loop, records out as they finish.

*How* to send belongs to the client; this module owns the small ``Sender`` protocol it needs, so
imports point one way and tests can drive it with any sender.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ttft.core.records import ErrorInfo, RequestRecord, RunAnchor
from ttft.load.pacing import sleep_until
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop, Replay
from ttft.workload.requests import WorkItem


class Sender(Protocol):
    """Sends one request and fills ``record``'s ladder from ``sent_ns`` on; never raises for a
    failed request (the failure goes into ``record.error``)."""

    async def send(self, item: WorkItem, record: RequestRecord) -> None: ...


OnRecord = Callable[[RequestRecord], None]


class CellLoop(Protocol):
    """A cell that sends in its own pattern (a duration, a live stop, conversations) instead of
    the fixed-count loops below; it makes its records with ``Runner.new_record``."""

    async def run(self, runner: Runner, plan: CellPlan) -> list[RequestRecord]: ...


@dataclass
class CellPlan:
    """One cell: these items, sent with this arrival pattern, labelled ``cell``."""

    cell: str
    items: Sequence[WorkItem]
    arrival: Arrival
    phase: str = "warm"
    max_in_flight: int | None = None  # open loop, replay: a cap makes client-side waiting visible
    meta: dict[str, object] = field(default_factory=dict)
    repeat: int | None = None  # --repeat: which run of this cell (stored in every record)
    loop: CellLoop | None = None  # how to send when not a fixed count (see load/timed.py)


class Runner:
    """Runs cells against one sender; numbers records across the whole run."""

    def __init__(
        self, sender: Sender, anchor: RunAnchor, on_record: OnRecord, id_prefix: str | None = None
    ) -> None:
        self.sender = sender
        self.anchor = anchor
        self.on_record = on_record
        self._next_index = 0
        # Every request's X-Request-Id is this prefix and its record index: unique in the run,
        # and it names the record in the server's own logs.
        self.id_prefix = id_prefix or f"ttft-{secrets.token_hex(4)}"

    def _now(self) -> int:
        return time.perf_counter_ns() - self.anchor.monotonic_ns

    def _new_record(self, plan: CellPlan) -> RequestRecord:
        index = self._next_index
        record = RequestRecord(
            index=index, cell=plan.cell, phase=plan.phase, request_id=f"{self.id_prefix}-{index}"
        )
        record.repeat = plan.repeat
        self._next_index += 1
        return record

    # The pieces a ``CellLoop`` builds on.
    now = _now
    new_record = _new_record

    async def one(self, item: WorkItem, record: RequestRecord) -> RequestRecord:
        """Send one request; its record reaches ``on_record`` whether it finished or was
        cancelled."""
        return await self._one(item, record)

    async def _one(self, item: WorkItem, record: RequestRecord) -> RequestRecord:
        try:
            await self.sender.send(item, record)
        except asyncio.CancelledError:
            # Ctrl-C or a deadline: the request is reported as cut short, never silently lost.
            record.error = ErrorInfo("cancelled", "the run stopped before this request finished")
            self.on_record(record)
            raise
        self.on_record(record)
        return record

    async def run_cell(self, plan: CellPlan) -> list[RequestRecord]:
        if plan.loop is not None:
            return await plan.loop.run(self, plan)
        if isinstance(plan.arrival, ClosedLoop):
            return await self._closed(plan, plan.arrival)
        return await self._open(plan, plan.arrival)

    async def _closed(self, plan: CellPlan, arrival: ClosedLoop) -> list[RequestRecord]:
        pending = list(enumerate(plan.items))
        pending.reverse()
        results: list[RequestRecord] = []

        async def worker() -> None:
            while pending:
                _, item = pending.pop()
                record = self._new_record(plan)
                record.scheduled_ns = self._now()
                results.append(await self._one(item, record))

        workers = max(1, min(arrival.concurrency, len(plan.items)))
        await asyncio.gather(*(worker() for _ in range(workers)))
        return results

    async def _open(self, plan: CellPlan, arrival: OpenLoop | Replay) -> list[RequestRecord]:
        offsets = arrival.schedule_ns(len(plan.items))
        limit = asyncio.Semaphore(plan.max_in_flight) if plan.max_in_flight else None
        start = self._now()
        tasks: list[asyncio.Task[RequestRecord]] = []

        async def gated(item: WorkItem, record: RequestRecord) -> RequestRecord:
            if limit is None:
                return await self._one(item, record)
            try:
                await limit.acquire()
            except asyncio.CancelledError:
                # Stopped while waiting for a --max-in-flight slot: never sent, still recorded.
                record.error = ErrorInfo(
                    "cancelled", "the run stopped before this request was sent"
                )
                self.on_record(record)
                raise
            try:
                return await self._one(item, record)
            finally:
                limit.release()

        for item, offset in zip(plan.items, offsets, strict=True):
            due = start + offset
            await sleep_until(due, self._now)
            record = self._new_record(plan)
            # The planned time, not when we got round to it: client lag shows as client_wait.
            record.scheduled_ns = due
            tasks.append(asyncio.create_task(gated(item, record)))
        return list(await asyncio.gather(*tasks))


def max_overlap(records: Sequence[RequestRecord]) -> int:
    """The most requests that were in flight at once (sent..done), from the records alone."""
    events: list[tuple[int, int]] = []
    for r in records:
        if r.sent_ns is None:
            continue
        end = r.done_ns if r.done_ns is not None else r.sent_ns
        events.append((r.sent_ns, 1))
        events.append((end, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


__all__ = ["CellLoop", "CellPlan", "ClosedLoop", "OpenLoop", "Runner", "Sender", "max_overlap"]
