"""The probe measures its own process: a blocked event loop shows as loop lag, a busy one as
CPU share near a whole core, an idle one as neither."""

from __future__ import annotations

import asyncio
import time

from ttft.core.client_verdict import HealthSample
from ttft.load.health_probe import HealthProbe


def _probe(body: str) -> HealthSample:
    async def scenario() -> HealthSample:
        probe = HealthProbe("main", read_gaps=lambda: [1_000, 2_000, 3_000])
        probe.start()
        for _ in range(5):
            await asyncio.sleep(0.02)
            if body == "block":
                time.sleep(0.06)  # a callback that holds the loop
            elif body == "spin":
                end = time.process_time() + 0.06  # 60 ms of CPU, however long that takes
                while time.process_time() < end:
                    pass
        return await probe.stop()

    return asyncio.run(scenario())


def test_an_idle_loop_wakes_on_time_and_uses_little_cpu() -> None:
    sample = _probe("idle")
    assert sample.loop_samples >= 10
    # On time: far below the 60 ms a blocking callback adds (the next test), even when a
    # neighbour holds a core.
    assert sample.loop_lag_p99_ns is not None and sample.loop_lag_p99_ns < 50_000_000
    assert sample.cpu_share is not None and sample.cpu_share < 0.5
    assert sample.reads == 3 and sample.read_gap_max_ns == 3_000


def test_a_blocking_callback_shows_as_loop_lag() -> None:
    sample = _probe("block")
    assert sample.loop_lag_max_ns is not None and sample.loop_lag_max_ns >= 50_000_000


def test_a_busy_loop_shows_as_cpu_time_over_the_wall_time() -> None:
    """Five 60 ms bursts of CPU: at least 300 ms of CPU are counted (the share also depends on
    what else the machine runs, so the CPU time is what is pinned)."""
    sample = _probe("spin")
    assert sample.cpu_ns >= 300_000_000
    assert sample.cpu_share is not None and sample.cpu_share > _probe("idle").cpu_share  # type: ignore[operator]
