"""``ttft weights verify`` for people: a table of files, then each problem on its own line."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttft.report.findings import dumps, markdown_document, sarif_document
from ttft.weights.problems import VerifyReport


def size_text(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"  # pragma: no cover - the loop returns at GB


_SHORT_FORMATS = {"safetensors-index": "index"}


def stdout_console(report: VerifyReport) -> Console:
    """A terminal keeps its width; a pipe or CI log gets one wide enough for whole file names."""
    console = Console()
    if console.is_terminal:
        return console
    longest = max((len(f.path) for f in report.files), default=0)
    return Console(width=max(100, longest + 60))


def print_report(console: Console, report: VerifyReport) -> None:
    console.print(
        f"[bold]ttft weights verify[/] {escape(report.root)}", soft_wrap=True, highlight=False
    )
    table = Table()
    table.add_column("file", overflow="fold")
    table.add_column("format", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("tensors", justify="right", no_wrap=True)
    table.add_column("sha256", no_wrap=True)
    table.add_column("status", no_wrap=True)
    hash_style = {"ok": "green", "mismatch": "red", "missing": "red", "unlisted": "yellow"}
    for f in report.files:
        errors = sum(p.severity == "error" for p in f.problems)
        warnings = len(f.problems) - errors
        if errors:
            status = f"[red]{errors} error{'s' if errors > 1 else ''}[/]"
        elif warnings:
            status = f"[yellow]{warnings} warning{'s' if warnings > 1 else ''}[/]"
        else:
            status = "[green]ok[/]"
        sha = f.sha256 if f.sha256 != "unchecked" else "-"
        style = hash_style.get(f.sha256)
        table.add_row(
            escape(f.path),
            _SHORT_FORMATS.get(f.format, f.format),
            size_text(f.size_bytes),
            "-" if f.tensors is None else str(f.tensors),
            f"[{style}]{sha}[/]" if style else sha,
            status,
        )
    console.print(table)
    for p in report.problems:
        mark = "[red]error[/]" if p.severity == "error" else "[yellow]warning[/]"
        line = f"{mark} {escape(p.file)}: {escape(p.describe())} [dim]\\[{p.code}][/]"
        console.print(line, soft_wrap=True, highlight=False)
    errors, total = len(report.errors), len(report.problems)
    if errors:
        console.print(
            f"[red bold]FAILED[/]: {errors} error(s), {total - errors} warning(s) "
            f"in {len(report.files)} file(s)",
            highlight=False,
        )
    else:
        tail = f" ({total} warning(s))" if total else ""
        console.print(
            f"[green bold]OK[/]: {len(report.files)} file(s) verified{tail}", highlight=False
        )


def document_text(report: VerifyReport, fmt: str) -> str:
    """The report as json (schema ttft.weights.verify/1), sarif or markdown."""
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt == "sarif":
        return dumps(sarif_document(report.problems))
    return markdown_document(report.problems, subject=f"weights verify {report.root}")
