"""``ttft bench --trace``: the options of trace replay (read into a TraceSpec by
``ttft.load.bench_trace``).

Kept apart from ``cli/bench.py`` so the bench command only gains one decorator and a few lines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ttft.workload.trace import FORMATS, MOONCAKE_BLOCK_SIZE

if TYPE_CHECKING:
    pass

_OPTIONS = (
    click.option(
        "--trace",
        "trace_path",
        type=click.Path(path_type=Path),
        default=None,
        help="Replay a timed trace: JSONL of request bodies with 'timestamp' (ms) or "
        "'arrival_s' (s), or a Mooncake trace (timestamp, input_length, output_length, "
        "hash_ids). Requests go out at their recorded times; outputs default to the trace's.",
    ),
    click.option(
        "--trace-format",
        type=click.Choice(FORMATS),
        default="auto",
        show_default=True,
        help="How to read --trace; auto tells from the first line.",
    ),
    click.option(
        "--speed",
        type=float,
        default=1.0,
        show_default=True,
        help="Replay speed: 2 sends twice as fast (half the gaps), 0.5 half as fast.",
    ),
    click.option(
        "--block-size",
        type=int,
        default=MOONCAKE_BLOCK_SIZE,
        show_default=True,
        help="Tokens per Mooncake hash block (the published traces use 512).",
    ),
    click.option(
        "--trace-limit",
        type=int,
        default=None,
        help="Replay only the first N requests of the trace.",
    ),
)


def trace_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_OPTIONS):
        f = option(f)
    return f
