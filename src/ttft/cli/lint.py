"""``ttft lint``: static checks that catch TTFT killers before they reach production.

Subcommands share one output contract (``--format text|json|sarif``, ``--fail-on``, ``--ignore``)
through ``output_options`` and ``emit``, so a new subcommand only has to produce ``Finding``s:

    @lint.command("prompts")
    @output_options
    def prompts(..., fmt: str, fail_on: str, ignore: tuple[str, ...]) -> None:
        findings = ...
        exit_with(emit(findings, fmt, fail_on, ignore=ignore, subject="prompts"))

Exit codes: 0 no finding at or above ``--fail-on``, 1 such findings exist, 2 the input itself
could not be used (missing file, unreadable command line), with a message and no traceback.
"""

from __future__ import annotations

from pathlib import Path

import click

from ttft.cli.engine_choice import EngineKind
from ttft.cli.lint_common import emit, exit_with, gate, output_options, user_errors
from ttft.core.findings import without_rules


@click.group()
def lint() -> None:
    """Static checks that catch TTFT killers: nginx configs, engine flags, prompts.

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 unusable input.
    """


@lint.command("nginx")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--upstream-engine",
    type=EngineKind(extra=("unknown",)),
    default="unknown",
    show_default=True,
    help="The engine behind the proxy: llama-server sends X-Accel-Buffering: no, vLLM and "
    "SGLang do not, which changes what buffering does to its streams.",
)
@click.option(
    "--min-read-timeout",
    default="300s",
    show_default=True,
    help="proxy_read_timeout below this is flagged (nginx time syntax: 300s, 10m).",
)
@click.option(
    "--location",
    "locations",
    multiple=True,
    metavar="TEXT",
    help="Only check locations whose path contains TEXT (repeatable), e.g. --location /v1/.",
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print the automatic fixes as a unified diff instead of the report (paths relative to "
    "PATH's folder: apply with `patch -p1` there). The exit code still follows --fail-on.",
)
@click.option(
    "--write-fixed",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    metavar="DIR",
    help="Write the configuration (includes followed) with the automatic fixes applied under DIR, "
    "each file at its path relative to PATH's folder; files outside it by name.",
)
@output_options
def nginx(
    path: Path,
    upstream_engine: str,
    min_read_timeout: str,
    locations: tuple[str, ...],
    show_diff: bool,
    write_fixed: Path | None,
    fmt: str,
    fail_on: str,
    ignore: tuple[str, ...],
) -> None:
    """Check the LLM routes of an nginx config (includes followed) for streaming killers.

    PATH is the main configuration file, e.g. /etc/nginx/nginx.conf. --diff and --write-fixed
    apply the findings' automatic changes (not kept by --ignore: not applied) to a copy.
    """
    from ttft.lint.nginx import fixed_copy
    from ttft.lint.nginx.config import load
    from ttft.lint.nginx.rulekit import nginx_lint_options
    from ttft.lint.nginx.rules import lint_config
    from ttft.proxy.nginx_edit import apply_edits, unified_diff

    with user_errors():
        options = nginx_lint_options(upstream_engine, min_read_timeout, locations)
        config = load(path)
        findings = lint_config(config, options)
        fix = None
        if show_diff or write_fixed is not None:
            kept = without_rules(findings, ignore)
            fix = fixed_copy.build_fix(path, config, kept, apply_edits)
            for line in fixed_copy.summary(fix):
                click.echo(line, err=True)
            if write_fixed is not None:
                click.echo(fixed_copy.write_fixed(fix, write_fixed), err=True)
    if fix is not None and show_diff:
        diff = unified_diff(fix.original, fix.patched)
        if diff:  # nothing when there is nothing to fix
            click.echo(diff, nl=False)
        exit_with(gate(findings, fail_on, ignore=ignore))
        return
    exit_with(emit(findings, fmt, fail_on, ignore=ignore, subject=f"nginx {path}"))


@lint.command(
    "engine",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--expected-concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Concurrent requests the service must carry (or its SLO's design load): compared "
    "with the engine's concurrency cap.",
)
@click.option(
    "--gpu/--cpu",
    default=None,
    help="GPU deployment, or CPU-only (GPU levers such as -ngl and CUDA graphs are moot) "
    "[detected from the command: VLLM_TARGET_DEVICE, --device, CPU-backend variables; else GPU].",
)
@click.option(
    "--engine",
    "engine_kind",
    type=EngineKind(with_flags=True),
    default=None,
    help="Which engine the command starts, when its launcher is not recognised.",
)
@click.option(
    "--from-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Read the command from a shell script or Dockerfile (findings then carry its lines).",
)
@output_options
@click.argument("cmdline", nargs=-1, type=click.UNPROCESSED)
def engine(
    expected_concurrency: int | None,
    gpu: bool | None,
    engine_kind: str | None,
    from_file: Path | None,
    fmt: str,
    fail_on: str,
    ignore: tuple[str, ...],
    cmdline: tuple[str, ...],
) -> None:
    """Check an engine's launch flags (vLLM, SGLang, llama-server) for TTFT costs.

    \b
    Examples:
      ttft lint engine -- vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager
      ttft lint engine --expected-concurrency 32 -- llama-server -m m.gguf -np 4
      ttft lint engine --from-file deploy/start.sh --format sarif
    """
    from ttft.engines.cmdline import COMMAND_LINE, command_tokens, parse
    from ttft.engines.registry import adapter_for
    from ttft.engines.rulekit import EngineLintOptions
    from ttft.lint.engine.run import lint_command

    with user_errors():
        tokens, source = command_tokens(from_file, list(cmdline))
        command = parse(tokens, engine_kind, source)
        findings = lint_command(
            command, EngineLintOptions(expected_concurrency=expected_concurrency, gpu=gpu)
        )
    subject = f"{adapter_for(command.engine).display_name} command line" + (
        f" from {source}" if source != COMMAND_LINE else ""
    )
    exit_with(emit(findings, fmt, fail_on, ignore=ignore, subject=subject))


# Subcommands kept in their own modules attach here; they import the shared options above.
from ttft.cli.lint_prompts import prompts  # noqa: E402

lint.add_command(prompts)
