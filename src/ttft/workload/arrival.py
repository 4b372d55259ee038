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


@dataclass(frozen=True, slots=True)
class Replay:
    """Requests at the offsets a trace recorded (ns after its first arrival), ``speed`` times as
    fast: 2 halves every gap, 0.5 doubles it. Like ``OpenLoop``, fixed before the first request.
    """

    offsets_ns: tuple[int, ...]
    speed: float = 1.0

    def label(self) -> str:
        return "replay" if self.speed == 1.0 else f"replay x{self.speed:g}"

    def schedule_ns(self, count: int) -> list[int]:
        """The first ``count`` offsets, scaled by the speed."""
        if not (self.speed > 0 and self.speed != float("inf")):
            raise TtftError(f"--speed must be a number above 0, not {self.speed}", "e.g. --speed 2")
        if count > len(self.offsets_ns):
            raise TtftError(f"the trace has {len(self.offsets_ns)} arrivals, not {count}")
        return [round(offset / self.speed) for offset in self.offsets_ns[:count]]


Arrival = ClosedLoop | OpenLoop | Replay


def parse_rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TtftError(f"rate {text!r} is not a number", "e.g. --rate 4 (requests/s)") from None
    if value <= 0:
        raise TtftError(f"rate must be above 0, not {value}")
    return value
