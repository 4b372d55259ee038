"""A trial runner without a server: a queueing model turns a configuration into records.

Service time per request is ``service_ms`` (divided by the ``-np`` slots working in parallel);
with closed-loop concurrency c, request i waits for ceil((i % c + 1) / slots) service times.
The records go through the same summary code as real ones.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.slo import Slo
from ttft.tune.space import Config
from ttft.tune.trial import LevelResult, level_from_records
from ttft.tune.workload import TuneWorkload
from ttft.workload.arrival import OpenLoop

MS = 1_000_000


@dataclass
class FakeSession:
    config: Config
    workload: TuneWorkload
    slos: Sequence[Slo]
    service_ms: float
    launch_command: list[str] = field(default_factory=list)
    startup_s: float | None = 0.5
    measured: list[int] = field(default_factory=list)
    measured_rates: list[float] = field(default_factory=list)

    def measure(self, concurrency: int) -> LevelResult:
        self.measured.append(concurrency)
        slots = int(self.config.get("-np", "1"))
        n = max(self.workload.requests, 2 * concurrency)
        records = []
        for i in range(n):
            waits = math.ceil(((i % concurrency) + 1) / slots)
            ttft = int(waits * self.service_ms * MS)
            records.append(
                RequestRecord(index=i, cell="c", sent_ns=0, first_content_ns=ttft, done_ns=ttft)
            )
        # Slots finish min(c, slots) requests per service time.
        duration = int(n / min(concurrency, slots) * self.service_ms * MS)
        return level_from_records(concurrency, records, duration, self.slos)

    def measure_rate(
        self, rate: float, *, seconds: float = 10.0, burstiness: float = 1.0
    ) -> LevelResult:
        """Open loop on a constant schedule: each arrival takes the first free slot (FIFO)."""
        self.measured_rates.append(rate)
        slots = int(self.config.get("-np", "1"))
        n = max(self.workload.requests, math.ceil(rate * seconds))
        service = int(self.service_ms * MS)
        free = [0] * slots
        records = []
        for i, due in enumerate(OpenLoop(rate, distribution="constant").schedule_ns(n)):
            slot = min(range(slots), key=lambda s: free[s])
            start = max(due, free[slot])
            free[slot] = start + service
            records.append(
                RequestRecord(
                    index=i,
                    cell="r",
                    scheduled_ns=due,
                    sent_ns=due,
                    first_content_ns=start + service,
                    done_ns=start + service,
                )
            )
        duration = max(r.done_ns or 0 for r in records)
        return level_from_records(1, records, duration, self.slos, rate=rate)


@dataclass
class FakeRunner:
    service_ms: Callable[[Config, TuneWorkload], float]
    fail: Callable[[Config], str | None] = lambda config: None
    opened: list[dict[str, str]] = field(default_factory=list)

    @contextlib.contextmanager
    def open(
        self, config: Config, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[FakeSession]:
        self.opened.append(dict(config))
        reason = self.fail(config)
        if reason is not None:
            raise TtftError(reason)
        records.write_text("")
        yield FakeSession(
            config,
            workload,
            slos,
            self.service_ms(config, workload),
            launch_command=["llama-server", *[a for kv in config.items() for a in kv]],
        )


@dataclass
class ManualRunner:
    """An arm runner for a service ttft does not run: proxy edits and engine flags are the
    person's to apply; what ttft applies itself reaches ``inner``."""

    inner: FakeRunner
    applied_by_hand: dict[str, str] = field(default_factory=dict)  # the live service's state

    def manual_reason(self, change: Change) -> str | None:
        if change.edits or change.flags:
            return "the proxy is not ttft's to restart"
        return None

    @contextlib.contextmanager
    def open_arm(
        self, change: Change, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[FakeSession]:
        assert not change.edits and not change.flags, "ttft must never apply a manual change"
        with self.inner.open(dict(self.applied_by_hand), workload, records, slos) as session:
            yield session
