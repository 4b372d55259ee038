"""CPU time of the processes behind a local port, for benchmarks that compare proxies.

A proxy's added latency on a small shared machine is mostly a matter of how much CPU it needs per
request and per streamed event: reading both beside the latencies says *why* one path adds more
than another. Linux only (``/proc``); elsewhere the readings are None and benchmarks leave the
column empty.

- ``listener_pids(port)``: the processes holding the listening socket of ``127.0.0.1:port`` (an
  nginx master and its workers, a gateway), found through ``/proc/net/tcp`` and the processes'
  descriptors, so no launcher has to hand out its children's pids.
- ``cpu_ns(pids)``: time on CPU of every thread of those processes, from ``schedstat``
  (nanoseconds; ``/proc/PID/stat``'s ticks are 10 ms).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    wanted = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[1].endswith(wanted) and fields[3] == _LISTEN:
                inodes.add(fields[9])
    return inodes


def listener_pids(port: int) -> list[int]:
    """Pids of the processes that hold the listening socket on ``port`` (empty if unknown)."""
    targets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not targets:
        return []
    pids: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.scandir(f"/proc/{entry.name}/fd")
        except OSError:
            continue  # gone, or not ours to read
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) in targets:
                        pids.append(int(entry.name))
                        break
                except OSError:
                    continue
    return sorted(pids)


def cpu_ns(pids: Iterable[int]) -> int | None:
    """Nanoseconds on CPU, all threads of ``pids`` together; None when ``/proc`` cannot say."""
    total = 0
    seen = False
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
                seen = True
            except (OSError, ValueError, IndexError):
                continue
    return total if seen else None


__all__ = ["cpu_ns", "listener_pids"]
