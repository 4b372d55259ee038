"""Waiting for a scheduled send time precisely enough to keep a replayed schedule.

``asyncio.sleep`` alone wakes up to about a millisecond late: the event loop waits in
``epoll`` with a timeout rounded up to whole milliseconds. The last stretch before the due time
is therefore spent yielding to the loop (``sleep(0)``) instead: other requests' responses are
still read meanwhile, at the cost of one busy core for at most ``SPIN_NS`` per send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SPIN_NS = 1_500_000


async def sleep_until(due_ns: int, now: Callable[[], int]) -> None:
    """Return at ``due_ns`` (a reading of ``now``) or as soon after it as the loop allows."""
    coarse = due_ns - now() - SPIN_NS
    if coarse > 0:
        await asyncio.sleep(coarse / 1e9)
    while now() < due_ns:
        await asyncio.sleep(0)
