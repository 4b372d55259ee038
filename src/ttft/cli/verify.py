"""``ttft verify quality``: does a speed lever change the answers, and what does it buy?"""

from __future__ import annotations

from pathlib import Path

import click

from ttft.cli.target_options import access_options
from ttft.core.target_options import AccessOptions
from ttft.report.verify import render
from ttft.verify.run import QualityOptions, parse_lengths, run_quality
from ttft.verify.sides import SYNTAX, parse_side


@click.group()
def verify() -> None:
    """Verdicts on whether a change keeps the answers."""


@verify.command()
@click.option(
    "--baseline", default="embedded", show_default=True, help=f"Reference side: {SYNTAX}."
)
@click.option("--candidate", required=True, help=f"Side under test: {SYNTAX}.")
@click.option(
    "--lengths",
    default="1024,4096",
    show_default=True,
    help="Context lengths in tokens (1k = 1024).",
)
@click.option(
    "--samples",
    default=4,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Probes per length.",
)
@click.option(
    "--tokens",
    "n_tokens",
    default=16,
    show_default=True,
    type=click.IntRange(1, 512),
    help="Greedy tokens compared per probe.",
)
@click.option(
    "--top-k",
    "n_probs",
    default=10,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Top-k probabilities per position for the KL divergence.",
)
@click.option(
    "--parallel",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Slots of an embedded side (the same on both).",
)
@click.option(
    "--threads",
    default=None,
    type=click.IntRange(1, 512),
    help="Threads of an embedded side (default: the engine's).",
)
@click.option(
    "--requests-log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSONL of OpenAI chat bodies (your own prompts): each is asked of both sides through "
    "the chat endpoint and summarized as a 'your prompts' row. Prompts longer than the "
    "window (an embedded side's is sized by --lengths) are skipped and counted.",
)
@click.option(
    "--max-prompts",
    default=50,
    show_default=True,
    type=click.IntRange(1, 100000),
    help="Check the first N prompts of --requests-log.",
)
@access_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
)
def quality(
    baseline: str,
    candidate: str,
    lengths: str,
    samples: int,
    n_tokens: int,
    n_probs: int,
    parallel: int,
    threads: int | None,
    requests_log: Path | None,
    max_prompts: int,
    fmt: str,
    access: AccessOptions,
) -> int:
    """Compare a candidate's answers with a baseline's at several context lengths.

      \b
      Sides are a running service (llama-server, vLLM, SGLang) or an embedded engine
    ttft starts:
        ttft verify quality --candidate embedded:-ctk=q8_0,-ctv=q8_0
        ttft verify quality --baseline http://127.0.0.1:8080 --candidate http://127.0.0.1:8081
        ttft verify quality --candidate embedded:-ctk=q4_0,-ctv=q4_0 --requests-log log.jsonl

      A URL side that is not llama-server (vLLM, SGLang) is asked through /v1/completions
      and /v1/chat/completions with OpenAI logprobs/top_logprobs. An embedded side reports
      its KV cache size (from llama-server's start-up log) for the trade line.

      --api-key and --header go with every request to a URL side (a service behind a key).

      Exit code 1 when a length fails, 0 for pass or degraded.
    """
    options = QualityOptions(
        lengths=parse_lengths(lengths),
        samples=samples,
        n_tokens=n_tokens,
        n_probs=n_probs,
        parallel=parallel,
        threads=threads,
        requests_log=requests_log,
        max_prompts=max_prompts,
    )

    def progress(label: str, done: int, total: int) -> None:
        click.echo(f"\r{label}: probe {done}/{total}", err=True, nl=done == total)

    key, headers = access.api_key, access.header_dict()
    base = parse_side(baseline, api_key=key, headers=headers)
    cand = parse_side(candidate, api_key=key, headers=headers)
    report, _ = run_quality(base, cand, options, progress)
    click.echo(render(report, fmt), nl=False)
    return 1 if report.verdict == "fail" else 0
