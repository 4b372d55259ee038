"""The HTML page of ``ttft bench compare``: paired TTFT CDFs per shared cell, and the delta
table with both sides' confidence intervals and the verdict of ``ttft.core.compare``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ttft.core.compare import compare_json
from ttft.core.records import RequestRecord
from ttft.core.units import DURATION_UNIT, format_value
from ttft.report import bench_charts as bc
from ttft.report.html_bench import ttft_rules
from ttft.report.html_page import Cell, charts, figure, page, paragraph, section, table
from ttft.report.svg import Series, color, line_chart

MAX_CDF_CHARTS = 12
A_COLOR, B_COLOR = color(0), color(1)


def _points(
    doc: Mapping[str, Any], records: Sequence[RequestRecord] | None, cell: str, phase: str
) -> list[tuple[float, float]]:
    if records is not None:
        mine = [r for r in records if r.cell == cell]
        return bc.thin_cdf(bc.ttft_ms(bc.counted(mine, phase)))
    for part in doc["cells"]:
        for candidate in (part, part.get("cold")):
            if candidate and (candidate["cell"], candidate["phase"]) == (cell, phase):
                ttft = candidate["metrics"].get("ttft")
                return [] if ttft is None else bc.summary_cdf(ttft)
    return []


def compare_page(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    a_records: Sequence[RequestRecord] | None = None,
    b_records: Sequence[RequestRecord] | None = None,
    a_label: str = "A",
    b_label: str = "B",
    generated: str,
) -> str:
    comparison = compare_json(a, b, a_label=a_label, b_label=b_label)
    cells = list(dict.fromkeys((r.cell, r.phase) for r in comparison.rows))
    figures = []
    for i, (cell, phase) in enumerate(cells[:MAX_CDF_CHARTS]):
        series = [
            Series(label, points, hue, step=True)
            for label, doc, records, hue in (
                (comparison.a_label, a, a_records, A_COLOR),
                (comparison.b_label, b, b_records, B_COLOR),
            )
            if (points := _points(doc, records, cell, phase))
        ]
        if series:
            svg = line_chart(f"compare-cdf-{i}", f"TTFT CDF {cell} ({phase})", series,
                             x_label="TTFT (ms)", y_label="fraction of requests",
                             x_rules=ttft_rules(a), y_range=(0.0, 1.0))  # fmt: skip
            figures.append(figure(svg, f"{cell} ({phase}): A and B, paired."))
    rows: list[list[Cell | str]] = []
    for r in comparison.rows:
        unit = r.unit

        def show(value: float, unit: str = unit) -> str:
            return format_value(value, unit)

        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        rows.append([
            r.cell, r.phase, r.metric, r.stat,
            Cell(show(r.a), r.a), f"{show(r.a_ci.low)}-{show(r.a_ci.high)}",
            Cell(show(r.b), r.b), f"{show(r.b_ci.low)}-{show(r.b_ci.high)}",
            Cell(show(r.delta), r.delta), ratio, r.verdict,
        ])  # fmt: skip
    columns = ["cell", "phase", "metric", "stat", "A", "A 95% CI", "B", "B 95% CI", "B - A",
               "B / A", "verdict"]  # fmt: skip
    units = "durations in ms" if any(r.unit == DURATION_UNIT for r in comparison.rows) else ""
    body = [section("Paired TTFT CDFs", charts(*figures))] if figures else []
    body.append(section("Deltas", paragraph(units, "note"), table("compare", columns, rows)))
    only = [f"only in A: {c} ({p})" for c, p in comparison.only_in_a]
    only += [f"only in B: {c} ({p})" for c, p in comparison.only_in_b]
    body += [paragraph(line, "note") for line in only]
    subtitle = f"A = {comparison.a_label}, B = {comparison.b_label}"
    return page("ttft bench compare", subtitle, body, kind="compare", generated=generated)
