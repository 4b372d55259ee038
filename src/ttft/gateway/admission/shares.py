"""Each client's share of a model: how many of its requests may be queued or in flight at once.

The queue is first come, first served and bounded (``queue_size``), so without a share one
client that sends many long requests at once fills it, and every other client is refused (429
``queue_full``) until they end. A client is an API key, or the client's address on a gateway
without keys; it may hold at most ``admission.max_requests_per_client`` requests of one model
(default with keys: half of what the model's replicas hold, in flight plus queued), and one more
is refused at once (429 ``too_many_requests``) while the others still find room.

Without keys there is no default share: every client of such a gateway usually has one address
(loopback, or the proxy in front), so a share per address would throttle a single load
generator such as ``ttft bench`` or ``tune``'s gateway step; it applies when configured.
"""

from __future__ import annotations

from typing import Protocol

from ttft.gateway.errors import overloaded
from ttft.gateway.metrics import GatewayMetrics

REASON = "client_limit"


class SharedModel(Protocol):
    """What a share reads of a model (``runtime.ModelRuntime``)."""

    @property
    def name(self) -> str: ...

    def client_room(self) -> int: ...


class ClientShares:
    """Counts per (client, model); all methods run on the event loop's thread."""

    def __init__(
        self, configured: int | None, metrics: GatewayMetrics, *, keyed: bool = True
    ) -> None:
        self.configured = configured  # None: half the model's room (with keys); 0: no limit
        self.keyed = keyed
        self.metrics = metrics
        self.held: dict[tuple[str, str], int] = {}

    def limit(self, runtime: SharedModel) -> int:
        if self.configured is not None:
            return self.configured
        if not self.keyed:
            return 0
        return max(1, runtime.client_room() // 2)

    def take(self, client: str, runtime: SharedModel) -> tuple[str, str]:
        """Count one request of ``client``, refused over the limit; the caller gives the
        returned slot to ``give_back`` when the request ends. Not a context manager: a
        generator-based one cost a generator and two extra frames on every request."""
        limit = self.limit(runtime)
        slot = (client, runtime.name)
        count = self.held.get(slot, 0)
        if limit and count >= limit:
            self.metrics.shed.inc(runtime.name, REASON)
            raise overloaded(
                429,
                f"{runtime.name}: you have {count} requests queued or running, the most one "
                "client may; retry when one has ended",
                1.0,
                "too_many_requests",
            )
        self.held[slot] = count + 1
        return slot

    def give_back(self, slot: tuple[str, str]) -> None:
        left = self.held[slot] - 1
        if left:
            self.held[slot] = left
        else:
            del self.held[slot]
