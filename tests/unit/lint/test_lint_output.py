"""The shared Finding model and its three renderings: terminal, JSON (ttft.lint/1), SARIF 2.1.0."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ttft.core.errors import TtftError
from ttft.core.findings import (
    Finding,
    Location,
    Severity,
    at_or_above,
    counts,
    sort_findings,
    without_rules,
    worst,
)
from ttft.report.findings import exit_code, json_document, render_text, sarif_document, summary_line


def _finding(
    rule: str, severity: Severity, file: str = "conf/nginx.conf", line: int = 3
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        title=f"title of {rule}",
        message="why it costs TTFT",
        location=Location(file, line),
        action="the exact change",
        gain="-120 ms p50",
    )


FINDINGS = [
    _finding("nginx/proxy-read-timeout", Severity.WARNING, line=9),
    _finding("nginx/gzip-event-stream", Severity.ERROR, line=3),
    _finding("nginx/proxy-request-buffering", Severity.INFO, "conf/other.conf", 1),
]


def test_severities_are_ordered_info_warning_error() -> None:
    assert Severity.INFO < Severity.WARNING < Severity.ERROR
    assert max(Severity) is Severity.ERROR
    assert Severity.parse(" Warning ") is Severity.WARNING


def test_unknown_severity_is_a_user_error() -> None:
    with pytest.raises(TtftError, match="unknown severity"):
        Severity.parse("fatal")


def test_sorting_is_by_file_then_line() -> None:
    ordered = sort_findings(FINDINGS)
    assert [(f.location.file, f.location.line) for f in ordered] == [
        ("conf/nginx.conf", 3),
        ("conf/nginx.conf", 9),
        ("conf/other.conf", 1),
    ]


def test_threshold_helpers() -> None:
    assert worst(FINDINGS) is Severity.ERROR and worst([]) is None
    assert len(at_or_above(FINDINGS, Severity.WARNING)) == 2
    assert counts(FINDINGS) == {"info": 1, "warning": 1, "error": 1}


@pytest.mark.parametrize(
    ("fail_on", "findings", "code"),
    [
        (Severity.WARNING, FINDINGS, 1),
        (Severity.ERROR, FINDINGS[:1], 0),  # a warning does not fail --fail-on error
        (Severity.INFO, FINDINGS[2:], 1),
        (None, FINDINGS, 0),  # --fail-on never
        (Severity.INFO, [], 0),
    ],
)
def test_exit_code_is_non_zero_only_at_or_above_fail_on(
    fail_on: Severity | None, findings: list[Finding], code: int
) -> None:
    assert exit_code(findings, fail_on) == code


def test_ignore_drops_rules_exactly_or_by_area() -> None:
    assert [f.rule for f in without_rules(FINDINGS, ["nginx/gzip-event-stream"])] == [
        "nginx/proxy-read-timeout",
        "nginx/proxy-request-buffering",
    ]
    assert without_rules(FINDINGS, ["nginx/*"]) == []
    assert len(without_rules(FINDINGS, ["engine/*", "nginx/gzip"])) == 3


def test_location_display_covers_lines_and_token_offsets() -> None:
    assert Location("a.conf", 3).display() == "a.conf:3"
    assert Location("a.conf", 3, 7).display() == "a.conf:3:7"
    cmd = Location("<command line>", offset=4, offset_unit="token")
    assert cmd.display() == "<command line>[token 4]" and not cmd.is_file


def test_json_document_is_versioned_and_complete() -> None:
    doc = json_document(FINDINGS, subject="nginx conf/nginx.conf")
    json.dumps(doc)  # serialisable
    assert doc["schema"] == "ttft.lint/1"
    assert doc["tool"]["name"] == "ttft"
    assert doc["summary"] == {"info": 1, "warning": 1, "error": 1}
    first = doc["findings"][0]
    assert first == {
        "rule": "nginx/gzip-event-stream",
        "severity": "error",
        "title": "title of nginx/gzip-event-stream",
        "message": "why it costs TTFT",
        "location": {"file": "conf/nginx.conf", "line": 3},
        "fix": "the exact change",
        "gain": "-120 ms p50",
    }


def test_sarif_log_has_rules_results_levels_and_regions(tmp_path: Path) -> None:
    sarif = sarif_document(FINDINGS, base_dir=tmp_path)
    assert sarif["version"] == "2.1.0"
    assert sarif["$schema"].endswith("sarif-2.1.0.json")
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [
        "nginx/gzip-event-stream",
        "nginx/proxy-read-timeout",
        "nginx/proxy-request-buffering",
    ]
    assert rules[0]["shortDescription"]["text"] == "title of nginx/gzip-event-stream"
    levels = [r["level"] for r in run["results"]]
    assert levels == ["error", "warning", "note"]  # SARIF has no "info": it is "note"
    result = run["results"][0]
    assert result["ruleId"] == "nginx/gzip-event-stream" and result["ruleIndex"] == 0
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "conf/nginx.conf"
    assert loc["region"] == {"startLine": 3}
    assert "Fix: the exact change" in result["message"]["text"]


def test_sarif_paths_are_relative_to_the_base_dir_when_below_it(tmp_path: Path) -> None:
    inside = _finding("r/a", Severity.ERROR, str(tmp_path / "etc" / "nginx.conf"))
    outside = _finding("r/b", Severity.ERROR, "/elsewhere/nginx.conf")
    results = sarif_document([inside, outside], base_dir=tmp_path)["runs"][0]["results"]
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results)
    assert uris == ["etc/nginx.conf", "file:///elsewhere/nginx.conf"]


def test_sarif_command_line_findings_use_a_logical_location() -> None:
    finding = Finding(
        "vllm/cuda-graphs",
        Severity.WARNING,
        "CUDA graphs disabled",
        "m",
        Location("<command line>", offset=5, offset_unit="token"),
    )
    result = sarif_document([finding])["runs"][0]["results"][0]
    assert result["locations"] == [
        {"logicalLocations": [{"name": "command line token 5", "kind": "resource"}]}
    ]


def test_text_output_groups_by_file_and_ends_with_a_summary() -> None:
    buffer = io.StringIO()
    render_text(FINDINGS, Console(file=buffer, width=120, color_system=None), subject="nginx x")
    text = buffer.getvalue()
    assert text.index("conf/nginx.conf") < text.index("conf/other.conf")
    assert "nginx/gzip-event-stream" in text and "fix: the exact change" in text
    assert text.rstrip().endswith("1 error, 1 warning, 1 info")


def test_text_output_without_findings_says_so() -> None:
    buffer = io.StringIO()
    render_text([], Console(file=buffer, color_system=None))
    assert buffer.getvalue().strip() == "no findings"
    assert summary_line([]) == "no findings"
