"""A worker's monotonic clock against the driver's: offset and error bound from round trips.

Each round reads the driver's clock (t0), asks the worker for its clock (w), reads the driver's
clock again (t1). The worker read its clock somewhere inside [t0, t1], so its offset lies in
[w - t1, w - t0]: the midpoint is the estimate and half the round trip the bound. The round
with the shortest trip gives the tightest bound (queueing only ever adds delay).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_ROUNDS = 25


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """worker clock - driver clock at the same moment, within +- ``bound_ns``."""

    offset_ns: int
    bound_ns: int
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_offset(remote_clock: Callable[[], int], rounds: int = DEFAULT_ROUNDS) -> ClockOffset:
    """The min-round-trip estimate over ``rounds`` calls of ``remote_clock`` (at least one)."""
    best: tuple[int, int] | None = None
    for _ in range(max(1, rounds)):
        t0 = time.perf_counter_ns()
        remote = remote_clock()
        t1 = time.perf_counter_ns()
        trip = t1 - t0
        if best is None or trip < best[0]:
            best = (trip, remote - (t0 + t1) // 2)
    assert best is not None
    return ClockOffset(offset_ns=best[1], bound_ns=(best[0] + 1) // 2, rounds=max(1, rounds))
