"""Durations (``60s``, ``2m``) and load ramps (``--ramp concurrency=1..8:step=1,stage=20s``).

A ramp is a list of load levels, each run as its own cell for one stage length:

    KIND=FROM..TO[:OPTION,OPTION...]
    KIND      concurrency (closed loop) or rate (open loop, requests/s)
    step=S    levels FROM, FROM+S, ... up to TO (default for concurrency: step=1)
    stages=N  N levels evenly spaced from FROM to TO, both included (a linear ramp in N steps)
    stage=D   how long each level runs (e.g. 20s, 1m); default: --duration

A ramp goes up (FROM < TO): it is how one finds the load a server stops holding.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ttft.core.errors import TtftError
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_RAMP_HELP = "e.g. --ramp concurrency=1..8:step=1,stage=20s or --ramp rate=1..10:stages=5,stage=30s"
MAX_STAGES = 100


def parse_duration(text: str, option: str = "--duration") -> float:
    """Seconds from ``90``, ``90s``, ``1.5m``, ``500ms`` or ``1h``."""
    match = _DURATION.match(text)
    if match is None:
        raise TtftError(
            f"{option} {text!r} is not a duration", f"e.g. {option} 60s (or 500ms, 2m, 1h)"
        )
    seconds = float(match.group(1)) * _SCALE[match.group(2) or "s"]
    if seconds <= 0:
        raise TtftError(f"{option} must be longer than 0, not {text!r}")
    return seconds


@dataclass(frozen=True)
class Ramp:
    """Load levels in order, and how long each runs (None: the run's --duration)."""

    kind: str  # "concurrency" or "rate"
    levels: tuple[float, ...]
    stage_s: float | None

    def arrivals(self, burstiness: float = 1.0) -> list[Arrival]:
        if self.kind == "concurrency":
            return [ClosedLoop(int(level)) for level in self.levels]
        if burstiness == 1.0:
            return [OpenLoop(level) for level in self.levels]
        return [
            OpenLoop(level, burstiness=burstiness, distribution="gamma") for level in self.levels
        ]


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TtftError(f"--ramp: {what} {text!r} is not a number", _RAMP_HELP) from None
    if not math.isfinite(value):
        raise TtftError(f"--ramp: {what} {text!r} is not a finite number", _RAMP_HELP)
    return value


def _options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("step", "stages", "stage"):
            raise TtftError(
                f"--ramp: unknown option {part!r} (options are step=, stages= and stage=)",
                _RAMP_HELP,
            )
        if key in options:
            raise TtftError(f"--ramp: {key}= is given twice", _RAMP_HELP)
        options[key] = value.strip()
    return options


def _levels(kind: str, low: float, high: float, options: dict[str, str]) -> tuple[float, ...]:
    if "step" in options and "stages" in options:
        raise TtftError("--ramp: give step= or stages=, not both", _RAMP_HELP)
    if "stages" in options:
        stages = _number(options["stages"], "stages")
        if stages < 2 or stages != int(stages):
            raise TtftError("--ramp: stages= must be a whole number of at least 2", _RAMP_HELP)
        n = int(stages)
        levels = [low + (high - low) * i / (n - 1) for i in range(n)]
    else:
        if "step" not in options and kind == "rate":
            raise TtftError("--ramp rate=... needs step= or stages=", _RAMP_HELP)
        step = _number(options.get("step", "1"), "step")
        if step <= 0:
            raise TtftError("--ramp: step= must be above 0", _RAMP_HELP)
        count = math.floor((high - low) / step + 1e-9) + 1
        if count > MAX_STAGES:
            raise TtftError(f"--ramp makes {count} stages; at most {MAX_STAGES}", _RAMP_HELP)
        levels = [low + step * i for i in range(count)]
    if kind == "concurrency":
        whole = sorted({round(level) for level in levels})
        return tuple(float(level) for level in whole)
    return tuple(round(level, 6) for level in levels)


def parse_ramp(text: str) -> Ramp:
    """A ``Ramp`` from ``KIND=FROM..TO[:OPTIONS]``; a clear error naming the part that is wrong."""
    head, _, rest = text.partition(":")
    kind, sep, span = head.partition("=")
    kind = kind.strip()
    if not sep or kind not in ("concurrency", "rate"):
        raise TtftError(
            f"--ramp {text!r}: start with concurrency= or rate= (what the ramp raises)",
            _RAMP_HELP,
        )
    low_text, dots, high_text = span.partition("..")
    if not dots:
        raise TtftError(f"--ramp {text!r}: the levels are FROM..TO, e.g. 1..8", _RAMP_HELP)
    low, high = _number(low_text, "FROM"), _number(high_text, "TO")
    if low <= 0 or high <= low:
        raise TtftError(
            f"--ramp {text!r}: a ramp goes up from a level above 0 (FROM < TO)", _RAMP_HELP
        )
    if kind == "concurrency" and (low != int(low) or high != int(high)):
        raise TtftError("--ramp: concurrency levels are whole numbers", _RAMP_HELP)
    options = _options(rest)
    stage = parse_duration(options["stage"], "--ramp stage=") if "stage" in options else None
    return Ramp(kind, _levels(kind, low, high, options), stage)


def count_within(arrival: OpenLoop, duration_s: float) -> int:
    """How many arrivals of ``arrival``'s schedule fall before ``duration_s`` (at least 1).

    Schedules are prefix-stable (the same seed draws the same gaps), so the first ``n`` offsets
    of a longer schedule are the schedule of ``n``."""
    limit = int(duration_s * 1e9)
    guess = max(8, int(arrival.rate * duration_s * 1.5) + 8)
    while True:
        offsets = arrival.schedule_ns(guess)
        if offsets[-1] >= limit:
            return max(1, sum(1 for offset in offsets if offset < limit))
        guess *= 2
