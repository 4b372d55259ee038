"""Small, bounded measurements of a live target: send these prompts, this way, get records.

The doctor's steps are built from these; each call opens its own client so one step's
connection state (keep-alive, encodings) never leaks into the next.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.engines.gpu import GpuReading
from ttft.load.gpu_sampler import GpuSource, track_gpu
from ttft.load.runner import CellPlan, Runner
from ttft.load.sender import ClientSender, client_for
from ttft.load.server_metrics import MetricsWatcher
from ttft.load.window import ServerWindow
from ttft.workload.arrival import ClosedLoop
from ttft.workload.requests import WorkItem


@dataclass
class Sample:
    """Records of one measurement plus the server's view of the same window."""

    records: list[RequestRecord]
    server: dict[str, Any] | None = None
    duration_ns: int = 0
    peaks: dict[str, float] = field(default_factory=dict)
    gpu: list[list[GpuReading]] = field(default_factory=list)  # one list per sampling instant
    gpu_errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]


async def sample_async(
    target: Target,
    items: Sequence[WorkItem],
    *,
    concurrency: int = 1,
    headers: Mapping[str, str] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    label: str = "probe",
    watch_gauges: bool = False,
    timeout_s: float = 300.0,
    anchor: RunAnchor | None = None,
    gpu: GpuSource | None = None,
) -> Sample:
    anchor = anchor or RunAnchor.now()
    watcher = MetricsWatcher(target.metrics_url, target.engine_kind, target.auth_headers())
    records: list[RequestRecord] = []
    gpu_readings: list[list[GpuReading]] = []
    gpu_errors: list[str] = []
    async with ServerWindow(watcher, target, watch_gauges=watch_gauges) as window:
        gpu_task = (
            asyncio.create_task(track_gpu(gpu, gpu_readings, gpu_errors))
            if gpu is not None
            else None
        )
        started = time.perf_counter_ns()
        try:
            async with client_for(target, timeout_s=timeout_s, headers=headers) as client:
                runner = Runner(ClientSender(client, anchor, extra_body), anchor, records.append)
                await runner.run_cell(CellPlan(label, list(items), ClosedLoop(concurrency)))
        finally:
            if gpu_task is not None:
                gpu_task.cancel()
    duration = time.perf_counter_ns() - started
    server = await window.deltas()
    return Sample(records, server, duration, window.peaks, gpu_readings, gpu_errors)


def sample(target: Target, items: Sequence[WorkItem], **options: Any) -> Sample:
    """Synchronous ``sample_async`` for procedures that run one measurement at a time."""
    return asyncio.run(sample_async(target, items, **options))
