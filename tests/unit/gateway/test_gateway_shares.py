"""The default share per client: half the model's room with keys, none on an open gateway."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ttft.gateway.admission.shares import ClientShares
from ttft.gateway.metrics import GatewayMetrics


def _runtime(*room: tuple[int, int]) -> Any:
    replicas = [
        SimpleNamespace(admission=SimpleNamespace(own_part=cap, queue_size=queue))
        for cap, queue in room
    ]
    return SimpleNamespace(name="m", replicas=replicas)


def test_with_keys_the_default_share_is_half_the_models_room() -> None:
    shares = ClientShares(None, GatewayMetrics(), keyed=True)
    assert shares.limit(_runtime((4, 64), (2, 64))) == 67


def test_an_open_gateway_has_no_default_share_but_a_configured_one_holds() -> None:
    # Every client of an open gateway tends to share one address (loopback, a proxy): a default
    # share per address would throttle a single load generator.
    assert ClientShares(None, GatewayMetrics(), keyed=False).limit(_runtime((4, 64))) == 0
    assert ClientShares(3, GatewayMetrics(), keyed=False).limit(_runtime((4, 64))) == 3
    assert ClientShares(0, GatewayMetrics(), keyed=True).limit(_runtime((4, 64))) == 0
