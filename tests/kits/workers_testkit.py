"""Shared by the --workers and --ray tests: a scripted server, a prompt file, one session run,
and a starver that holds one worker's CPU with a busy loop."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ttft.core.target import Target
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.session import SessionHooks, SessionResult, run_session
from ttft.workload.arrival import Arrival
from ttft.workload.spec import WorkloadSpec

# First token 20 ms after the request, then 3 more tokens 2 ms apart: timing truth is known.
SCRIPT = {"first_token_delay_ms": 20.0, "n_tokens": 4, "token_interval_ms": 2.0}
TTFT_NS = 20_000_000


def prompt_file(folder: Path, n: int = 16) -> Path:
    path = folder / "prompts.jsonl"
    with path.open("w") as fh:
        for i in range(n):
            body = {"messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4}
            fh.write(json.dumps(body) + "\n")
    return path


def run(
    base_url: str,
    folder: Path,
    arrivals: list[Arrival],
    requests: int,
    workers: WorkerSetup | None,
    hooks: SessionHooks | None = None,
    name: str = "records.jsonl",
) -> SessionResult:
    spec = WorkloadSpec(
        requests=requests,
        max_tokens=4,
        prompt_file=prompt_file(folder),
        warmup=1,
        arrivals=arrivals,
    )
    target = Target(base_url, "scripted")
    return run_session(
        target, spec, None, folder / name, hooks=hooks, workers=workers, timeout_s=60.0
    )


def shape(value: Any) -> Any:
    """The keys of a JSON document, recursively (values dropped): its schema, roughly. A list's
    shape is the merged shape of its items; an empty list and a null are left open (``None``),
    because how many checks a verdict lists, or whether a statistic had samples, depends on the
    run's timing, not on its schema."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        merged: Any = None
        for item in value:
            merged = _merge(merged, shape(item))
        return ["list", merged]
    return type(value).__name__ if value is not None else None


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a.get(k), b.get(k)) for k in a.keys() | b.keys()}
    return a


def shape_mismatches(a: Any, b: Any, where: str = "$") -> list[str]:
    """Where the shapes of two documents differ: the same keys everywhere, the same types where
    both sides hold a value; an open side (empty list, null) matches anything."""
    sa, sb = (a, b) if where != "$" else (shape(a), shape(b))
    if sa is None or sb is None:
        return []
    if isinstance(sa, dict) and isinstance(sb, dict):
        out = [
            f"{where}.{k}: only in {'first' if k in sa else 'second'}"
            for k in sa.keys() ^ sb.keys()
        ]
        for k in sa.keys() & sb.keys():
            out += shape_mismatches(sa[k], sb[k], f"{where}.{k}")
        return out
    if isinstance(sa, list) and isinstance(sb, list):
        return shape_mismatches(sa[1], sb[1], f"{where}[]")
    if (sa == "int" and sb == "float") or (sa == "float" and sb == "int"):
        return []  # JSON numbers: a mean can be a whole number in one run
    return [] if sa == sb else [f"{where}: {sa} against {sb}"]


def _threads(pid: int) -> list[int]:
    """Every thread of ``pid``: affinity and nice are per thread on Linux, and a Ray actor runs
    its event loop in a thread of its own, not in the process's main thread."""
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if t.name.isdigit()]
    except OSError:
        return [pid]


@contextlib.contextmanager
def starved(pid: int) -> Iterator[None]:
    """Pin every thread of process ``pid`` to one CPU at the lowest priority and hold that CPU
    with a busy-loop process at normal priority: ``pid`` runs only in the hog's leftovers."""
    before = os.sched_getaffinity(pid)
    cpu = min(before)  # one this process may run on (CI containers restrict the set)
    old_nice = os.getpriority(os.PRIO_PROCESS, pid)
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"]
    )
    threads = _threads(pid)
    # With autogroup scheduling (Linux's default for desktops, on here) nice only ranks threads
    # within one session's group, and a Ray worker has a session of its own: its group's share
    # against the hog's is set through /proc/PID/autogroup, where the kernel allows it.
    group = Path(f"/proc/{pid}/autogroup")
    # Never the test run's own group: a run killed before the restore below left every later
    # process of the session at nice 19, and then no worker could be starved relative to a hog.
    old_group = (
        None
        if _group_name(group) == _group_name(Path("/proc/self/autogroup"))
        else _group_nice(group)
    )
    try:
        for tid in threads:
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(tid, {cpu})
                os.setpriority(os.PRIO_PROCESS, tid, 19)
        if old_group is not None:
            with contextlib.suppress(OSError):
                group.write_text("19")
        yield
    finally:
        hog.kill()
        hog.wait(10)
        for tid in threads:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before)
                os.setpriority(os.PRIO_PROCESS, tid, old_nice)
        if old_group is not None:
            with contextlib.suppress(OSError):
                group.write_text(str(old_group))


def _group_name(group: Path) -> str | None:
    """A process's autogroup ("/autogroup-12"), None without autogroups."""
    try:
        return group.read_text().split()[0]
    except (OSError, IndexError):
        return None


def _group_nice(group: Path) -> int | None:
    """The nice of a process's autogroup ("/autogroup-12 nice 0"), None without autogroups."""
    try:
        return int(group.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None
