"""From what the user asked (buckets, concurrency levels, rates, prompt sources) to cells."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ttft.core.errors import TtftError
from ttft.load.runner import CellPlan
from ttft.workload.arrival import Arrival, OpenLoop, Replay
from ttft.workload.builders import from_jsonl, from_sharegpt, length_buckets, shared_prefix
from ttft.workload.exact_length import BARE, PromptFrame
from ttft.workload.requests import WorkItem
from ttft.workload.run_mark import marked_items, run_mark
from ttft.workload.spec import WorkloadSpec
from ttft.workload.tokenizer import Tokenizer

Progress = Callable[[int, int], None]


def check_fits_context(spec: WorkloadSpec, limit: int | None) -> None:
    """Refuse up front a bucket the server cannot take (``limit``: its tokens per request, None
    when it does not say), instead of sending hundreds of requests that get HTTP 400."""
    if spec.trace is not None:
        from ttft.load.trace_plan import check_trace_fits, load_trace

        check_trace_fits(load_trace(spec.trace), spec.trace, limit)
        return
    if limit is None or spec.prompt_file is not None or spec.sharegpt_file is not None:
        return
    longest = sum(spec.shared_prefix) if spec.shared_prefix else max(spec.buckets)
    if longest + spec.max_tokens > limit:
        raise TtftError(
            f"prompts of {longest} tokens plus {spec.max_tokens} output tokens exceed the "
            f"server's context of {limit} tokens per request",
            "choose smaller --buckets, or give the server more context (llama-server: -c is "
            "shared by the -np slots; vLLM: --max-model-len)",
        )


def _file_items(spec: WorkloadSpec) -> list[WorkItem]:
    """The file's prompts, each starting with the run's mark (``workload/run_mark.py``)."""
    if spec.prompt_file is not None:
        items = from_jsonl(spec.prompt_file, max_tokens=spec.max_tokens)
    else:
        assert spec.sharegpt_file is not None
        items = from_sharegpt(spec.sharegpt_file, max_tokens=spec.max_tokens)
    return marked_items(items, run_mark(spec.seed))


def _cycle(items: Sequence[WorkItem], count: int, offset: int) -> list[WorkItem]:
    return [items[(offset + i) % len(items)] for i in range(count)]


def build_cells(
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    *,
    frame: PromptFrame = BARE,
    progress: Progress | None = None,
) -> tuple[list[CellPlan], list[WorkItem]]:
    """Cells in run order (bucket-major, then arrival) and the warm-up items.

    Each cell gets its own prompts (seeded by bucket, arrival and index), so a later cell never
    finds an earlier cell's prompt in the prefix cache; the same seed gives the same prompts in
    every run, so runs are comparable.
    """
    if spec.trace is not None:
        from ttft.load.trace_plan import trace_cells

        return trace_cells(spec, tokenizer, progress=progress)
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
                frame=frame,
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
            frame=frame,
            seed=f"{spec.seed}/warmup",
            progress=tick,
        )
        if spec.warmup
        else []
    )
    return cells, warm


def _plan(label: str, items: list[WorkItem], arrival: Arrival, spec: WorkloadSpec) -> CellPlan:
    limit = spec.max_in_flight if isinstance(arrival, OpenLoop | Replay) else None
    return CellPlan(label, items, arrival, max_in_flight=limit)
