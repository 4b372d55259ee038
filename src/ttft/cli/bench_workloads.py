"""``ttft bench`` options for workloads beyond a fixed count: duration, ramps, repeats,
saturation stops and multi-turn sessions; parsed into the ``WorkloadSpec`` with clear errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ttft.cli.options import BenchOptions
from ttft.core.errors import TtftError
from ttft.load.plan import check_fits_context
from ttft.workload.arrival import ClosedLoop
from ttft.workload.conversations import (
    SessionsSpec,
    parse_think_time,
    parse_turn_tokens,
    read_conversations,
)
from ttft.workload.ramp import parse_duration, parse_ramp
from ttft.workload.spec import WorkloadSpec

_OPTIONS = (
    click.option(
        "--duration",
        default=None,
        help="Run each cell this long (e.g. 60s, 2m) instead of --requests: closed loop starts "
        "requests until then, open loop schedules arrivals up to then; requests in flight at "
        "the end finish and count.",
    ),
    click.option(
        "--ramp",
        default=None,
        help="Raise the load stage by stage, one cell per stage: "
        "'concurrency=1..8:step=1,stage=20s' or 'rate=1..10:stages=5,stage=30s' "
        "(stage= defaults to --duration). Replaces --concurrency/--rate.",
    ),
    click.option(
        "--repeat",
        type=int,
        default=1,
        show_default=True,
        help="Run every cell N times, interleaved (A1 B1 A2 B2 ...), each repeat with its own "
        "prompt seed; reports the run-to-run spread of p50 with its CI.",
    ),
    click.option(
        "--stop-on-saturation",
        is_flag=True,
        help="Stop an open-loop cell once its queue grows without bound (in-flight requests "
        "are recorded as cancelled) and skip the higher rates after it.",
    ),
    click.option(
        "--sessions",
        type=int,
        default=None,
        help="Multi-turn: N conversations at once, each sending its whole history (with the "
        "model's real answers, --max-tokens long) every turn; TTFT reported per turn.",
    ),
    click.option(
        "--turns", type=int, default=4, show_default=True, help="Multi-turn: turns per session."
    ),
    click.option(
        "--think-time",
        default="1",
        show_default=True,
        help="Multi-turn: seconds between an answer and the next turn, e.g. 2 or 1-3 (uniform).",
    ),
    click.option(
        "--turn-tokens",
        default="256:32",
        show_default=True,
        help="Multi-turn: FIRST:NEXT tokens of the first user turn and of each later one.",
    ),
    click.option(
        "--conversations",
        type=click.Path(path_type=Path),
        default=None,
        help='Multi-turn from a JSONL file, one {"messages": [...]} per line; its assistant '
        "turns are replaced by the model's answers. --sessions N takes the first N.",
    ),
)


def workload_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def _sessions(options: BenchOptions) -> SessionsSpec | None:
    if options.sessions is None and options.conversations is None:
        return None
    if options.sessions is not None and options.sessions < 1:
        raise TtftError(f"--sessions must be at least 1, not {options.sessions}")
    if options.conversations is not None and not options.conversations.is_file():
        raise TtftError(
            f"file not found: {options.conversations}", "check the --conversations path"
        )
    if options.turns < 1:
        raise TtftError(f"--turns must be at least 1, not {options.turns}")
    if options.api == "completions":
        raise TtftError(
            "multi-turn sessions send a chat history", "drop --api completions (use chat)"
        )
    if options.prompt_file or options.sharegpt or options.shared_prefix:
        raise TtftError(
            "--sessions/--conversations bring their own prompts",
            "drop --prompt-file, --sharegpt and --shared-prefix",
        )
    if options.duration or options.ramp or options.rates or options.concurrency:
        raise TtftError(
            "a multi-turn run's load is its sessions (N sessions = N in flight at most)",
            "drop --duration, --ramp, --rate and --concurrency; set --sessions and --turns",
        )
    first, later = parse_turn_tokens(options.turn_tokens)
    count = options.sessions
    if options.conversations is not None:  # read now: a bad file fails before any request
        count = len(read_conversations(options.conversations, options.sessions))
    return SessionsSpec(
        sessions=count,
        turns=options.turns,
        think_s=parse_think_time(options.think_time),
        first_tokens=first,
        next_tokens=later,
        conversations_file=options.conversations,
    )


def apply_workload_options(spec: WorkloadSpec, options: BenchOptions) -> WorkloadSpec:
    """``spec`` with the duration, ramp, repeats, saturation stop and sessions asked for."""
    if options.repeat < 1:
        raise TtftError(f"--repeat must be at least 1, not {options.repeat}")
    duration = parse_duration(options.duration) if options.duration else None
    arrivals = spec.arrivals
    if options.ramp:
        if options.rates or options.concurrency:
            raise TtftError(
                "--ramp sets the load levels itself", "drop --rate/--concurrency, or drop --ramp"
            )
        ramp = parse_ramp(options.ramp)
        if ramp.stage_s is not None and duration is not None and ramp.stage_s != duration:
            raise TtftError(
                "--ramp stage= and --duration disagree on how long a stage runs",
                "give the stage length once: stage= in --ramp, or --duration",
            )
        duration = ramp.stage_s or duration
        if duration is None:
            raise TtftError(
                "a ramp's stages need a length", "add stage=20s to --ramp, or --duration 20s"
            )
        arrivals = ramp.arrivals(options.burstiness)
    sessions = _sessions(options)
    buckets = list(spec.buckets)
    if sessions is not None:
        # The warm-up prompt has the first turn's length; the load is the sessions themselves.
        buckets = [sessions.first_tokens]
        arrivals = [ClosedLoop(sessions.sessions)] if sessions.sessions else []
    return dataclasses.replace(
        spec,
        buckets=buckets,
        arrivals=arrivals,
        duration_s=duration,
        repeat=options.repeat,
        stop_on_saturation=options.stop_on_saturation,
        sessions=sessions,
    )


def check_fits(spec: WorkloadSpec, limit: int | None) -> None:
    """``check_fits_context``, and for synthesised sessions their last, longest turn."""
    check_fits_context(spec, limit)
    sessions = spec.sessions
    if limit is None or sessions is None or sessions.conversations_file is not None:
        return
    longest = sessions.longest_prompt(spec.max_tokens)
    if longest + spec.max_tokens > limit:
        raise TtftError(
            f"the last turn of a session reaches about {longest} tokens plus {spec.max_tokens} "
            f"output tokens, beyond the server's context of {limit} tokens per request",
            "use fewer --turns, shorter --turn-tokens or --max-tokens, or give the server more "
            "context (llama-server: -c is shared by the -np slots)",
        )


def longest_prompt(spec: WorkloadSpec) -> int:
    """Tokens of the longest request the workload sends (to size the embedded engine)."""
    if spec.sessions is not None:
        return spec.sessions.longest_prompt(spec.max_tokens)
    return max(spec.buckets) if spec.shared_prefix is None else sum(spec.shared_prefix)


def workload_shape(spec: WorkloadSpec) -> str | None:
    """What a multi-turn run sends, for the header line (None: not a multi-turn run)."""
    sessions = spec.sessions
    if sessions is None:
        return None
    if sessions.conversations_file is not None:
        return "conversations from a file"
    return f"turns of {sessions.first_tokens} then {sessions.next_tokens} tokens"


def requests_text(spec: WorkloadSpec) -> str:
    """How much each cell sends, for the run's header line."""
    sessions = spec.sessions
    if sessions is not None and sessions.conversations_file is not None:
        return f"{sessions.sessions} sessions from {sessions.conversations_file}"
    if sessions is not None:
        return f"{sessions.sessions} sessions x {sessions.turns} turns"
    if spec.duration_s is not None:
        return f"{spec.duration_s:g} s per cell"
    return f"{spec.requests} requests per cell"
