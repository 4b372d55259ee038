"""Limits split between worker processes: each one holds only its own part.

With ``--workers N`` every worker runs the whole gateway on the same port (SO_REUSEPORT: the
kernel spreads new connections over them). A replica's slots are shared between them through
a table in shared memory (``slot_table.py``): any worker may start a request while the replica
has a free slot. What belongs to a process, or to a connection, is split instead: worker ``i``
of ``N`` gets ``total // N``, plus one of the ``total % N`` left over, so the parts add up to
the total without any message between processes. The left-over units rotate with an
``offset`` (the replica's index), so with two replicas and an odd total each worker gets its
fair share overall.

What is split: each replica's queue (``queue_size``: requests waiting in a worker's own
lanes); the per-key shares (``max_slots_per_client``, ``max_requests_per_client``) when set,
and the derived per-key defaults (a client's connection lands on one worker, so its share
there is that worker's part); the body budget (memory of the whole host). What is not:
connection caps and timeouts (each process guards its own descriptors).

A per-key limit smaller than N is raised to 1 per worker (so up to N in all): a key must be
servable on every worker it can land on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Partition:
    """This process's place among the workers: ``index`` in ``0 .. count - 1``."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"worker {self.index} of {self.count}")

    def part(self, total: int, offset: int = 0) -> int:
        """This worker's part of ``total`` units; the parts of all workers add up to it."""
        base, extra = divmod(total, self.count)
        return base + (1 if (self.index - offset) % self.count < extra else 0)

    def limit(self, setting: int | None, offset: int = 0) -> int | None:
        """A per-client limit's part: None (derived) and 0 (no limit) stay as they are; a
        positive one is at least 1, since a client may land on any worker."""
        if not setting:
            return setting
        return max(1, self.part(setting, offset))


SOLE = Partition()
