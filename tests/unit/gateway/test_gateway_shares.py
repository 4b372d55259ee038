"""The default share per client: half the model's room with keys, none on an open gateway."""

from __future__ import annotations

from dataclasses import dataclass

from ttft.gateway.admission.shares import ClientShares
from ttft.gateway.metrics import GatewayMetrics


@dataclass
class _Model:
    """A model whose replicas hold (in-flight cap, queue size) each (``shares.SharedModel``)."""

    room: tuple[tuple[int, int], ...]
    name: str = "m"

    def client_room(self) -> int:
        return sum(cap + queue for cap, queue in self.room)


def _runtime(*room: tuple[int, int]) -> _Model:
    return _Model(room)


def test_with_keys_the_default_share_is_half_the_models_room() -> None:
    shares = ClientShares(None, GatewayMetrics(), keyed=True)
    assert shares.limit(_runtime((4, 64), (2, 64))) == 67


def test_an_open_gateway_has_no_default_share_but_a_configured_one_holds() -> None:
    # Every client of an open gateway tends to share one address (loopback, a proxy): a default
    # share per address would throttle a single load generator.
    assert ClientShares(None, GatewayMetrics(), keyed=False).limit(_runtime((4, 64))) == 0
    assert ClientShares(3, GatewayMetrics(), keyed=False).limit(_runtime((4, 64))) == 3
    assert ClientShares(0, GatewayMetrics(), keyed=True).limit(_runtime((4, 64))) == 0
