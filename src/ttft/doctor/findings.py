"""What one doctor step measured and concluded, and the doctor report's JSON shape of a finding.

Findings are ``ttft.core.findings.Finding``: ranked cheapest first (the article's order: transport
and template before scheduling, before cache, before precision and kernels), then by gain.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ttft.core.findings import Evidence, Finding, Severity


class StepStatus(enum.StrEnum):
    OK = "ok"  # measured (with or without findings)
    SKIPPED = "skipped"  # nothing to check here (no log given, one level only, ...)
    FAILED = "failed"  # could not measure: the report is incomplete
    OUT_OF_BUDGET = "out_of_budget"  # not run: the --budget ran out first


@dataclass
class StepResult:
    """What one doctor step measured and concluded (findings may be empty: healthy)."""

    name: str
    title: str
    status: StepStatus = StepStatus.OK
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the step could not see, and why
    seconds: float = 0.0

    def add_finding(self, **fields: Any) -> Finding:
        """Record a finding of this step, with the evidence the step has gathered so far."""
        fields.setdefault("evidence", tuple(self.evidence))
        fields.setdefault("severity", Severity.WARNING)
        finding = Finding(step=self.name, **fields)
        self.findings.append(finding)
        return finding

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "findings": [doctor_dict(f) for f in self.findings],
            "notes": self.notes,
            "seconds": self.seconds,
        }


def doctor_dict(finding: Finding) -> dict[str, Any]:
    """A finding as the doctor report (schema ``ttft.doctor/1``) has always written it."""
    return {
        "rule": finding.rule,
        "symptom": finding.title,
        "cause": finding.message,
        "action": finding.action,
        "cost_tier": finding.tier.label if finding.tier is not None else None,
        "confidence": finding.confidence.label if finding.confidence is not None else None,
        "step": finding.step,
        "evidence": [e.to_dict() for e in finding.evidence],
        "expected_gain_ms": finding.expected_gain_ms,
        "expected_gain": finding.gain,
        "change": None if finding.change is None else finding.change.to_dict(),
    }
