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

from ttft.client.stream import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.engines.gpu import GpuReading
from ttft.load.gpu_sampler import GpuSource, track_gpu
from ttft.load.runner import CellPlan, Runner
from ttft.load.server_metrics import MetricsWatcher, track_gauge_peaks
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


class _Sender:
    def __init__(
        self, client: StreamingClient, anchor: RunAnchor, extra: Mapping[str, Any]
    ) -> None:
        self.client, self.anchor, self.extra = client, anchor, extra

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        body = {**item.body, **self.extra, "stream": True}
        body.setdefault("stream_options", {"include_usage": True})
        await self.client.send(body, record, self.anchor)


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
    merged_headers = {**target.headers, **(headers or {})}
    before = await asyncio.to_thread(watcher.snapshot)
    peaks: dict[str, float] = {}
    sampler = (
        asyncio.create_task(
            track_gauge_peaks(
                target.metrics_url, watcher.engine_kind, peaks, headers=target.auth_headers()
            )
        )
        if watch_gauges and before is not None and target.metrics_url and watcher.engine_kind
        else None
    )
    gpu_readings: list[list[GpuReading]] = []
    gpu_errors: list[str] = []
    gpu_task = (
        asyncio.create_task(track_gpu(gpu, gpu_readings, gpu_errors)) if gpu is not None else None
    )
    started = time.perf_counter_ns()
    try:
        async with StreamingClient(
            target.root,
            model=target.model,
            api_key=target.api_key,
            headers=merged_headers,
            timeout_s=timeout_s,
        ) as client:
            runner = Runner(_Sender(client, anchor, extra_body or {}), anchor, records.append)
            await runner.run_cell(CellPlan(label, list(items), ClosedLoop(concurrency)))
    finally:
        for task in (sampler, gpu_task):
            if task is not None:
                task.cancel()
    duration = time.perf_counter_ns() - started
    after = await asyncio.to_thread(watcher.snapshot)
    return Sample(records, watcher.deltas(before, after), duration, peaks, gpu_readings, gpu_errors)


def sample(target: Target, items: Sequence[WorkItem], **options: Any) -> Sample:
    """Synchronous ``sample_async`` for procedures that run one measurement at a time."""
    return asyncio.run(sample_async(target, items, **options))
