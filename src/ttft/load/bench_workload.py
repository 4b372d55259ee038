"""The workload ``ttft bench``'s options describe, checked before anything is sent.

``workload_spec`` turns the options and a profile into a ``WorkloadSpec`` (buckets, arrivals,
prompts, a trace, a duration or ramp, sessions), refusing combinations that mean two different
workloads; the helpers size it (``longest_prompt``, ``check_fits``) and say it in words for the
run's first line. ``make_tokenizer`` picks what counts prompt tokens.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.load.bench_options import PROFILES, BenchOptions, parse_int_list, parse_shared_prefix
from ttft.load.bench_trace import describe as describe_trace
from ttft.load.bench_trace import trace_spec
from ttft.load.workload_cells import check_fits_context
from ttft.workload.arrival import Arrival, ClosedLoop, OpenLoop, parse_rate
from ttft.workload.conversations import (
    SessionsSpec,
    parse_think_time,
    parse_turn_tokens,
    read_conversations,
)
from ttft.workload.ramp import parse_duration, parse_ramp
from ttft.workload.spec import WorkloadSpec
from ttft.workload.tokenizer import Tokenizer


def workload_spec(options: BenchOptions, profile_name: str) -> WorkloadSpec:
    profile = PROFILES[profile_name]
    buckets = parse_int_list(options.buckets, "--buckets") if options.buckets else profile.buckets
    arrivals: list[Arrival] = [
        OpenLoop(
            parse_rate(r),
            burstiness=options.burstiness,
            distribution="poisson" if options.burstiness == 1.0 else "gamma",
        )
        for r in options.rates
    ]
    if options.concurrency or not arrivals:
        levels = (
            parse_int_list(options.concurrency, "--concurrency")
            if options.concurrency
            else profile.concurrency
        )
        closed: list[Arrival] = [ClosedLoop(c) for c in levels]
        arrivals = closed + arrivals
    for path in (options.prompt_file, options.sharegpt):
        if path is not None and not path.is_file():
            raise TtftError(f"file not found: {path}", "check the path")
    if (
        sum(x is not None for x in (options.prompt_file, options.sharegpt, options.shared_prefix))
        > 1
    ):
        raise TtftError("choose one of --prompt-file, --sharegpt and --shared-prefix")
    if options.max_tokens < 1:
        raise TtftError("--max-tokens must be at least 1")
    trace = trace_spec(options)
    spec = WorkloadSpec(
        buckets=buckets,
        requests=options.n_requests if options.n_requests is not None else profile.requests,
        max_tokens=options.max_tokens,
        api="completions" if options.api == "completions" else "chat",
        shared_prefix=parse_shared_prefix(options.shared_prefix) if options.shared_prefix else None,
        prompt_file=options.prompt_file,
        sharegpt_file=options.sharegpt,
        warmup=max(0, options.warmup),
        seed=options.seed,
        arrivals=arrivals,
        max_in_flight=options.max_in_flight,
        trace=trace,
    )
    return apply_workload_options(spec, options)


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


def make_tokenizer(path: Path | None, target: Target) -> Tokenizer:
    """A tokenizer.json or .gguf when given, else the server's own /tokenize (checked once here)."""
    if path is not None and path.suffix.lower() == ".gguf":
        from ttft.workload.gguf_tokenizer import GgufTokenizer

        return GgufTokenizer.from_gguf(path)
    if path is not None:
        from ttft.workload.hf_tokenizer import HFTokenizer

        return HFTokenizer.from_file(path)
    tokenizer = ServerTokenizer(target)
    try:
        tokenizer.encode("probe")
    except TtftError:
        raise TtftError(
            f"{target.root} offers no /tokenize endpoint, so prompt lengths cannot be exact",
            "pass --tokenizer path/to/tokenizer.json (the model's own), or --prompt-file",
        ) from None
    return tokenizer


def describe_workload(spec: WorkloadSpec) -> str:
    """What each cell sends and how much, for the run's first line."""
    levels = ", ".join(a.label() for a in spec.arrivals)
    shape = (
        describe_trace(spec.trace)
        if spec.trace
        else f"prefix {spec.shared_prefix[0]}+{spec.shared_prefix[1]} tokens"
        if spec.shared_prefix
        else "prompts from file"
        if spec.prompt_file or spec.sharegpt_file
        else "/".join(str(b) for b in spec.buckets) + " tokens"
    )
    shape = workload_shape(spec) or shape
    sizes = f" x {levels}, {requests_text(spec)}" if spec.trace is None else ""
    return shape + sizes
