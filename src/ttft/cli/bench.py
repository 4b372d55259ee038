"""``ttft bench``: client-side streaming TTFT per bucket x concurrency, done right.

Without --url it starts the embedded engine and runs a quick profile sized for a small CPU;
with --url the article's profile (512 / 2400 / 8000 tokens, concurrency 1 / 8 / 32).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import click

from ttft.cli.bench_workloads import workload_options
from ttft.cli.html_output import html_option
from ttft.cli.target_options import target_options
from ttft.cli.trace_options import trace_options
from ttft.core.target_options import TargetOptions
from ttft.load.bench_options import PROFILES, BenchOptions


@click.group(invoke_without_command=True)
@target_options
@click.option(
    "--api", type=click.Choice(["chat", "completions"]), default="chat", show_default=True
)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default=None,
    help="Defaults for buckets/concurrency/requests: 'article' (512,2400,8000 x 1,8,32 "
    "x 200) or 'quick'. Default: article with --url, quick on the embedded engine.",
)
@click.option("--buckets", default=None, help="Prompt lengths in tokens, comma-separated.")
@click.option("--requests", "n_requests", type=int, default=None, help="Requests per cell.")
@click.option(
    "--concurrency", default=None, help="Closed-loop concurrency levels, comma-separated."
)
@click.option("--rate", "rates", multiple=True, help="Open loop: requests/s (repeat for levels).")
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="Open loop: gamma shape; 1 = Poisson, <1 burstier.",
)
@click.option(
    "--max-in-flight", type=int, default=None, help="Open loop: cap on requests in flight."
)
@click.option(
    "--max-tokens",
    type=int,
    default=1,
    show_default=True,
    help="Output tokens per request; 1 isolates TTFT (the article's setup).",
)
@click.option(
    "--warmup",
    type=int,
    default=1,
    show_default=True,
    help="Requests sent first and kept apart (not counted).",
)
@click.option(
    "--shared-prefix",
    default=None,
    help="P:S - a common system prompt of P tokens "
    "plus unique S-token user messages (prefix-cache work).",
)
@click.option(
    "--prompt-file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSONL, one OpenAI request body per line.",
)
@click.option(
    "--sharegpt", type=click.Path(path_type=Path), default=None, help="ShareGPT JSON file."
)
@click.option(
    "--tokenizer",
    "tokenizer_path",
    type=click.Path(path_type=Path),
    default=None,
    help="tokenizer.json or .gguf for exact lengths. Default: the server's /tokenize.",
)
@click.option(
    "--slo",
    "slo_texts",
    multiple=True,
    help="e.g. 'ttft:p99<600ms' (repeat). Exit code 1 when one fails.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds before one request counts as timed out.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for records.jsonl, summary.json/.csv/.md. Default: results/bench-TIME.",
)
@click.option(
    "--cold",
    "cold_samples",
    type=int,
    default=None,
    help="Cold-start mode: restart the embedded engine before each of N requests and measure "
    "only those first requests.",
)
@click.option(
    "--seed",
    default=None,
    help="Prompt seed: the same seed sends the same prompts. Default: a new one per run "
    "(ttft-XXXXXXXX, in the summary's meta.seed), so a run never finds an earlier run's prompts "
    "in the server's prefix cache (a second run against the same engine would time cache hits); "
    "prompts read from a file or log start with a mark made from it.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Client processes, each with its own event loop: the schedule is computed once and "
    "split between them, records merged as they finish. Use when the client-health verdict "
    "says suspect. With --ray: Ray actors (default: one per cluster CPU).",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="auto|ADDRESS",
    help="Run the client workers as Ray actors: 'auto' joins the running cluster (or starts a "
    "local one), HOST:PORT a head node. Needs pip install 'ttft[distributed]'.",
)
@click.option(
    "--fail-on-client-suspect",
    is_flag=True,
    help="Exit 3 when the client-health verdict is not healthy (the load generator itself was "
    "a bottleneck, so the numbers may be the client's, not the server's).",
)
@html_option
@trace_options
@workload_options
@click.pass_context
def bench(ctx: click.Context, /, target: TargetOptions, **opts: Any) -> None:
    """Measure streaming TTFT at the client, per prompt length x load level.

    TTFT is the time from sending to the first content token (a role-only first chunk is not a
    token); headers, first byte, first event and client-side waiting are reported beside it.
    Failed requests are counted, never dropped. Every request is appended to records.jsonl as it
    finishes, so Ctrl-C loses nothing measured.

    \b
    Examples:
      ttft bench                                   # embedded engine, quick profile
      ttft bench --url http://127.0.0.1:8000 --slo 'ttft:p99<600ms'
      ttft bench --url URL --rate 2 --rate 8 --requests 100
      ttft bench --url URL --ramp rate=1..10:stages=5,stage=30s --stop-on-saturation
      ttft bench --sessions 4 --turns 4 --max-tokens 32   # multi-turn, TTFT per turn
      ttft bench --repeat 5                        # run-to-run spread with its CI
      ttft bench --html                            # + results/.../report.html with charts
      ttft bench --trace mooncake.jsonl --api completions --speed 2   # replay a trace
      ttft bench --url URL --rate 400 --workers 2  # two client processes share the schedule
      ttft bench compare before/summary.json after/summary.json
    """
    if ctx.invoked_subcommand is not None:
        return
    from ttft.cli.bench_run import execute

    given = ctx.get_parameter_source("max_tokens") != click.core.ParameterSource.DEFAULT
    if opts["seed"] is None:  # one per run, chosen here so every worker process shares it
        opts["seed"] = f"ttft-{uuid.uuid4().hex[:8]}"
    execute(BenchOptions(target=target, **opts, max_tokens_given=given))


@bench.command("compare")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv"]), default="text")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when B's TTFT p50 or p95 is worse than A's beyond the confidence intervals.",
)
@html_option
def compare_cmd(
    a: Path, b: Path, fmt: str, fail_on_regression: bool, html_path: str | None
) -> None:
    """Compare two summary.json files per cell, with confidence intervals.

    A change is "likely real" when the bootstrap intervals of A and B do not overlap, "within
    noise" when they do, and "too few samples" below 5 requests per cell. --html also writes
    paired TTFT CDFs and the delta table as one page (FILE defaults to compare.html).
    """
    from ttft.core.compare import compare_json
    from ttft.report.csv import comparison_to_csv
    from ttft.report.markdown import comparison_to_markdown
    from ttft.report.saved import read_bench_summary
    from ttft.report.terminal import print_comparison

    docs = [read_bench_summary(path) for path in (a, b)]
    comparison = compare_json(docs[0], docs[1], a_label=str(a), b_label=str(b))
    if fmt == "markdown":
        click.echo(comparison_to_markdown(comparison))
    elif fmt == "csv":
        click.echo(comparison_to_csv(comparison), nl=False)
    else:
        print_comparison(comparison)
    if html_path is not None:
        _write_compare_html(docs, (a, b), Path(html_path or "compare.html"))
    if fail_on_regression and comparison.regressions():
        worse = ", ".join(f"{r.cell} {r.stat}" for r in comparison.regressions())
        click.echo(f"regression in TTFT: {worse}", err=True)
        raise click.exceptions.Exit(1)


def _write_compare_html(docs: list[Any], paths: tuple[Path, Path], out: Path) -> None:
    """Paired CDFs from each side's records.jsonl when it sits beside its summary."""
    from ttft.cli.html_output import write_page
    from ttft.report.html_compare import compare_page
    from ttft.report.saved import generated_now, records_beside

    records = [records_beside(path) for path in paths]
    text = compare_page(
        docs[0], docs[1], a_records=records[0], b_records=records[1],
        a_label=str(paths[0]), b_label=str(paths[1]), generated=generated_now(),
    )  # fmt: skip
    write_page(text, out)
