"""``ttft lint prompts``: dynamic content and template instability that keep the prefix cache cold.

Attached to the ``ttft lint`` group by ``ttft.cli.lint`` (import that module, not this one, first).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from ttft.cli.lint_common import exit_with, gate, output_options, user_errors
from ttft.core.findings import without_rules
from ttft.lint.prompts.inputs import load_requests, prompt_sources
from ttft.lint.prompts.prefix_cache import CACHE_MODEL_HELP, CACHE_MODELS


def _say(line: str) -> None:
    click.echo(line, err=True)


@click.command("prompts")
@click.argument("log", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--messages",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="One conversation to check (a chat body or a JSON list of messages) instead of a log.",
)
@click.option(
    "--template",
    "template_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Chat template: a .jinja file, a tokenizer_config.json or a .gguf. "
    "Default: the template the server (--url) or the embedded engine applies.",
)
@click.option("--template-name", default=None, help="A named template of a tokenizer_config.json.")
@click.option(
    "--tokenizer",
    "tokenizer_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The model's tokenizer.json. Default: beside a tokenizer_config.json, else the server's "
    "/tokenize.",
)
@click.option(
    "--url",
    default=None,
    help="A running llama-server: its GET /props template and its /tokenize. Without --url and "
    "--template the embedded engine is started for them.",
)
@click.option(
    "--api-key",
    envvar="TTFT_API_KEY",
    default=None,
    help="Bearer key for a --url server started with --api-key (env TTFT_API_KEY).",
)
@click.option(
    "--cache-model",
    type=click.Choice(sorted(CACHE_MODELS)),
    default=None,
    help="How the engine reuses a shared prefix: "
    + "; ".join(f"{k}: {v}" for k, v in sorted(CACHE_MODEL_HELP.items()))
    + ". Default: checkpoint when the server's model (its GGUF) has a sliding window, "
    "token otherwise.",
)
@click.option(
    "--prefill-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="TOKENS_PER_S",
    help="Prefill speed that turns saved tokens into saved TTFT. Default: measured on the "
    "server when there is one.",
)
@output_options
def prompts(
    log: Path | None,
    messages: Path | None,
    template_path: Path | None,
    template_name: str | None,
    tokenizer_path: Path | None,
    url: str | None,
    api_key: str | None,
    cache_model: str | None,
    prefill_rate: float | None,
    fmt: str,
    fail_on: str,
    ignore: tuple[str, ...],
) -> None:
    """Find what keeps the prefix cache cold in a chat template and its requests.

    Renders each request as the engine would (Hugging Face chat-template semantics), tokenizes it,
    and reports dynamic content in the cacheable prefix (timestamps, ids, names, counters),
    logically equal requests that render differently, and the prefix-cache hit rate of the log
    now and after the suggested fixes, with the TTFT that saves.

    \b
    Examples:
      ttft lint prompts requests.jsonl
      ttft lint prompts --url http://127.0.0.1:8080 requests.jsonl --prefill-rate 420
      ttft lint prompts --messages chat.json --template tokenizer_config.json
    """
    from ttft.lint.prompts.analysis import lint_prompts
    from ttft.lint.prompts.findings import findings as to_findings
    from ttft.lint.prompts.prefix_cache import cache_model_for
    from ttft.lint.prompts.server import prefill_rate_for
    from ttft.report.prompts import document_text, print_text

    with user_errors():
        requests = load_requests(log, messages)
        sources = prompt_sources(template_path, template_name, tokenizer_path, url, api_key, _say)
        with sources as src:
            model = cache_model_for(cache_model, src.sliding_window)
            rate = prefill_rate_for(prefill_rate, src.server, len(requests))
            analysis = lint_prompts(
                requests, src.template, src.tokens, cache_model=model, prefill_rate=rate
            )
            found = without_rules(to_findings(analysis, src.tokens), ignore)
    subject = f"prompts {log or messages} (template: {analysis.template.origin})"
    if fmt == "text":
        print_text(found, analysis, model.name, Console(highlight=False), subject)
    else:
        click.echo(document_text(found, analysis, fmt, subject))
    exit_with(gate(found, fail_on))
