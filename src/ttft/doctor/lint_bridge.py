"""Static findings (nginx configuration, engine flags) joining the doctor's list."""

from __future__ import annotations

from pathlib import Path

from ttft.doctor.findings import DoctorFinding


def lint_findings(nginx_conf: Path | None, engine_cmd: str | None) -> list[DoctorFinding]:
    return []
