"""Words and tables for the workloads beyond a fixed count: saturation verdicts, the run-to-run
spread of repeats, and TTFT per turn of multi-turn sessions. Shared by the terminal and Markdown
renderers so they say the same thing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.table import Table

from ttft.core.errors import TtftError
from ttft.core.repeats import RunSpread
from ttft.core.saturation import Saturation
from ttft.core.summary import BenchSummary, CellSummary
from ttft.core.turns import TurnRow
from ttft.core.units import format_ms, format_number, format_rate


def saturation_text(verdict: Saturation) -> str:
    """``SATURATED at this load: ...`` with the slope and the queue's growth."""
    slope = "-" if verdict.slope is None else f"{verdict.slope * 1000:.0f} ms per s"
    queue = (
        f"in flight {verdict.in_flight_start} -> {verdict.in_flight_end}"
        if verdict.in_flight_start is not None
        else "queue unknown"
    )
    return (
        f"SATURATED at this load: the wait rises {slope} over the second half (z "
        f"{verdict.z or 0:.1f}); completions {format_rate(verdict.completions_per_s)}/s < "
        f"arrivals {format_rate(verdict.arrivals_per_s)}/s; {queue}"
    )


def spread_text(spread: RunSpread) -> str:
    """``ttft p50 over 3 runs: median 412 ms, min-max 398-431 ms, 95% CI 398-431 ms``."""
    runs = ", ".join(
        f"#{run.repeat + 1} {format_ms(run.p50)} [{format_ms(run.p50_ci.low)}-"
        f"{format_ms(run.p50_ci.high)}]"
        for run in spread.runs
    )
    relative = spread.relative_spread
    share = "" if relative is None else f" ({relative:.0%} of the median)"
    return (
        f"{spread.metric} p50 over {len(spread.runs)} runs: median {format_ms(spread.median_p50)} "
        f"ms, min-max {format_ms(spread.min_p50)}-{format_ms(spread.max_p50)} ms{share}, "
        f"{spread.ci.level:.0%} CI {format_ms(spread.ci.low)}-{format_ms(spread.ci.high)} ms; "
        f"per run (within-run CI): {runs}"
    )


def cell_workload_lines(cell: CellSummary) -> list[tuple[str, str]]:
    """(text, style) lines a cell adds under its table."""
    lines = []
    if cell.repeats is not None:
        lines.append((spread_text(cell.repeats), "cyan"))
    if cell.saturation is not None and cell.saturation.saturated:
        lines.append((saturation_text(cell.saturation), "bold red"))
    return lines


def overview_lines(summary: BenchSummary) -> list[tuple[str, str]]:
    """Where the load stopped holding, per group of open-loop cells."""
    lines = []
    entries: list[dict[str, Any]] = summary.meta.get("saturation") or []
    for entry in entries:
        group = entry.get("group") or "cells"
        held = entry.get("last_held") or "none (the lowest rate already saturated)"
        text = f"{group}: last load that held: {held}"
        if entry.get("saturated_at"):
            text += f"; saturated at {entry['saturated_at']}"
        if entry.get("skipped"):
            text += f"; skipped (--stop-on-saturation): {', '.join(entry['skipped'])}"
        lines.append((text, "bold"))
    return lines


TURN_COLUMNS = ("turn", "n", "failed", "ttft", "prompt", "cached", "new", "ms/new", "ms/prompt")


def turn_values(row: TurnRow) -> list[str]:
    return [
        str(row.turn),
        str(row.n),
        str(row.failed),
        format_ms(row.ttft_p50),
        format_number(row.prompt_tokens_p50),
        format_number(row.cached_tokens_p50),
        format_number(row.new_tokens_p50),
        format_ms(row.ns_per_new_token_p50),
        format_ms(row.ns_per_prompt_token_p50),
    ]


def turns_table(summary: BenchSummary) -> Table:
    """Medians per turn: TTFT, the prompt, what the prefix cache held, and the cost per token."""
    table = Table(
        title="multi-turn, medians per turn (ttft in ms; prompt, cached and new in tokens; "
        "new = computed, not cached; ms/new and ms/prompt: ttft per token)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    for column in TURN_COLUMNS:
        table.add_column(column, justify="right")
    for row in summary.turns:
        table.add_row(*turn_values(row))
    return table


def workload_notes(summary: Mapping[str, Any]) -> list[str]:
    """The same saturation and where-it-held lines, from a summary read back as JSON (the HTML
    page works on the saved dict)."""
    try:
        loaded = BenchSummary.from_dict(summary)
    except (TtftError, KeyError, TypeError, ValueError):
        return []  # a partial or foreign summary: the page shows what it can without these
    notes = [
        f"{cell.cell}: {text}" for cell in loaded.cells for text, _ in cell_workload_lines(cell)
    ]
    return notes + [text for text, _ in overview_lines(loaded)]
