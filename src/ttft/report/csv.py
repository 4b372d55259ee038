"""CSV for spreadsheets: one row per cell, phase and metric, durations in ms.

Cell-level figures (requests, errors, throughput, goodput) repeat on every row of their cell so a
filtered or pivoted sheet keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ttft.core.compare import Comparison
from ttft.core.summary import BenchSummary
from ttft.core.tables import csv_records
from ttft.core.units import display_unit, to_display
from ttft.report.rows import ordered_metrics, phases, stat_numbers

SUMMARY_COLUMNS = (
    "cell",
    "phase",
    "metric",
    "unit",
    "n",
    "p50",
    "p90",
    "p95",
    "p99",
    "mean",
    "min",
    "max",
    "stdev",
    "p50_ci_low",
    "p50_ci_high",
    "p95_ci_low",
    "p95_ci_high",
    "outliers",
    "outlier_fence",
    "requests",
    "ok",
    "errors",
    "warmup",
    "duration_s",
    "request_throughput",
    "output_token_throughput",
    "goodput_per_s",
    "goodput_fraction",
)

COMPARISON_COLUMNS = (
    "cell",
    "phase",
    "metric",
    "stat",
    "unit",
    "a",
    "b",
    "delta",
    "ratio",
    "a_ci_low",
    "a_ci_high",
    "b_ci_low",
    "b_ci_high",
    "verdict",
)


def _blank(value: float | None) -> float | str:
    return "" if value is None else value


def summary_to_csv(summary: BenchSummary, metrics: Sequence[str] | None = None) -> str:
    """The summary as CSV text with a header row (``SUMMARY_COLUMNS``)."""
    rows: list[dict[str, Any]] = []
    for cell in phases(summary):
        shared = {
            "cell": cell.cell,
            "phase": cell.phase,
            "requests": cell.n,
            "ok": cell.ok,
            "errors": cell.failed,
            "warmup": cell.warmup,
            "duration_s": _blank(None if cell.duration_ns is None else cell.duration_ns / 1e9),
            "request_throughput": _blank(cell.request_throughput),
            "output_token_throughput": _blank(cell.output_token_throughput),
            "goodput_per_s": _blank(cell.goodput.per_s if cell.goodput else None),
            "goodput_fraction": _blank(cell.goodput.fraction if cell.goodput else None),
        }
        for name, entry in ordered_metrics(cell, metrics):
            rows.append(
                {
                    **shared,
                    "metric": name,
                    "unit": display_unit(entry.unit),
                    "n": entry.stats.n,
                    "outliers": entry.stats.outliers,
                    **stat_numbers(entry),
                }
            )
    return csv_records(SUMMARY_COLUMNS, rows)


def comparison_to_csv(comparison: Comparison) -> str:
    """A comparison as CSV text (``COMPARISON_COLUMNS``); a and b are the two sides."""
    rows: list[dict[str, Any]] = []
    for row in comparison.rows:
        values = {
            "a": row.a,
            "b": row.b,
            "delta": row.delta,
            "a_ci_low": row.a_ci.low,
            "a_ci_high": row.a_ci.high,
            "b_ci_low": row.b_ci.low,
            "b_ci_high": row.b_ci.high,
        }
        rows.append(
            {
                "cell": row.cell,
                "phase": row.phase,
                "metric": row.metric,
                "stat": row.stat,
                "unit": display_unit(row.unit),
                "ratio": _blank(row.ratio),
                "verdict": row.verdict,
                **{name: to_display(value, row.unit) for name, value in values.items()},
            }
        )
    return csv_records(COMPARISON_COLUMNS, rows)
