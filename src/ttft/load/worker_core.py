"""What one client worker is, whatever carries it (a child process, a Ray actor).

It owns one ``StreamingClient`` (its own connections, on its own event loop), runs the shares
it is given with ``run_share``, samples its own health over each, and tells where it runs:
host, process, boot id (two processes with the same boot id share one monotonic clock) and its
clock reading for offset measurement.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ttft.client.stream import StreamingClient
from ttft.core.client_health import schedule_lag_p99
from ttft.core.client_verdict import HealthSample
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.health_probe import client_probe
from ttft.load.sender import ClientSender, client_for
from ttft.load.worker_shares import Share, run_share

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str:
    """This machine's boot id (Linux); empty where there is none."""
    try:
        with open(_BOOT_ID, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Placement:
    """Where a worker runs."""

    host: str
    pid: int
    boot_id: str
    node: str = ""  # the Ray node id, for actors

    @classmethod
    def here(cls, node: str = "") -> Placement:
        return cls(socket.gethostname(), os.getpid(), boot_id(), node)

    def shares_clock_with(self, other: Placement) -> bool:
        """Same host and same boot: ``perf_counter_ns()`` is the same CLOCK_MONOTONIC."""
        return bool(self.boot_id) and (self.host, self.boot_id) == (other.host, other.boot_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs to build its client (picklable: it crosses processes)."""

    target: Target
    timeout_s: float = 600.0
    extra_body: dict[str, Any] | None = None


class WorkerCore:
    def __init__(self, name: str, config: WorkerConfig) -> None:
        self.name = name
        self.config = config
        self._client: StreamingClient | None = None

    def placement(self) -> Placement:
        return Placement.here()

    @staticmethod
    def clock() -> int:
        return time.perf_counter_ns()

    def _ensure_client(self) -> StreamingClient:
        # Made inside the running loop on first use: its connections belong to that loop.
        if self._client is None:
            target = self.config.target
            self._client = client_for(target, timeout_s=self.config.timeout_s)
        return self._client

    async def run(
        self, share: Share, anchor_ns: int, emit: Callable[[RequestRecord], None]
    ) -> HealthSample:
        """Run ``share`` with the run anchor ``anchor_ns`` given on this process's clock;
        ``emit`` gets each record as it finishes."""
        client = self._ensure_client()
        sender = ClientSender(client, RunAnchor(anchor_ns, 0.0), self.config.extra_body)
        probe = client_probe(self.name, client)
        probe.start()
        try:
            records = await run_share(sender, share, anchor_ns, emit)
        finally:
            sample = await probe.stop()
        if share.concurrency is None:  # open loop: this worker's own part of the schedule lag
            sample = dataclasses.replace(sample, schedule_lag_p99_ns=schedule_lag_p99(records))
        return sample

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
