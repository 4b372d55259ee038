"""A doctor's diagnosis: symptom, cause, evidence (numbers), action, gain, cost tier, confidence.

Findings are ranked cheapest first (the article's order: transport and template before
scheduling, before cache, before precision and kernels), then by expected gain.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class CostTier(enum.IntEnum):
    """What a fix costs, cheapest first."""

    TRANSPORT = 1  # proxy and template settings: config only, no restart of the engine
    SCHEDULING = 2  # engine scheduling flags: a restart
    CACHE = 3  # prefix and KV cache: a restart, sometimes prompt changes
    PRECISION = 4  # KV precision, kernels, graphs: a restart plus a quality check

    @property
    def label(self) -> str:
        return {1: "transport/template", 2: "scheduling", 3: "cache", 4: "precision/kernels"}[
            self.value
        ]


class Confidence(enum.IntEnum):
    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding, with where it came from."""

    name: str
    value: float | str
    unit: str = ""
    source: str = ""  # "client", "server timings", "metrics", "lint", ...

    def text(self) -> str:
        if isinstance(self.value, float):
            shown = f"{self.value:.0f}" if abs(self.value) >= 100 else f"{self.value:.3g}"
        else:
            shown = str(self.value)
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name}: {shown}{unit}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class DoctorFinding:
    rule: str  # stable id, e.g. "transport/buffered-stream"
    symptom: str
    cause: str
    action: str  # the exact flag, config line or prompt change
    tier: CostTier
    confidence: Confidence
    step: str
    evidence: tuple[Evidence, ...] = ()
    expected_gain_ms: float | None = None
    expected_gain: str = ""

    def sort_key(self) -> tuple[int, float, int]:
        return (self.tier.value, -(self.expected_gain_ms or 0.0), -self.confidence.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "symptom": self.symptom,
            "cause": self.cause,
            "action": self.action,
            "cost_tier": self.tier.label,
            "confidence": self.confidence.label,
            "step": self.step,
            "evidence": [e.to_json() for e in self.evidence],
            "expected_gain_ms": self.expected_gain_ms,
            "expected_gain": self.expected_gain,
        }


@dataclass
class StepResult:
    """What one doctor step measured and concluded (findings may be empty: healthy)."""

    name: str
    title: str
    status: str = "ok"  # "ok", "skipped", "failed"
    summary: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    findings: list[DoctorFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the step could not see, and why
    seconds: float = 0.0

    def add_finding(self, **fields: Any) -> DoctorFinding:
        """Record a finding of this step, with the evidence the step has gathered so far."""
        fields.setdefault("evidence", tuple(self.evidence))
        finding = DoctorFinding(step=self.name, **fields)
        self.findings.append(finding)
        return finding

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "findings": [f.to_json() for f in self.findings],
            "notes": self.notes,
            "seconds": self.seconds,
        }


def rank(findings: list[DoctorFinding]) -> list[DoctorFinding]:
    return sorted(findings, key=lambda f: f.sort_key())
