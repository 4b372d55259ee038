"""Sampling the client's own health while a cell runs: loop lag, CPU time, read gaps.

One probe per client process and cell. A timer task asks the event loop to wake it every
``INTERVAL_S`` and records how late it woke; the process's CPU time over the cell's wall time
gives its CPU share; the streaming client hands over its kernel-receive -> read gaps. The
judgement is ``ttft.core.client_health``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Callable

from ttft.client.stream import StreamingClient
from ttft.core.client_verdict import HealthSample, reduce_samples

INTERVAL_S = 0.005  # short enough to catch a 10 ms stall, cheap enough to cost nothing (200/s)
_clock = time.perf_counter_ns


def client_probe(worker: str, client: StreamingClient) -> HealthProbe:
    """A probe over ``client``: its read gaps, and whether all its reads were kernel-stamped."""

    def all_stamped() -> bool:
        stats = client.stats
        return stats.opened > 0 and stats.kernel_stamped == stats.opened

    return HealthProbe(worker, client.take_read_gaps, all_stamped)


class HealthProbe:
    """``start()`` in the running loop before the cell, ``stop()`` after it."""

    def __init__(
        self,
        worker: str = "main",
        read_gaps: Callable[[], list[int]] | None = None,
        all_stamped: Callable[[], bool] | None = None,
    ) -> None:
        self.worker = worker
        self._read_gaps = read_gaps
        self._all_stamped = all_stamped
        self._lags: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = self._cpu0 = 0

    def start(self) -> None:
        if self._read_gaps is not None:
            self._read_gaps()  # drop what came before this cell
        self._lags = []
        self._t0, self._cpu0 = _clock(), time.process_time_ns()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        interval_ns = int(INTERVAL_S * 1e9)
        while True:
            due = _clock() + interval_ns
            await asyncio.sleep(INTERVAL_S)
            self._lags.append(max(0, _clock() - due))

    async def stop(self) -> HealthSample:
        wall, cpu = _clock() - self._t0, time.process_time_ns() - self._cpu0
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        gaps = self._read_gaps() if self._read_gaps is not None else []
        lag_p99, lag_max = reduce_samples(self._lags)
        gap_p99, gap_max = reduce_samples(gaps)
        return HealthSample(
            worker=self.worker,
            wall_ns=wall,
            cpu_ns=cpu,
            loop_lag_p99_ns=lag_p99,
            loop_lag_max_ns=lag_max,
            loop_samples=len(self._lags),
            read_gap_p99_ns=gap_p99,
            read_gap_max_ns=gap_max,
            reads=len(gaps),
            kernel_stamped=self._all_stamped() if self._all_stamped is not None else False,
            host=socket.gethostname(),
            pid=os.getpid(),
        )
