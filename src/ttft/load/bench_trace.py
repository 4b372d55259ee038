"""``ttft bench --trace``: the replay the options ask for, and what the run needs around it.

``trace_spec`` refuses options that mean another workload; ``embedded_settings`` sizes the
embedded engine for the trace; ``reuse_note`` compares, after a Mooncake replay, the prefix
reuse the trace implies with what the server reported.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ttft.core.errors import TtftError
from ttft.workload.trace import FORMATS, TraceFormat, TraceSpec

if TYPE_CHECKING:
    from ttft.load.bench_options import BenchOptions
    from ttft.load.results import BenchResult
    from ttft.workload.spec import WorkloadSpec


def trace_spec(options: BenchOptions) -> TraceSpec | None:
    """The replay asked for, or None; options that mean another workload are refused."""
    if options.trace_path is None:
        return None
    if not options.trace_path.is_file():
        raise TtftError(f"trace not found: {options.trace_path}", "check the path given to --trace")
    others = {
        "--prompt-file": options.prompt_file is not None,
        "--sharegpt": options.sharegpt is not None,
        "--shared-prefix": options.shared_prefix is not None,
        "--buckets": options.buckets is not None,
        "--concurrency": options.concurrency is not None,
        "--rate": bool(options.rates),
        "--requests": options.n_requests is not None,
        "--cold": options.cold_samples is not None,
    }
    given = [name for name, used in others.items() if used]
    if given:
        raise TtftError(
            f"--trace replays the trace's own requests at its own times; it cannot be combined "
            f"with {', '.join(given)}",
            "drop those options (use --trace-limit for fewer requests, --speed for another rate)",
        )
    if not (options.speed > 0 and math.isfinite(options.speed)):
        raise TtftError(f"--speed must be above 0, not {options.speed}", "e.g. --speed 2")
    if options.max_tokens < 1:
        raise TtftError("--max-tokens must be at least 1")
    return TraceSpec(
        path=options.trace_path,
        format=_format(options.trace_format),
        speed=options.speed,
        block_size=options.block_size,
        limit=options.trace_limit,
        max_tokens=options.max_tokens if options.max_tokens_given else None,
    )


def _format(text: str) -> TraceFormat:
    for known in FORMATS:
        if text == known:
            return known
    raise TtftError(f"unknown --trace-format {text!r}", f"choose one of {', '.join(FORMATS)}")


def describe(spec: TraceSpec) -> str:
    """The run's first line for a replay."""
    speed = "" if spec.speed == 1.0 else f" at {spec.speed:g}x speed"
    unit = "token" if spec.max_tokens == 1 else "tokens"
    cap = "" if spec.max_tokens is None else f", output capped at {spec.max_tokens} {unit}"
    limit = "" if spec.limit is None else f" (first {spec.limit} requests)"
    return f"trace {spec.path}{limit}{speed}{cap}"


def embedded_settings(spec: WorkloadSpec) -> tuple[int, tuple[str, ...]]:
    """For the embedded engine: the longest prompt to size the context for, and extra flags.

    Gemma 3 uses sliding-window attention; without ``--swa-full`` llama-server restores a
    cached prefix only from a checkpoint near the end of the previous prompt, so two requests
    sharing their first blocks reuse nothing and a Mooncake trace's reuse could not happen.
    """
    from ttft.load.trace_plan import load_trace

    assert spec.trace is not None
    trace = load_trace(spec.trace)
    longest = trace.longest_prompt or 2048  # bodies: unknown lengths, a generous guess
    output = trace.longest_output or 1
    if spec.trace.max_tokens is not None:
        output = min(output, spec.trace.max_tokens)
    extra = ("--swa-full",) if trace.format == "mooncake" else ()
    return longest + output, extra


def reuse_note(result: BenchResult) -> tuple[str, dict[str, Any]] | None:
    """After a Mooncake replay: the implied against the reported prefix reuse."""
    from ttft.load.trace_plan import measure_reuse

    for cell in result.cells:
        if cell.plan.phase == "warm" and "trace" in cell.plan.meta:
            reuse = measure_reuse(cell.plan.items, cell.records)
            if reuse is not None:
                return reuse.note(), reuse.to_dict()
    return None
