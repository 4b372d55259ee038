"""``ttft bench --workers/--ray`` on the terminal: one line per client worker (the setup itself
is ``ttft.load.bench_options.worker_setup``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ttft.core.summary import BenchSummary


def _ms(ns: Any) -> str:
    return f"{float(ns) / 1e6:.3f} ms"


def print_workers(summary: BenchSummary, console: Console) -> None:
    """One line per client worker: where it ran and its clock offset against this process."""
    fleet = summary.meta.get("client_workers")
    if not isinstance(fleet, dict):
        return
    console.print(f"client workers ({fleet.get('backend')}, {fleet.get('count')}):")
    lost = set(fleet.get("lost") or [])
    for worker in fleet.get("workers", []):
        clock = (
            "same clock as the driver"
            if worker.get("same_clock_as_driver")
            else f"clock converted by {_ms(worker.get('applied_offset_ns', 0))}"
        )
        state = " [red]LOST[/red]" if worker.get("name") in lost else ""
        console.print(
            f"  {worker.get('name')}: pid {worker.get('pid')} on {worker.get('host')}, "
            f"offset {_ms(worker.get('clock_offset_ns', 0))} +- "
            f"{_ms(worker.get('clock_bound_ns', 0))} ({clock}){state}"
        )
