"""What a client-health verdict is made of: each process's own measurements, the checks, and
the verdict (healthy / suspect / invalid, with reason and fix). Pure data; the judgement is
``ttft.core.client_health``'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ttft.core.stats import percentile

HEALTHY, SUSPECT, INVALID = "healthy", "suspect", "invalid"
_RANK = {HEALTHY: 0, SUSPECT: 1, INVALID: 2}


@dataclass(frozen=True, slots=True)
class HealthSample:
    """What one client process measured about itself over one cell (already reduced)."""

    worker: str
    wall_ns: int
    cpu_ns: int
    loop_lag_p99_ns: int | None = None
    loop_lag_max_ns: int | None = None
    loop_samples: int = 0
    read_gap_p99_ns: int | None = None
    read_gap_max_ns: int | None = None
    reads: int = 0  # kernel-stamped reads the gap is over (0: no stamps, not measured)
    kernel_stamped: bool = False  # every connection's reads carried the kernel's receive time
    schedule_lag_p99_ns: int | None = None  # open loop: this worker's own scheduled -> sent
    host: str = ""
    pid: int = 0

    @property
    def cpu_share(self) -> float | None:
        return self.cpu_ns / self.wall_ns if self.wall_ns > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cpu_share": self.cpu_share}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HealthSample:
        payload = {k: v for k, v in data.items() if k != "cpu_share"}
        return cls(**payload)


def reduce_samples(values: Sequence[int]) -> tuple[int | None, int | None]:
    """(p99, max) of raw samples, ``(None, None)`` for none."""
    if not values:
        return None, None
    ordered = sorted(values)
    return int(percentile(ordered, 99.0)), ordered[-1]


@dataclass(frozen=True, slots=True)
class Check:
    """One signal: its level, the numbers in words, and (when not healthy) the fix."""

    name: str
    level: str
    detail: str
    fix: str = ""
    short: str = ""  # the number alone, for a healthy verdict's one line


@dataclass(slots=True)
class ClientVerdict:
    """healthy / suspect / invalid, the reason (the worst checks), the fix, and the evidence."""

    level: str
    reason: str
    fix: str
    checks: list[Check] = field(default_factory=list)
    workers: list[HealthSample] = field(default_factory=list)

    @property
    def trusted(self) -> bool:
        return self.level == HEALTHY

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "reason": self.reason,
            "fix": self.fix,
            "checks": [asdict(check) for check in self.checks],
            "workers": [sample.to_dict() for sample in self.workers],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientVerdict:
        return cls(
            level=str(data["level"]),
            reason=str(data["reason"]),
            fix=str(data["fix"]),
            checks=[Check(**check) for check in data.get("checks", [])],
            workers=[HealthSample.from_dict(w) for w in data.get("workers", [])],
        )
