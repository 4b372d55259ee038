"""One Finding, every format: lint, doctor and weights findings render the same way."""

from __future__ import annotations

from ttft.core.findings import Confidence, CostTier, Evidence, Finding, Location, Severity
from ttft.report.findings import markdown_document, sarif_document
from ttft.weights.problems import problem

LINT = Finding(
    "nginx/proxy-buffering", Severity.WARNING, "Stream buffered", "nginx holds *every* event",
    Location("nginx.conf", 12), "proxy_buffering off;", "first token at once",
)  # fmt: skip
DOCTOR = Finding(
    "capacity/queueing", Severity.WARNING, "requests wait for a slot", "4 | 1 slots",
    action="llama-server: `-np 4`", tier=CostTier.SCHEDULING, confidence=Confidence.HIGH,
    evidence=(Evidence("queue time p50", 1500.0, "ms", "metrics"),), step="capacity",
)  # fmt: skip
WEIGHTS = problem("model.gguf", "data-truncated", "the file is truncated", expected="9", found="3")


def test_markdown_has_a_section_per_finding_with_its_fix_tier_and_evidence() -> None:
    text = markdown_document([LINT, DOCTOR, WEIGHTS], subject="mixed")
    assert text.startswith("# ttft: mixed")
    assert "## warning: Stream buffered at `nginx.conf:12`" in text
    assert r"nginx holds \*every\* event" in text  # Markdown shows it as written
    assert "- **fix**: llama-server: `-np 4`" in text and "- **cost tier**: scheduling" in text
    assert "- evidence: queue time p50: 1500 ms" in text
    assert "the file is truncated (expected 9, found 3)" in text
    assert r"4 \| 1 slots" in text  # a pipe cannot break a table it lands in


def test_sarif_takes_findings_without_a_location_such_as_doctors() -> None:
    run = sarif_document([DOCTOR, WEIGHTS])["runs"][0]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert by_rule["capacity/queueing"]["locations"] == []
    assert "Fix: llama-server: `-np 4`" in by_rule["capacity/queueing"]["message"]["text"]
    uri = by_rule["weights/data-truncated"]["locations"][0]["physicalLocation"]
    assert uri["artifactLocation"]["uri"] == "model.gguf"
