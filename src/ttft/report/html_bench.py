"""The HTML page of a bench run: headline table, TTFT CDFs, staircase, ladder, ITL, goodput,
and a per-request timeline.

It renders from the summary as written to ``summary.json`` (a parsed JSON mapping, not the
dataclass), so ``ttft bench --html`` and ``ttft report DIR`` read the same input and give the
same page. ``records`` (from ``records.jsonl``) feed the sample-level charts; without them the
CDFs are drawn from the summary's percentiles and the timeline is left out, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ttft.core.records import RequestRecord
from ttft.core.units import NS_PER_MS, format_percent, format_rate, format_value
from ttft.report import bench_charts as bc
from ttft.report.html_page import (
    Cell,
    charts,
    figure,
    page,
    paragraph,
    section,
    table,
    toggled_figure,
)
from ttft.report.svg import Rule, Segment, Series, color, lanes_chart, line_chart
from ttft.report.workloads import workload_notes

HEADLINE_STATS = ("p50", "p90", "p95", "p99", "mean")
LADDER_COLORS = ("#bbbbbb", "#9ecae1", "#4292c6", "#08519c", "#e6550d")
SERVER_COLOR = "#31a354"


def _ms(value: Any) -> float:
    return float(value) / NS_PER_MS


def ttft_rules(summary: Mapping[str, Any]) -> list[Rule]:
    """SLO thresholds on TTFT, as chart rules in ms."""
    rules = []
    for slo in summary.get("cells", [{}])[0].get("slos", []) if summary.get("cells") else []:
        if slo.get("metric") == "ttft":
            rules.append(Rule(_ms(slo["threshold"]), f"SLO {slo['slo']}"))
    return rules


def _headline_table(cells: Sequence[Mapping[str, Any]]) -> str:
    columns = ["cell", "phase", "n", "ok", "errors"]
    columns += [f"TTFT {s} ms" for s in HEADLINE_STATS] + ["p50 95% CI ms", "goodput/s", "SLOs"]
    rows: list[list[Cell | str]] = []
    for i, cell in enumerate(cells):
        for part, path in ((cell, f"cells[{i}]"), (cell.get("cold"), f"cells[{i}].cold")):
            if part is None:
                continue
            row: list[Cell | str] = [part["cell"], part["phase"]]
            row += [Cell(str(part["n"]), part["n"], f"{path}.n")]
            row += [Cell(str(part["ok"]), part["ok"], f"{path}.ok")]
            row.append(", ".join(f"{k} {v}" for k, v in part["errors"].items()) or "0")
            ttft = part["metrics"].get("ttft")
            for stat in HEADLINE_STATS:
                if ttft is None:
                    row.append("-")
                else:
                    key = f"{path}.metrics.ttft.{stat}"
                    row.append(Cell(format_value(ttft[stat], "ns"), ttft[stat], key))
            if ttft is None:
                row.append("-")
            else:
                ci = ttft["p50_ci"]
                row.append(f"{format_value(ci['low'], 'ns')}-{format_value(ci['high'], 'ns')}")
            goodput = part.get("goodput")
            if goodput is None:
                row.append("-")
            else:
                shown = f"{format_rate(goodput['per_s'])} ({format_percent(goodput['fraction'])})"
                row.append(Cell(shown, goodput["per_s"], f"{path}.goodput.per_s"))
            verdicts = [("pass " if s["passed"] else "FAIL ") + s["slo"] for s in part["slos"]]
            row.append("; ".join(verdicts) or "-")
            rows.append(row)
    return table("cells", columns, rows)


def _cdf_section(
    summary: Mapping[str, Any], by_cell: Mapping[str, list[RequestRecord]] | None
) -> str:
    series = []
    for i, cell in enumerate(summary["cells"]):
        ttft = cell["metrics"].get("ttft")
        if by_cell is not None and cell["cell"] in by_cell:
            points = bc.thin_cdf(bc.ttft_ms(bc.counted(by_cell[cell["cell"]], cell["phase"])))
        else:
            points = bc.summary_cdf(ttft) if ttft is not None else []
        if points:
            series.append(Series(cell["cell"], points, color(i), step=True))
    if not series:
        return paragraph("No successful request: no TTFT to plot.", "note")
    rules = ttft_rules(summary)
    common: dict[str, Any] = {
        "x_label": "TTFT (ms)",
        "y_label": "fraction of requests",
        "x_rules": rules,
        "y_range": (0.0, 1.0),
    }
    linear = line_chart("ttft-cdf", "TTFT CDF per cell", series, **common)
    log = line_chart("ttft-cdf-log", "TTFT CDF per cell (log x)", series, x_log=True, **common)
    how = "from every request" if by_cell is not None else "from the summary's percentiles only"
    return toggled_figure(
        "cdf", linear, log, f"TTFT CDF per cell (warm requests, {how}); dashed: the TTFT SLO."
    )


def _by_load(cells: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[Mapping[str, Any]]]]:
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for cell in cells:
        load = bc.parse_cell(cell["cell"])
        if load.kind:
            grouped.setdefault(load.kind, {}).setdefault(load.bucket, []).append(cell)
    return grouped


def _load_charts(summary: Mapping[str, Any]) -> list[str]:
    """The staircase (TTFT percentiles against load, knee marked) and goodput against load."""
    figures = []
    rules = ttft_rules(summary)
    for kind, buckets in _by_load(summary["cells"]).items():
        unit = "concurrency" if kind == "concurrency" else "rate (requests/s)"
        stairs: list[Series] = []
        goodput: list[Series] = []
        knees: list[Rule] = []
        has_slo = False
        for i, (bucket, cells) in enumerate(buckets.items()):
            loads = [(bc.parse_cell(c["cell"]).load, c) for c in cells if "ttft" in c["metrics"]]
            loads.sort(key=lambda pair: pair[0])
            for stat, shade in (("p50", 0), ("p99", 5)):
                points = [(x, _ms(c["metrics"]["ttft"][stat])) for x, c in loads]
                stairs.append(Series(f"{bucket} {stat}", points, color(i + shade), markers=True))
            where = bc.knee([(x, _ms(c["metrics"]["ttft"]["p50"])) for x, c in loads])
            if where is not None:
                knees.append(Rule(where, f"knee {bucket}", "#555"))
            good = []
            for x, c in loads:
                has_slo = has_slo or c.get("goodput") is not None
                per_s = (c.get("goodput") or {}).get("per_s") or c.get("request_throughput")
                good.append((x, float(per_s or 0.0)))
            goodput.append(Series(bucket, good, color(i), markers=True))
        if len(stairs[0].points) < 2 if stairs else True:
            continue
        figures.append(
            figure(
                line_chart(
                    f"staircase-{kind}",
                    f"TTFT against {unit}",
                    stairs,
                    x_label=unit,
                    y_label="TTFT (ms)",
                    y_rules=rules,
                    x_rules=knees,
                ),
                f"TTFT p50 and p99 against {unit}, per bucket; knee: the last level before p50 "
                f"grows more than {bc.KNEE_RATIO}x at the next one.",
            )
        )
        what = "goodput (good requests/s)" if has_slo else "throughput (requests/s, no SLO)"
        figures.append(
            figure(
                line_chart(
                    f"goodput-{kind}", f"{what} against {unit}", goodput, x_label=unit, y_label=what
                ),
                f"{what} against {unit}, per bucket.",
            )
        )
    return figures


def _ladder_chart(summary: Mapping[str, Any]) -> str:
    rows: list[tuple[str, list[Segment]]] = []
    names = [name for name, _ in bc.LADDER]
    server_seen = False
    for cell in summary["cells"]:
        metrics = cell["metrics"]
        segments = [
            Segment(start, end, LADDER_COLORS[names.index(name)], f"{name}: {end - start:.1f} ms")
            for name, start, end in bc.ladder_segments(metrics)
        ]
        rows.append((cell["cell"], segments))
        prefill = bc.server_prefill_ms(metrics)
        if prefill is not None:
            server_seen = True
            rows.append(
                ("  server", [Segment(0.0, prefill, SERVER_COLOR, f"prefill {prefill:.1f} ms")])
            )
    legend = [(name, LADDER_COLORS[i]) for i, name in enumerate(names)]
    if server_seen:
        legend.append(("server prefill", SERVER_COLOR))
    svg = lanes_chart(
        "ladder",
        "The timestamp ladder per cell (means)",
        rows,
        x_label="time since scheduled (ms, means)",
        legend=legend,
    )
    return figure(
        svg,
        "Where the first-token time went, per cell: mean of each rung of the ladder (means add "
        "up to the mean TTFT). Green: the server's own prompt time (timings.prompt_ms) where it "
        "reports one; the queue is not reported separately by every engine.",
    )


def _itl_chart(summary: Mapping[str, Any], by_cell: Mapping[str, list[RequestRecord]]) -> str:
    series = []
    for i, cell in enumerate(summary["cells"]):
        gaps = bc.itl_ms(bc.counted(by_cell.get(cell["cell"], []), cell["phase"]))
        if gaps:
            series.append(Series(cell["cell"], bc.thin_cdf(gaps), color(i), step=True))
    if not series:
        return paragraph("No request streamed more than one chunk: no inter-token latency.", "note")
    svg = line_chart(
        "itl-cdf",
        "Inter-token latency distribution",
        series,
        x_label="ITL (ms)",
        y_label="fraction of gaps",
        x_log=True,
        y_range=(0.0, 1.0),
    )
    return figure(svg, "Distribution (CDF, log x) of every gap between text chunks, per cell.")


def _timeline_chart(records: Sequence[RequestRecord], cells: Sequence[str]) -> str:
    rows = bc.timeline(records)
    if not rows:
        return ""
    lanes = []
    for row in rows:
        segments = []
        if row.wait is not None:
            segments.append(Segment(*row.wait, "#bbbbbb", "client wait"))
        if row.ttft is not None:
            fill = (
                "#d62728"
                if row.failed
                else color(cells.index(row.cell) if row.cell in cells else 0)
            )
            segments.append(
                Segment(
                    *row.ttft,
                    fill,
                    f"#{row.index} {row.cell}: TTFT {row.ttft[1] - row.ttft[0]:.1f} ms",
                )
            )
        if row.decode is not None:
            segments.append(Segment(*row.decode, "#c7e9c0", "decode"))
        lanes.append((f"#{row.index}", segments))
    height = max(2.0, min(14.0, 600 / len(lanes)))
    legend = [(c, color(i)) for i, c in enumerate(cells)] + [("failed", "#d62728")]
    svg = lanes_chart(
        "timeline",
        "Per-request timeline",
        lanes,
        x_label="run time (ms)",
        legend=legend,
        row_height=height,
    )
    shown = f"{len(rows)} of {len(records)}" if len(rows) < len(records) else f"all {len(rows)}"
    return figure(
        svg,
        f"Per-request timeline ({shown} requests, in send order): grey client "
        "wait, coloured TTFT, pale green the rest of the stream.",
    )


def bench_body(summary: Mapping[str, Any], records: Sequence[RequestRecord] | None) -> list[str]:
    by_cell = None if records is None else bc.records_by_cell(records)
    body = [section("Cells", _headline_table(summary["cells"]))]
    figures = [_cdf_section(summary, by_cell), *_load_charts(summary), _ladder_chart(summary)]
    if by_cell is not None:
        figures.append(_itl_chart(summary, by_cell))
    body.append(section("Charts", charts(*figures)))
    if records is not None:
        body.append(
            section("Timeline", _timeline_chart(records, [c["cell"] for c in summary["cells"]]))
        )
    else:
        body.append(
            paragraph(
                "records.jsonl was not found beside the summary: the timeline "
                "and the sample-level charts are left out.",
                "note",
            )
        )
    notes = [f"{c['cell']}: {w['message']}" for c in summary["cells"] for w in c["warnings"]]
    notes += workload_notes(summary)
    if notes:
        body.append(
            section("Warnings", "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
        )
    health = _health_lines(summary)
    if health:
        items = "".join(f"<li>{escape(line)}</li>" for line in health)
        body.append(section("Client health", f"<ul>{items}</ul>"))
    return body


def _health_lines(summary: Mapping[str, Any]) -> list[str]:
    """The client-health verdict of each cell and of the run, with the fix when not healthy."""
    lines = []
    for label, verdict in [
        *((c["cell"], c.get("client_health")) for c in summary["cells"]),
        ("the run", summary.get("client_health")),
    ]:
        if verdict:
            fix = "" if verdict["level"] == "healthy" else f" Fix: {verdict['fix']}"
            lines.append(f"{label}: {verdict['level']}: {verdict['reason']}.{fix}")
    return lines


def bench_page(
    summary: Mapping[str, Any],
    records: Sequence[RequestRecord] | None,
    *,
    generated: str,
    source: str = "",
) -> str:
    meta = summary.get("meta", {})
    subtitle = f"target {meta.get('target', '?')}, model {meta.get('model', '?')}"
    if summary.get("slos"):
        subtitle += "; SLOs " + ", ".join(summary["slos"])
    if source:
        subtitle += f"; from {source}"
    return page(
        "ttft bench", subtitle, bench_body(summary, records), kind="bench", generated=generated
    )
