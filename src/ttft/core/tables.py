"""Tables as text: one Markdown table writer and one CSV writer for every report.

Bench summaries, tune sweeps and A/B steps, verify verdicts and the frontend cost table all
write their tables here, so a pipe inside a cell is escaped the same way everywhere (it would
end the cell) and a number column is right-aligned the same way. Pure: strings in, text out.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence


def _escape(text: str) -> str:
    # A pipe would end a table cell; the other Markdown specials are harmless in these texts.
    return text.replace("|", "\\|")


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right_from: int | None = None
) -> list[str]:
    """The table's lines: header, alignment row, one line per row. Columns from ``right_from``
    on are right-aligned (numbers); None: every column is left-aligned."""
    first_right = len(header) if right_from is None else right_from
    align = ["---" if i < first_right else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(_escape(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_escape(cell) for cell in row) + " |" for row in rows]
    return lines


def markdown_records(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> list[str]:
    """``markdown_table`` of rows given as column -> text (a missing column is empty)."""
    return markdown_table(columns, [[row.get(c, "") for c in columns] for row in rows])


def csv_records(columns: Sequence[str], rows: Sequence[Mapping[str, object]]) -> str:
    """CSV text with a header row; ``\\n`` line ends (spreadsheets take them, diffs stay clean)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
