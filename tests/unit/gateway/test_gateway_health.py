"""A replica that is busy answering is not taken for a dead one (issue 28)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from ttft.gateway import runtime as runtime_module
from ttft.gateway.config import from_mapping
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.runtime import Replica, build_runtime, check_health
from ttft.gateway.upstream import UpstreamConnection


def _replica() -> Replica:
    raw = {"model": [{"name": "m", "upstreams": ["http://127.0.0.1:9"]}]}
    config = from_mapping(raw)
    return build_runtime(config, config.models[0], GatewayMetrics()).replicas[0]


async def _late(*args: Any, **kwargs: Any) -> tuple[int, bytes]:
    raise TimeoutError


@pytest.mark.parametrize("streaming", [True, False])
def test_a_late_health_answer_while_the_engine_streams_is_busy_not_dead(
    streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One client streamed 105 MB beside one that read nothing: the engine answered its health
    checks late, and the gateway's /health said 503 for over a second."""
    monkeypatch.setattr(runtime_module, "fetch", _late)
    replica = _replica()
    conn = UpstreamConnection()
    replica.pool._busy.add(conn)

    async def checks() -> None:
        for _ in range(3):
            if streaming:
                conn.last_data_ns = time.perf_counter_ns()  # bytes of an answer just arrived
            await check_health(replica, 2.0)

    asyncio.run(checks())
    assert replica.healthy is streaming
