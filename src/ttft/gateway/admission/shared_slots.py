"""One replica's slots as every worker sees them: counts and pins kept in the ``SlotTable``.

``LaneRules`` (``lane_rules.py``) asks a ``SharedSlots`` before it starts a request: the
request starts only if, under the table's lock, the replica's requests in flight from *all*
workers are below its cap (and long ones below the long lanes' cap).

Each worker's lanes order its own waiting requests; across workers, a slot goes to the request
that has waited longest. Each worker publishes when the first request in each of its lanes
arrived, and a worker about to start a request yields when an older one waits elsewhere and
could start (that worker is woken: a release wakes every worker with waiters). Without this, a
worker whose own clients kept its queue full took every slot it released, and the other
worker's clients waited out their queue timeout. A yield lasts at most ``YIELD_S``
(``lanes.py``): a worker slow to take its turn must not leave the slot idle. (A request whose
client is at its share is not published: it could not start.)

``SharedPins`` is ``SlotPins`` with its free set and last keys in the table, so two workers
never send requests to the same llama-server slot.
"""

from __future__ import annotations

from ttft.gateway.admission.partition import Partition
from ttft.gateway.admission.slot_pins import choose_slot
from ttft.gateway.admission.slot_table import (
    IN_FLIGHT,
    LONG_IN_FLIGHT,
    OLDEST_SHORT,
    PIN_SLOTS,
    SlotShare,
    SlotTable,
    wake,
)

_KEY_MASK = (1 << 63) - 1  # prefix keys are stored as int64


TAKEN, FULL, YIELDED = 1, 0, -1  # what ``SharedSlots.take`` did


class SharedSlots:
    """The in-flight counts of replica ``replica`` across workers, for ``LaneRules.shared``."""

    def __init__(
        self, table: SlotTable, share: SlotShare, replica: int, partition: Partition
    ) -> None:
        self.table = table
        self.replica = replica
        self.row = share.row
        self.wake_fds = share.wake_fds
        self.partition = partition
        self._in_flight = table.at(replica, share.row, IN_FLIGHT)
        self._long = table.at(replica, share.row, LONG_IN_FLIGHT)
        self._oldest = table.at(replica, share.row, OLDEST_SHORT)

    def busy(self) -> tuple[int, int]:
        """Requests in flight from every worker, and how many of them are long (a hint)."""
        return self.table.totals(self.replica)

    def take(self, long: bool, cap: int, long_cap: int, since: int = 0) -> int:
        """Count one more request of this worker if the replica has room for it: ``TAKEN``,
        else ``FULL``; ``YIELDED`` when a request that arrived before ``since`` (a
        ``time.monotonic_ns``; 0: do not look) waits in another worker and could use the room:
        that worker was woken, and the slot is its for now."""
        table, counts = self.table, self.table.counts
        table.lock()
        try:
            total, long_total, short_first, long_first = table.survey(self.replica, self.row)
            if total >= cap or (long and long_total >= long_cap):
                return FULL
            if since and (
                (short_first and short_first < since)
                or (long_first and long_first < since and long_total < long_cap)
            ):
                return YIELDED  # an older request elsewhere could start: its turn
            counts[self._in_flight] += 1
            if long:
                counts[self._long] += 1
            return TAKEN
        finally:
            table.unlock()

    def give(self, long: bool) -> None:
        """One request of this worker left; workers with waiters are woken."""
        table, counts = self.table, self.table.counts
        table.lock()
        try:
            counts[self._in_flight] = max(0, counts[self._in_flight] - 1)
            if long:
                counts[self._long] = max(0, counts[self._long] - 1)
            rows = table.waiting_rows(self.replica, self.row)
        finally:
            table.unlock()
        if rows:
            wake(self.wake_fds, rows)

    def publish_waiting(self, short_since: int, long_since: int) -> None:
        """When the first request waiting in each of this worker's lanes arrived (0: none).
        Written under the lock, so a release in another worker either sees it (and wakes this
        one) or happened before, and this worker's next grant sees the room."""
        with self.table.locked():
            self.table.counts[self._oldest] = short_since
            self.table.counts[self._oldest + 1] = long_since

    def pins(self, slots: int, reserve: int) -> SharedPins:
        """llama-server's ``slots`` ids of this replica, pinned through the same table."""
        return SharedPins(self.table, self.row, self.replica, slots, reserve)

    def part_of(self, total: int) -> int:
        """This worker's part of a per-client limit derived from the slot count (shares stay
        partitioned: a client's connections land on one worker)."""
        return self.partition.part(total, self.replica)


class SharedPins:
    """``SlotPins`` over the table: slot ids free in every worker, and the keys they served."""

    def __init__(
        self, table: SlotTable, row: int, replica: int, slots: int, reserve: int = 1
    ) -> None:
        if not 0 < slots <= PIN_SLOTS:
            raise ValueError(f"{slots} slots: between 1 and {PIN_SLOTS} can be pinned")
        self.table = table
        self.slots = slots
        self.reserve = reserve
        self.owner = row + 1
        self._base = replica * PIN_SLOTS

    @property
    def free(self) -> int:
        owners, base = self.table.owners, self._base
        return sum(1 for s in range(self.slots) if owners[base + s] == 0)

    def take(self, lane: str, key: int | None = None) -> int | None:
        """As ``SlotPins.take`` (``choose_slot``), over the slots no worker holds."""
        table, base = self.table, self._base
        owners, keys, keyed = table.owners, table.keys, table.keyed
        stored = None if key is None else key & _KEY_MASK

        def last_key(slot: int) -> int | None:
            return keys[base + slot] if keyed[base + slot] else None

        table.lock()
        try:
            free = [s for s in range(self.slots) if owners[base + s] == 0]
            if not free:
                return None
            slot = choose_slot(free, lane, self.reserve, stored, last_key)
            owners[base + slot] = self.owner
            keyed[base + slot] = 0 if stored is None else 1
            keys[base + slot] = stored or 0
            return slot
        finally:
            table.unlock()

    def give_back(self, slot: int | None) -> None:
        if slot is None or not 0 <= slot < self.slots:
            return
        table = self.table
        table.lock()
        try:
            if table.owners[self._base + slot] == self.owner:
                table.owners[self._base + slot] = 0
        finally:
            table.unlock()
