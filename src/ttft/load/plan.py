"""From what the user asked (buckets, concurrency levels, rates, prompt sources) to cells."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.load.runner import CellPlan
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop
from ttft.workload.builders import from_jsonl, from_sharegpt, length_buckets, shared_prefix
from ttft.workload.requests import ApiStyle, WorkItem
from ttft.workload.tokenizer import Tokenizer


@dataclass
class WorkloadSpec:
    """Which prompts: length buckets (default), a shared-prefix set, or a file."""

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


Progress = Callable[[int, int], None]


def _file_items(spec: WorkloadSpec) -> list[WorkItem]:
    if spec.prompt_file is not None:
        items = from_jsonl(spec.prompt_file, max_tokens=spec.max_tokens)
    else:
        assert spec.sharegpt_file is not None
        items = from_sharegpt(spec.sharegpt_file, max_tokens=spec.max_tokens)
    return items


def _cycle(items: Sequence[WorkItem], count: int, offset: int) -> list[WorkItem]:
    return [items[(offset + i) % len(items)] for i in range(count)]


def build_cells(
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    *,
    template_overhead: int = 0,
    progress: Progress | None = None,
) -> tuple[list[CellPlan], list[WorkItem]]:
    """Cells in run order (bucket-major, then arrival) and the warm-up items.

    Each cell gets its own prompts (seeded by bucket, arrival and index), so a later cell never
    finds an earlier cell's prompt in the prefix cache; the same seed gives the same prompts in
    every run, so runs are comparable.
    """
    if spec.requests < 1:
        raise TtftError(f"--requests must be at least 1, not {spec.requests}")
    cells: list[CellPlan] = []
    if spec.prompt_file is not None or spec.sharegpt_file is not None:
        pool = _file_items(spec)
        warm = _cycle(pool, spec.warmup, 0)
        for n, arrival in enumerate(spec.arrivals):
            items = _cycle(pool, spec.requests, spec.warmup + n * spec.requests)
            cells.append(_plan(f"file {arrival.label()}", items, arrival, spec))
        return cells, warm
    if tokenizer is None:
        raise TtftError("building prompts of exact lengths needs a tokenizer")
    total = (len(spec.buckets) * len(spec.arrivals) * spec.requests) + spec.warmup
    done = 0

    def tick(_: int, __: int) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    if spec.shared_prefix is not None:
        prefix, suffix = spec.shared_prefix
        for arrival in spec.arrivals:
            items = shared_prefix(
                tokenizer,
                prefix,
                suffix,
                spec.requests,
                max_tokens=spec.max_tokens,
                seed=f"{spec.seed}/{arrival.label()}",
                progress=tick,
            )
            cells.append(_plan(f"prefix={prefix}+{suffix} {arrival.label()}", items, arrival, spec))
        warm = (
            shared_prefix(
                tokenizer, 16, suffix, spec.warmup, seed=f"{spec.seed}/warmup", progress=tick
            )
            if spec.warmup
            else []
        )
        return cells, warm
    for bucket in spec.buckets:
        for arrival in spec.arrivals:
            items = length_buckets(
                tokenizer,
                [bucket],
                spec.requests,
                max_tokens=spec.max_tokens,
                api=spec.api,
                template_overhead=template_overhead,
                seed=f"{spec.seed}/{arrival.label()}",
                progress=tick,
            )
            cells.append(_plan(f"{bucket} tok {arrival.label()}", items, arrival, spec))
    warm = (
        length_buckets(
            tokenizer,
            [min(spec.buckets)],
            spec.warmup,
            max_tokens=spec.max_tokens,
            api=spec.api,
            template_overhead=template_overhead,
            seed=f"{spec.seed}/warmup",
            progress=tick,
        )
        if spec.warmup
        else []
    )
    return cells, warm


def _plan(label: str, items: list[WorkItem], arrival: Arrival, spec: WorkloadSpec) -> CellPlan:
    limit = spec.max_in_flight if isinstance(arrival, OpenLoop) else None
    return CellPlan(label, items, arrival, max_in_flight=limit)
