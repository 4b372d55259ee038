"""Splitting one cell between several client processes, and running one process's part.

The parent computes a cell's open-loop schedule once (``OpenLoop.schedule_ns``) and deals the
requests round-robin, so every worker's part spans the whole cell at 1/N of the rate and their
union is exactly the single-process schedule. A closed loop's concurrency is split instead
(8 over 3 workers: 3, 3, 2), each worker taking requests in proportion to its streams. Record
numbers are fixed here, before anything is sent, so the merged records are numbered exactly as
a single-process run numbers them.

``run_share`` is what a worker does with its part; it needs only a ``Sender``, so the same code
runs in a child process, in a Ray actor and in tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.load.runner import CellPlan, Sender
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem


@dataclass
class Entry:
    """One request of a share: its run-wide record number, what to send, and (open loop) its
    offset from the cell's start."""

    index: int
    item: WorkItem
    offset_ns: int | None = None


@dataclass
class Share:
    """One worker's part of one cell. ``start_ns`` (the cell's start on the run's clock, relative
    to the run anchor) is set when the parent dispatches it."""

    cell: str
    phase: str
    entries: list[Entry]
    concurrency: int | None = None  # closed loop: streams in this worker
    max_in_flight: int | None = None  # open loop: this worker's part of the cap
    start_ns: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def indices(self) -> list[int]:
        return [entry.index for entry in self.entries]


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as whole numbers allow, larger parts first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def split_cell(plan: CellPlan, workers: int, first_index: int) -> list[Share]:
    """The cell's requests dealt over ``workers`` parts (empty parts dropped), numbered from
    ``first_index`` in schedule order."""
    if workers < 1:
        raise TtftError(f"--workers must be at least 1, not {workers}")
    items = list(plan.items)
    if isinstance(plan.arrival, OpenLoop):
        offsets = plan.arrival.schedule_ns(len(items))
        caps = _spread(plan.max_in_flight, workers) if plan.max_in_flight else [0] * workers
        shares = [
            Share(plan.cell, plan.phase, [], max_in_flight=max(1, cap) if cap else None)
            for cap in caps
        ]
        for n, (item, offset) in enumerate(zip(items, offsets, strict=True)):
            shares[n % workers].entries.append(Entry(first_index + n, item, offset))
        return [share for share in shares if share.entries]
    if isinstance(plan.arrival, ClosedLoop):
        streams = _spread(max(1, min(plan.arrival.concurrency, len(items))), workers)
        # One slot per stream, interleaved (w0, w1, w2, w0, w1, ...): requests are dealt in
        # proportion to each worker's streams.
        order = [w for n in range(max(streams)) for w in range(workers) if streams[w] > n]
        shares = [Share(plan.cell, plan.phase, [], concurrency=c) for c in streams]
        for n, item in enumerate(items):
            shares[order[n % len(order)]].entries.append(Entry(first_index + n, item))
        return [share for share in shares if share.entries and share.concurrency]
    raise TtftError(
        f"cell {plan.cell!r}: --workers runs closed- and open-loop cells only",
        "drop --workers for this workload",
    )


OnRecord = Callable[[RequestRecord], None]


async def _one(sender: Sender, entry: Entry, record: RequestRecord, on_record: OnRecord) -> None:
    try:
        await sender.send(entry.item, record)
    except asyncio.CancelledError:
        record.error = ErrorInfo("cancelled", "the run stopped before this request finished")
        on_record(record)
        raise
    on_record(record)


async def run_share(
    sender: Sender, share: Share, anchor_ns: int, on_record: OnRecord
) -> list[RequestRecord]:
    """Send this worker's part: closed loop with its streams, or open loop at its offsets from
    ``share.start_ns``. ``anchor_ns`` is the run anchor on *this* process's clock."""

    def now() -> int:
        return time.perf_counter_ns() - anchor_ns

    delay = (share.start_ns - now()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
    records: list[RequestRecord] = []

    def new_record(entry: Entry) -> RequestRecord:
        record = RequestRecord(index=entry.index, cell=share.cell, phase=share.phase)
        records.append(record)
        return record

    if share.concurrency is not None:
        pending = list(reversed(share.entries))

        async def stream() -> None:
            while pending:
                entry = pending.pop()
                record = new_record(entry)
                record.scheduled_ns = now()
                await _one(sender, entry, record, on_record)

        await asyncio.gather(*(stream() for _ in range(share.concurrency)))
        return records
    limit = asyncio.Semaphore(share.max_in_flight) if share.max_in_flight else None

    async def gated(entry: Entry, record: RequestRecord) -> None:
        if limit is None:
            await _one(sender, entry, record, on_record)
            return
        async with limit:
            await _one(sender, entry, record, on_record)

    tasks: list[asyncio.Task[None]] = []
    for entry in share.entries:
        due = share.start_ns + (entry.offset_ns or 0)
        wait = (due - now()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
        record = new_record(entry)
        record.scheduled_ns = due  # the plan's time: a late worker shows as client_wait
        tasks.append(asyncio.create_task(gated(entry, record)))
    await asyncio.gather(*tasks)
    return records


def lost_records(share: Share, finished: Sequence[int], why: str) -> list[RequestRecord]:
    """The requests of a dead worker's share that never came back, as failed records (kind
    ``worker_lost``) that keep their place in the schedule: counted, never dropped."""
    done = set(finished)
    out = []
    for entry in share.entries:
        if entry.index in done:
            continue
        record = RequestRecord(index=entry.index, cell=share.cell, phase=share.phase)
        if entry.offset_ns is not None:
            record.scheduled_ns = share.start_ns + entry.offset_ns
        record.error = ErrorInfo("worker_lost", why)
        out.append(record)
    return out
