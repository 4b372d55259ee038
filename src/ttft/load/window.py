"""A measured window: the server's metrics just before and just after, its gauges' peaks during.

A bench cell (in this process or over a worker fleet) and a doctor probe are each one window
around the requests they send: the counters' deltas say what the server did in it, and the
gauges (running, waiting, KV usage), sampled while it runs, say how full it got; a snapshot
after the window would only see an idle server.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from ttft.core.target import Target
from ttft.engines.prometheus import Scrape
from ttft.load.runner import CellPlan
from ttft.load.server_metrics import MetricsWatcher, track_gauge_peaks
from ttft.load.sink import JsonlSink


class ServerWindow:
    """``async with ServerWindow(watcher, target):`` around the requests, then ``deltas()``.

    Gauges are sampled only when the metrics answered before the window and the engine is
    known (``watch_gauges=False``: counters only, for a probe that does not need them).
    """

    def __init__(self, watcher: MetricsWatcher, target: Target, *, watch_gauges: bool = True):
        self.watcher = watcher
        self.target = target
        self.watch_gauges = watch_gauges
        self.before: Scrape | None = None
        self.peaks: dict[str, float] = {}
        self._sampler: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ServerWindow:
        self.before = await asyncio.to_thread(self.watcher.snapshot)
        url, kind = self.target.metrics_url, self.watcher.engine_kind
        if self.watch_gauges and self.before is not None and url and kind:
            headers = self.target.auth_headers()
            self._sampler = asyncio.create_task(
                track_gauge_peaks(url, kind, self.peaks, headers=headers)
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sampler is not None:
            self._sampler.cancel()

    async def deltas(self) -> dict[str, Any] | None:
        """The server's metric deltas over the window (None: no metrics, or an unknown engine)."""
        after = await asyncio.to_thread(self.watcher.snapshot)
        return self.watcher.deltas(self.before, after)

    async def write_cell(
        self, sink: JsonlSink, plan: CellPlan, duration_ns: int
    ) -> dict[str, Any] | None:
        """A bench cell is over: its deltas, with the gauge peaks seen during it, go to disk as
        the cell's ``metrics`` line and are returned (in-process and fleet runs write the same
        line)."""
        server = await self.deltas()
        if server is not None:
            server["peaks_during_cell"] = self.peaks
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
