"""Trace replay as a cell: the trace's requests at its recorded arrival times (scaled by
``--speed``), and afterwards how much of the trace's prefix reuse the server delivered.

The schedule is fixed before the first request, as for open loop (``workload.arrival.Replay``),
so a server that falls behind cannot slow the arrivals, and a client that falls behind shows
it as ``client_wait`` (scheduled -> sent).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.load.runner import CellPlan
from ttft.workload.arrival import Replay
from ttft.workload.mooncake import mooncake_items
from ttft.workload.requests import ApiStyle, WorkItem, chat_body, completion_body
from ttft.workload.run_mark import marked_items, run_mark
from ttft.workload.spec import WorkloadSpec
from ttft.workload.tokenizer import Tokenizer
from ttft.workload.trace import Trace, TraceRequest, TraceSpec, read_trace

Progress = Callable[[int, int], None]


@functools.lru_cache(maxsize=4)
def load_trace(spec: TraceSpec) -> Trace:
    """The trace a spec names, read once per process (sizing the engine, checking the context
    and building the cell all need it; a Mooncake trace can hold tens of thousands of lines)."""
    return read_trace(spec.path, spec.format, block_size=spec.block_size, limit=spec.limit)


def needs_tokenizer(trace: Trace) -> bool:
    """Mooncake prompts are synthesised in the target's tokens; bodies are sent as they are."""
    return trace.format == "mooncake"


def check_trace_fits(trace: Trace, spec: TraceSpec, limit: int | None) -> None:
    """Refuse up front a trace whose longest prompt the server cannot take."""
    longest = trace.longest_prompt
    if limit is None or longest is None:
        return
    output = trace.longest_output or 1
    output = min(output, spec.max_tokens) if spec.max_tokens is not None else output
    if longest + output > limit:
        raise TtftError(
            f"the trace's longest prompt ({longest} tokens plus {output} output tokens) exceeds "
            f"the server's context of {limit} tokens per request",
            "give the server more context, replay fewer requests (--trace-limit), or cap the "
            "output with --max-tokens",
        )


def body_item(request: TraceRequest, cap: int | None) -> WorkItem:
    """A JSONL trace line as a request; ``cap`` limits its output (see ``TraceSpec``)."""
    assert request.body is not None and request.api is not None
    body = {k: v for k, v in request.body.items() if k != "max_completion_tokens"}
    own = request.output_length
    # Without a length of its own a request gets the cap, or 1 (TTFT only), never "unbounded".
    if own is None:
        wanted = cap if cap is not None else 1
    else:
        wanted = own if cap is None else min(own, cap)
    body["max_tokens"] = max(1, wanted)
    return WorkItem(body, request.api, "trace", None, {"trace_line": request.line})


def _warmup(api: ApiStyle, count: int) -> list[WorkItem]:
    """Short requests of their own: a trace's first prompt must not be cached by the warm-up."""
    items = []
    for i in range(count):
        text = f"Warm-up request {i}: say one word."
        body = (
            chat_body([{"role": "user", "content": text}], 1)
            if api == "chat"
            else completion_body(text, 1)
        )
        items.append(WorkItem(body, api, "warmup", None))
    return items


def trace_cells(
    spec: WorkloadSpec,
    tokenizer: Tokenizer | None,
    *,
    progress: Progress | None = None,
) -> tuple[list[CellPlan], list[WorkItem]]:
    """One replay cell for the whole trace, and the warm-up items. Notes on reading the trace
    and building its prompts are in the cell's ``meta["notes"]``."""
    assert spec.trace is not None
    trace = load_trace(spec.trace)
    found = list(trace.notes)
    if trace.format == "mooncake":
        if tokenizer is None:
            raise TtftError("synthesising Mooncake prompts needs the target's tokenizer")
        items, built = mooncake_items(
            trace.requests,
            tokenizer,
            block_size=spec.trace.block_size,
            api=spec.api,
            max_tokens=spec.trace.max_tokens,
            seed=spec.seed,
            progress=progress,
        )
        found += built
        api: ApiStyle = spec.api
    else:
        items = []
        for request in trace.requests:
            items.append(body_item(request, spec.trace.max_tokens))
            if progress is not None:
                progress(len(items), len(trace.requests))
        api = items[0].api
        items = marked_items(items, run_mark(spec.seed))  # a log's prompts repeat every run
    arrival = Replay(trace.offsets_ns, spec.trace.speed)
    label = f"{trace.path.stem} {arrival.label()}"
    plan = CellPlan(label, items, arrival, max_in_flight=spec.max_in_flight)
    plan.meta["trace"] = {"path": str(trace.path), "format": trace.format}
    plan.meta["notes"] = found
    return [plan], _warmup(api, spec.warmup)


@dataclass(frozen=True)
class Reuse:
    """The trace's implied prefix reuse against what the server reported, summed."""

    requests: int
    implied_tokens: int
    measured_tokens: int
    measured_requests: int  # requests whose response said how many tokens were cached

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "implied_cached_tokens": self.implied_tokens,
            "measured_cached_tokens": self.measured_tokens,
            "measured_requests": self.measured_requests,
        }

    def note(self) -> str:
        if not self.measured_requests:
            return (
                f"the trace implies {self.implied_tokens} cached prompt tokens; the server "
                "reported none (no usage.prompt_tokens_details.cached_tokens or timings.cache_n)"
            )
        share = self.measured_tokens / self.implied_tokens if self.implied_tokens else None
        ratio = f" ({share:.0%})" if share is not None else ""
        return (
            f"prefix reuse: the trace implies {self.implied_tokens} cached prompt tokens over "
            f"{self.requests} requests; the server reported {self.measured_tokens}{ratio}"
        )


def cached_of(record: RequestRecord) -> int | None:
    """Prompt tokens the server said it reused: usage first, llama-server's timings else."""
    if record.cached_tokens is not None:
        return record.cached_tokens
    timings = record.server_timings or {}
    value = timings.get("cache_n")
    return None if value is None else int(value)


def measure_reuse(items: Sequence[WorkItem], records: Sequence[RequestRecord]) -> Reuse | None:
    """Sum implied and reported cached tokens over a replay cell (records in item order)."""
    implied = [item.meta.get("implied_cached_tokens") for item in items]
    if not implied or any(value is None for value in implied):
        return None  # not a Mooncake replay: nothing is implied
    measured = [cached_of(record) for record in records]
    known = [value for value in measured if value is not None]
    return Reuse(len(items), sum(int(v or 0) for v in implied), sum(known), len(known))
