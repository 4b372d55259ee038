"""One ``ttft bench`` run: cells of a workload against a target, metrics around each cell.

Every finished request goes to the sink as it completes; per-cell server metric deltas follow
each cell. The caller summarizes from the records (``ttft.core.summary``). This module only
dispatches: the sender, the results and the measured window are their own modules, which the
worker fleets (``fleet_bench.py``) share without importing back from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.health_probe import client_probe
from ttft.load.results import BenchResult, CellResult
from ttft.load.runner import CellPlan, Runner
from ttft.load.sender import ClientSender, client_for
from ttft.load.server_metrics import MetricsWatcher
from ttft.load.sink import JsonlSink
from ttft.load.window import ServerWindow

if TYPE_CHECKING:
    from ttft.load.fleet_setup import WorkerSetup


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
    async with client_for(target, timeout_s=timeout_s) as client:
        runner = Runner(ClientSender(client, anchor, extra_body), anchor, record_done)
        for plan in cells:
            if skip is not None and skip(plan):
                continue
            if on_cell_start is not None:
                on_cell_start(plan)
            async with ServerWindow(watcher, target) as window:
                probe = client_probe("main", client)
                probe.start()
                started = time.perf_counter_ns()
                records = await runner.run_cell(plan)
            duration = time.perf_counter_ns() - started
            health = await probe.stop()
            server = await window.write_cell(sink, plan, duration)
            results.append(CellResult(plan, records, duration, server, window.peaks, [health]))
    return BenchResult(anchor, results, watcher.notes, watcher.engine_kind)
