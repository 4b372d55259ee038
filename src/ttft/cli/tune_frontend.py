"""``ttft tune frontend``: where the template and the tokenizer spend time on your own prompts.

The inputs and the measurement are ``ttft.tune.frontend_inputs``; the text and Markdown forms
``ttft.report.frontend``. Here: run it, turn an input problem into exit code 2, print.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ttft.core.errors import TtftError
from ttft.report.frontend import render_markdown, render_text
from ttft.tune.frontend_inputs import run_frontend
from ttft.tune.frontend_report import to_json


class FrontendInputError(click.ClickException):
    """Bad input (a missing file, no template): exit code 2 and one line, never a traceback."""

    exit_code = 2


def _announce(line: str) -> None:
    click.echo(line, err=True)


def execute_frontend(
    request_log: Path,
    url: str | None,
    model: Path | None,
    chat_template: Path | None,
    repeats: int,
    fmt: str,
) -> None:
    try:
        report = run_frontend(request_log, url, model, chat_template, repeats, _announce)
    except TtftError as exc:
        fix = f" (fix: {exc.fix})" if exc.fix else ""
        raise FrontendInputError(f"{exc.problem}{fix}".replace("\n", " ")) from None
    if fmt == "json":
        click.echo(json.dumps(to_json(report), indent=2))
    elif fmt == "markdown":
        click.echo(render_markdown(report))
    else:
        click.echo(render_text(report))
