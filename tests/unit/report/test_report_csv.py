"""CSV: one row per cell, phase and metric; durations in ms; parses back with the csv module."""

from __future__ import annotations

import csv
import io

import pytest

from ttft.core.compare import compare
from ttft.core.summary import BenchSummary
from ttft.report.csv import COMPARISON_COLUMNS, SUMMARY_COLUMNS, comparison_to_csv, summary_to_csv


def _rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def test_summary_csv_has_one_row_per_cell_phase_and_metric(summary: BenchSummary) -> None:
    header, rows = _rows(summary_to_csv(summary))
    assert header == list(SUMMARY_COLUMNS)
    expected = sum(
        len(part.metrics) for cell in summary.cells for part in (cell, cell.cold) if part
    )
    assert len(rows) == expected
    assert {(r["cell"], r["phase"]) for r in rows} == {
        ("bucket=512 c=1", "warm"),
        ("bucket=512 c=1", "cold"),
        ("bucket=2k|c=8", "warm"),
        ("bucket=2k|c=8", "cold"),
    }


def test_summary_csv_shows_durations_in_ms_and_tokens_as_counts(summary: BenchSummary) -> None:
    _, rows = _rows(summary_to_csv(summary))
    cell = summary.cells[0]
    ttft = next(
        r for r in rows if (r["cell"], r["phase"], r["metric"]) == (cell.cell, "warm", "ttft")
    )
    stats = cell.metrics["ttft"].stats
    assert ttft["unit"] == "ms"
    assert float(ttft["p50"]) == pytest.approx(stats.p50 / 1e6)
    assert float(ttft["p95_ci_high"]) == pytest.approx(stats.p95_ci.high / 1e6)
    assert int(ttft["requests"]) == cell.n and int(ttft["errors"]) == cell.failed
    assert int(ttft["warmup"]) == 1
    assert cell.goodput is not None
    assert float(ttft["goodput_fraction"]) == pytest.approx(cell.goodput.fraction)
    tokens = next(r for r in rows if r["metric"] == "prompt_tokens")
    assert (tokens["unit"], float(tokens["p50"])) == ("tokens", 512.0)


def test_summary_csv_can_be_limited_to_some_metrics(summary: BenchSummary) -> None:
    _, rows = _rows(summary_to_csv(summary, metrics=["ttft", "e2e"]))
    assert {r["metric"] for r in rows} == {"ttft", "e2e"}


def test_comparison_csv_parses_back_with_a_and_b_in_ms(
    summary: BenchSummary, faster: BenchSummary
) -> None:
    comparison = compare(summary, faster, metrics=["ttft"])
    header, rows = _rows(comparison_to_csv(comparison))
    assert header == list(COMPARISON_COLUMNS)
    assert len(rows) == len(comparison.rows)
    first = comparison.rows[0]
    assert float(rows[0]["a"]) == pytest.approx(first.a / 1e6)
    assert float(rows[0]["delta"]) == pytest.approx(first.delta / 1e6)
    assert rows[0]["verdict"] == first.verdict
