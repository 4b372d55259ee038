"""Cores of its own for an embedded engine, so engines started side by side on one machine run
at the speed one engine had alone (the simulation gives every replica the calibrated speed)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence


def core_groups(replicas: int, threads: int | None) -> list[list[int]] | None:
    """Disjoint groups of ``threads`` cores, one per replica; None when this process may not
    use that many cores (the replicas then share them, and the validation says so)."""
    if threads is None or not hasattr(os, "sched_getaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < replicas * threads:
        return None
    return [cores[i * threads : (i + 1) * threads] for i in range(replicas)]


def pin(pid: int, cores: Sequence[int]) -> None:
    """Every thread of process ``pid`` onto ``cores`` (threads it starts later inherit it)."""
    try:
        tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tasks = [pid]
    for tid in tasks:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, set(cores))


def shared_cores(replicas: int) -> list[list[int]]:
    """The cores this process may use, split into ``replicas`` equal groups (wrapping round
    when there are more replicas than cores): engines that must share a machine then run side
    by side, each with as many threads as cores of its own, instead of every engine spinning a
    thread per core on every core (llama.cpp's threads wait for each other at every step, so
    oversubscribed engines slow down by far more than their share)."""
    if hasattr(os, "sched_getaffinity"):
        cores = sorted(os.sched_getaffinity(0))
    else:  # pragma: no cover - macOS, Windows: no pinning, so the numbers only size threads
        cores = list(range(os.cpu_count() or 1))
    each = max(1, len(cores) // replicas)
    return [[cores[(i * each + j) % len(cores)] for j in range(each)] for i in range(replicas)]


def replica_cores(replicas: int, threads: int | None) -> tuple[list[list[int]], bool]:
    """The cores of each replica started side by side, and whether they are cores of its own
    for ``threads`` threads each (``core_groups``); if not, the cores split evenly
    (``shared_cores``), each replica running a thread per core of its group."""
    groups = core_groups(replicas, threads)
    return (groups, True) if groups is not None else (shared_cores(replicas), False)
