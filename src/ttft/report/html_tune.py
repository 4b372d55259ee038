"""The HTML pages of ``tune ab`` (the attribution waterfall) and ``tune sweep`` (the Pareto plot
and each configuration's load search).

Both render from the experiment's ``summary.json`` as parsed JSON. The table rows there are
already text (``"1830"``, ``"1500-2100"``); the charts read those same strings, so a bar cannot
show a number the table does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.core.units import NS_PER_MS
from ttft.report.html_page import Cell, charts, figure, page, paragraph, section, table
from ttft.report.svg import Bar, Rule, Series, bar_chart, color, line_chart

AB_SCHEMA = "ttft.tune.ab/1"
VERDICT_COLORS = {"kept": "#2ca02c", "no effect": "#999999", "regressed": "#d62728"}
BASE_COLOR, FINAL_COLOR = "#1f77b4", "#08306b"
WATERFALL_CAPTION = (
    "Baseline, then what each step changed against the previous kept step (green kept, grey no "
    "effect, red regressed and undone), then the final result; whiskers: the p50 95% bootstrap "
    "interval."
)


def _float(text: Any) -> float | None:
    """A number from a table cell's text; ``None`` for an empty cell."""
    if text in (None, ""):
        return None
    try:
        return float(str(text).replace("+", ""))
    except ValueError:
        return None


def _interval(text: Any) -> tuple[float | None, float | None]:
    low, _, high = str(text or "").rpartition("-") if text else ("", "", "")
    # A CI is "LOW-HIGH" with non-negative ends, so the last '-' separates them.
    return _float(low), _float(high)


def _row_cells(name: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    body: list[list[Cell | str]] = []
    for i, row in enumerate(rows):
        cells: list[Cell | str] = []
        for column in columns:
            value = row.get(column, "")
            numeric = _float(value) is not None
            cells.append(Cell(str(value), value, f"table[{i}].{column}") if numeric else str(value))
        body.append(cells)
    return table(name, columns, body)


def waterfall_bars(doc: Mapping[str, Any]) -> list[Bar]:
    """Baseline, each step as the p50 change it made (floating from where the previous kept
    step ended), then the final result; whiskers are the p50 95% intervals."""
    bars: list[Bar] = []
    for row in doc["table"]:
        p50 = _float(row.get("ttft_p50_ms"))
        if p50 is None:
            continue
        low, high = _interval(row.get("p50_ci_ms"))
        if row["step"] == "step 0":
            bars.append(Bar("baseline", p50, 0.0, low, high, BASE_COLOR, f"baseline: {p50:.0f} ms"))
            continue
        before = _float(row.get("vs_previous_ms"))
        base = p50 - before if before is not None else 0.0
        verdict = str(row.get("verdict", ""))
        tip = f"{row['step']} {row['change']}: {p50:.0f} ms ({verdict})"
        bars.append(
            Bar(
                str(row["change"]) or str(row["step"]),
                p50,
                base,
                low,
                high,
                VERDICT_COLORS.get(verdict, "#bbbbbb"),
                tip,
            )
        )
    total = doc.get("total")
    if total:
        final = float(total["final_p50_ms"])
        bars.append(
            Bar(
                "final",
                final,
                0.0,
                None,
                None,
                FINAL_COLOR,
                f"final ({total['final_step']}): {final:.0f} ms, {total['p50_pct']:+.0f}%",
            )
        )
    return bars


def ab_body(doc: Mapping[str, Any]) -> list[str]:
    bars = waterfall_bars(doc)
    legend = [("baseline", BASE_COLOR), *VERDICT_COLORS.items(), ("final", FINAL_COLOR)]
    body = []
    if bars:
        svg = bar_chart(
            "attribution", "Attribution waterfall (TTFT p50)", bars,
            y_label="TTFT p50 (ms)", legend=legend,
        )  # fmt: skip
        body.append(section("Attribution", charts(figure(svg, WATERFALL_CAPTION))))
    else:
        body.append(paragraph("No step was measured: nothing to chart.", "note"))
    columns = list(doc["table"][0]) if doc["table"] else []
    body.append(section("Table", _row_cells("attribution", columns, doc["table"])))
    notes = []
    total = doc.get("total")
    if total:
        notes.append(
            f"total: p50 {total['baseline_p50_ms']:.0f} -> {total['final_p50_ms']:.0f} ms "
            f"({total['p50_pct']:+.0f}%), p95 {total['baseline_p95_ms']:.0f} -> "
            f"{total['final_p95_ms']:.0f} ms ({total['p95_pct']:+.0f}%) at {total['final_step']}; "
            f"the article: {total['article_p50_pct']:+.0f}% p50"
        )
    if doc.get("overlap_note"):
        notes.append(str(doc["overlap_note"]))
    if doc.get("undone_steps"):
        notes.append("undone (regressed): steps " + ", ".join(map(str, doc["undone_steps"])))
    body += [paragraph(note) for note in notes]
    return body


def _ttft_rules(slos: Sequence[str]) -> list[Rule]:
    try:
        parsed = parse_slos(list(slos)) if slos else ()
    except TtftError:
        return []
    return [Rule(s.threshold / NS_PER_MS, f"SLO {s.text}") for s in parsed if s.metric == "ttft"]


def pareto_series(doc: Mapping[str, Any]) -> list[Series]:
    front: list[tuple[float, float, str]] = []
    rest: list[tuple[float, float, str]] = []
    for row in doc["table"]:
        goodput, p99 = _float(row.get("goodput_per_s")), _float(row.get("ttft_p99_ms"))
        if goodput is None or p99 is None:
            continue
        (front if row.get("pareto") == "yes" else rest).append((goodput, p99, str(row["config"])))
    series = []
    for name, points, hue, line in (("Pareto front", front, 1, True), ("other", rest, 8, False)):
        if points:
            points.sort()
            series.append(
                Series(
                    name,
                    [(x, y) for x, y, _ in points],
                    color(hue),
                    markers=True,
                    line=line,
                    labels=[f"{label}: {x:.2f}/s, p99 {y:.0f} ms" for x, y, label in points],
                )
            )
    return series


def sweep_body(doc: Mapping[str, Any]) -> list[str]:
    rules = _ttft_rules(doc.get("slos", []))
    figures = []
    pareto = pareto_series(doc)
    if pareto:
        svg = line_chart(
            "pareto",
            "TTFT p99 against goodput",
            pareto,
            x_label="goodput at the best load (good requests/s)",
            y_label="TTFT p99 (ms)",
            y_rules=rules,
        )
        figures.append(
            figure(
                svg,
                "Each configuration at its best load; the Pareto front (no "
                "other has both lower p99 and more goodput) is joined.",
            )
        )
    goodput, latency = [], []
    for i, trial in enumerate(doc.get("trials", [])):
        levels = sorted(trial.get("levels", []), key=lambda level: level["concurrency"])
        name = ", ".join(f"{k}={v}" for k, v in trial["config"].items()) or "defaults"
        good = [(float(v["concurrency"]), float(v["goodput_per_s"])) for v in levels]
        p99 = [
            (float(v["concurrency"]), float(v["ttft_p99_ms"]))
            for v in levels
            if v.get("ttft_p99_ms") is not None
        ]
        if good:
            goodput.append(Series(name, good, color(i), markers=True))
        if p99:
            latency.append(Series(name, p99, color(i), markers=True))
    if goodput:
        figures.append(
            figure(
                line_chart(
                    "load-goodput",
                    "Load search: goodput",
                    goodput,
                    x_label="concurrency",
                    y_label="goodput (good requests/s)",
                ),
                "Every load level the search tried, per configuration.",
            )
        )
    if latency:
        figures.append(
            figure(
                line_chart(
                    "load-ttft",
                    "Load search: TTFT p99",
                    latency,
                    x_label="concurrency",
                    y_label="TTFT p99 (ms)",
                    y_rules=rules,
                ),
                "TTFT p99 at each load level tried; dashed: the TTFT SLO.",
            )
        )
    body = [section("Charts", charts(*figures))] if figures else []
    columns = list(doc["table"][0]) if doc["table"] else []
    body.append(section("Ranking", _row_cells("sweep", columns, doc["table"])))
    cost = doc.get("cost")
    if isinstance(cost, dict) and cost.get("trials"):
        share = 100 * float(cost.get("startup_share", 0.0))
        body.append(
            paragraph(
                f"cost: {cost['trials']} trials, {float(cost['seconds']):.0f} s, of which "
                f"{float(cost['startup_seconds']):.0f} s ({share:.0f}%) engine start-up"
            )
        )
    chosen = doc.get("chosen")
    if chosen:
        command = " ".join(chosen.get("launch_command", []))
        body.append(paragraph(f"chosen: {chosen['config']} - launch: {command}"))
    return body


def tune_page(doc: Mapping[str, Any], *, generated: str, source: str = "") -> str:
    is_ab = doc.get("schema") == AB_SCHEMA
    title = "ttft tune ab" if is_ab else "ttft tune sweep"
    slos = doc.get("slos") or []
    subtitle = ("SLOs " + ", ".join(slos) if slos else "no SLO") + (
        f"; from {source}" if source else ""
    )
    body = ab_body(doc) if is_ab else sweep_body(doc)
    return page(
        title, subtitle, body, kind="tune-ab" if is_ab else "tune-sweep", generated=generated
    )
