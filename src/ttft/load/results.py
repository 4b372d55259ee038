"""What a bench run returns: each cell's records and server view, and the run around them.

The same shape whichever way the run went (in this process, over worker processes or Ray
actors), so summaries, saturation checks and reports never ask how it was sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttft.core.client_verdict import HealthSample
from ttft.core.records import RequestRecord, RunAnchor
from ttft.load.runner import CellPlan


@dataclass
class CellResult:
    plan: CellPlan
    records: list[RequestRecord]
    duration_ns: int
    server: dict[str, Any] | None = None
    peaks: dict[str, float] = field(default_factory=dict)
    health: list[HealthSample] = field(default_factory=list)  # one per client process


@dataclass
class BenchResult:
    anchor: RunAnchor
    cells: list[CellResult]
    notes: list[str]
    engine_kind: str | None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the workers and their clocks
