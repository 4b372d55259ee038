"""One ``ttft bench`` run: cells of a workload against a target, metrics around each cell.

Every finished request goes to the sink as it completes; per-cell server metric deltas follow
each cell. The caller summarizes from the records (``ttft.core.summary``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ttft.client.stream import StreamingClient
from ttft.core.client_verdict import HealthSample
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.engines.prometheus import Scrape
from ttft.load.health_probe import client_probe
from ttft.load.runner import CellPlan, Runner
from ttft.load.server_metrics import MetricsWatcher, track_gauge_peaks
from ttft.load.sink import JsonlSink
from ttft.workload.requests import WorkItem

if TYPE_CHECKING:
    from ttft.load.fleet_setup import WorkerSetup


class ClientSender:
    """The load layer's ``Sender`` on top of the streaming client."""

    def __init__(
        self, client: StreamingClient, anchor: RunAnchor, extra_body: dict[str, Any] | None = None
    ) -> None:
        self.client = client
        self.anchor = anchor
        self.extra_body = extra_body or {}

    def _body(self, item: WorkItem) -> dict[str, Any]:
        body = dict(item.body)
        body.update(self.extra_body)
        body["stream"] = True
        body.setdefault("stream_options", {"include_usage": True})
        return body

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        await self.client.send(self._body(item), record, self.anchor)

    async def send_collecting(self, item: WorkItem, record: RequestRecord) -> str:
        """``send``, and the answer's text (multi-turn runs send it back in the next turn)."""
        texts: list[str] = []
        await self.client.send(self._body(item), record, self.anchor, text_out=texts)
        return "".join(texts)


@dataclass
class CellResult:
    plan: CellPlan
    records: list[RequestRecord]
    duration_ns: int
    server: dict[str, Any] | None = None
    peaks: dict[str, float] = field(default_factory=dict)
    health: list[HealthSample] = field(default_factory=list)  # one per client process


@dataclass
class BenchResult:
    anchor: RunAnchor
    cells: list[CellResult]
    notes: list[str]
    engine_kind: str | None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the workers and their clocks


async def end_cell_metrics(
    watcher: MetricsWatcher,
    before: Scrape | None,
    peaks: dict[str, float],
    sink: JsonlSink,
    plan: CellPlan,
    duration_ns: int,
) -> dict[str, Any] | None:
    """A cell is over: the server's metric deltas since ``before`` (with the gauge peaks seen
    during it) go to disk as the cell's ``metrics`` line, and are returned. Shared by the
    in-process run and the worker fleet, so both write the same line."""
    after = await asyncio.to_thread(watcher.snapshot)
    server = watcher.deltas(before, after)
    if server is not None:
        server["peaks_during_cell"] = peaks
    sink.write(
        {
            "type": "metrics",
            "phase": plan.phase,
            "cell": plan.cell,
            "duration_ns": duration_ns,
            "server": server,
        }
    )
    return server


async def run_cells(
    target: Target,
    cells: Sequence[CellPlan],
    sink: JsonlSink,
    *,
    anchor: RunAnchor | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_cell_start: Callable[[CellPlan], None] | None = None,
    extra_body: dict[str, Any] | None = None,
    timeout_s: float = 600.0,
    skip: Callable[[CellPlan], bool] | None = None,
    workers: WorkerSetup | None = None,
) -> BenchResult:
    """Run ``cells`` in order; each record is written to ``sink`` the moment it finishes.
    ``skip(plan)``, asked just before each cell, leaves that cell out (a saturation stop).
    ``workers``: in client worker processes (or Ray actors) instead of this process."""
    anchor = anchor or RunAnchor.now()
    if workers is not None:
        from ttft.load.fleet_setup import run_with_workers

        return await run_with_workers(
            workers, target, cells, sink, anchor=anchor, on_record=on_record,
            on_cell_start=on_cell_start, timeout_s=timeout_s, extra_body=extra_body,
        )  # fmt: skip
    watcher = MetricsWatcher(target.metrics_url, target.engine_kind, target.auth_headers())

    def record_done(record: RequestRecord) -> None:
        sink.write_record(record)
        if on_record is not None:
            on_record(record)

    results: list[CellResult] = []
    async with StreamingClient(
        target.root,
        model=target.model,
        api_key=target.api_key,
        headers=target.headers,
        timeout_s=timeout_s,
    ) as client:
        runner = Runner(ClientSender(client, anchor, extra_body), anchor, record_done)
        for plan in cells:
            if skip is not None and skip(plan):
                continue
            if on_cell_start is not None:
                on_cell_start(plan)
            before = await asyncio.to_thread(watcher.snapshot)
            peaks: dict[str, float] = {}
            sampler = None
            if before is not None and watcher.engine_kind and target.metrics_url:
                sampler = asyncio.create_task(
                    track_gauge_peaks(
                        target.metrics_url,
                        watcher.engine_kind,
                        peaks,
                        headers=target.auth_headers(),
                    )
                )
            probe = client_probe("main", client)
            probe.start()
            started = time.perf_counter_ns()
            try:
                records = await runner.run_cell(plan)
            finally:
                if sampler is not None:
                    sampler.cancel()
            duration = time.perf_counter_ns() - started
            health = await probe.stop()
            server = await end_cell_metrics(watcher, before, peaks, sink, plan, duration)
            results.append(CellResult(plan, records, duration, server, peaks, [health]))
    return BenchResult(anchor, results, watcher.notes, watcher.engine_kind)
