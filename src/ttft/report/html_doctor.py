"""The HTML page of a doctor report (schema ``ttft.doctor/1``): findings cheapest first, each with
its evidence as a chart, then the steps and what each one measured.

The report JSON keeps numbers, not samples, so a finding's chart is its evidence in ms side by
side (for the transport step: the chunk timeline's median gap against the server's decode time,
through the proxy against direct). Evidence in other units stays in the finding's list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ttft.report.html_page import Cell, page, paragraph, section, table
from ttft.report.svg import Segment, color, lanes_chart

MAX_BARS = 12


def _evidence_text(item: Mapping[str, Any]) -> str:
    value = item["value"]
    if isinstance(value, float):
        shown = f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    else:
        shown = str(value)
    unit = f" {item['unit']}" if item.get("unit") else ""
    source = f" ({item['source']})" if item.get("source") else ""
    return f"{item['name']}: {shown}{unit}{source}"


def evidence_chart(name: str, evidence: Sequence[Mapping[str, Any]]) -> str:
    """The evidence in ms as bars on one axis; empty when a finding has none."""
    timed = [
        e
        for e in evidence
        if e.get("unit") == "ms"
        and isinstance(e.get("value"), int | float)
        and not isinstance(e.get("value"), bool)
    ][:MAX_BARS]
    if not timed:
        return ""
    rows = [
        (str(e["name"]), [Segment(0.0, float(e["value"]), color(i), _evidence_text(e))])
        for i, e in enumerate(timed)
    ]
    return lanes_chart(
        name,
        "Evidence (ms)",
        rows,
        x_label="ms",
        legend=[(str(e["name"]), color(i)) for i, e in enumerate(timed)],
    )


def _finding(number: int, finding: Mapping[str, Any]) -> str:
    parts = [f'<div class="finding" data-rule="{escape(str(finding["rule"]), quote=True)}">']
    parts.append(f"<h3>{number}. {escape(str(finding['symptom']))}</h3><ul>")
    gain = finding.get("expected_gain") or (
        f"about {finding['expected_gain_ms']:.0f} ms of TTFT"
        if finding.get("expected_gain_ms") is not None
        else "n/a"
    )
    for label, text in (
        ("cause", finding["cause"]),
        ("action", finding["action"]),
        ("expected gain", gain),
        (
            "cost tier",
            f"{finding.get('cost_tier') or 'unknown'}, confidence "
            f"{finding.get('confidence') or 'unknown'}; rule {finding['rule']}",
        ),
    ):
        parts.append(f"<li><b>{label}</b>: {escape(str(text))}</li>")
    parts.append("</ul>")
    chart = evidence_chart(f"evidence-{number}", finding.get("evidence", []))
    if chart:
        parts.append(f"<figure>{chart}</figure>")
    items = "".join(f"<li>{escape(_evidence_text(e))}</li>" for e in finding.get("evidence", []))
    if items:
        parts.append(f'<ul class="note">{items}</ul>')
    parts.append("</div>")
    return "".join(parts)


def doctor_body(doc: Mapping[str, Any]) -> list[str]:
    body: list[str] = []
    findings = doc.get("findings", [])
    if doc.get("healthy"):
        body.append(paragraph("Healthy: no finding in the steps that ran.", "good"))
    elif not findings:
        names = ", ".join(doc.get("failed_steps", []) + doc.get("unfinished_steps", []))
        body.append(paragraph(f"Incomplete: steps that could not measure: {names}.", "bad"))
    if findings:
        body.append(
            section(
                f"{len(findings)} finding(s), cheapest fix first",
                *[_finding(i, f) for i, f in enumerate(findings, start=1)],
            )
        )
    rows: list[list[Cell | str]] = [
        [
            s["name"],
            s["status"],
            Cell(f"{s['seconds']:.1f}", s["seconds"], f"steps[{i}].seconds"),
            s.get("summary") or "; ".join(s.get("notes", [])[:1]),
        ]
        for i, s in enumerate(doc.get("steps", []))
    ]
    body.append(
        section("Steps", table("steps", ["step", "status", "seconds", "what it saw"], rows))
    )
    for i, step in enumerate(doc.get("steps", [])):
        evidence = step.get("evidence", [])
        if not evidence:
            continue
        chart = evidence_chart(f"step-{i}", evidence)
        items = "".join(f"<li>{escape(_evidence_text(e))}</li>" for e in evidence)
        body.append(
            section(
                f"Measured: {step['name']}",
                f"<figure>{chart}</figure>" if chart else "",
                f"<ul>{items}</ul>",
                level=3,
            )
        )
    notes = [f"{s['name']}: {n}" for s in doc.get("steps", []) for n in s.get("notes", [])]
    if notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in notes)
        body.append(section("What doctor could not see, and why", f"<ul>{items}</ul>"))
    return body


def doctor_page(doc: Mapping[str, Any], *, generated: str, source: str = "") -> str:
    meta = doc.get("meta", {})
    subtitle = (
        f"{doc.get('target', '?')} (engine {meta.get('engine') or 'unknown'}, model "
        f"{meta.get('model') or 'unknown'}, ttft {doc.get('ttft_version', '?')})"
    ) + (f"; from {source}" if source else "")
    return page("ttft doctor", subtitle, doctor_body(doc), kind="doctor", generated=generated)
