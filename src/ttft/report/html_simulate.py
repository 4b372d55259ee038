"""The HTML page of ``ttft simulate run``: predicted TTFT per what-if point with its interval,
and, where ``--validate`` ran, the measured value beside it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.report.html_page import Cell, charts, figure, page, paragraph, section, table
from ttft.report.svg import Bar, bar_chart, color

QUANTILES = ("p50", "p95", "p99")


def _ms(value: float) -> str:
    return f"{value * 1e3:.0f}"


def _label(point: Mapping[str, Any]) -> str:
    rate = point.get("rate")
    return str(point.get("config", "")) + (f" rate={rate:g}/s" if rate is not None else "")


def _predictions(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every prediction of the run (a --fewest-replicas search contributes every count tried)."""
    out: list[Mapping[str, Any]] = []
    for point in points:
        if "tried" in point:
            out += [{**p, "rate": point.get("rate")} for p in point["tried"]]
        else:
            out.append(point)
    return out


def _row(i: int, p: Mapping[str, Any]) -> list[Cell | str]:
    cells: list[Cell | str] = [_label(p)]
    for q in QUANTILES:
        est = p["ttft_s"][q]
        text = f"{_ms(est['value'])} [{_ms(est['interval']['low'])}-{_ms(est['interval']['high'])}]"
        cells.append(Cell(text, est["value"], f"points.{i}.ttft_s.{q}"))
    cells.append(Cell(_ms(p["queue_s"]["p95"]["value"]), p["queue_s"]["p95"]["value"]))
    cells.append(Cell(f"{p['throughput_rps']['value']:.2f}", p["throughput_rps"]["value"]))
    good = p.get("goodput_rps")
    cells.append("-" if good is None else Cell(f"{good['value']:.2f}", good["value"]))
    met = p.get("slo_met")
    cells.append("-" if met is None else ("yes" if met else "no"))
    return cells


def _chart(predictions: Sequence[Mapping[str, Any]], quantile: str) -> str:
    bars: list[Bar] = []
    for i, p in enumerate(predictions):
        est = p["ttft_s"][quantile]
        bars.append(
            Bar(
                _label(p),
                est["value"] * 1e3,
                low=est["interval"]["low"] * 1e3,
                high=est["interval"]["high"] * 1e3,
                color=color(0),
                tip=f"predicted {quantile} {_ms(est['value'])} ms",
            )
        )
        validation = p.get("validation") or {}
        for c in validation.get("comparisons", []):
            if f"p{c['quantile']:g}" == quantile:
                m = c["measured_interval"]
                bars.append(
                    Bar(
                        "measured",
                        c["measured_s"] * 1e3,
                        low=m["low"] * 1e3,
                        high=m["high"] * 1e3,
                        color=color(1),
                        tip=f"measured, error {c['error']:+.1%}",
                    )
                )
        if i >= 24:
            break
    legend = [("predicted", color(0)), ("measured (--validate)", color(1))]
    return bar_chart(
        f"simulate-{quantile}",
        f"TTFT {quantile} per point (ms, 95% intervals)",
        bars,
        y_label="TTFT (ms)",
        legend=legend,
    )


def simulate_page(doc: Mapping[str, Any], *, generated: str) -> str:
    points = doc.get("points", [])
    predictions = _predictions(points)
    columns = ["point", "TTFT p50 ms", "p95", "p99", "queue p95 ms", "req/s", "goodput/s", "SLO"]
    body = [
        section(
            "Predictions",
            table("predictions", columns, [_row(i, p) for i, p in enumerate(predictions)]),
        ),
        charts(*(figure(_chart(predictions, q), f"TTFT {q}") for q in ("p50", "p95"))),
    ]
    fewest = [p for p in points if "fewest_replicas" in p]
    for p in fewest:
        n = p["fewest_replicas"]
        text = "none up to the limit" if n is None else str(n)
        body.append(paragraph(f"rate {p.get('rate')}: fewest replicas that hold the SLOs: {text}"))
    body.append(
        paragraph(
            "Predictions are means over replications of a discrete-event model of the engine's "
            "scheduler, calibrated on the engine (" + str(doc.get("calibration", "")) + "); "
            "intervals include the calibration's own scatter.",
            "meta",
        )
    )
    return page("ttft simulate", "what-if predictions", body, kind="simulate", generated=generated)


def write_simulate_page(doc: Mapping[str, Any], path: Path) -> None:
    """The page of ``doc`` written to ``path``; a path that cannot be written is an input error."""
    try:
        path.write_text(
            simulate_page(doc, generated=time.strftime("%Y-%m-%d %H:%M:%S")), encoding="utf-8"
        )
    except OSError as exc:
        raise TtftError(f"cannot write {path}: {exc.strerror}") from None
