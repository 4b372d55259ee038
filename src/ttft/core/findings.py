"""The one Finding: what lint, doctor and weights report, and every renderer reads.

A finding is a diagnosis: a stable ``rule`` id (``area/what``, e.g. ``nginx/proxy-buffering``), a
``severity``, the symptom (``title``), the cause with its numbers (``message``), the exact change
that fixes it (``action``) and the gain in words, and, where they apply: a ``location`` in a file,
``evidence`` (measured numbers and where they came from), a cost ``tier`` (the article's order,
cheapest first), a ``confidence``, the doctor ``step`` that measured it, and what was ``expected``
against what was ``found`` in which ``subject`` (a tensor, a flag, a directive).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ttft.core.cost_tier import CostTier as CostTier  # re-exported: its old home
from ttft.core.errors import TtftError

if TYPE_CHECKING:  # a Finding carries a Change; changes.py needs only cost_tier
    from ttft.core.changes import Change


class Severity(enum.StrEnum):
    """How bad a finding is; ordered ``info < warning < error`` (not alphabetically)."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank >= other.rank

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise TtftError(
                f"unknown severity {text!r}", "use one of: " + ", ".join(s.value for s in cls)
            ) from None


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


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

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class Location:
    """Where a finding points: a file (or a pseudo-file such as ``<command line>``) and a place.

    ``line`` and ``column`` are 1-based. ``offset`` is a 0-based position whose unit the checker
    states in ``offset_unit`` (``"token"`` for an argument index in a command line, ``"char"`` for
    a character offset in a prompt, ...), for inputs that have no useful line numbers.
    """

    file: str
    line: int | None = None
    column: int | None = None
    offset: int | None = None
    offset_unit: str | None = None
    end_line: int | None = None

    @property
    def is_file(self) -> bool:
        """False for pseudo-files such as ``<command line>`` (nothing to open in an editor)."""
        return not (self.file.startswith("<") and self.file.endswith(">"))

    def display(self) -> str:
        """``file:line[:column]``, or ``file[token 3]`` for offset-only locations."""
        text = self.file
        if self.line is not None:
            text += f":{self.line}"
            if self.column is not None:
                text += f":{self.column}"
        elif self.offset is not None:
            text += f"[{self.offset_unit or 'offset'} {self.offset}]"
        return text

    def sort_key(self) -> tuple[str, int, int, int]:
        return (self.file, self.line or 0, self.column or 0, self.offset or 0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file}
        for name in ("line", "column", "end_line", "offset", "offset_unit"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class Finding:
    """One diagnosis (see the module docstring). Positional order: rule, severity, title,
    message, location, action, gain, related; everything else by keyword."""

    rule: str
    severity: Severity
    title: str  # the symptom, one line
    message: str  # the cause, with the numbers behind it
    location: Location | None = None
    action: str = ""  # the exact change (flag, config line, prompt change); "" when none is known
    gain: str = ""  # the expected gain, in words
    related: tuple[Location, ...] = field(default=())
    evidence: tuple[Evidence, ...] = ()
    tier: CostTier | None = None
    confidence: Confidence | None = None
    step: str = ""  # the doctor step that measured it
    expected_gain_ms: float | None = None
    subject: str | None = None  # what inside the location: a tensor, a flag, a directive
    expected: str | None = None
    found: str | None = None
    change: Change | None = None  # the machine-applicable fix, when one exists

    @property
    def code(self) -> str:
        """The rule id without its area (``weights/shard-missing`` -> ``shard-missing``)."""
        return self.rule.rsplit("/", 1)[-1]

    @property
    def file(self) -> str:
        return self.location.file if self.location is not None else ""

    def describe(self) -> str:
        """The message with the expected and found values appended, for a one-line display."""
        if self.expected is None and self.found is None:
            return self.message
        return f"{self.message} (expected {self.expected}, found {self.found})"

    def cost_key(self) -> tuple[int, float, int]:
        """Cheapest fix first, then the largest expected gain, then the most certain."""
        tier = self.tier.value if self.tier is not None else len(CostTier) + 1
        confidence = self.confidence.value if self.confidence is not None else 0
        return (tier, -(self.expected_gain_ms or 0.0), -confidence)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity.value,
            "title": self.title,
            "message": self.message,
            "action": self.action,
            "gain": self.gain,
        }
        if self.location is not None:
            out["location"] = self.location.to_dict()
        if self.related:
            out["related"] = [loc.to_dict() for loc in self.related]
        if self.evidence:
            out["evidence"] = [e.to_dict() for e in self.evidence]
        if self.tier is not None:
            out["cost_tier"] = self.tier.label
        if self.confidence is not None:
            out["confidence"] = self.confidence.label
        for name in ("step", "expected_gain_ms", "subject", "expected", "found"):
            value = getattr(self, name)
            if value not in (None, ""):
                out[name] = value
        if self.change is not None:
            out["change"] = self.change.to_dict()
        return out


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Stable presentation order: by file and position, the worst first at the same place."""
    return sorted(findings, key=lambda f: (_place(f), -f.severity.rank, f.rule))


def _place(f: Finding) -> tuple[str, int, int, int]:
    return f.location.sort_key() if f.location is not None else ("", 0, 0, 0)


def rank_by_cost(findings: Iterable[Finding]) -> list[Finding]:
    """The article's order: cheapest fix first, then by expected gain and confidence."""
    return sorted(findings, key=lambda f: f.cost_key())


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The highest severity present, or None for no findings."""
    return max((f.severity for f in findings), default=None)


def at_or_above(findings: Iterable[Finding], threshold: Severity) -> list[Finding]:
    return [f for f in findings if f.severity >= threshold]


def without_rules(findings: Iterable[Finding], ignored: Iterable[str]) -> list[Finding]:
    """Drop findings whose rule id is ignored; ``nginx/*`` ignores every rule of an area."""
    patterns = [p.strip() for p in ignored if p.strip()]

    def ignored_rule(rule: str) -> bool:
        for pattern in patterns:
            if pattern == rule:
                return True
            if pattern.endswith("/*") and rule.startswith(pattern[:-1]):
                return True
        return False

    return [f for f in findings if not ignored_rule(f.rule)]


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """Number of findings per severity, every severity present as a key."""
    out = {s.value: 0 for s in Severity}
    for f in findings:
        out[f.severity.value] += 1
    return out
