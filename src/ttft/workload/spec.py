"""A Workload: what to send (prompt lengths, a shared-prefix set, a file of requests) and when
(the arrival patterns), as the user asked for it; ``load/workload_cells.py`` turns it into cells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttft.workload.arrival import Arrival, ClosedLoop
from ttft.workload.conversations import SessionsSpec
from ttft.workload.requests import ApiStyle
from ttft.workload.trace import TraceSpec


@dataclass
class WorkloadSpec:
    """Which prompts: length buckets (default), a shared-prefix set, a file, or a trace."""

    buckets: Sequence[int] = (512, 2400, 8000)
    requests: int = 200
    max_tokens: int = 1
    api: ApiStyle = "chat"
    shared_prefix: tuple[int, int] | None = None  # (prefix tokens, suffix tokens)
    prompt_file: Path | None = None
    sharegpt_file: Path | None = None
    warmup: int = 0
    seed: str = "ttft"
    arrivals: Sequence[Arrival] = field(default_factory=lambda: [ClosedLoop(c) for c in (1, 8, 32)])
    max_in_flight: int | None = None
    trace: TraceSpec | None = None  # replay a timed trace instead (one cell; arrivals unused)
    duration_s: float | None = None  # --duration: each cell runs this long instead of a count
    repeat: int = 1  # --repeat: every cell this many times, interleaved, each with its own seed
    stop_on_saturation: bool = False  # stop a saturated cell and skip the higher loads after it
    sessions: SessionsSpec | None = None  # multi-turn conversations instead of single requests
