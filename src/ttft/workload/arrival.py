"""When to send: closed loop at a fixed concurrency, or an open-loop schedule computed up front.

An open-loop schedule is a list of offsets from the run start, fixed before the first request, so
a slow server cannot slow the arrivals down (which would hide queueing: coordinated omission).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from ttft.core.errors import TtftError

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class ClosedLoop:
    """``concurrency`` requests in flight; each finished one starts the next."""

    concurrency: int

    def label(self) -> str:
        return f"c={self.concurrency}"


@dataclass(frozen=True, slots=True)
class OpenLoop:
    """Requests at ``rate`` per second. ``burstiness`` is the gamma shape: 1 is Poisson, below 1
    burstier, above 1 more regular."""

    rate: float
    burstiness: float = 1.0
    distribution: Literal["poisson", "gamma", "constant"] = "poisson"
    seed: int = 0

    def label(self) -> str:
        return f"rate={self.rate:g}/s"

    def schedule_ns(self, count: int) -> list[int]:
        """Send offsets (ns from the run start) for ``count`` requests, first at 0."""
        if self.rate <= 0:
            raise TtftError(f"rate must be above 0 requests/s, not {self.rate}")
        if self.burstiness <= 0:
            raise TtftError(f"burstiness must be above 0, not {self.burstiness}")
        rng = random.Random(self.seed)
        mean_gap = 1.0 / self.rate
        offsets, t = [], 0.0
        for i in range(count):
            offsets.append(int(t * NS_PER_S))
            if i == count - 1:
                break
            if self.distribution == "constant":
                gap = mean_gap
            elif self.distribution == "poisson":
                gap = rng.expovariate(self.rate)
            else:
                shape = self.burstiness
                gap = rng.gammavariate(shape, mean_gap / shape)
            t += gap
        return offsets


Arrival = ClosedLoop | OpenLoop


def parse_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TtftError(f"rate {text!r} is not a number", "e.g. --rate 4 (requests/s)") from None
    if value <= 0:
        raise TtftError(f"rate must be above 0, not {value}")
    return value
