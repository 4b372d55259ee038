"""The doctor's report: findings cheapest first with their evidence, then what each step saw."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ttft.core.findings import Finding
from ttft.doctor.run import DoctorReport

_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "failed": "red", "out_of_budget": "red"}


def gain_text(finding: Finding) -> str:
    """The expected gain in words, or from the number when no words were given."""
    if finding.gain:
        return finding.gain
    if finding.expected_gain_ms is not None:
        return f"about {finding.expected_gain_ms:.0f} ms of TTFT"
    return ""


def _tier_label(finding: Finding) -> str:
    return finding.tier.label if finding.tier is not None else "unknown"


def _confidence_label(finding: Finding) -> str:
    return finding.confidence.label if finding.confidence is not None else "unknown"


def _tier_text(finding: Finding) -> str:
    return f"{_tier_label(finding)}, confidence {_confidence_label(finding)}"


def _finding_text(number: int, finding: Finding) -> Text:
    text = Text()
    text.append(f"{number}. {finding.title}\n", style="bold")
    text.append("   cause:  ", style="dim")
    text.append(f"{finding.message}\n")
    text.append("   action: ", style="dim")
    text.append(f"{finding.action}\n", style="cyan")
    if gain_text(finding):
        text.append("   gain:   ", style="dim")
        text.append(f"{gain_text(finding)}\n")
    text.append("   change: ", style="dim")
    if finding.change is not None:
        text.append(f"{finding.change.summary()} (applied by `ttft tune ab --plan`)\n")
    else:
        text.append("no automatic change: apply the action by hand\n", style="dim")
    text.append("   tier:   ", style="dim")
    text.append(f"{_tier_text(finding)}  [{finding.rule}]\n")
    for evidence in finding.evidence[:14]:
        text.append(f"     - {evidence.text()}\n", style="dim")
    return text


def print_doctor(report: DoctorReport, console: Console | None = None) -> None:
    out = console or Console()
    out.print(
        f"[bold]ttft doctor[/bold] - {report.target} "
        f"(engine {report.meta.get('engine') or 'unknown'}, model "
        f"{report.meta.get('model') or 'unknown'})"
    )
    out.print()
    if report.healthy:
        ran = ", ".join(s.name for s in report.steps if s.status == "ok")
        out.print(
            Panel(
                f"No finding in the steps that ran ({ran}): a clean bill of health for what "
                "was measured. The numbers behind it are below.",
                title="healthy",
                style="green",
            )
        )
    elif not report.findings:
        failed = report.failed_steps + report.unfinished_steps
        why = "; ".join(n for s in failed for n in s.notes[:1]) or "see the steps below"
        out.print(
            Panel(
                f"{len(failed)} step(s) could not measure ({', '.join(s.name for s in failed)}): "
                f"{why}. No finding is not a clean bill of health here.",
                title="incomplete",
                style="red",
            )
        )
    else:
        out.print(f"[bold]{len(report.findings)} finding(s), cheapest fix first:[/bold]")
        for number, finding in enumerate(report.findings, start=1):
            out.print(_finding_text(number, finding))
    table = Table(title="Steps", title_justify="left", show_lines=False)
    for column in ("step", "status", "seconds", "what it saw"):
        table.add_column(column)
    for step in report.steps:
        style = _STATUS_STYLE.get(step.status, "")
        table.add_row(
            step.name,
            Text(step.status, style=style),
            f"{step.seconds:.1f}",
            step.summary or "; ".join(step.notes[:1]),
        )
    out.print(table)
    measured = [s for s in report.steps if s.evidence]
    if measured:
        out.print("[bold]Measured:[/bold]")
        for step in measured:
            out.print(f"  [bold]{step.name}[/bold]")
            for evidence in step.evidence[:8]:
                out.print(f"    {evidence.text()}")
    notes = [(s.name, n) for s in report.steps for n in s.notes]
    if notes:
        out.print("[bold]What doctor could not see, and why:[/bold]")
        for name, note in notes:
            out.print(f"  - [dim]{name}:[/dim] {note}")


def doctor_markdown(report: DoctorReport) -> str:
    lines = [f"# ttft doctor: {report.target}", ""]
    if report.healthy:
        lines += ["**Healthy**: no finding for what was measured.", ""]
    elif not report.findings:
        names = ", ".join(s.name for s in report.failed_steps + report.unfinished_steps)
        lines += [f"**Incomplete**: steps that could not measure: {names}.", ""]
    for number, f in enumerate(report.findings, start=1):
        lines += [
            f"## {number}. {f.title}",
            "",
            f"- **cause**: {f.message}",
            f"- **action**: {f.action}",
            f"- **expected gain**: {gain_text(f) or 'n/a'}",
            f"- **cost tier**: {_tier_label(f)}; **confidence**: {_confidence_label(f)}; "
            f"rule `{f.rule}`",
            "- **evidence**:",
            *[
                f"  - {e.text()} ({e.source})" if e.source else f"  - {e.text()}"
                for e in f.evidence
            ],
            "",
        ]
    lines += ["## Steps", "", "| step | status | seconds | summary |", "| --- | --- | ---: | --- |"]
    for s in report.steps:
        summary = s.summary or "; ".join(s.notes[:1])
        lines.append(f"| {s.name} | {s.status} | {s.seconds:.1f} | {summary} |")
    measured = [s for s in report.steps if s.evidence]
    if measured:
        lines += ["", "## Measured", ""]
        for step in measured:
            lines += [f"- **{step.name}**", *[f"  - {e.text()}" for e in step.evidence]]
    notes = [f"- {s.name}: {n}" for s in report.steps for n in s.notes]
    if notes:
        lines += ["", "## Not seen", "", *notes]
    return "\n".join(lines) + "\n"


def document_text(report: DoctorReport, fmt: str) -> str:
    """The report as json, markdown or sarif (the same findings as lint's, for code-scanning
    UIs)."""
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2)
    if fmt == "markdown":
        return doctor_markdown(report)
    from ttft.report.findings import dumps, sarif_document

    return dumps(sarif_document(report.findings))


def write_report_files(report: DoctorReport, out: Path) -> None:
    """``--out``: report.json (what `ttft report` reads) and report.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report.to_dict(), indent=2))
    (out / "report.md").write_text(doctor_markdown(report))
