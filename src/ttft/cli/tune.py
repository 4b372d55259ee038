"""``ttft tune``: sweep engine configurations under SLOs, or attribute a chain of changes (A/B).

Trials run the real engine (the embedded llama-server unless --url): each trial starts it, warms
it up, measures, and stops it. Every trial lands in the experiment directory as it finishes, so
a killed run continues with --resume and re-runs only what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ttft.cli.engine_choice import EngineKind
from ttft.cli.html_output import html_option


def _workload_options(f: Callable[..., Any]) -> Callable[..., Any]:
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


@click.group()
def tune() -> None:
    """Tune engine settings and request shape against SLOs; every trial on disk, resumable.

    \b
      ttft tune sweep --param -np=1,2,4 --param -ub=128,512 --slo 'ttft:p99<600ms'
      ttft tune sweep --engine vllm --launch 'vllm serve MODEL' --dry-run
      ttft tune ab --workload timestamp-first --baseline 'baseline | -np=1' \\
          --change 'timestamp moved last | move-dynamic' --change '-np 4 | -np=4'
      ttft tune frontend --request-log requests.jsonl
    """


@tune.command()
@click.option(
    "--param",
    "params",
    multiple=True,
    help="FLAG=V1,V2,... to sweep (repeat). Default: the engine's tunables.",
)
@click.option(
    "--engine",
    "engine_kind",
    type=EngineKind(),
    default="llamacpp",
    show_default=True,
    help="Engine whose parameter space and flags to use.",
)
@click.option(
    "--launch",
    default=None,
    help="The engine's launch command without tuned flags (for --dry-run; with --engine vllm "
    "each trial starts it, e.g. 'vllm serve /models/m --max-model-len 4096'; default: the small "
    "local model of `ttft serve --engine vllm`).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print each configuration's launch command; run nothing."
)
@click.option(
    "--max-configs",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Refuse a sweep of more configurations than this (the engine's whole default space is "
    "often hundreds): pick the axes with --param.",
)
@click.option(
    "--buckets",
    default=None,
    help="Prompt lengths in words (e.g. 400,1850 for ~512/2400 tokens): a second "
    "table comparing every configuration across them, unique prompts each.",
)
@click.option(
    "--load",
    "load_mode",
    type=click.Choice(["concurrency", "rate"]),
    default="concurrency",
    show_default=True,
    help="What the load search raises: closed-loop concurrency, or the open-loop arrival rate "
    "(requests/s, sent on a schedule fixed up front).",
)
@click.option("--start-load", type=int, default=1, show_default=True)
@click.option(
    "--max-load",
    type=int,
    default=16,
    show_default=True,
    help="Highest concurrency the load search tries.",
)
@click.option(
    "--start-rate",
    type=float,
    default=0.5,
    show_default=True,
    help="With --load rate: the first rate (requests/s); doubled until an SLO breaks.",
)
@click.option(
    "--max-rate",
    type=float,
    default=16.0,
    show_default=True,
    help="With --load rate: the highest rate the search tries.",
)
@click.option(
    "--rate-tolerance",
    type=float,
    default=0.1,
    show_default=True,
    help="With --load rate: bisection stops when the failing rate is within this fraction "
    "of the held one.",
)
@click.option(
    "--level-seconds",
    type=float,
    default=10.0,
    show_default=True,
    help="With --load rate: each rate level sends max(--requests, rate x this) requests.",
)
@click.option(
    "--max-client-lag-ms",
    type=float,
    default=10.0,
    show_default=True,
    help="With --load rate: a level whose median scheduled -> sent lag is above this was not "
    "sent at its rate; the search counts it as not held and stops doubling.",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="With --load rate: gamma shape of the arrival gaps; 1 = Poisson, <1 burstier.",
)
@click.option(
    "--quality-gate",
    is_flag=True,
    help="Check each configuration's answers against the first one (ttft verify quality: "
    "512 tokens, 2 probes); a 'fail' is marked 'quality fail' and never chosen.",
)
@_workload_options
def sweep(**opts: Any) -> None:
    """Every configuration of a parameter space: highest load within the SLOs, ranked.

    \b
      ttft tune sweep --param -np=1,4 --slo 'ttft:p99<600ms'
      ttft tune sweep --param -np=1,4 --slo 'ttft:p99<600ms' --load rate --start-rate 0.5 \\
          --max-rate 16
    """
    from ttft.cli.tune_run import execute_sweep

    execute_sweep(opts)


@tune.command()
@click.option(
    "--baseline",
    default="baseline",
    show_default=True,
    help="'LABEL | ITEM ...': the starting point (items as in --change).",
)
@click.option(
    "--change",
    "changes",
    multiple=True,
    help="'LABEL | ITEM ...', ITEM = FLAG=VALUE, move-dynamic, url=URL or tier=N "
    "(repeat, one per step).",
)
@click.option(
    "--plan",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A plan written by `ttft doctor --plan` (and edited by you): its service, workload "
    "and steps, in the order written. Replaces --change and the workload options.",
)
@click.option(
    "--fixed-order",
    is_flag=True,
    help="Keep the changes in the order given (default: cheapest first).",
)
@click.option("--concurrency", type=int, default=4, show_default=True)
@click.option(
    "--repeats",
    type=int,
    default=2,
    show_default=True,
    help="Interleaved rounds over all steps (A B C A B C ...).",
)
@_workload_options
def ab(**opts: Any) -> None:
    """A chain of changes from a baseline: what each step gains, in sequence and alone.

    Each step is measured cumulatively (baseline, +1, +1+2, ...) and each later change alone on
    the baseline, in interleaved repeats; the table gives TTFT p50/p95 with 95% bootstrap CIs,
    each step's gain, and a verdict: kept (CIs apart, faster), no effect, or regressed (then
    undone in the later steps). A change ttft cannot apply itself (a proxy or engine it does not
    run) pauses the chain with the exact change and the command that resumes it (exit code 3).

    \b
      ttft doctor --url URL --nginx-conf site.conf --engine-cmd '...' --plan plan.toml
      ttft tune ab --plan plan.toml --out results/ab
      ttft tune ab --plan plan.toml --out results/ab --resume     # after a pause
    """
    from ttft.cli.tune_ab import execute_ab

    execute_ab(opts)


@tune.command()
@click.option(
    "--request-log",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="JSONL of OpenAI chat bodies: the prompts to time.",
)
@click.option(
    "--url",
    default=None,
    help="A running llama-server: its /props template, and its /tokenize timed too. Default: "
    "the embedded engine, started only when --chat-template is not given.",
)
@click.option(
    "--model",
    "model_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="GGUF whose vocabulary both tokenizers are built from. Default: the served model's "
    "file, or the embedded Gemma 3 270M.",
)
@click.option(
    "--chat-template",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A .jinja, tokenizer_config.json or .gguf. Default: the server's GET /props template.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Warm runs per request and stage (after one cold run).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="json: schema ttft.tune.frontend/1.",
)
def frontend(
    request_log: Path,
    url: str | None,
    model_path: Path | None,
    chat_template: Path | None,
    repeats: int,
    fmt: str,
) -> None:
    """Frontend cost per request: Jinja render, pre-rendered render, Python vs Rust tokenizer.

    Times each stage on your own requests (one cold call, then --repeats warm ones; medians and
    p95), checks that both tokenizers give the same ids, and states each alternative's saving
    in ms per request: changes that `ttft tune ab` can then include.

    \b
      ttft tune frontend --request-log requests.jsonl
      ttft tune frontend --request-log requests.jsonl --url http://127.0.0.1:8080 --format json
    """
    from ttft.cli.tune_frontend import execute_frontend

    execute_frontend(request_log, url, model_path, chat_template, repeats, fmt)
