"""``--html [FILE]``, shared by every command that writes results: where the page goes, and
writing it.

The page is always rendered from the files the command has just written (``render_saved``), so
``ttft report`` on the same folder later gives the same bytes but for the generation time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console

PAGE_FILE = "report.html"


def html_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--html",
        "html_path",
        is_flag=False,
        flag_value="",
        default=None,
        metavar="[FILE]",
        help="Also write a self-contained HTML report with charts (opens offline). "
        f"FILE defaults to {PAGE_FILE} in the results folder.",
    )(f)


def html_target(value: str | None, folder: Path) -> Path | None:
    """Where ``--html`` asked the page to go; ``None`` when it was not given."""
    if value is None:
        return None
    return Path(value) if value else folder / PAGE_FILE


def write_page(text: str, path: Path, console: Console | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    (console or Console(stderr=True)).print(f"html report: {path}")


def write_saved_page(value: str | None, source: Path, folder: Path, console: Console) -> None:
    """Render ``source`` (a results folder or file) to where ``--html`` asked, if it asked."""
    target = html_target(value, folder)
    if target is None:
        return
    from ttft.report.saved import render_saved

    write_page(render_saved(source), target, console)
