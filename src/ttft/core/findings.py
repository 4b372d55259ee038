"""The shape every lint check reports in: one ``Finding`` per problem, at a place in a file.

All lint commands (nginx configurations, engine command lines, prompts and chat templates) share
this model, so their output can be rendered the same way (terminal, JSON, SARIF) and gated the
same way in CI (``--fail-on``).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ttft.core.errors import TtftError


@functools.total_ordering
class Severity(enum.Enum):
    """How bad a finding is; ordered ``info < warning < error``."""

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

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise TtftError(
                f"unknown severity {text!r}", "use one of: " + ", ".join(s.value for s in cls)
            ) from None


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


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
    """One diagnosis from a static check.

    ``rule`` is a stable id (``area/what``, e.g. ``nginx/proxy-buffering``) that users can put in
    ``--ignore`` and that SARIF lists as the rule. ``message`` says why it costs TTFT (with the
    article's numbers where apt), ``fix`` the exact change, ``gain`` the expected gain in words.
    """

    rule: str
    severity: Severity
    title: str
    message: str
    location: Location
    fix: str = ""
    gain: str = ""
    related: tuple[Location, ...] = field(default=())

    def with_severity(self, severity: Severity) -> Finding:
        return replace(self, severity=severity)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity.value,
            "title": self.title,
            "message": self.message,
            "location": self.location.to_dict(),
            "fix": self.fix,
            "gain": self.gain,
        }
        if self.related:
            out["related"] = [loc.to_dict() for loc in self.related]
        return out


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Stable presentation order: by file and position, the worst first at the same place."""
    return sorted(findings, key=lambda f: (f.location.sort_key(), -f.severity.rank, f.rule))


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
