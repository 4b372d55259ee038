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
import time

from ttft.gateway.admission.lane_rules import (
    LANES,
    LONG,
    SHORT,
    LaneRules,
    Shed,
    Ticket,
    lane_for,
    resolve_long_reserve,
)

__all__ = [
    "LANES",
    "LONG",
    "SHORT",
    "Admission",
    "Shed",
    "default_max_in_flight",
    "lane_for",
    "resolve_long_reserve",
]


# How long a worker leaves a free slot to an older request waiting in another worker before
# its own requests take it (shared_slots.py): about one event-loop turn of a busy worker.
YIELD_S = 0.002


class Admission(LaneRules[asyncio.Future[None]]):
    """Slots and lanes of one replica. All methods run on the event loop's thread.

    The decisions are ``LaneRules``'s (shared with the simulator); this class waits on them."""

    _yield_timer: asyncio.TimerHandle | None = None

    async def acquire(
        self, lane: str, priority: int = 0, timeout_s: float = 30.0, client: str = ""
    ) -> int:
        """Wait for a slot; return the nanoseconds waited. Raises ``Shed`` when refused.

        Cancellation (the client left) gives back the slot if it had just been granted. The
        caller gives the same ``lane`` to ``release``.
        """
        if self.try_start(lane, client):
            return 0
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ticket = self.enqueue(lane, priority, client, future)
        start = time.perf_counter_ns()
        if self.room:
            # Tickets ahead of it may be held back by their client's share; with several
            # workers, a slot may have freed in another one since ``try_start``.
            self.dispatch()
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

    def _gone(self, ticket: Ticket[asyncio.Future[None]]) -> bool:
        # A waiter cancelled a moment ago whose task has not yet withdrawn its ticket.
        return ticket.cancelled or ticket.item.done()

    def _withdraw(self, ticket: Ticket[asyncio.Future[None]]) -> None:
        if ticket.item.done() and not ticket.item.cancelled():
            # Granted in the same instant the wait ended: hand the slot on.
            self.release(ticket.lane, ticket.client)
            return
        self.withdraw(ticket)

    def release(self, lane: str, client: str = "") -> None:
        """A request of ``lane`` left the engine: free slots go to waiting ones that may start."""
        for ticket in self.free(lane, client):
            ticket.item.set_result(None)
        if self.yielded:
            self._retry_after_yield()

    def dispatch(self) -> None:
        """Start every waiting request that may start (also after ``max_in_flight`` grew)."""
        for ticket in self.grant():
            ticket.item.set_result(None)
        if self.yielded:
            self._retry_after_yield()

    def _retry_after_yield(self) -> None:
        """A free slot was left to an older request in another worker: if that worker has not
        taken it within ``YIELD_S`` (busy, or its request just left), the requests here take
        it after all."""
        if self._yield_timer is None:
            loop = asyncio.get_running_loop()
            self._yield_timer = loop.call_later(YIELD_S, self._after_yield)

    def _after_yield(self) -> None:
        self._yield_timer = None
        for ticket in self.grant(fair=False):
            ticket.item.set_result(None)


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
