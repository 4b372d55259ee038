"""What `ttft weights verify` reports: one problem per broken fact, grouped per file.

A verifier never raises on a broken file: every defect becomes a finding (``problem``) naming the
file, the tensor (when there is one) and the expected versus found values, so one run lists every
defect and a CI job can gate on the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ttft.core.findings import Finding, Location, Severity

SCHEMA = "ttft.weights.verify/1"

SeverityName = Literal["error", "warning"]
HashStatus = Literal["ok", "mismatch", "missing", "unlisted", "unchecked"]


def problem(
    file: str,
    code: str,
    message: str,
    tensor: str | None = None,
    expected: str | None = None,
    found: str | None = None,
    severity: SeverityName = "error",
) -> Finding:
    """One broken fact about one file, as a finding with rule ``weights/<code>``.

    ``code`` is a short stable name (``shard-missing``, ``offsets-overlap``, ...) that tests and CI
    can match on; ``message`` is the sentence a person reads; ``tensor`` is the finding's subject.
    """
    return Finding(
        f"weights/{code}",
        Severity(severity),
        message,
        message,
        Location(file),
        subject=tensor,
        expected=expected,
        found=found,
    )


def weights_dict(finding: Finding) -> dict[str, Any]:
    """A problem as ``ttft.weights.verify/1`` has always written it."""
    return {
        "file": finding.file,
        "code": finding.code,
        "severity": finding.severity.value,
        "tensor": finding.subject,
        "expected": finding.expected,
        "found": finding.found,
        "message": finding.message,
    }


@dataclass(slots=True)
class FileReport:
    """Everything verify learned about one file: its format, size, tensors, hash and problems."""

    path: str
    format: str  # "safetensors", "safetensors-index", "gguf", "manifest" or "other"
    size_bytes: int | None = None
    tensors: int | None = None
    sha256: HashStatus = "unchecked"
    problems: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "size_bytes": self.size_bytes,
            "tensors": self.tensors,
            "sha256": self.sha256,
            "ok": self.ok,
            "problems": [weights_dict(p) for p in self.problems],
        }


@dataclass(slots=True)
class VerifyReport:
    """The outcome of one `verify` call: per-file reports in a stable order."""

    root: str
    manifest: str | None = None
    files: list[FileReport] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [p for f in self.files for p in f.problems]

    @property
    def errors(self) -> list[Finding]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def file(self, path: str, fmt: str = "other") -> FileReport:
        """The report for ``path``, created on first use so findings can arrive in any order."""
        for report in self.files:
            if report.path == path:
                return report
        report = FileReport(path=path, format=fmt)
        self.files.append(report)
        return report

    def add(self, found: Finding) -> None:
        self.file(found.file).problems.append(found)

    def to_dict(self) -> dict[str, Any]:
        errors = self.errors
        return {
            "schema": SCHEMA,
            "root": self.root,
            "manifest": self.manifest,
            "ok": self.ok,
            "counts": {
                "files": len(self.files),
                "errors": len(errors),
                "warnings": len(self.problems) - len(errors),
            },
            "files": [f.to_dict() for f in self.files],
        }
