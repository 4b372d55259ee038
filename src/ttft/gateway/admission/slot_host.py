"""The supervisor's side of the shared slot table: files, rows of live workers, wake pipes.

Every worker process gets a row of its own for as long as it lives (``claim``); when it has
exited, ``release`` clears the row (counts and pinned slots it held, which only a dead
process leaves behind) and wakes the workers that wait, since room may have appeared. Rows
outnumber workers four to one: a SIGHUP starts a new worker beside each old one that drains.

A configuration whose replicas differ from the running one's (a reload that adds, removes or
reorders upstreams) gets a new table file: old workers finish their answers counted in the old
one, new workers count in the new one (as before this table existed, the limits may then be
exceeded by the draining answers, for up to ``drain_timeout_s``). The same replicas keep the
same table, so a reload that rotates keys keeps every count exact.
"""

from __future__ import annotations

import contextlib
import os

from ttft.gateway.admission.slot_table import Layout, SlotShare, SlotTable, drain, wake

ROWS_PER_WORKER = 4


class SlotHost:
    """Owns the tables under ``directory`` (the supervisor's private one) and the pipes."""

    def __init__(self, directory: str, workers: int) -> None:
        self.directory = directory
        self.rows = ROWS_PER_WORKER * max(1, workers)
        self._pipes = [os.pipe() for _ in range(self.rows)]
        for read_end, write_end in self._pipes:
            os.set_blocking(read_end, False)
            os.set_blocking(write_end, False)
        self._write_fds = tuple(w for _, w in self._pipes)
        self._free = list(range(self.rows))
        self._tables: dict[Layout, SlotTable] = {}
        self._generation = 0

    @property
    def free_rows(self) -> int:
        return len(self._free)

    def claim(self, layout: Layout) -> SlotShare:
        """A row for a worker about to start with a configuration of these replicas
        (``slot_table.layout_of``). Raises ``LookupError`` when every row is held (workers
        still draining from earlier reloads)."""
        if not self._free:
            raise LookupError("every slot-table row is held by a running or draining worker")
        table = self._tables.get(layout)
        if table is None:
            self._generation += 1
            path = os.path.join(self.directory, f"slots-{self._generation}.bin")
            table = SlotTable.create(path, self.rows, len(layout))
            self._tables[layout] = table
        row = self._free.pop(0)
        return SlotShare(table.path, row, layout, self._write_fds, self._pipes[row][0])

    def release(self, share: SlotShare) -> None:
        """The worker that held ``share`` has exited: its row is cleared and free again."""
        table = self._tables.get(share.layout)  # one table per layout, for the host's life
        if table is not None:
            wake(self._write_fds, table.clear_row(share.row))
        drain(self._pipes[share.row][0])  # no stale wake-up for the row's next worker
        if share.row not in self._free:
            self._free.append(share.row)
            self._free.sort()

    def keep_only(self, share: SlotShare) -> None:
        """In a worker just forked: close the other rows' read ends (it wakes the others
        through their write ends, and is woken through its own read end only), so a worker
        holds 4N + 1 pipe ends, not 8N."""
        for row, (read_end, _) in enumerate(self._pipes):
            if row != share.row:
                os.close(read_end)
        self._pipes.clear()

    def close(self) -> None:
        for table in self._tables.values():
            with contextlib.suppress(BufferError, ValueError):
                table.close()
        self._tables.clear()
        for read_end, write_end in self._pipes:
            os.close(read_end)
            os.close(write_end)
        self._pipes.clear()
