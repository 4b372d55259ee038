"""The terminal report: a rich table per cell and phase, SLO verdicts and warnings in words."""

from __future__ import annotations

from rich.console import Console

from ttft.core.compare import compare
from ttft.core.records import RequestRecord
from ttft.core.summary import BenchSummary, summarize
from ttft.report.terminal import cell_table, print_comparison, print_summary

MS = 1_000_000


def _text(render: object, *args: object) -> str:
    console = Console(record=True, width=200, color_system=None)
    render(*args, console)  # type: ignore[operator]
    return console.export_text()


def test_cell_table_has_metric_rows_and_the_percentile_columns(summary: BenchSummary) -> None:
    table = cell_table(summary.cells[0])
    headers = [str(column.header) for column in table.columns]
    assert headers == ["metric", "n", "p50", "p90", "p95", "p99", "mean", "min", "max"]
    assert "times in ms" in str(table.title)
    metrics = list(table.columns[0].cells)
    assert metrics[0] == "ttft"
    assert "itl" in metrics and "e2e" in metrics


def test_cell_table_gains_an_outliers_column_only_when_there_are_outliers() -> None:
    records = [
        RequestRecord(index=i, sent_ns=0, first_content_ns=(9000 if i == 0 else 100 + i % 5) * MS)
        for i in range(50)
    ]
    table = cell_table(summarize(records, resamples=50))
    assert str(table.columns[-1].header) == "outliers"
    assert next(iter(table.columns[-1].cells)) == "1"  # the ttft row


def test_the_table_fits_eighty_columns_without_folding(summary: BenchSummary) -> None:
    console = Console(record=True, width=80, color_system=None)
    console.print(cell_table(summary.cells[0]))
    lines = console.export_text().splitlines()
    rows = [line for line in lines if line.startswith(("ttft ", "e2e ", "itl "))]
    assert len(rows) == 3  # one line each: nothing folded onto a second line
    assert all(len(line.rstrip()) <= 80 for line in lines)


def test_summary_prints_each_cell_and_phase_with_counts_and_ms(summary: BenchSummary) -> None:
    text = _text(print_summary, summary)
    for title in ("bucket=512 c=1 · warm", "bucket=512 c=1 · cold", "bucket=2k|c=8 · warm"):
        assert title in text
    cell = summary.cells[0]
    assert f"requests {cell.n}" in text and f"ok {cell.ok}" in text
    assert "errors 2 (timeout 2)" in text
    assert "warm-up excluded 1" in text
    assert "req/s" in text and "goodput" in text
    p50_ms = f"{cell.metrics['ttft'].stats.p50 / 1e6:.1f}"
    assert p50_ms in text


def test_summary_prints_slo_verdicts_and_warnings_in_words(summary: BenchSummary) -> None:
    text = _text(print_summary, summary)
    assert "SLO ttft:p99<350ms: p99 = " in text
    assert "FAIL" in text  # a 300 ms median cannot keep p99 under 350 ms
    assert "tpot:p95<50ms" in text and "pass" in text
    assert "requests failed (timeout 2); they count as not good in goodput" in text
    assert "some SLOs FAILED" in text


def test_comparison_prints_both_labels_delta_ratio_and_verdict(
    summary: BenchSummary, faster: BenchSummary
) -> None:
    text = _text(print_comparison, compare(summary, faster, metrics=["ttft"]))
    assert "tuned vs base" in text
    for word in ("delta", "ratio", "verdict", "likely real", "x"):
        assert word in text
    assert text.count("ttft") >= 4  # p50 and p95 for two cells
