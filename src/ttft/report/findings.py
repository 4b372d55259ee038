"""Render lint findings for people (terminal), programs (JSON) and CI systems (SARIF 2.1.0).

The JSON document is versioned (``"schema": "ttft.lint/1"``); SARIF follows the OASIS 2.1.0
schema so that code-scanning UIs (GitHub, GitLab, Azure DevOps) show findings inline.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttft import __version__
from ttft.core.findings import Finding, Location, Severity, at_or_above, counts, sort_findings

JSON_SCHEMA = "ttft.lint/1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"

FORMATS = ("text", "json", "markdown", "sarif")

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def exit_code(findings: Iterable[Finding], fail_on: Severity | None) -> int:
    """1 when a finding at or above ``fail_on`` exists (None: never fail), else 0."""
    if fail_on is None:
        return 0
    return 1 if at_or_above(findings, fail_on) else 0


def summary_line(findings: Sequence[Finding]) -> str:
    n = counts(findings)
    if not findings:
        return "no findings"
    parts = [f"{n[s.value]} {s.value}{'s' if n[s.value] != 1 else ''}" for s in reversed(Severity)]
    return ", ".join(parts)


# --- terminal -------------------------------------------------------------------------------


def render_text(findings: Sequence[Finding], console: Console, *, subject: str = "") -> None:
    """A block per file, one row per finding: where, how bad, what, why, the fix, the gain."""
    ordered = sort_findings(findings)
    if subject:
        console.print(f"[bold]ttft lint[/bold] {escape(subject)}")
    for file, group in groupby(ordered, key=lambda f: f.file or "-"):
        table = Table(
            title=escape(file), title_justify="left", show_header=True, expand=False, box=None
        )
        table.add_column("where", no_wrap=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("finding", overflow="fold")
        for f in group:
            table.add_row(
                escape(_where(f.location)),
                f"[{_STYLE[f.severity]}]{f.severity.value}[/]",
                _finding_cell(f),
            )
        console.print(table)
        console.print()
    worst_style = _STYLE[max(f.severity for f in ordered)] if ordered else "green"
    console.print(f"[{worst_style}]{escape(summary_line(ordered))}[/]")


def _where(location: Location | None) -> str:
    if location is None:
        return "-"
    if location.line is not None:
        return f"{location.line}" + (f":{location.column}" if location.column else "")
    if location.offset is not None:
        return f"{location.offset_unit or 'offset'} {location.offset}"
    return "-"


def _finding_cell(f: Finding) -> str:
    lines = [f"[bold]{escape(f.title)}[/bold] [dim]({escape(f.rule)})[/dim]", escape(f.message)]
    if f.action:
        lines.append(f"[green]fix:[/green] {escape(f.action)}")
    if f.gain:
        lines.append(f"[green]gain:[/green] {escape(f.gain)}")
    for rel in f.related:
        lines.append(f"[dim]see also {escape(rel.display())}[/dim]")
    return "\n".join(lines)


# --- JSON -----------------------------------------------------------------------------------


def json_document(findings: Sequence[Finding], *, subject: str = "") -> dict[str, Any]:
    ordered = sort_findings(findings)
    return {
        "schema": JSON_SCHEMA,
        "tool": {"name": "ttft", "version": __version__},
        "subject": subject,
        "summary": counts(ordered),
        "findings": [lint_dict(f) for f in ordered],
    }


def lint_dict(f: Finding) -> dict[str, Any]:
    """A finding as ``ttft.lint/1`` has always written it (``fix`` is the finding's action)."""
    out: dict[str, Any] = {
        "rule": f.rule,
        "severity": f.severity.value,
        "title": f.title,
        "message": f.message,
        "location": f.location.to_dict() if f.location is not None else None,
        "fix": f.action,
        "gain": f.gain,
    }
    if f.related:
        out["related"] = [loc.to_dict() for loc in f.related]
    if f.change is not None:  # optional, so documents without one read as they always did
        out["change"] = f.change.to_dict()
    return out


# --- Markdown -------------------------------------------------------------------------------


def markdown_document(findings: Sequence[Finding], *, subject: str = "") -> str:
    """A findings report to paste into a pull request or a ticket: a section per finding."""
    ordered = sort_findings(findings)
    lines = [f"# ttft: {_md(subject)}" if subject else "# ttft findings", ""]
    lines += [f"{summary_line(ordered)}", ""]
    for f in ordered:
        where = f" at `{f.location.display()}`" if f.location is not None else ""
        lines += [f"## {f.severity.value}: {_md(f.title)}{where}", "", f"`{f.rule}`", ""]
        lines.append(_md(f.describe()))
        if f.action:
            lines += ["", f"- **fix**: {_md(f.action)}"]
        if f.gain:
            lines.append(f"- **gain**: {_md(f.gain)}")
        if f.tier is not None:
            lines.append(f"- **cost tier**: {f.tier.label}")
        lines += [f"- evidence: {_md(e.text())}" for e in f.evidence]
        lines.append("")
    return "\n".join(lines)


def _md(text: str) -> str:
    """Text that Markdown shows as written (no accidental emphasis, tables or HTML)."""
    for char in ("\\", "*", "_", "|", "<", ">", "#"):
        text = text.replace(char, "\\" + char)
    return text


# --- SARIF 2.1.0 ----------------------------------------------------------------------------


def sarif_document(findings: Sequence[Finding], *, base_dir: Path | None = None) -> dict[str, Any]:
    """A SARIF log with one run; rules are the distinct rule ids, in order of first use.

    File paths are written relative to ``base_dir`` (default: the current directory) when they lie
    below it, so that CI systems can match them to files in the repository.
    """
    ordered = sort_findings(findings)
    base = (base_dir or Path.cwd()).resolve()
    rules: list[dict[str, Any]] = []
    rule_index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for f in ordered:
        if f.rule not in rule_index:
            rule_index[f.rule] = len(rules)
            rules.append(
                {
                    "id": f.rule,
                    "name": _rule_name(f.rule),
                    "shortDescription": {"text": f.title},
                    "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]},
                }
            )
        text = f.message
        if f.action:
            text += f"\nFix: {f.action}"
        if f.gain:
            text += f"\nExpected gain: {f.gain}"
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "ruleIndex": rule_index[f.rule],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": text},
            "locations": [_sarif_location(f.location, base)] if f.location is not None else [],
        }
        if f.related:
            result["relatedLocations"] = [
                {"id": i, **_sarif_location(loc, base)} for i, loc in enumerate(f.related)
            ]
        if f.action:
            result["properties"] = {"fix": f.action}
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ttft",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }


def _rule_name(rule: str) -> str:
    """SARIF's identifier-like ``name``: ``nginx/proxy-buffering`` -> ``NginxProxyBuffering``."""
    parts = rule.replace("/", "-").replace("_", "-").split("-")
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def _sarif_location(location: Location, base: Path) -> dict[str, Any]:
    if not location.is_file:
        name = location.file.strip("<>")
        if location.offset is not None:
            name += f" {location.offset_unit or 'offset'} {location.offset}"
        return {"logicalLocations": [{"name": name, "kind": "resource"}]}
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(location.file, base)}}
    region: dict[str, Any] = {}
    if location.line is not None:
        region["startLine"] = location.line
        if location.column is not None:
            region["startColumn"] = location.column
        if location.end_line is not None:
            region["endLine"] = location.end_line
    elif location.offset is not None and location.offset_unit == "char":
        region["charOffset"] = location.offset
    if region:
        physical["region"] = region
    return {"physicalLocation": physical}


def _uri(file: str, base: Path) -> str:
    path = Path(file)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)
