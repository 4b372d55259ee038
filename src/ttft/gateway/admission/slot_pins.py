"""Which llama-server slot each admitted request runs in, so the short lane's slot is served first.

llama-server fills every batch with prompt tokens slot by slot, in slot-id order, until the batch
(``-b``) is full. A long prompt in slot 0 therefore takes whole batches while a short question in
slot 1 waits for all of it, even when the gateway reserved a slot for the short lane: the reserve
decides *whether* a short request reaches the engine, the slot id decides *when* its tokens are
computed. Pinned with ``id_slot`` to the lowest free slot, a short request's tokens go first into
the next batch, and it waits at most for the batch being computed (``-b`` tokens; smaller batches
mean a shorter wait, at some cost to long-prompt throughput). Long requests take the highest free
slots, away from the short lane's.

For a long request, a free slot outside the short lane's reserve that last served the same
prefix key (the routing key: the prompt's leading blocks) is preferred, so pinning keeps what
llama-server's own slot choice gave, the prefix cache of the slot that saw that prefix. The key
never pulls a long request into the reserved low slots: many prompts share a key (every prompt
without a system message shares the template's header), and a long prompt in slot 0 is exactly
what the reserve is for avoiding. Short requests always take the lowest free slot: their prefill
is cheap, their place in the batch is what counts.
"""

from __future__ import annotations

from collections.abc import Callable

from ttft.gateway.admission.lanes import LONG


class SlotPins:
    """Free and busy slot ids of one llama-server replica. All calls run on the event loop."""

    def __init__(self, slots: int, reserve: int = 1) -> None:
        self.slots = slots
        self.reserve = reserve  # slots 0 .. reserve-1 are the short lane's
        self._free = set(range(slots))
        self._last_key: dict[int, int | None] = {}

    @property
    def free(self) -> int:
        return len(self._free)

    def take(self, lane: str, key: int | None = None) -> int | None:
        """A free slot for a request of ``lane``: None when none is free (the engine then picks,
        as it would without the gateway: admission and slots disagree only when other clients
        use the engine directly)."""
        if not self._free:
            return None
        slot = choose_slot(sorted(self._free), lane, self.reserve, key, self._last_key.get)
        self._free.discard(slot)
        self._last_key[slot] = key
        return slot

    def give_back(self, slot: int | None) -> None:
        if slot is not None and 0 <= slot < self.slots:
            self._free.add(slot)


def choose_slot(
    free: list[int],
    lane: str,
    reserve: int,
    key: int | None,
    last_key: Callable[[int], int | None],
) -> int:
    """The slot for a request of ``lane`` among ``free`` (ascending, not empty): a short one
    takes the lowest; a long one the highest outside the short lane's ``reserve``, preferring
    one whose ``last_key`` is ``key`` (the module's docstring says why)."""
    if lane != LONG:
        return free[0]
    region = [s for s in free if s >= reserve] or free
    same = [s for s in region if key is not None and last_key(s) == key]
    return max(same or region)


def with_slot(raw: bytes, slot: int) -> bytes:
    """The JSON object ``raw`` with ``"id_slot": slot`` as its first member; the rest byte for
    byte (no re-serialization on the hot path). ``raw`` is a validated JSON object."""
    at = raw.index(b"{") + 1
    rest = raw[at:].lstrip()
    sep = b"" if rest.startswith(b"}") else b","
    return raw[:at] + b'"id_slot":' + str(slot).encode() + sep + raw[at:]


__all__ = ["SlotPins", "choose_slot", "with_slot"]
