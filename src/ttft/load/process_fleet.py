"""``--workers N``: client workers as child processes on this machine, each with its own loop.

Started with ``multiprocessing``'s spawn (a fresh interpreter: no inherited event loop or
sockets), each child talks to the parent over one pipe. Records go back in small batches as
they finish (everything finished within ``FLUSH_S`` travels in one message). Children ignore
SIGINT: on Ctrl-C the parent tells them to stop, so their cut-short requests still come back
as records; if the parent dies, the pipe closes and they exit. A child killed outright loses
only the records of its last ``FLUSH_S``, which the parent then writes as ``worker_lost``.

All children share the parent's CLOCK_MONOTONIC (same host, same boot), so their timestamps
need no conversion; the offset is still measured by round trips and reported, as a check.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import queue
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.load.clock_sync import measure_offset
from ttft.load.fleet_bench import Event, WorkerInfo
from ttft.load.worker_core import Placement, WorkerConfig, WorkerCore
from ttft.load.worker_shares import Share

START_TIMEOUT_S = 60.0  # a child imports ttft first: seconds on a loaded 2-core machine
# How long a finished record may wait in a child before it travels (what a killed child can
# take with it; the records of a clean stop or Ctrl-C are always flushed).
FLUSH_S = 0.01


class _Outbox:
    """Finished records, sent to the parent every ``FLUSH_S`` in one message: one pipe write
    per batch instead of one per record, so a busy worker spends its CPU on requests."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.batch: list[RequestRecord] = []

    def put(self, record: RequestRecord) -> None:
        if not self.batch:
            asyncio.get_running_loop().call_later(FLUSH_S, self.flush)
        self.batch.append(record)

    def flush(self) -> None:
        if self.batch:
            batch, self.batch = self.batch, []
            self.conn.send(("records", batch))


async def _serve(conn: Connection, name: str, config: WorkerConfig) -> None:
    core = WorkerCore(name, config)
    loop = asyncio.get_running_loop()
    outbox = _Outbox(conn)
    stopped = asyncio.Event()
    running: set[asyncio.Task[None]] = set()

    async def run(share: Share, anchor_ns: int) -> None:
        try:
            sample = await core.run(share, anchor_ns, outbox.put)
        except asyncio.CancelledError:
            outbox.flush()
            conn.send(("done", None))
            return
        outbox.flush()
        conn.send(("done", sample))

    def readable() -> None:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            stopped.set()
            return
        kind = message[0]
        if kind == "clock":
            conn.send(("clock", core.clock()))  # answered in the callback: a tight round trip
        elif kind == "run":
            task = loop.create_task(run(message[1], message[2]))
            running.add(task)
            task.add_done_callback(running.discard)
        elif kind == "cancel":
            for task in running:
                task.cancel()
        elif kind == "stop":
            stopped.set()

    loop.add_reader(conn.fileno(), readable)
    conn.send(("hello", core.placement()))
    await stopped.wait()
    loop.remove_reader(conn.fileno())
    for task in running:
        task.cancel()
    await core.aclose()


def _child_main(conn: Connection, name: str, config: WorkerConfig) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        asyncio.run(_serve(conn, name, config))
    finally:
        conn.close()


class ProcessFleet:
    """``count`` child processes; use as a context manager (children are always stopped)."""

    backend = "processes"

    def __init__(self, count: int, config: WorkerConfig, anchor_ns: int) -> None:
        if count < 1:
            raise TtftError(f"--workers must be at least 1, not {count}")
        self.count = count
        self.config = config
        self.anchor_ns = anchor_ns
        self._procs: dict[str, BaseProcess] = {}
        self._conns: dict[str, Connection] = {}
        self._infos: list[WorkerInfo] = []
        self._dead: set[str] = set()
        self._events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._reader: threading.Thread | None = None

    def __enter__(self) -> ProcessFleet:
        context = multiprocessing.get_context("spawn")
        try:
            for n in range(self.count):
                name = f"w{n}"
                parent, child = context.Pipe()
                proc = context.Process(
                    target=_child_main, args=(child, name, self.config), name=f"ttft-{name}"
                )
                proc.daemon = True
                proc.start()
                child.close()
                self._procs[name], self._conns[name] = proc, parent
            here = Placement.here()
            for name, conn in self._conns.items():
                placement = self._expect(name, conn, "hello")
                offset = measure_offset(functools.partial(self._clock, name, conn))
                same = placement.shares_clock_with(here)
                self._infos.append(WorkerInfo(name, placement, offset, same))
            self._reader = threading.Thread(
                target=self._pump, name="ttft-fleet-reader", daemon=True
            )
            self._reader.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _expect(self, name: str, conn: Connection, kind: str) -> Any:
        if not conn.poll(START_TIMEOUT_S):
            raise TtftError(
                f"client worker {name} did not answer within {START_TIMEOUT_S:.0f} s",
                "the machine may be overloaded: use fewer --workers",
            )
        try:
            message = conn.recv()
        except EOFError:
            raise TtftError(
                f"client worker {name} exited while starting (exit code "
                f"{self._procs[name].exitcode})",
                "run with --workers 1 to see the error in this process",
            ) from None
        if message[0] != kind:
            raise TtftError(f"client worker {name} answered {message[0]!r}, not {kind!r}")
        return message[1]

    def _clock(self, name: str, conn: Connection) -> int:
        conn.send(("clock",))
        return int(self._expect(name, conn, "clock"))

    def workers(self) -> list[WorkerInfo]:
        return list(self._infos)

    def pids(self) -> dict[str, int]:
        return {info.name: info.placement.pid for info in self._infos}

    def dispatch(self, worker: str, share: Share) -> None:
        info = next(i for i in self._infos if i.name == worker)
        # A dead child cannot take it: its sentinel reports it as lost on the next poll.
        with contextlib.suppress(OSError):
            self._conns[worker].send(("run", share, self.anchor_ns + info.applied_offset_ns))

    def poll(self, timeout_s: float) -> list[Event]:
        """What the reader thread collected; waits up to ``timeout_s`` only when it has nothing."""
        events: list[Event] = []
        try:
            events.append(
                self._events.get(timeout=timeout_s) if timeout_s > 0 else self._events.get_nowait()
            )
            while True:
                events.append(self._events.get_nowait())
        except queue.Empty:
            pass
        return events

    def _pump(self) -> None:
        """The reader thread: empties the children's pipes as fast as they fill, so a child
        never waits on a parent busy writing the results file."""
        while not self._stopping.is_set() and len(self._dead) < len(self._conns):
            for event in self._collect(0.1):
                self._events.put(event)

    def _collect(self, timeout_s: float) -> list[Event]:
        live = {n: c for n, c in self._conns.items() if n not in self._dead}
        sentinels = {self._procs[n].sentinel: n for n in live}
        ready = wait([*live.values(), *sentinels], timeout_s)
        events: list[Event] = []
        for name, conn in live.items():
            events.extend(self._read_all(name, conn))
        for handle in ready:
            dead = sentinels.get(handle) if isinstance(handle, int) else None
            if dead is not None and dead not in self._dead:
                events.extend(self._read_all(dead, live[dead]))  # its last words first
                self._dead.add(dead)
                code = self._procs[dead].exitcode
                events.append(Event(dead, "lost", why=f"its process exited with code {code}"))
        return events

    def _read_all(self, name: str, conn: Connection) -> list[Event]:
        events: list[Event] = []
        try:
            while conn.poll():
                kind, payload = conn.recv()
                if kind == "records":
                    events.append(Event(name, "records", records=payload))
                elif kind == "done":
                    events.append(Event(name, "done", sample=payload))
        except (EOFError, OSError):
            pass  # the child died mid-message: its sentinel says so
        return events

    def cancel(self) -> None:
        for name, conn in self._conns.items():
            if name not in self._dead:
                with contextlib.suppress(OSError):
                    conn.send(("cancel",))

    def close(self) -> None:
        self._stopping.set()
        for name, conn in self._conns.items():
            try:
                if name not in self._dead:
                    conn.send(("stop",))
            except OSError:
                pass
        deadline = time.monotonic() + 5.0
        for proc in self._procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        if self._reader is not None:
            self._reader.join(5.0)
            self._reader = None
        for conn in self._conns.values():
            conn.close()
        self._procs.clear()
        self._conns.clear()
