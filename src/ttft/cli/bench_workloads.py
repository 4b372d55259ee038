"""``ttft bench`` options for workloads beyond a fixed count: duration, ramps, repeats,
saturation stops and multi-turn sessions (declared here; read into the ``WorkloadSpec`` by
``ttft.load.bench_workload``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

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
