"""``ttft bench --workers/--ray``: from the options to a ``WorkerSetup``, and the worker lines."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from ttft.cli.options import BenchOptions
from ttft.core.errors import TtftError
from ttft.core.summary import BenchSummary
from ttft.load.fleet_setup import WorkerSetup


def worker_setup(options: BenchOptions) -> WorkerSetup | None:
    """None for the plain in-process client (no --workers above 1, no --ray)."""
    many = options.workers is not None and options.workers > 1
    if options.ray_address is None and not many:
        return None
    if options.cold_samples is not None:
        raise TtftError(
            "--cold sends one request per engine start: --workers and --ray do not apply",
            "drop --workers/--ray, or drop --cold",
        )
    unsupported = [
        flag
        for flag, given in (
            ("--trace", options.trace_path is not None),
            ("--sessions/--conversations", options.sessions is not None or options.conversations),
            ("--duration", options.duration is not None),
            ("--ramp", options.ramp is not None),
            ("--repeat", options.repeat > 1),
            ("--stop-on-saturation", options.stop_on_saturation),
        )
        if given
    ]
    if unsupported:
        # The fleet deals fixed-count closed- and open-loop cells; these workloads decide live
        # (timed cells, saturation stops, conversations, replayed schedules) in one process.
        raise TtftError(
            f"--workers/--ray do not run {', '.join(unsupported)} yet",
            "drop --workers/--ray (one client process runs them), or run fixed-count cells",
        )
    if options.ray_address is not None:
        from ttft.load.ray_fleet import import_ray

        import_ray()  # says which extra to install before any engine starts
        address = options.ray_address.strip()
        if not address:
            raise TtftError("--ray needs 'auto' or a head node's HOST:PORT")
        return WorkerSetup(options.workers, address)
    return WorkerSetup(options.workers)


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
