"""Choosing where the client runs: this process, N child processes, or Ray actors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.load.fleet_bench import Fleet, run_cells_fleet
from ttft.load.results import BenchResult
from ttft.load.runner import CellPlan
from ttft.load.sink import JsonlSink
from ttft.load.worker_core import WorkerConfig


@dataclass(frozen=True)
class WorkerSetup:
    """``count`` client workers: child processes, or Ray actors when ``ray_address`` is set
    (``"auto"`` or a head node's address). ``count=None`` with Ray: one per cluster CPU."""

    count: int | None = None
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 1:
            raise TtftError(f"--workers must be at least 1, not {self.count}")


@contextlib.contextmanager
def open_fleet(setup: WorkerSetup, config: WorkerConfig, anchor_ns: int) -> Iterator[Fleet]:
    if setup.ray_address is None:
        from ttft.load.process_fleet import ProcessFleet

        with ProcessFleet(setup.count or 1, config, anchor_ns) as fleet:
            yield fleet
        return
    from ttft.load.ray_fleet import RayFleet

    with RayFleet(setup.count, config, anchor_ns, setup.ray_address) as ray_fleet:
        yield ray_fleet


async def run_with_workers(
    setup: WorkerSetup,
    target: Target,
    cells: Sequence[CellPlan],
    sink: JsonlSink,
    *,
    anchor: RunAnchor,
    on_record: Callable[[RequestRecord], None] | None = None,
    on_cell_start: Callable[[CellPlan], None] | None = None,
    timeout_s: float = 600.0,
    extra_body: dict[str, Any] | None = None,
) -> BenchResult:
    """The cells over the workers ``setup`` asks for, records merged into ``sink``. Starting
    the workers blocks the loop for a moment; nothing else runs in it yet."""
    config = WorkerConfig(target, timeout_s, extra_body)
    with open_fleet(setup, config, anchor.monotonic_ns) as fleet:
        result = await run_cells_fleet(
            target,
            cells,
            sink,
            fleet,
            anchor=anchor,
            on_record=on_record,
            on_cell_start=on_cell_start,
        )
        note = getattr(fleet, "note", "")
        if note:
            result.notes.append(f"ray: {note}")
        return result
