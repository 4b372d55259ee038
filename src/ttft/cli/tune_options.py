"""The options of ``ttft tune sweep`` and ``ttft tune ab``, declared once.

``workload_options`` are the ones both commands share (workload, SLOs, experiment directory,
which service); ``sweep_options`` are the sweep's own (space, load search, gate). Their
parameter names are the fields of ``ttft.tune.options.SweepOptions`` and ``AbOptions``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ttft.cli.engine_choice import EngineKind
from ttft.cli.html_output import html_option


def workload_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--workload",
            "shape",
            type=click.Choice(["shared-prefix", "timestamp-first", "unique", "log"]),
            default="shared-prefix",
            show_default=True,
            help="Prompts: one shared system prompt, a timestamp as its first line, or your log.",
        ),
        click.option("--request-log", type=click.Path(path_type=Path), default=None,
                     help="JSONL of OpenAI chat bodies (with --workload log)."),
        click.option("--prefix-words", type=int, default=120, show_default=True,
                     help="System prompt length in words (~1.3 tokens each)."),
        click.option("--suffix-words", type=int, default=12, show_default=True,
                     help="Per-request user message length in words."),
        click.option("--max-tokens", type=int, default=8, show_default=True),
        click.option("--requests", type=int, default=8, show_default=True,
                     help="Measured requests per load level (at least 2 rounds of the load)."),
        click.option("--slo", "slo_texts", multiple=True,
                     help="e.g. 'ttft:p99<600ms' (repeat). Goodput counts requests within all."),
        click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
                     help="Experiment directory. Default: results/tune-<kind>-<time>."),
        click.option("--resume", is_flag=True,
                     help="Continue the experiment in --out; finished trials are not run again."),
        click.option("--url", default=None,
                     help="Measure a service you run (request-side changes only)."),
        click.option("--model", "model_path", type=click.Path(path_type=Path), default=None,
                     help="GGUF for llama-server. Default: the embedded Gemma 3 270M."),
        click.option("--per-slot-ctx", type=int, default=2048, show_default=True,
                     help="Context per llama-server slot; -c = this x -np."),
        click.option("--threads", type=int, default=None, help="llama-server -t for every trial."),
        click.option("--restart", default=None,
                     help="With --url: a shell command that restarts the engine with a trial's "
                     "flags ({args}: the flags; {launch}: --launch with them set), run before "
                     "each trial; ttft then waits for /health."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return html_option(f)


_SWEEP = [
    click.option(
        "--param",
        "params",
        multiple=True,
        help="FLAG=V1,V2,... to sweep (repeat). Default: the engine's tunables.",
    ),
    click.option(
        "--engine",
        "engine_kind",
        type=EngineKind(),
        default="llamacpp",
        show_default=True,
        help="Engine whose parameter space and flags to use.",
    ),
    click.option(
        "--launch",
        default=None,
        help="The engine's launch command without tuned flags (for --dry-run; with --engine vllm "
        "each trial starts it, e.g. 'vllm serve /models/m --max-model-len 4096'; default: the "
        "small local model of `ttft serve --engine vllm`).",
    ),
    click.option(
        "--dry-run", is_flag=True, help="Print each configuration's launch command; run nothing."
    ),
    click.option(
        "--max-configs",
        type=click.IntRange(min=1),
        default=64,
        show_default=True,
        help="Refuse a sweep of more configurations than this (the engine's whole default space is "
        "often hundreds): pick the axes with --param.",
    ),
    click.option(
        "--buckets",
        default=None,
        help="Prompt lengths in words (e.g. 400,1850 for ~512/2400 tokens): a second "
        "table comparing every configuration across them, unique prompts each.",
    ),
    click.option(
        "--load",
        "load_mode",
        type=click.Choice(["concurrency", "rate"]),
        default="concurrency",
        show_default=True,
        help="What the load search raises: closed-loop concurrency, or the open-loop arrival rate "
        "(requests/s, sent on a schedule fixed up front).",
    ),
    click.option("--start-load", type=int, default=1, show_default=True),
    click.option(
        "--max-load",
        type=int,
        default=16,
        show_default=True,
        help="Highest concurrency the load search tries.",
    ),
    click.option(
        "--start-rate",
        type=float,
        default=0.5,
        show_default=True,
        help="With --load rate: the first rate (requests/s); doubled until an SLO breaks.",
    ),
    click.option(
        "--max-rate",
        type=float,
        default=16.0,
        show_default=True,
        help="With --load rate: the highest rate the search tries.",
    ),
    click.option(
        "--rate-tolerance",
        type=float,
        default=0.1,
        show_default=True,
        help="With --load rate: bisection stops when the failing rate is within this fraction "
        "of the held one.",
    ),
    click.option(
        "--level-seconds",
        type=float,
        default=10.0,
        show_default=True,
        help="With --load rate: each rate level sends max(--requests, rate x this) requests.",
    ),
    click.option(
        "--max-client-lag-ms",
        type=float,
        default=10.0,
        show_default=True,
        help="With --load rate: a level whose median scheduled -> sent lag is above this was not "
        "sent at its rate; the search counts it as not held and stops doubling.",
    ),
    click.option(
        "--burstiness",
        type=float,
        default=1.0,
        show_default=True,
        help="With --load rate: gamma shape of the arrival gaps; 1 = Poisson, <1 burstier.",
    ),
    click.option(
        "--quality-gate",
        is_flag=True,
        help="Check each configuration's answers against the first one (ttft verify quality: "
        "512 tokens, 2 probes); a 'fail' is marked 'quality fail' and never chosen.",
    ),
    click.option(
        "--predict",
        "predict_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="A calibration from `ttft simulate calibrate`: rank the whole grid by the "
        "simulator's prediction and measure only the best --measure-top configurations.",
    ),
    click.option(
        "--measure-top",
        type=int,
        default=None,
        help="With --predict: how many of the best-predicted configurations to measure "
        "(default: half the grid, rounded up). Those the model cannot predict are measured too.",
    ),
]


def sweep_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_SWEEP):
        f = option(f)
    return f
