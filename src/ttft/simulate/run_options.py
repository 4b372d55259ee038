"""``ttft simulate run``'s typed options and the question they ask: a ``Sweep`` whose every
value is checked before the first point is answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ttft.core.slo import parse_slos
from ttft.simulate.model import Calibration
from ttft.simulate.sweep import (
    Grid,
    Sweep,
    base_workload,
    check_question,
    int_axis,
    lanes_axis,
    policy_axis,
    rate_axis,
    schedule_axis,
    trace_tokenizer,
)
from ttft.workload.trace import TraceSpec


@dataclass(frozen=True)
class RunOptions:
    """``ttft simulate run``'s options, as click parsed them."""

    cal_path: Path
    trace_path: Path | None
    trace_format: str
    speed: float
    block_size: int
    trace_limit: int | None
    rate: str | None
    count: int
    prompt_tokens: int
    output_tokens: int
    shared_prefix: int
    prefix_groups: int
    max_tokens: int | None
    replicas: str
    policy: str
    slots: str | None
    batch_tokens: str | None
    kv_blocks: str | None
    schedule_policy: str | None
    gateway_cap: str | None
    lanes: bool
    long_prompt_tokens: str | None
    long_reserve: str | None
    short_burst: str | None
    queue_size: int | None
    queue_timeout: float | None
    slo_texts: tuple[str, ...]
    find_fewest: bool
    max_replicas: int
    runs: int
    seed: int
    validate: bool
    url: str | None
    json_out: Path | None
    html_out: Path | None


def sweep_for(o: RunOptions) -> Sweep:
    """The question the options ask, every value checked before the first point."""
    calibration = Calibration.load(o.cal_path)
    slos = parse_slos(list(o.slo_texts)) if o.slo_texts else ()
    check_question(slos, o.find_fewest)
    trace = None
    if o.trace_path is not None:
        fmt = cast(Any, o.trace_format)
        trace = TraceSpec(o.trace_path, fmt, o.speed, o.block_size, o.trace_limit, o.max_tokens)
    rates = rate_axis(o.rate)
    base = base_workload(
        trace, o.count, o.prompt_tokens, o.output_tokens, o.shared_prefix, o.prefix_groups
    )
    grid = Grid(
        int_axis(o.replicas, "--replicas"),
        policy_axis(o.policy),
        int_axis(o.slots, "--slots"),
        int_axis(o.batch_tokens, "--batch-tokens"),
        int_axis(o.kv_blocks, "--kv-blocks"),
        int_axis(o.gateway_cap, "--gateway-cap"),
        lanes_axis(
            o.lanes,
            o.long_prompt_tokens,
            o.long_reserve,
            o.short_burst,
            o.queue_size,
            o.queue_timeout,
        ),
        rates,
        schedule_axis(o.schedule_policy, calibration.engine.kind),
    )
    tokenizer = trace_tokenizer(calibration, base)
    return Sweep(
        calibration, base, grid, slos, o.find_fewest, o.max_replicas, o.runs, o.seed, tokenizer
    )
