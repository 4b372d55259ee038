"""What one doctor step leaves for later ones, typed: a field per measurement, named by the step
that writes it, instead of string keys in a dict.

A step that reads a field copes with its default: an earlier step may have failed, been skipped
or been cut by the budget, and a step may run alone (tests, ``run_doctor(steps=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttft.core.records import RequestRecord
from ttft.prompts.log_analysis import LogAnalysis


@dataclass
class Handoff:
    # transport: its plain (identity-encoded) probes; the timeline takes them apart and the
    # control step reads the engine's prefill rate from them.
    transport_records: list[RequestRecord] = field(default_factory=list)
    # transport: the engine's metric window around those probes, for the timeline.
    transport_server: dict[str, Any] | None = None
    # transport: the worst client-minus-server gap (ms); the GPU check names transport by it.
    transport_gap_ms: float | None = None
    # dynamic_prefix: the request log's analysis, computed once (None: no chat requests, or
    # nothing dynamic found); ``dynamic_analysed`` tells "not computed yet" from None.
    dynamic_analysed: bool = False
    dynamic_analysis: LogAnalysis | None = None
    # dynamic_prefix: why the analysis kept more than the template renders, for its notes.
    dynamic_notes: list[str] = field(default_factory=list)
