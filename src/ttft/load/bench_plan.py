"""``ttft bench``'s decisions around the run: where the results go, how large the embedded
engine must be, what a cold-start run needs, whether prompts need the server's tokenizer, the
notes a finished run carries and the exit code it earns.

The CLI fills ``BenchOptions``, asks these questions and prints; it decides none of them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.summary import BenchSummary
from ttft.engines.llamacpp.on_demand import EmbeddedSize, context_for
from ttft.load.bench_options import BenchOptions
from ttft.load.bench_trace import embedded_settings, reuse_note
from ttft.load.bench_workload import longest_prompt
from ttft.load.session import SessionResult
from ttft.load.trace_plan import load_trace, needs_tokenizer
from ttft.workload.spec import WorkloadSpec

CLIENT_SUSPECT_EXIT = 3  # --fail-on-client-suspect: the client, not the server, was in doubt


def results_dir(options: BenchOptions, *, cold: bool = False) -> Path:
    """``--out``, or a new ``results/bench-TIME`` folder; created either way."""
    stamp = "bench-cold-%Y%m%d-%H%M%S" if cold else "bench-%Y%m%d-%H%M%S"
    out = options.out_dir or Path("results") / time.strftime(stamp)
    out.mkdir(parents=True, exist_ok=True)
    return out


def embedded_size(spec: WorkloadSpec) -> EmbeddedSize:
    """Every slot fits the longest prompt and its answer (a trace: its longest request)."""
    if spec.trace is not None:
        longest, extra = embedded_settings(spec)
        return EmbeddedSize(context_for(longest + 64), extra_args=extra)
    return EmbeddedSize(context_for(longest_prompt(spec) + spec.max_tokens + 64))


@dataclass(frozen=True)
class ColdPlan:
    """A cold-start run: how many restarts, the prompt's length and the engine's context."""

    samples: int
    prompt_tokens: int
    ctx_size: int


def cold_plan(options: BenchOptions, spec: WorkloadSpec) -> ColdPlan:
    """``--cold`` restarts an engine ttft manages, at least once, with the shortest bucket."""
    if options.target.url:
        raise TtftError(
            "--cold restarts the engine between samples, so it needs an engine ttft manages",
            "drop --url to use the embedded engine (or restart your server yourself and run "
            "bench with --requests 1)",
        )
    samples, tokens = options.cold_samples or 0, min(spec.buckets)
    if samples < 1:
        raise TtftError("--cold needs at least 1 sample")
    return ColdPlan(samples, tokens, context_for(tokens + 1 + 64))


def needs_server_tokenizer(options: BenchOptions, spec: WorkloadSpec) -> bool:
    """Prompts built to a token count need a tokenizer; bodies read from files do not."""
    uses_files = any(f is not None for f in (options.prompt_file, options.sharegpt))
    uses_files = uses_files or options.conversations is not None
    if spec.trace is not None:
        uses_files = not needs_tokenizer(load_trace(spec.trace))
    return not uses_files


def add_reuse_note(result: SessionResult, spec: WorkloadSpec) -> None:
    """A replayed trace's prefix reuse: a note for the reader and a field of the summary."""
    reuse = reuse_note(result.bench) if spec.trace is not None else None
    if reuse is not None:
        result.notes.append(reuse[0])
        result.summary.meta["trace_reuse"] = reuse[1]


def client_suspect(options: BenchOptions, summary: BenchSummary) -> bool:
    """--fail-on-client-suspect, and the client-health verdict is not healthy."""
    health = summary.client_health
    return options.fail_on_client_suspect and health is not None and not health.trusted


def slos_missed(slos: Sequence[Slo], summary: BenchSummary) -> bool:
    """SLOs were given and a cell missed one."""
    return bool(slos) and not summary.slos_passed
