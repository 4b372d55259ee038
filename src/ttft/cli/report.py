"""``ttft report``: render a saved run again (bench, doctor, tune), measuring nothing."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from ttft.cli.html_output import PAGE_FILE, write_page


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"Where the page goes. Default: {PAGE_FILE} in the results folder.",
)
def report(path: Path, html_path: Path | None) -> None:
    """Render a saved result as one self-contained HTML page with charts.

    PATH is a results folder (ttft bench --out, doctor --out, a tune experiment) or one file in
    it: summary.json, records.jsonl or a doctor report.json. The page needs no network to open:
    charts are inline SVG, the script and styles are inline.

    \b
    Examples:
      ttft report results/bench-20250101-120000
      ttft report results/tune-ab-20250101/summary.json --html ab.html
      ttft report doctor-out/report.json --html doctor.html
    """
    from ttft.report.saved import render_saved

    text = render_saved(path)
    folder = path if path.is_dir() else path.parent
    write_page(text, html_path or folder / PAGE_FILE, Console(stderr=True))
