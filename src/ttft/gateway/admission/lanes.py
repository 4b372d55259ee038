"""Admission control for one upstream replica: an in-flight cap and a bounded, two-lane queue.

An engine with every slot busy queues new requests itself, first come first served, so a short
question waits behind every long prefill that arrived before it: the head-of-line blocking that
makes p99 TTFT explode. Here the gateway holds the queue instead, split by prompt length:

- at most ``max_in_flight`` requests are at the engine (about its slot count);
- waiting requests sit in a short or a long lane (``long_prompt_tokens``); when a slot frees, the
  short lane goes first, but after ``short_burst`` short requests in a row a waiting long one
  gets its turn, so long requests are delayed, never starved;
- within a lane, a lower ``priority`` number goes first (vLLM's convention), then arrival order;
- long requests hold at most ``max_in_flight - long_reserve`` slots. Without a reserve, long
  prompts that arrive together take every slot, and a short question then waits for a whole long
  prefill however the queue is ordered: the queue only decides who gets the *next* free slot. A
  reserved slot is free, or frees within one short request, when the short one arrives;
- the lanes together hold at most ``queue_size`` requests: one more is refused at once (429),
  and a request that waited ``queue_timeout_s`` is refused too (503). Nothing grows unbounded;
- one client (a key) holds at most ``client_slots`` of the slots (``slots_per_client``): four
  slow streams of one key held every slot of a replica and every other key waited. Its next
  request waits in its lane while the others' pass it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass, field

SHORT = "short"
LONG = "long"
LANES = (SHORT, LONG)


class Shed(Exception):
    """The request was not admitted: ``reason`` is ``queue_full`` or ``queue_timeout``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(order=True, slots=True)
class _Ticket:
    priority: int
    seq: int
    lane: str = field(compare=False)
    future: asyncio.Future[None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)
    client: str = field(default="", compare=False)


class Admission:
    """Slots and lanes of one replica. All methods run on the event loop's thread."""

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
        self._lanes: dict[str, list[_Ticket]] = {SHORT: [], LONG: []}
        self._seq = itertools.count()
        self._short_streak = 0

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
        return max(1, self.max_in_flight // 2) if setting is None else setting

    def _can_start(self, lane: str) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        return lane == SHORT or self.long_in_flight < self.long_cap

    def _client_may_start(self, client: str) -> bool:
        cap = self.client_slots
        return not client or not cap or self._by_client.get(client, 0) < cap

    def _start(self, lane: str, client: str = "") -> None:
        self.in_flight += 1
        if lane == LONG:
            self.long_in_flight += 1
        if client and self.client_slots_setting != 0:
            self._by_client[client] = self._by_client.get(client, 0) + 1

    @property
    def waiting(self) -> int:
        return self.queued[SHORT] + self.queued[LONG]

    @property
    def load(self) -> int:
        """What routing balances: requests at the engine plus requests waiting for it."""
        return self.in_flight + self.waiting

    @property
    def has_free_slot(self) -> bool:
        return self.in_flight < self.max_in_flight and self.waiting == 0

    @property
    def has_room(self) -> bool:
        # No slot at all (this worker's part of a replica with fewer slots than workers):
        # no room either, or a request would only wait for its queue timeout.
        if self.max_in_flight <= 0:
            return False
        return self.in_flight < self.max_in_flight or self.waiting < self.queue_size

    def try_start(self, lane: str, client: str = "") -> bool:
        """Start at once when ``acquire`` would not wait (True); the usual case, without the
        coroutine ``acquire`` costs. The caller gives the same ``lane`` to ``release``."""
        if not self.split_lanes:
            lane = SHORT
        if self.queued[lane] == 0 and self._can_start(lane) and self._client_may_start(client):
            self._start(lane, client)
            return True
        return False

    async def acquire(
        self, lane: str, priority: int = 0, timeout_s: float = 30.0, client: str = ""
    ) -> int:
        """Wait for a slot; return the nanoseconds waited. Raises ``Shed`` when refused.

        Cancellation (the client left) gives back the slot if it had just been granted. The
        caller gives the same ``lane`` to ``release``.
        """
        if not self.split_lanes:
            lane = SHORT  # one lane: plain first come, first served
        # Every waiting ticket is one that cannot start (``release`` dispatches all that can), so
        # a request whose own lane is empty may start at once: a short one then does not wait
        # behind long ones held back by their cap.
        if self.queued[lane] == 0 and self._can_start(lane) and self._client_may_start(client):
            self._start(lane, client)
            return 0
        if self.waiting >= self.queue_size:
            raise Shed("queue_full", f"the queue is full ({self.queue_size} waiting)")
        start = time.perf_counter_ns()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ticket = _Ticket(priority, next(self._seq), lane, future, client=client)
        heapq.heappush(self._lanes[lane], ticket)
        self.queued[lane] += 1
        if self.in_flight < self.max_in_flight:
            self.dispatch()  # tickets ahead of it may be held back by their client's share
        try:
            async with asyncio.timeout(timeout_s):
                await future
        except TimeoutError:
            self._withdraw(ticket)
            raise Shed(
                "queue_timeout", f"waited {timeout_s:g} s in the queue without a free slot"
            ) from None
        except asyncio.CancelledError:
            self._withdraw(ticket)
            raise
        return time.perf_counter_ns() - start

    def _withdraw(self, ticket: _Ticket) -> None:
        if ticket.future.done() and not ticket.future.cancelled():
            # Granted in the same instant the wait ended: hand the slot on.
            self.release(ticket.lane, ticket.client)
            return
        if not ticket.cancelled:
            ticket.cancelled = True
            self.queued[ticket.lane] -= 1
            lane = self._lanes[ticket.lane]
            # Withdrawn tickets stay in the heap until popped; compact before they pile up.
            if len(lane) > 2 * self.queue_size + 16:
                self._lanes[ticket.lane] = [t for t in lane if not t.cancelled]
                heapq.heapify(self._lanes[ticket.lane])

    def release(self, lane: str, client: str = "") -> None:
        """A request of ``lane`` left the engine: free slots go to waiting ones that may start."""
        if not self.split_lanes:
            lane = SHORT
        self.in_flight -= 1
        if lane == LONG:
            self.long_in_flight -= 1
        if client and self.client_slots_setting != 0:
            left = self._by_client.get(client, 1) - 1
            if left > 0:
                self._by_client[client] = left
            else:
                self._by_client.pop(client, None)
        self.dispatch()

    def dispatch(self) -> None:
        """Start every waiting request that may start (also after ``max_in_flight`` grew)."""
        while self.in_flight < self.max_in_flight and self.waiting:
            ticket = self._next()
            if ticket is None:
                break
            self._start(ticket.lane, ticket.client)
            ticket.future.set_result(None)

    def _next(self) -> _Ticket | None:
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

    def _pop(self, lane: str) -> _Ticket | None:
        """The first ticket of ``lane`` whose client is under its share of the slots; the
        tickets of clients at their share keep their places."""
        heap = self._lanes[lane]
        held: list[_Ticket] = []
        found = None
        while heap:
            ticket = heapq.heappop(heap)
            if ticket.cancelled or ticket.future.done():
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


# Engines that batch many sequences: a cap of 4 throttled them. 64 is a documented middle (not
# measured here: no vLLM/SGLang on these machines): far above 4, below vLLM's default
# --max-num-seqs of 256, so at a saturated replica the gateway's lanes still order what waits.
# Setting max_in_flight to the replica's own --max-num-seqs passes everything to its scheduler.
BATCHING_ENGINES_IN_FLIGHT = 64
# llama-server before its /props answers, or a generic upstream: a few slots.
FALLBACK_IN_FLIGHT = 4


def default_max_in_flight(kind: str) -> int:
    """The in-flight cap per replica when neither the user nor the engine gave one."""
    return BATCHING_ENGINES_IN_FLIGHT if kind in ("vllm", "sglang", "tgi") else FALLBACK_IN_FLIGHT
