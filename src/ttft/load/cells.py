"""Cells for the workloads beyond a fixed count: timed cells and ramps, repeats, saturation stops,
multi-turn sessions. A plain spec goes straight to ``load/workload_cells.build_cells``, unchanged.

Repeats: every cell runs ``repeat`` times, interleaved (A#1, B#1, A#2, B#2, ...), so a slow drift
of the machine spreads over every cell instead of landing on the last one. Each repeat builds its
prompts from its own seed (``SEED/repeat2``; the first repeat keeps ``SEED``), so no repeat finds
the previous one's prompts in the prefix cache: each run is a first visit, as the first was.
Open-loop schedules are the same in every repeat (the same arrival times; new prompts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.saturation import Saturation, assess_records
from ttft.core.summary import BenchSummary
from ttft.load.multiturn import SessionLoop
from ttft.load.runner import CellPlan
from ttft.load.timed import SaturationWatch, TimedLoop
from ttft.load.workload_cells import build_cells
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop
from ttft.workload.builders import length_buckets, shared_prefix
from ttft.workload.conversations import marked_conversation, read_conversations, synthesize
from ttft.workload.exact_length import BARE, PromptFrame
from ttft.workload.ramp import count_within
from ttft.workload.requests import WorkItem
from ttft.workload.run_mark import run_mark
from ttft.workload.spec import WorkloadSpec
from ttft.workload.tokenizer import Tokenizer

Progress = Callable[[int, int], None]


def needs_expansion(spec: WorkloadSpec) -> bool:
    return (
        spec.duration_s is not None
        or spec.repeat > 1
        or spec.stop_on_saturation
        or spec.sessions is not None
    )


def repeat_seed(seed: str, repeat: int) -> str:
    """The prompt seed of one repeat: the run's own for the first, a derived one after."""
    return seed if repeat == 0 else f"{seed}/repeat{repeat + 1}"


def _group(label: str, arrival: Arrival) -> str:
    """The cell label without its load level: the cells a saturation stop compares."""
    return label.removesuffix(arrival.label()).strip()


@dataclass
class SaturationGate:
    """With --stop-on-saturation: once a cell saturates, the cells of the same prompts at that
    load or higher are skipped (in this repeat and the later ones)."""

    ran: list[CellPlan] = field(default_factory=list)
    skipped: list[CellPlan] = field(default_factory=list)

    def verdict(self, plan: CellPlan) -> Saturation | None:
        loop = plan.loop
        if not isinstance(loop, TimedLoop):
            return None
        if loop.watch is not None and loop.watch.verdict is not None:
            return loop.watch.verdict
        return assess_records(loop.records) if loop.records else None

    def skip(self, plan: CellPlan) -> bool:
        if plan.phase != "warm" or not isinstance(plan.arrival, OpenLoop):
            self.ran.append(plan)
            return False
        group = _group(plan.cell, plan.arrival)
        for earlier in self.ran:
            if (
                isinstance(earlier.arrival, OpenLoop)
                and _group(earlier.cell, earlier.arrival) == group
                and earlier.arrival.rate <= plan.arrival.rate
                and (verdict := self.verdict(earlier)) is not None
                and verdict.saturated
            ):
                self.skipped.append(plan)
                return True
        self.ran.append(plan)
        return False


def _count(spec: WorkloadSpec, arrival: Arrival) -> int:
    if spec.duration_s is None or not isinstance(arrival, OpenLoop):
        return spec.requests
    return count_within(arrival, spec.duration_s)


def _more(
    spec: WorkloadSpec, tokenizer: Tokenizer | None, bucket: int, seed: str, frame: PromptFrame
) -> Callable[[int], WorkItem] | None:
    """Builds item ``i`` of a timed closed-loop cell's series (None: files are reused)."""
    if tokenizer is None or spec.prompt_file is not None or spec.sharegpt_file is not None:
        return None
    if spec.shared_prefix is not None:
        prefix, suffix = spec.shared_prefix
        return lambda i: shared_prefix(
            tokenizer, prefix, suffix, 1, max_tokens=spec.max_tokens, seed=seed, start=i
        )[0]
    return lambda i: length_buckets(
        tokenizer,
        [bucket],
        1,
        max_tokens=spec.max_tokens,
        api=spec.api,
        frame=frame,
        seed=seed,
        start=i,
    )[0]


def _loop(
    spec: WorkloadSpec, plan: CellPlan, more: Callable[[int], WorkItem] | None
) -> TimedLoop | None:
    watch = (
        SaturationWatch()
        if spec.stop_on_saturation and isinstance(plan.arrival, OpenLoop)
        else None
    )
    duration = int(spec.duration_s * 1e9) if spec.duration_s is not None else None
    if duration is None and watch is None:
        return None
    return TimedLoop(
        duration, more=more if isinstance(plan.arrival, ClosedLoop) else None, watch=watch
    )


class _Ticks:
    """One progress bar over several builder calls."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.base, self.last = progress, total, 0, 0

    def __call__(self, done: int, _: int) -> None:
        self.last = done
        if self.progress is not None:
            self.progress(self.base + done, self.total)

    def next_call(self) -> None:
        self.base += self.last
        self.last = 0


def _session_cells(
    spec: WorkloadSpec, tokenizer: Tokenizer | None, frame: PromptFrame, progress: Progress | None
) -> tuple[list[CellPlan], list[WorkItem]]:
    sessions = spec.sessions
    assert sessions is not None
    cells = []
    for repeat in range(spec.repeat):
        seed = repeat_seed(spec.seed, repeat)
        if sessions.conversations_file is not None:
            read = read_conversations(sessions.conversations_file, sessions.sessions)
            conversations = [marked_conversation(c, run_mark(seed)) for c in read]
            if progress is not None:
                progress(repeat + 1, spec.repeat)
        else:
            if tokenizer is None:
                raise TtftError(
                    "synthesised conversations need a tokenizer (for exact turn lengths)",
                    "pass --tokenizer, or --conversations FILE",
                )
            count = sessions.sessions or 1

            def tick(done: int, _: int, base: int = repeat * count, total: int = count) -> None:
                if progress is not None:
                    progress(base + done, total * spec.repeat)

            conversations = synthesize(tokenizer, sessions, count, seed=seed, progress=tick)
        loop = SessionLoop(conversations, sessions, spec.max_tokens, seed=seed)
        label = f"sessions={len(conversations)}"
        items: list[WorkItem] = []
        cells.append(
            CellPlan(
                label,
                items,
                ClosedLoop(len(conversations)),
                repeat=repeat if spec.repeat > 1 else None,
                loop=loop,
            )
        )
    warm = (
        length_buckets(
            tokenizer,
            [min(spec.buckets)],
            spec.warmup,
            max_tokens=spec.max_tokens,
            frame=frame,
            seed=f"{spec.seed}/warmup",
        )
        if spec.warmup and tokenizer is not None
        else []
    )
    return cells, warm


def expand_cells(
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    *,
    frame: PromptFrame = BARE,
    progress: Progress | None = None,
) -> tuple[list[CellPlan], list[WorkItem]]:
    """Cells in run order (repeat-major, then bucket, then load level) and the warm-up items."""
    if not needs_expansion(spec):
        return build_cells(spec, tokenizer, frame=frame, progress=progress)
    if spec.sessions is not None:
        return _session_cells(spec, tokenizer, frame, progress)
    uses_files = spec.prompt_file is not None or spec.sharegpt_file is not None
    buckets: Sequence[int] = [spec.buckets[0]] if uses_files or spec.shared_prefix else spec.buckets
    per_run = sum(_count(spec, a) for a in spec.arrivals) * len(buckets)
    ticks = _Ticks(progress, per_run * spec.repeat + spec.warmup)
    cells: list[CellPlan] = []
    warm: list[WorkItem] = []
    for repeat in range(spec.repeat):
        seed = repeat_seed(spec.seed, repeat)
        for bucket in buckets:
            for arrival in spec.arrivals:
                first = not cells
                one = dataclasses.replace(
                    spec,
                    buckets=[bucket],
                    arrivals=[arrival],
                    requests=_count(spec, arrival),
                    warmup=spec.warmup if first else 0,
                    seed=seed,
                )
                built, lead = build_cells(
                    one, tokenizer, frame=frame, progress=ticks
                )
                ticks.next_call()
                warm.extend(lead)
                for plan in built:
                    more = _more(
                        spec, tokenizer, bucket, f"{seed}/{arrival.label()}", frame
                    )
                    plan.repeat = repeat if spec.repeat > 1 else None
                    plan.loop = _loop(spec, plan, more)
                    cells.append(plan)
    return cells, warm


def saturation_overview(
    cells: Sequence[CellPlan], summary: BenchSummary, gate: SaturationGate | None
) -> list[dict[str, Any]]:
    """Per group of open-loop cells (same prompts, rising rates): where the load stopped
    holding. ``last_held`` is the highest rate below the first saturated one."""
    groups: dict[str, list[CellPlan]] = {}
    for plan in cells:
        if plan.phase == "warm" and isinstance(plan.arrival, OpenLoop):
            group = groups.setdefault(_group(plan.cell, plan.arrival), [])
            if all(p.cell != plan.cell for p in group):
                group.append(plan)
    skipped = {p.cell for p in gate.skipped} if gate is not None else set()
    overview = []
    for name, plans in groups.items():
        ordered = sorted(
            plans, key=lambda p: p.arrival.rate if isinstance(p.arrival, OpenLoop) else 0
        )
        saturated_at = None
        last_held = None
        for plan in ordered:
            cell = summary.find(plan.cell)
            if cell is None:
                continue
            if cell.saturation is not None and cell.saturation.saturated:
                saturated_at = plan.cell
                break
            last_held = plan.cell
        if saturated_at is None and not skipped:
            continue
        overview.append(
            {
                "group": name,
                "saturated_at": saturated_at,
                "last_held": last_held,
                "skipped": [p.cell for p in ordered if p.cell in skipped],
            }
        )
    return overview


def expected_requests(plan: CellPlan) -> int | None:
    """How many requests a cell will send, for a progress bar (None: it depends on the
    server's speed, as in a timed closed loop)."""
    loop = plan.loop
    if isinstance(loop, SessionLoop):
        return sum(len(c.users) for c in loop.conversations)
    if isinstance(loop, TimedLoop) and loop.duration_ns is not None:
        return len(plan.items) if isinstance(plan.arrival, OpenLoop) else None
    return len(plan.items)


def _keep_live_verdicts(summary: BenchSummary, cells: Sequence[CellPlan]) -> None:
    """A cell the live check stopped reports the verdict that stopped it: judged again on the
    records alone, the requests it cancelled carry no wait and the trend may read weaker."""
    for plan in cells:
        loop = plan.loop
        verdict = loop.watch.verdict if isinstance(loop, TimedLoop) and loop.watch else None
        cell = summary.find(plan.cell)
        held = cell is not None and (cell.saturation is None or not cell.saturation.saturated)
        if verdict is not None and cell is not None and held:
            cell.saturation = verdict


def describe_workload(
    summary: BenchSummary,
    spec: WorkloadSpec,
    cells: Sequence[CellPlan],
    gate: SaturationGate | None,
) -> list[str]:
    """Put what shaped the cells (and where the load stopped holding) into ``summary.meta``;
    returns the notes the user should read (also added to ``meta.notes``)."""
    notes = []
    summary.meta["seed"] = spec.seed  # `--seed` this value sends the same prompts again
    if spec.duration_s is not None:
        summary.meta["duration_s"] = spec.duration_s
    if spec.repeat > 1:
        summary.meta["repeat"] = spec.repeat
        summary.meta["repeat_seeds"] = [repeat_seed(spec.seed, r) for r in range(spec.repeat)]
    if spec.sessions is not None:
        summary.meta["sessions"] = {
            "sessions": spec.sessions.sessions,
            "turns": spec.sessions.turns,
            "think_s": list(spec.sessions.think_s),
            "turn_tokens": [spec.sessions.first_tokens, spec.sessions.next_tokens],
            "conversations_file": str(spec.sessions.conversations_file or "") or None,
        }
    if spec.sessions is not None and spec.max_tokens == 1:
        notes.append(
            "multi-turn answers were 1 token long (--max-tokens 1), so the history grew by the "
            "user turns only; pass e.g. --max-tokens 32 for answers like a chat's"
        )
    if spec.stop_on_saturation:
        summary.meta["stop_on_saturation"] = True
        _keep_live_verdicts(summary, cells)
    overview = saturation_overview(cells, summary, gate)
    if overview:
        summary.meta["saturation"] = overview
    summary.meta.setdefault("notes", []).extend(notes)
    return notes


__all__ = [
    "SaturationGate",
    "describe_workload",
    "expand_cells",
    "needs_expansion",
    "repeat_seed",
    "saturation_overview",
]
