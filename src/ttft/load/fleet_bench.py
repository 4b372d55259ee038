"""``ttft bench`` over several client workers: one schedule, split, records merged as they come.

The parent owns the run: it numbers and splits every cell (``split_cell``), gives each worker
its part with one start time on the run's clock, and writes every record the moment a worker
sends it back, so a crash or Ctrl-C loses nothing measured. A worker that dies mid-cell has
the rest of its part written as ``worker_lost`` records (never dropped); the others go on, and
later cells are split between the survivors.

Workers live behind the small ``Fleet`` protocol: child processes on this machine
(``process_fleet``) or Ray actors (``ray_fleet``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ttft.core.client_verdict import HealthSample
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.clock_sync import ClockOffset
from ttft.load.results import BenchResult, CellResult
from ttft.load.runner import CellPlan
from ttft.load.server_metrics import MetricsWatcher
from ttft.load.sink import JsonlSink
from ttft.load.window import ServerWindow
from ttft.load.worker_core import Placement
from ttft.load.worker_shares import Share, lost_records, split_cell

POLL_S = 0.02  # how often the parent collects records (they are stamped already)
DRAIN_AFTER_CANCEL_S = 5.0


@dataclass
class WorkerInfo:
    """One worker as the driver knows it: where it runs and how its clock relates to ours."""

    name: str
    placement: Placement
    offset: ClockOffset
    same_clock: bool  # same host and boot as the driver: offset 0 by construction

    @property
    def applied_offset_ns(self) -> int:
        """What is added to the driver's clock to get this worker's: 0 on the same clock (the
        measurement then only checks it), the measured offset elsewhere."""
        return 0 if self.same_clock else self.offset.offset_ns

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.placement.to_dict(),
            "same_clock_as_driver": self.same_clock,
            "clock_offset_ns": self.offset.offset_ns,
            "clock_bound_ns": self.offset.bound_ns,
            "clock_rounds": self.offset.rounds,
            "applied_offset_ns": self.applied_offset_ns,
        }


@dataclass
class Event:
    worker: str
    kind: Literal["records", "done", "lost"]
    records: list[RequestRecord] = field(default_factory=list)
    sample: HealthSample | None = None
    why: str = ""


class Fleet(Protocol):
    backend: str  # "processes" or "ray"

    def workers(self) -> list[WorkerInfo]: ...

    def dispatch(self, worker: str, share: Share) -> None:
        """Start ``share`` on ``worker`` (the share's times are on the run's clock)."""

    def poll(self, timeout_s: float) -> list[Event]:
        """Whatever happened since the last call, waiting up to ``timeout_s`` for something."""

    def cancel(self) -> None:
        """Ask every worker to stop its part now (each reports its cut-short requests)."""


def _lead_ns(fleet: Fleet, requests: int) -> int:
    """How far ahead a cell's start is set so every worker has its part before it is due
    (sending a part costs a few microseconds per request, more through Ray)."""
    base, per_request = (
        (100_000_000, 5_000) if fleet.backend == "processes" else (300_000_000, 20_000)
    )
    return base + per_request * requests


@dataclass
class _CellState:
    shares: dict[str, Share]
    open: set[str]
    returned: dict[str, list[int]]
    records: list[RequestRecord] = field(default_factory=list)
    samples: list[HealthSample] = field(default_factory=list)


class _Merger:
    """Applies workers' events to the cell in progress, writing every record at once."""

    def __init__(self, record_done: Callable[[RequestRecord], None], alive: list[str]) -> None:
        self.record_done = record_done
        self.alive = alive
        self.notes: list[str] = []

    def apply(self, state: _CellState, events: Sequence[Event]) -> None:
        for event in events:
            if event.kind == "records":
                for record in event.records:
                    state.returned.setdefault(event.worker, []).append(record.index)
                    state.records.append(record)
                    self.record_done(record)
            elif event.kind == "done":
                if event.sample is not None:
                    state.samples.append(event.sample)
                state.open.discard(event.worker)
            else:
                self._lost(state, event)

    def _lost(self, state: _CellState, event: Event) -> None:
        name = event.worker
        if name in self.alive:
            self.alive.remove(name)
            self.notes.append(f"client worker {name} was lost ({event.why}); the others went on")
        share = state.shares.get(name)
        if share is not None and name in state.open:
            why = f"client worker {name} was lost: {event.why}"
            for record in lost_records(share, state.returned.get(name, []), why):
                state.records.append(record)
                self.record_done(record)
        state.open.discard(name)


async def run_cells_fleet(
    target: Target,
    cells: Sequence[CellPlan],
    sink: JsonlSink,
    fleet: Fleet,
    *,
    anchor: RunAnchor,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_cell_start: Callable[[CellPlan], None] | None = None,
) -> BenchResult:
    """Run ``cells`` in order over ``fleet``'s workers; the result has the single-process shape."""
    watcher = MetricsWatcher(target.metrics_url, target.engine_kind, target.auth_headers())

    def record_done(record: RequestRecord) -> None:
        sink.write_record(record)
        if on_record is not None:
            on_record(record)

    def now() -> int:
        return time.perf_counter_ns() - anchor.monotonic_ns

    infos = fleet.workers()
    merger = _Merger(record_done, [info.name for info in infos])
    results: list[CellResult] = []
    next_index = 0
    for plan in cells:
        # A worker that died since the last cell is known before this cell is split.
        merger.apply(_CellState({}, set(), {}), fleet.poll(0))
        if not merger.alive:
            raise TtftError(
                "every client worker was lost; the records so far are on disk",
                "look at the workers' logs, then rerun (fewer --workers, or a healthy cluster)",
            )
        if on_cell_start is not None:
            on_cell_start(plan)
        async with ServerWindow(watcher, target) as window:
            parts = split_cell(plan, len(merger.alive), next_index)
            next_index += len(plan.items)
            start = now() + _lead_ns(fleet, len(plan.items))
            state = _CellState(dict(zip(merger.alive, parts, strict=False)), set(), {})
            for name, share in state.shares.items():
                share.start_ns = start
                fleet.dispatch(name, share)
                state.open.add(name)
            try:
                while state.open:
                    # Never blocks: the loop also runs the gauge sampler, and a poll left
                    # running in a thread would race the drain after Ctrl-C. The pause between
                    # polls keeps the parent off the CPU the workers need (records are stamped).
                    merger.apply(state, fleet.poll(0))
                    await asyncio.sleep(POLL_S)
            except (asyncio.CancelledError, KeyboardInterrupt):
                _drain_after_cancel(fleet, merger, state)
                raise
        duration = max(0, now() - start)
        server = await window.write_cell(sink, plan, duration)
        records = sorted(state.records, key=lambda r: r.index)
        results.append(CellResult(plan, records, duration, server, window.peaks, state.samples))
    meta = {
        "client_workers": {
            "backend": fleet.backend,
            "count": len(infos),
            "workers": [info.to_dict() for info in infos],
            "lost": [info.name for info in infos if info.name not in merger.alive],
        }
    }
    return BenchResult(anchor, results, [*watcher.notes, *merger.notes], watcher.engine_kind, meta)


def _drain_after_cancel(fleet: Fleet, merger: _Merger, state: _CellState) -> None:
    """Ctrl-C: tell the workers to stop and write what they send back (their cut-short
    requests come back as ``cancelled``), for a few seconds at most."""
    fleet.cancel()
    deadline = time.monotonic() + DRAIN_AFTER_CANCEL_S
    while state.open and time.monotonic() < deadline:
        merger.apply(state, fleet.poll(POLL_S))
