"""The in-flight counts of every replica, shared by the worker processes of one gateway.

With ``--workers N`` each worker runs its own lanes (``lanes.py``), but a replica's slots are
one resource: a request may start in any worker while the replica has a free slot, wherever
the other requests started. The counts live in a small file mapped into every worker
(``mmap``), one row per worker process:

- per replica and process row: requests in flight, long requests in flight, and when the
  oldest request waiting in each of the process's lanes arrived (``time.monotonic_ns``, the
  same clock in every process; 0: none waits), so a release elsewhere wakes the process, and
  the slot goes to the request that has waited longest, whichever worker holds it;
- per replica: which process holds each of llama-server's slots (``slot_pins.py``'s choice,
  shared: two workers must never pin to the same slot) and the prefix key it last served.

Every read-modify-write holds ``flock`` on the file. The kernel drops that lock when its holder
dies, even by SIGKILL, so a dead worker never blocks the others; its counts stay in its row
until the supervisor clears that row (it knows which process had which row). Each process
opens the file itself: a lock belongs to an open file, and a descriptor inherited through
``fork`` would share the supervisor's.

A process wakes another by writing a byte into that row's pipe (created by the supervisor
before forking, so every worker holds every row's write end).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"TTFTSLT1"
PIN_SLOTS = 64  # llama-server slots pinned across workers per replica; beyond, pins are off
_HEADER = 16  # magic, then rows and replicas as two int32
_FIELDS = 4  # per replica and row: in flight, long in flight, oldest short / long waiting
IN_FLIGHT, LONG_IN_FLIGHT, OLDEST_SHORT, OLDEST_LONG = range(_FIELDS)
Layout = tuple[tuple[str, str], ...]  # (model, upstream URL) of every replica, in config order


def layout_of(models: list[tuple[str, list[str]]]) -> Layout:
    """The replicas of a configuration, each once, in order: the table's replica index."""
    return tuple((name, url) for name, urls in models for url in urls)


@dataclass(frozen=True)
class SlotShare:
    """What a worker needs to find the shared counts: set per worker by the supervisor."""

    path: str
    row: int
    layout: Layout
    wake_fds: tuple[int, ...]  # every row's pipe, write end (non-blocking)
    wake_read_fd: int  # this row's pipe, read end (non-blocking)

    def replica_index(self, model: str, url: str) -> int | None:
        try:
            return self.layout.index((model, url))
        except ValueError:
            return None


class SlotTable:
    """The mapped file: counts by (replica, row), pins by (replica, slot). Not thread-safe;
    each process opens its own (see the module's docstring on locks)."""

    def __init__(self, path: str, rows: int, replicas: int) -> None:
        self.path = path
        self.rows = rows
        self.replicas = replicas
        self._fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(self._fd).st_size
            if size != table_size(rows, replicas):
                raise ValueError(f"{path}: {size} bytes, expected {table_size(rows, replicas)}")
            self._map = mmap.mmap(self._fd, size)
        except BaseException:
            os.close(self._fd)
            raise
        view = memoryview(self._map)
        pins = replicas * PIN_SLOTS
        at = _HEADER
        self.keys = view[at : at + 8 * pins].cast("q")  # last prefix key per slot
        at += 8 * pins
        self.counts = view[at : at + 8 * replicas * rows * _FIELDS].cast("q")
        at += 8 * replicas * rows * _FIELDS
        self.owners = view[at : at + 4 * pins].cast("i")  # 0: free, else row + 1
        at += 4 * pins
        self.keyed = view[at : at + 4 * pins].cast("i")  # 1: keys[i] holds a key

    @classmethod
    def create(cls, path: str, rows: int, replicas: int) -> SlotTable:
        """A zeroed table at ``path`` (mode 0600), replacing any file there."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            header = MAGIC + rows.to_bytes(4, "little") + replicas.to_bytes(4, "little")
            os.write(fd, header)
            os.ftruncate(fd, table_size(rows, replicas))
        finally:
            os.close(fd)
        return cls(path, rows, replicas)

    @classmethod
    def open(cls, path: str) -> SlotTable:
        with open(path, "rb") as f:
            header = f.read(_HEADER)
        if len(header) != _HEADER or header[:8] != MAGIC:
            raise ValueError(f"{path}: not a slot table")
        return cls(
            path, int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:], "little")
        )

    def close(self) -> None:
        for view in (self.keys, self.counts, self.owners, self.keyed):
            view.release()
        self._map.close()
        os.close(self._fd)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def lock(self) -> None:
        """The lock without a context manager (the request path: one call less each way)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def unlock(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def at(self, replica: int, row: int, field: int) -> int:
        """The index in ``counts`` of one replica's field for one row."""
        return (replica * self.rows + row) * _FIELDS + field

    def totals(self, replica: int) -> tuple[int, int]:
        """Requests in flight at ``replica`` from every row, and how many are long (unlocked:
        a hint; decisions are taken again under the lock)."""
        counts, base, total, long_ = self.counts, replica * self.rows * _FIELDS, 0, 0
        for i in range(base, base + self.rows * _FIELDS, _FIELDS):
            total += counts[i]
            long_ += counts[i + 1]
        return total, long_

    def waiting_rows(self, replica: int, but: int) -> list[int]:
        """The rows other than ``but`` with requests waiting for ``replica``."""
        counts, rows = self.counts, []
        for row in range(self.rows):
            at = self.at(replica, row, OLDEST_SHORT)
            if row != but and (counts[at] or counts[at + 1]):
                rows.append(row)
        return rows

    def survey(self, replica: int, row: int) -> tuple[int, int, int, int]:
        """One pass over ``replica``'s rows: requests in flight, long ones, and the earliest
        arrival of a short and of a long request waiting in a row other than ``row`` (0:
        none). Read under the lock when a decision depends on it."""
        counts, rows = self.counts, self.rows
        total = long_ = short_first = long_first = 0
        at = replica * rows * _FIELDS
        for other in range(rows):
            total += counts[at]
            long_ += counts[at + 1]
            if other != row:
                short, waiting_long = counts[at + 2], counts[at + 3]
                if short and (not short_first or short < short_first):
                    short_first = short
                if waiting_long and (not long_first or waiting_long < long_first):
                    long_first = waiting_long
            at += _FIELDS
        return total, long_, short_first, long_first

    def clear_row(self, row: int) -> list[int]:
        """A process that held ``row`` is gone: its counts and slots are free again. Returns
        the rows that wait for a replica (to be woken: room may have appeared)."""
        woken: set[int] = set()
        with self.locked():
            for replica in range(self.replicas):
                for field in range(_FIELDS):
                    self.counts[self.at(replica, row, field)] = 0
                woken.update(self.waiting_rows(replica, row))
            for i in range(self.replicas * PIN_SLOTS):
                if self.owners[i] == row + 1:
                    self.owners[i] = 0
        return sorted(woken)


def table_size(rows: int, replicas: int) -> int:
    pins = replicas * PIN_SLOTS
    return _HEADER + 8 * pins + 8 * replicas * rows * _FIELDS + 8 * pins


def wake(fds: tuple[int, ...], rows: list[int]) -> None:
    """One byte into each row's pipe; a full pipe is a wake-up already pending."""
    for row in rows:
        with contextlib.suppress(OSError):  # BlockingIOError: full, a wake-up is pending
            os.write(fds[row], b"\0")


def drain(fd: int) -> None:
    """Empty a wake pipe (its bytes only say "look again")."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while os.read(fd, 4096):
            pass
