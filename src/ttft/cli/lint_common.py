"""Options and output shared by every ``ttft lint`` subcommand (one contract, one place).

Kept apart from ``cli/lint.py`` so subcommands in their own modules can import it without a
cycle through the group that attaches them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from rich.console import Console

from ttft.core.errors import TtftError
from ttft.core.findings import Finding, Severity, without_rules
from ttft.report.findings import (
    FORMATS,
    dumps,
    exit_code,
    json_document,
    markdown_document,
    render_text,
    sarif_document,
)

F = TypeVar("F", bound=Callable[..., Any])

FAIL_ON = ("error", "warning", "info", "never")


class LintInputError(click.ClickException):
    """The input could not be linted at all: exit code 2, distinct from 1 (findings)."""

    exit_code = 2


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn ``TtftError`` into a clean CLI error (also under click's test runner)."""
    try:
        yield
    except TtftError as exc:
        raise LintInputError(str(exc)) from exc


def output_options(func: F) -> F:
    """``--format``, ``--fail-on`` and ``--ignore``, passed as ``fmt``, ``fail_on``, ``ignore``."""
    func = click.option(
        "--ignore",
        "ignore",
        multiple=True,
        metavar="RULE",
        help="Drop findings of this rule id (repeatable; 'nginx/*' drops a whole area).",
    )(func)
    func = click.option(
        "--fail-on",
        "fail_on",
        type=click.Choice(FAIL_ON),
        default="warning",
        show_default=True,
        help="Exit with 1 when a finding at or above this severity exists ('never': always 0).",
    )(func)
    func = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="text for people, json (schema ttft.lint/1) for programs, markdown for tickets, "
        "sarif for CI annotations.",
    )(func)
    return func


def emit(
    findings: Sequence[Finding],
    format: str,
    fail_on: str,
    *,
    ignore: Sequence[str] = (),
    subject: str = "",
) -> int:
    """Print findings in ``format`` to stdout and return the exit code ``fail_on`` implies."""
    kept = without_rules(findings, ignore)
    if format == "json":
        click.echo(dumps(json_document(kept, subject=subject)))
    elif format == "sarif":
        click.echo(dumps(sarif_document(kept)))
    elif format == "markdown":
        click.echo(markdown_document(kept, subject=subject))
    else:
        render_text(kept, Console(highlight=False), subject=subject)
    return gate(kept, fail_on)


def gate(findings: Sequence[Finding], fail_on: str, *, ignore: Sequence[str] = ()) -> int:
    """The exit code ``fail_on`` implies, without printing (for output that replaces the report)."""
    threshold = None if fail_on == "never" else Severity.parse(fail_on)
    return exit_code(without_rules(findings, ignore), threshold)


def exit_with(code: int) -> None:
    """Exit with ``code`` (SystemExit works the same under ``ttft`` and click's test runner)."""
    if code:
        sys.exit(code)
