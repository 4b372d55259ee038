"""``ttft tune``: sweep engine configurations under SLOs, or attribute a chain of changes (A/B).

Trials run the real engine (the embedded llama-server unless --url): each trial starts it, warms
it up, measures, and stops it. Every trial lands in the experiment directory as it finishes, so
a killed run continues with --resume and re-runs only what is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ttft.cli.tune_options import sweep_options, workload_options


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
@sweep_options
@workload_options
def sweep(**opts: Any) -> None:
    """Every configuration of a parameter space: highest load within the SLOs, ranked.

    \b
      ttft tune sweep --param -np=1,4 --slo 'ttft:p99<600ms'
      ttft tune sweep --param -np=1,4 --slo 'ttft:p99<600ms' --load rate --start-rate 0.5 \\
          --max-rate 16
    """
    from ttft.cli.tune_run import execute_sweep
    from ttft.tune.options import SweepOptions

    execute_sweep(SweepOptions(**opts))


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
@workload_options
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
    from ttft.tune.options import AbOptions

    execute_ab(AbOptions(**opts))


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
