"""The lanes' decisions without an event loop: who may start, who starts next when a slot frees.

``Admission`` (``lanes.py``) waits on these rules with asyncio futures; the simulator
(``ttft.simulate.gateway_sim``) drives the very same rules from its discrete events, so the two
cannot drift. The policy itself is described in ``lanes.py``.

A ticket carries an opaque ``item`` (the gateway's future, the simulator's request). Methods
that start waiting tickets return them; the caller wakes (or submits) each one.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

SHORT = "short"
LONG = "long"
LANES = (SHORT, LONG)

T = TypeVar("T")


class Shed(Exception):
    """The request was not admitted: ``reason`` is ``queue_full`` or ``queue_timeout``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(order=True, slots=True)
class Ticket(Generic[T]):
    priority: int
    seq: int
    lane: str = field(compare=False)
    item: T = field(compare=False)
    cancelled: bool = field(default=False, compare=False)
    client: str = field(default="", compare=False)
    since: int = field(default=0, compare=False)  # arrival, monotonic ns (shared slots only)


class SlotCounter(Protocol):
    """A replica's slots counted across processes (``shared_slots.SharedSlots``)."""

    def busy(self) -> tuple[int, int]: ...
    def take(self, long: bool, cap: int, long_cap: int, since: int = 0) -> int: ...
    def give(self, long: bool) -> None: ...
    def publish_waiting(self, short_since: int, long_since: int) -> None: ...
    def part_of(self, total: int) -> int: ...


_TAKEN, _YIELDED = 1, -1  # SlotCounter.take's answers (0: no room)


class LaneRules(Generic[T]):
    """Slots and lanes of one replica: counts, queues and every decision, no waiting."""

    def __init__(
        self,
        max_in_flight: int,
        queue_size: int,
        *,
        split_lanes: bool = True,
        short_burst: int = 4,
        long_reserve: int = 0,
        client_slots: int | None = 0,
    ) -> None:
        self.max_in_flight = max_in_flight
        # The most slots one client may hold: None, half of them (at least one); 0, no limit.
        self.client_slots_setting = client_slots
        self._by_client: dict[str, int] = {}
        self.long_reserve = long_reserve
        self.queue_size = queue_size
        self.split_lanes = split_lanes
        self.short_burst = max(1, short_burst)
        self.in_flight = 0
        self.long_in_flight = 0
        self.queued = {SHORT: 0, LONG: 0}
        self._lanes: dict[str, list[Ticket[T]]] = {SHORT: [], LONG: []}
        self._seq = itertools.count()
        self._short_streak = 0
        # With several workers: the replica's slots as all of them hold them. ``in_flight``
        # stays this process's own; decisions use every worker's (``busy``).
        self.shared: SlotCounter | None = None
        self._published: tuple[int, int] = (0, 0)
        # The last grant left a free slot to an older request in another worker.
        self.yielded = False

    @property
    def long_cap(self) -> int:
        """The most slots long requests may hold; at least one, so they are never shut out."""
        if not self.split_lanes:
            return self.max_in_flight
        return max(1, self.max_in_flight - self.long_reserve)

    @property
    def client_slots(self) -> int:
        """The most slots one client may hold (0: no limit); read each time, since
        ``max_in_flight`` changes when an engine reports its slots."""
        setting = self.client_slots_setting
        return max(1, self.own_part // 2) if setting is None else setting

    @property
    def own_part(self) -> int:
        """The slots that per-client defaults derive from: all of them, or with several
        workers this one's part (the slots are shared, but a client's connection lands on
        one worker)."""
        shared = self.shared
        return self.max_in_flight if shared is None else shared.part_of(self.max_in_flight)

    def lane_of(self, lane: str) -> str:
        """The lane a request of ``lane`` really waits in: one lane (short) without the split."""
        return lane if self.split_lanes else SHORT

    def _busy(self) -> tuple[int, int]:
        shared = self.shared
        return (self.in_flight, self.long_in_flight) if shared is None else shared.busy()

    def _can_start(self, lane: str) -> bool:
        busy, long_busy = self._busy()
        if busy >= self.max_in_flight:
            return False
        return lane == SHORT or long_busy < self.long_cap

    def _client_may_start(self, client: str) -> bool:
        cap = self.client_slots
        return not client or not cap or self._by_client.get(client, 0) < cap

    def _start(self, lane: str, client: str = "", since: int = 0) -> bool:
        """Count a request as started; False when another worker took the room first, or
        when an older request waits in another worker (``since``: this one's arrival)."""
        shared = self.shared
        if shared is not None:
            took = shared.take(lane == LONG, self.max_in_flight, self.long_cap, since)
            if took != _TAKEN:
                self.yielded = self.yielded or took == _YIELDED
                return False
        self.in_flight += 1
        if lane == LONG:
            self.long_in_flight += 1
        if client and self.client_slots_setting != 0:
            self._by_client[client] = self._by_client.get(client, 0) + 1
        return True

    @property
    def waiting(self) -> int:
        return self.queued[SHORT] + self.queued[LONG]

    @property
    def busy(self) -> int:
        """Requests at the engine, from every worker when they share the slots."""
        return self.in_flight if self.shared is None else self.shared.busy()[0]

    @property
    def load(self) -> int:
        """What routing balances: requests at the engine plus requests waiting for it."""
        return self.busy + self.waiting

    @property
    def has_free_slot(self) -> bool:
        return self.busy < self.max_in_flight and self.waiting == 0

    @property
    def room(self) -> bool:
        """A slot is free now (another worker may still take it first)."""
        return self.busy < self.max_in_flight

    @property
    def has_room(self) -> bool:
        # No slot at all (max_in_flight = 0): no room either, or a request would only wait
        # for its queue timeout.
        if self.max_in_flight <= 0:
            return False
        return self.busy < self.max_in_flight or self.waiting < self.queue_size

    def try_start(self, lane: str, client: str = "") -> bool:
        """Start at once when the request would not wait (True). Every waiting ticket is one
        that cannot start (``release`` dispatches all that can), so a request whose own lane is
        empty may start at once: a short one then does not wait behind long ones held back by
        their cap. The caller gives the same ``lane`` to ``release``."""
        lane = self.lane_of(lane)
        if self.queued[lane] or not self._client_may_start(client):
            return False
        if self.shared is not None:  # decided under the table's lock, one look at the table
            return self._start(lane, client, time.monotonic_ns())
        return self._can_start(lane) and self._start(lane, client)

    def enqueue(self, lane: str, priority: int, client: str, item: T) -> Ticket[T]:
        """A request that could not start joins its lane; ``Shed("queue_full")`` when the lanes
        already hold ``queue_size``. Call ``grant`` next when a slot is free: tickets ahead of
        it may be held back by their client's share."""
        if self.waiting >= self.queue_size:
            raise Shed("queue_full", f"the queue is full ({self.queue_size} waiting)")
        ticket = Ticket(priority, next(self._seq), self.lane_of(lane), item, client=client)
        if self.shared is not None:
            ticket.since = time.monotonic_ns()
        heapq.heappush(self._lanes[ticket.lane], ticket)
        self.queued[ticket.lane] += 1
        self._publish()
        return ticket

    def withdraw(self, ticket: Ticket[T]) -> None:
        """A waiting ticket leaves its lane (timed out, or its client left)."""
        if not ticket.cancelled:
            ticket.cancelled = True
            self.queued[ticket.lane] -= 1
            lane = self._lanes[ticket.lane]
            # Withdrawn tickets stay in the heap until popped; compact before they pile up.
            if len(lane) > 2 * self.queue_size + 16:
                self._lanes[ticket.lane] = [t for t in lane if not t.cancelled]
                heapq.heapify(self._lanes[ticket.lane])
            self._publish()

    def free(self, lane: str, client: str = "") -> list[Ticket[T]]:
        """A request of ``lane`` left the engine: its slot goes to waiting ones that may start;
        the tickets started, in order."""
        lane = self.lane_of(lane)
        self.in_flight -= 1
        if lane == LONG:
            self.long_in_flight -= 1
        if self.shared is not None:
            self.shared.give(lane == LONG)
        if client and self.client_slots_setting != 0:
            left = self._by_client.get(client, 1) - 1
            if left > 0:
                self._by_client[client] = left
            else:
                self._by_client.pop(client, None)
        return self.grant()

    def grant(self, fair: bool = True) -> list[Ticket[T]]:
        """Start every waiting ticket that may start (also after ``max_in_flight`` grew).
        With shared slots and ``fair``, stop at a ticket younger than one waiting in another
        worker (``yielded``); ``fair=False`` takes the room regardless."""
        started: list[Ticket[T]] = []
        self.yielded = False
        while self.waiting and self.room:
            streak = self._short_streak
            ticket = self._next()
            if ticket is None:
                break
            if not self._start(ticket.lane, ticket.client, ticket.since if fair else 0):
                # Another worker took the slot between the look and the take: back in place.
                heapq.heappush(self._lanes[ticket.lane], ticket)
                self.queued[ticket.lane] += 1
                self._short_streak = streak
                break
            started.append(ticket)
        if self.shared is not None:
            self._publish()
        return started

    def _publish(self) -> None:
        """Tell the other workers when the first request in each lane arrived (they wake this
        one on release, and yield a slot to an older request)."""
        shared = self.shared
        if shared is None:
            return
        heads = (self._head_since(SHORT), self._head_since(LONG))
        if heads != self._published:
            shared.publish_waiting(*heads)
            self._published = heads

    def _head_since(self, lane: str) -> int:
        """The arrival of the ticket this lane serves next (0: none waits). A client at its
        share cannot start: its tickets are passed over, or a client that queues more than its
        share here would make every other worker yield its free slots to them."""
        if not self.queued[lane]:
            return 0
        heap = self._lanes[lane]
        while heap and self._gone(heap[0]):
            heapq.heappop(heap)  # withdrawn (or about to be): never served
        if not heap:
            return 0
        if self._client_may_start(heap[0].client):
            return heap[0].since
        ready = [t for t in heap if not self._gone(t) and self._client_may_start(t.client)]
        return min(ready).since if ready else 0

    def _next(self) -> Ticket[T] | None:
        """The short lane first, but a long one that may start gets its turn after
        ``short_burst`` shorts in a row."""
        short = self.queued[SHORT] > 0
        long_ = self.queued[LONG] > 0 and self._can_start(LONG)
        if short and (not long_ or self._short_streak < self.short_burst):
            order = (SHORT, LONG) if long_ else (SHORT,)
        elif long_:
            order = (LONG, SHORT) if short else (LONG,)
        else:
            return None
        for lane in order:
            ticket = self._pop(lane)
            if ticket is not None:
                self._short_streak = self._short_streak + 1 if lane == SHORT else 0
                return ticket
        return None

    def _gone(self, ticket: Ticket[T]) -> bool:
        """A ticket no longer waiting though still in its heap (withdrawn)."""
        return ticket.cancelled

    def _pop(self, lane: str) -> Ticket[T] | None:
        """The first ticket of ``lane`` whose client is under its share of the slots; the
        tickets of clients at their share keep their places."""
        heap = self._lanes[lane]
        held: list[Ticket[T]] = []
        found = None
        while heap:
            ticket = heapq.heappop(heap)
            if self._gone(ticket):
                continue
            if not self._client_may_start(ticket.client):
                held.append(ticket)
                continue
            self.queued[lane] -= 1
            found = ticket
            break
        for ticket in held:
            heapq.heappush(heap, ticket)
        return found


def lane_for(prompt_tokens: int, long_prompt_tokens: int) -> str:
    return LONG if prompt_tokens > long_prompt_tokens else SHORT


def resolve_long_reserve(configured: int | None, max_in_flight: int) -> int:
    """Slots kept for the short lane: the configured number, else one when there are two or more.

    One is the smallest reserve that guarantees a short request a slot within one short request's
    time; more costs long requests throughput (with two slots, long-only traffic already runs on
    one). With a single slot nothing can be reserved: long requests would never run.
    """
    if configured is not None:
        return configured
    return 1 if max_in_flight >= 2 else 0
