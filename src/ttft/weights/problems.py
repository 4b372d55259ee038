"""What `ttft weights verify` reports: one problem per broken fact, grouped per file.

A verifier never raises on a broken file: every defect becomes a :class:`Problem` that names the
file, the tensor (when there is one) and the expected versus found values, so one run lists every
defect and a CI job can gate on the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA = "ttft.weights.verify/1"

Severity = Literal["error", "warning"]
HashStatus = Literal["ok", "mismatch", "missing", "unlisted", "unchecked"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken fact about one file.

    ``code`` is a short stable name (``shard-missing``, ``offsets-overlap``, ...) that tests and CI
    can match on; ``message`` is the sentence a person reads.
    """

    file: str
    code: str
    message: str
    tensor: str | None = None
    expected: str | None = None
    found: str | None = None
    severity: Severity = "error"

    def describe(self) -> str:
        """The message with the expected and found values appended, for a one-line display."""
        parts = [self.message]
        if self.expected is not None or self.found is not None:
            parts.append(f"(expected {self.expected}, found {self.found})")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "code": self.code,
            "severity": self.severity,
            "tensor": self.tensor,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


@dataclass(slots=True)
class FileReport:
    """Everything verify learned about one file: its format, size, tensors, hash and problems."""

    path: str
    format: str  # "safetensors", "safetensors-index", "gguf", "manifest" or "other"
    size_bytes: int | None = None
    tensors: int | None = None
    sha256: HashStatus = "unchecked"
    problems: list[Problem] = field(default_factory=list)

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
            "problems": [p.to_dict() for p in self.problems],
        }


@dataclass(slots=True)
class VerifyReport:
    """The outcome of one `verify` call: per-file reports in a stable order."""

    root: str
    manifest: str | None = None
    files: list[FileReport] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return [p for f in self.files for p in f.problems]

    @property
    def errors(self) -> list[Problem]:
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

    def add(self, problem: Problem) -> None:
        self.file(problem.file).problems.append(problem)

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
