"""Capacity partitioned between worker processes: each one admits only its own part.

With ``--workers N`` every worker runs the whole gateway on the same port (SO_REUSEPORT: the
kernel spreads new connections over them), and each one's admission counts only its own
requests. So that the limits of the configuration still hold *exactly* across them, every
countable limit is split: worker ``i`` of ``N`` gets ``total // N``, plus one of the
``total % N`` left over. The parts add up to the total, so N workers together never hold more
than one would alone, without any state shared between processes (no lock, no table, no
message on the request path). The left-over units rotate with an ``offset`` (the replica's
index), so with two replicas of 3 slots and 2 workers each worker gets 3 slots in all.

What is split: each replica's in-flight slots (configured, or learned from the engine) and its
queue; the per-key shares (``max_slots_per_client``, ``max_requests_per_client``) when set;
the body budget (memory of the whole host). What is not: connection caps and timeouts (each
process guards its own descriptors), and derived defaults, which follow the split values.

The price is utilisation, not correctness: a request waits for its worker's part even when
another worker's part has a free slot, and a worker whose part of a model is zero (more
workers than the model's slots) answers 503 ``no_capacity_here`` with ``Connection: close``,
so the client's retry opens a new connection, which the kernel may give to another worker.
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
