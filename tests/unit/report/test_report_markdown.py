"""Markdown: a section per cell and phase with a well-formed table, verdicts and warnings."""

from __future__ import annotations

import re

from ttft.core.compare import compare
from ttft.core.summary import BenchSummary
from ttft.report.markdown import comparison_to_markdown, summary_to_markdown


def _table_rows(text: str) -> list[list[str]]:
    """Table lines split on unescaped pipes, as a Markdown renderer would."""
    return [
        re.split(r"(?<!\\)\|", line.strip()[1:-1])
        for line in text.splitlines()
        if line.startswith("| ")
    ]


def test_summary_markdown_has_a_section_and_table_per_cell_and_phase(
    summary: BenchSummary,
) -> None:
    text = summary_to_markdown(summary)
    assert text.count("### ") == 4
    assert "### bucket=512 c=1 · warm" in text
    assert "| metric | unit | n | p50 | p90 | p95 | p99 | mean | min | max | outliers |" in text
    assert "| --- | --- | ---: |" in text
    header_width = 11
    assert all(len(row) == header_width for row in _table_rows(text))


def test_summary_markdown_headings_keep_cell_labels_verbatim(summary: BenchSummary) -> None:
    text = summary_to_markdown(summary)
    assert "### bucket=2k|c=8 · warm" in text  # a heading may hold a pipe


def test_summary_markdown_lists_slos_and_warnings(summary: BenchSummary) -> None:
    text = summary_to_markdown(summary)
    assert "SLOs: `ttft:p99<350ms`, `tpot:p95<50ms`: **some FAILED**" in text
    assert "- SLO ttft:p99<350ms: p99 = " in text
    assert "- warning: 2 of 57 requests failed (timeout 2)" in text


def test_comparison_markdown_is_one_table_with_both_labels(
    summary: BenchSummary, faster: BenchSummary
) -> None:
    text = comparison_to_markdown(compare(summary, faster, metrics=["ttft"]))
    assert text.startswith("## tuned vs base")
    assert (
        "| cell | phase | metric | stat | unit | base | tuned | delta | ratio | verdict |" in text
    )
    assert "bucket=2k\\|c=8" in text  # the pipe in a label cannot split a cell
    assert all(len(row) == 10 for row in _table_rows(text))
