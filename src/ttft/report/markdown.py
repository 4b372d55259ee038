"""Markdown: the terminal report as headings, tables and lists, for PRs, issues and wikis."""

from __future__ import annotations

from collections.abc import Sequence

from ttft.core.compare import Comparison
from ttft.core.summary import BenchSummary, CellSummary
from ttft.core.tables import markdown_table
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
from ttft.report.workloads import TURN_COLUMNS, cell_workload_lines, overview_lines, turn_values


def cell_markdown(cell: CellSummary, metrics: Sequence[str] | None = None) -> str:
    lines = [f"### {cell_title(cell)}", ""]
    lines.append(" · ".join(f"{label} **{value}**" for label, value in cell_facts(cell)))
    lines.append("")
    header = ["metric", "unit", "n", *STAT_COLUMNS, "outliers"]
    rows = [
        [
            name,
            display_unit(entry.unit),
            str(entry.stats.n),
            *stat_texts(entry),
            str(entry.stats.outliers),
        ]
        for name, entry in ordered_metrics(cell, metrics)
    ]
    lines += markdown_table(header, rows, right_from=2)
    notes = [f"- SLO {verdict_text(v, verdict_unit(cell, v))}" for v in cell.slos]
    notes += [f"- warning: {notice.message}" for notice in cell.warnings]
    notes += [f"- {text}" for text, _ in cell_workload_lines(cell)]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def summary_to_markdown(summary: BenchSummary, metrics: Sequence[str] | None = None) -> str:
    """The whole summary as Markdown: a section per cell and phase."""
    parts = ["## ttft bench", ""]
    if summary.slos:
        verdict = "all met" if summary.slos_passed else "**some FAILED**"
        parts += [f"SLOs: {', '.join(f'`{s}`' for s in summary.slos)}: {verdict}", ""]
    health = summary.client_health
    if health is not None:
        fix = "" if health.trusted else f" Fix: {health.fix}"
        parts += [f"Client: **{health.level}**: {health.reason}.{fix}", ""]
    parts += [cell_markdown(cell, metrics) for cell in phases(summary)]
    if summary.turns:
        rows = [turn_values(row) for row in summary.turns]
        parts += [
            "### TTFT per turn (medians; ms, tokens)",
            "",
            *markdown_table(TURN_COLUMNS, rows, right_from=1),
            "",
        ]
    parts += [f"- {text}" for text, _ in overview_lines(summary)]
    return "\n".join(parts)


def comparison_to_markdown(comparison: Comparison) -> str:
    """B against A as one Markdown table."""
    header = ["cell", "phase", "metric", "stat", "unit", comparison.a_label, comparison.b_label]
    header += ["delta", "ratio", "verdict"]
    rows = [
        [
            row.cell,
            row.phase,
            row.metric,
            row.stat,
            display_unit(row.unit),
            format_value(row.a, row.unit),
            format_value(row.b, row.unit),
            format_value(row.delta, row.unit),
            "-" if row.ratio is None else f"{row.ratio:.2f}x",
            row.verdict,
        ]
        for row in comparison.rows
    ]
    lines = [f"## {comparison.b_label} vs {comparison.a_label}", ""]
    lines += markdown_table(header, rows, right_from=5)
    for side, keys in (
        (comparison.a_label, comparison.only_in_a),
        (comparison.b_label, comparison.only_in_b),
    ):
        lines += [f"- cell {cell} ({phase}) is only in {side}" for cell, phase in keys]
    return "\n".join(lines) + "\n"
