"""Rich tables for the terminal: one per cell and phase, then SLO verdicts and warnings in words."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ttft.core.client_verdict import HEALTHY, INVALID, ClientVerdict
from ttft.core.compare import LIKELY_REAL, Comparison, StatComparison
from ttft.core.summary import BenchSummary, CellSummary
from ttft.core.units import display_unit, format_value
from ttft.report.rows import (
    STAT_COLUMNS,
    cell_facts,
    cell_title,
    ordered_metrics,
    phases,
    stat_texts,
    verdict_text,
    verdict_unit,
)
from ttft.report.workloads import cell_workload_lines, overview_lines, turns_table


def cell_table(cell: CellSummary, metrics: Sequence[str] | None = None) -> Table:
    """The metric rows of one cell and phase: times in ms, token metrics in tokens."""
    rows = ordered_metrics(cell, metrics)
    with_outliers = any(entry.stats.outliers for _, entry in rows)
    # Two spaces between columns and no unit column (token metrics say so in their names), so
    # the table fits 80 columns; a squeezed number folds onto a second line, never truncates.
    table = Table(
        title=f"{cell_title(cell)}  (times in ms)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("n", justify="right", overflow="fold")
    for column in STAT_COLUMNS:
        table.add_column(column, justify="right", overflow="fold")
    if with_outliers:
        table.add_column("outliers", justify="right", overflow="fold")
    for name, entry in rows:
        outliers = [str(entry.stats.outliers or "")] if with_outliers else []
        style = "bold" if name == "ttft" else None
        table.add_row(name, str(entry.stats.n), *stat_texts(entry), *outliers, style=style)
    return table


def cell_notes(cell: CellSummary) -> list[Text]:
    """Counts and rates, SLO verdicts (green pass, red FAIL), then the warnings, one line each."""
    lines = [Text("  ".join(f"{label} {value}" for label, value in cell_facts(cell)))]
    for verdict in cell.slos:
        text = verdict_text(verdict, verdict_unit(cell, verdict))
        lines.append(Text(f"SLO {text}", style="green" if verdict.passed else "bold red"))
    for notice in cell.warnings:
        lines.append(Text(f"! {notice.message}", style="yellow"))
    lines += [Text(text, style=style) for text, style in cell_workload_lines(cell)]
    if cell.client_health is not None:
        lines.append(health_text(cell.client_health))
    return lines


def health_text(verdict: ClientVerdict, scope: str = "client") -> Text:
    """``client healthy: ...`` in green, suspect in yellow, invalid in red, with the fix."""
    style = {HEALTHY: "green", INVALID: "bold red"}.get(verdict.level, "bold yellow")
    text = f"{scope} {verdict.level}: {verdict.reason}"
    if verdict.level != HEALTHY:
        text += f"; fix: {verdict.fix}"
    return Text(text, style=style)


def summary_renderables(
    summary: BenchSummary, metrics: Sequence[str] | None = None
) -> list[RenderableType]:
    """Everything ``ttft bench`` prints for a summary, in order."""
    parts: list[RenderableType] = []
    for cell in phases(summary):
        parts.append(Group(cell_table(cell, metrics), *cell_notes(cell)))
    if summary.turns:
        parts.append(turns_table(summary))
    parts += [Text(text, style=style) for text, style in overview_lines(summary)]
    if summary.slos:
        overall = "all SLOs met" if summary.slos_passed else "some SLOs FAILED"
        style = "bold green" if summary.slos_passed else "bold red"
        parts.append(Text(overall, style=style))
    if summary.client_health is not None:
        parts.append(health_text(summary.client_health, "the run's client was"))
    return parts


def print_summary(
    summary: BenchSummary, console: Console | None = None, metrics: Sequence[str] | None = None
) -> None:
    out = console or Console()
    for part in summary_renderables(summary, metrics):
        out.print(part)
        out.print()


def _ratio_text(row: StatComparison) -> str:
    return "-" if row.ratio is None else f"{row.ratio:.2f}x"


def _delta_text(row: StatComparison) -> str:
    text = format_value(row.delta, row.unit)
    if set(text.lstrip("-")) <= {"0", "."}:
        return text.lstrip("-")  # a change too small to show has no direction
    return f"+{text}" if row.delta > 0 else text


def _verdict_style(row: StatComparison) -> str | None:
    if row.verdict != LIKELY_REAL:
        return "dim"
    if row.improved is None:
        return None
    return "green" if row.improved else "red"


def comparison_table(comparison: Comparison) -> Table:
    """B against A per cell, metric and percentile; green/red only when likely real."""
    table = Table(
        title=f"{comparison.b_label} vs {comparison.a_label}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    table.add_column("cell")
    table.add_column("phase")
    table.add_column("metric", no_wrap=True)
    table.add_column("unit")
    for column in (comparison.a_label, comparison.b_label, "delta", "ratio"):
        table.add_column(column, justify="right", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    for row in comparison.rows:
        table.add_row(
            row.cell,
            row.phase,
            f"{row.metric} {row.stat}",
            display_unit(row.unit),
            format_value(row.a, row.unit),
            format_value(row.b, row.unit),
            _delta_text(row),
            _ratio_text(row),
            row.verdict,
            style=_verdict_style(row),
        )
    return table


def comparison_renderables(comparison: Comparison) -> list[RenderableType]:
    parts: list[RenderableType] = [comparison_table(comparison)]
    for side, keys in (
        (comparison.a_label, comparison.only_in_a),
        (comparison.b_label, comparison.only_in_b),
    ):
        for cell, phase in keys:
            parts.append(Text(f"! cell {cell} ({phase}) is only in {side}", style="yellow"))
    return parts


def print_comparison(comparison: Comparison, console: Console | None = None) -> None:
    out = console or Console()
    for part in comparison_renderables(comparison):
        out.print(part)
