"""The parent's side of --workers, with a fake fleet: records are written as they come, a
worker lost mid-cell leaves worker_lost records for the rest of its part, and later cells are
split between the survivors."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ttft.core.client_verdict import HealthSample
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.clock_sync import ClockOffset
from ttft.load.fleet_bench import Event, WorkerInfo, run_cells_fleet
from ttft.load.runner import CellPlan
from ttft.load.sink import JsonlSink, read_results
from ttft.load.worker_core import Placement
from ttft.load.worker_shares import Share
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem


class FakeFleet:
    """Answers every share at once; ``doomed`` dies after returning ``keep`` records."""

    backend = "processes"

    def __init__(self, names: list[str], doomed: str | None = None, keep: int = 0) -> None:
        here = Placement("host", 1, "boot")
        self.infos = [WorkerInfo(n, here, ClockOffset(0, 1000, 5), True) for n in names]
        self.doomed, self.keep = doomed, keep
        self.pending: list[Event] = []
        self.dispatched: list[tuple[str, str, int]] = []  # (worker, cell, requests)

    def workers(self) -> list[WorkerInfo]:
        return list(self.infos)

    def dispatch(self, worker: str, share: Share) -> None:
        self.dispatched.append((worker, share.cell, len(share.entries)))
        records = []
        for entry in share.entries:
            record = RequestRecord(index=entry.index, cell=share.cell, phase=share.phase)
            record.scheduled_ns = record.sent_ns = share.start_ns + (entry.offset_ns or 0)
            record.first_content_ns = record.done_ns = record.sent_ns + 20_000_000
            records.append(record)
        if worker == self.doomed:
            self.pending.append(Event(worker, "records", records=records[: self.keep]))
            self.pending.append(Event(worker, "lost", why="its process exited with code -9"))
            self.doomed = None
            return
        self.pending.append(Event(worker, "records", records=records))
        sample = HealthSample(worker, 1_000_000_000, 100_000_000, 1_000_000, 2_000_000, 100)
        self.pending.append(Event(worker, "done", sample=sample))

    def poll(self, timeout_s: float) -> list[Event]:
        out, self.pending = self.pending, []
        return out

    def cancel(self) -> None:
        pass


def _items(n: int) -> list[WorkItem]:
    return [WorkItem({"prompt": str(i)}) for i in range(n)]


def _run(fleet: FakeFleet, cells: list[CellPlan], path: Path) -> list[RequestRecord]:
    target = Target("http://127.0.0.1:9", "m")
    with JsonlSink(path) as sink:
        result = asyncio.run(run_cells_fleet(target, cells, sink, fleet, anchor=RunAnchor.now()))
    return [r for cell in result.cells for r in cell.records]


def test_records_from_every_worker_are_merged_numbered_and_on_disk(tmp_path: Path) -> None:
    fleet = FakeFleet(["w0", "w1"])
    cells = [CellPlan("c=4", _items(10), ClosedLoop(4)), CellPlan("r", _items(7), OpenLoop(50.0))]
    records = _run(fleet, cells, tmp_path / "r.jsonl")
    assert sorted(r.index for r in records) == list(range(17))
    assert len(read_results(tmp_path / "r.jsonl").records) == 17
    assert {w for w, _, _ in fleet.dispatched} == {"w0", "w1"}


def test_a_worker_lost_mid_cell_leaves_worker_lost_records_and_the_survivor_goes_on(
    tmp_path: Path,
) -> None:
    fleet = FakeFleet(["w0", "w1"], doomed="w1", keep=2)
    cells = [CellPlan("r", _items(10), OpenLoop(50.0)), CellPlan("c", _items(4), ClosedLoop(2))]
    records = _run(fleet, cells, tmp_path / "r.jsonl")
    first = [r for r in records if r.cell == "r"]
    lost = [r for r in first if r.error is not None]
    assert len(first) == 10 and len(lost) == 3  # w1 had 5, sent back 2
    assert all(r.error is not None and r.error.kind == "worker_lost" for r in lost)
    assert all(r.scheduled_ns is not None for r in lost)  # kept at their place in the schedule
    assert fleet.dispatched[-1] == ("w0", "c", 4)  # the next cell went to the survivor alone
    on_disk = read_results(tmp_path / "r.jsonl").records
    assert sorted(r.index for r in on_disk) == list(range(14))
