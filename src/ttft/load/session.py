"""A whole bench session: prompts built, cold request, warm-up, cells run, results on disk.

Used by ``ttft bench`` and by ``ttft doctor``; the caller brings the target (or a managed engine)
and gets every record back as well as on disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttft import __version__
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.slo import Slo
from ttft.core.summary import BenchSummary, summarize_run
from ttft.core.target import Target
from ttft.load.bench import run_cells
from ttft.load.calibrate import prompt_frame, template_overhead
from ttft.load.cells import SaturationGate, describe_workload, expand_cells
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.health_verdicts import attach_health
from ttft.load.multiturn import turn_label
from ttft.load.results import BenchResult
from ttft.load.runner import CellPlan
from ttft.load.sink import RESULTS_SCHEMA, JsonlSink
from ttft.workload.arrival import ClosedLoop
from ttft.workload.exact_length import BARE, PromptFrame
from ttft.workload.spec import WorkloadSpec
from ttft.workload.tokenizer import Tokenizer


@dataclass
class SessionHooks:
    """Progress callbacks for a front end; all optional."""

    on_stage: Callable[[str], None] | None = None
    on_build: Callable[[int, int], None] | None = None
    on_cell_start: Callable[[CellPlan], None] | None = None
    on_record: Callable[[RequestRecord], None] | None = None


@dataclass
class SessionResult:
    records: list[RequestRecord]
    bench: BenchResult
    summary: BenchSummary
    template_overhead: int | None
    results_path: Path
    notes: list[str] = field(default_factory=list)


def _stage(hooks: SessionHooks, text: str) -> None:
    if hooks.on_stage is not None:
        hooks.on_stage(text)


def _calibrate(
    target: Target,
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    fresh_server: bool,
    hooks: SessionHooks,
    notes: list[str],
) -> tuple[PromptFrame | None, bool]:
    """How the server counts a prompt around its content (so bucket lengths are what it
    processes; None: only the content is counted), and whether the next request is still the
    server's first (a calibration request may take it)."""
    uses_files = spec.prompt_file is not None or spec.sharegpt_file is not None
    if tokenizer is None or uses_files or spec.shared_prefix is not None or spec.trace:
        return BARE, fresh_server
    _stage(hooks, "measuring the chat template's own tokens")
    frame = prompt_frame(target, tokenizer, spec.api)
    if frame is not None or spec.api != "chat":
        return frame or BARE, fresh_server
    overhead = asyncio.run(template_overhead(target, tokenizer, spec.api))
    if fresh_server:
        fresh_server = False  # that request was the cold one; it is not comparable
        notes.append("calibration took the server's first request: no cold figure")
    if overhead is None:
        notes.append("the server reports no token usage: bucket lengths count the content only")
        return None, fresh_server
    return PromptFrame(overhead), fresh_server


def run_session(
    target: Target,
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    results_path: Path,
    *,
    fresh_server: bool = False,
    slos: tuple[Slo, ...] = (),
    hooks: SessionHooks | None = None,
    run_meta: dict[str, Any] | None = None,
    timeout_s: float = 600.0,
    workers: WorkerSetup | None = None,
) -> SessionResult:
    """Build the workload, then send: a cold request first when ``fresh_server`` (the first
    request after a start is reported apart), the warm-up (kept, not counted), then each cell."""
    hooks = hooks or SessionHooks()
    notes: list[str] = []
    frame, fresh_server = _calibrate(target, spec, tokenizer, fresh_server, hooks, notes)
    overhead = None if frame is None else frame.overhead
    if spec.max_in_flight is not None:
        notes.append(
            f"client_wait includes time requests waited for your --max-in-flight "
            f"{spec.max_in_flight} cap: that wait is the cap's, not a lagging client"
        )
    _stage(hooks, "building prompts")
    # The cold request gets a prompt of its own: reusing a cell's first prompt would hand that
    # cell a prefix-cache hit.
    lead_spec = dataclasses.replace(spec, warmup=spec.warmup + (1 if fresh_server else 0))
    cells, lead_items = expand_cells(
        lead_spec, tokenizer, frame=frame or BARE, progress=hooks.on_build
    )
    for plan in cells:
        extra = plan.meta.get("notes")  # what building a cell found (a trace's notes)
        if isinstance(extra, list):
            notes.extend(str(note) for note in extra)
    gate = SaturationGate() if spec.stop_on_saturation else None
    # Multi-turn records are labelled per turn: the cold and warm-up requests belong to turn 1.
    lead_label = turn_label(cells[0].cell, 1) if spec.sessions and cells else ""
    cold_items = lead_items[:1] if fresh_server else []
    warmup = lead_items[len(cold_items) :]
    anchor = RunAnchor.now()
    with JsonlSink(results_path) as sink:
        sink.write(
            {
                "type": "run",
                "schema": RESULTS_SCHEMA,
                "ttft_version": __version__,
                "wall_time": anchor.wall_time,
                "target": {"url": target.root, "model": target.model},
                "template_overhead": overhead,
                "slos": [s.text for s in slos],
                **(run_meta or {}),
            }
        )
        lead: list[CellPlan] = []
        if fresh_server and cells and cold_items:
            lead.append(
                CellPlan(lead_label or cells[0].cell, cold_items, ClosedLoop(1), phase="cold")
            )
        if warmup and cells:
            lead.append(
                CellPlan(lead_label or cells[0].cell, warmup, ClosedLoop(1), phase="warmup")
            )
        _stage(hooks, "sending")
        bench = asyncio.run(
            run_cells(
                target,
                [*lead, *cells],
                sink,
                anchor=anchor,
                on_record=hooks.on_record,
                on_cell_start=hooks.on_cell_start,
                timeout_s=timeout_s,
                skip=gate.skip if gate is not None else None,
                workers=workers,
            )
        )
        records = [r for cell in bench.cells for r in cell.records]
        durations: dict[str, int] = {}
        for c in bench.cells:
            if c.plan.phase == "warm":  # repeats of a cell add up
                durations[c.plan.cell] = durations.get(c.plan.cell, 0) + c.duration_ns
        summary = summarize_run(
            records,
            duration_ns=durations,
            slos=slos,
            meta={
                "target": target.root,
                "model": target.model,
                "server_metrics": {
                    c.plan.cell: c.server for c in bench.cells if c.plan.phase == "warm"
                },
                "engine": bench.engine_kind,
                "notes": [*notes, *bench.notes],
                **bench.meta,
            },
        )
        notes += describe_workload(summary, spec, cells, gate)
        attach_health(summary, bench)
        sink.write(
            {"type": "end", "elapsed_s": (time.perf_counter_ns() - anchor.monotonic_ns) / 1e9}
        )
    return SessionResult(records, bench, summary, overhead, results_path, [*notes, *bench.notes])
