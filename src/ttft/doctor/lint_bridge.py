"""Static findings (nginx configuration, engine flags) joining the doctor's list.

Lint's warnings and errors become doctor findings with a cost tier by area (a proxy setting is
transport, a scheduler flag is scheduling, a cache flag is cache, precision and kernel flags are
the most expensive); lint's info notes stay out of the doctor's list.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from ttft.core.findings import Finding, Severity
from ttft.doctor.findings import Confidence, CostTier, DoctorFinding, Evidence

_CACHE_WORDS = ("prefix", "cache", "radix", "kv")
_PRECISION_WORDS = (
    "fp8",
    "quantized",
    "kv-cache-dtype",
    "cache-type",
    "cuda-graph",
    "eager",
    "flash",
    "ngl",
    "gpu-layers",
)


def _tier(rule: str) -> CostTier:
    area, _, what = rule.partition("/")
    if area in ("nginx", "prompts", "template"):
        return CostTier.TRANSPORT
    if any(word in what for word in _PRECISION_WORDS):
        return CostTier.PRECISION
    if any(word in what for word in _CACHE_WORDS):
        return CostTier.CACHE
    return CostTier.SCHEDULING


def to_doctor(findings: Sequence[Finding], source: str) -> list[DoctorFinding]:
    out = []
    for f in findings:
        if f.severity < Severity.WARNING:
            continue
        out.append(
            DoctorFinding(
                rule=f.rule,
                symptom=f"{f.title} ({f.location.display()})",
                cause=f.message,
                action=f.fix or "see `ttft lint` for details",
                tier=_tier(f.rule),
                confidence=Confidence.HIGH if f.severity == Severity.ERROR else Confidence.MEDIUM,
                step=f"lint {source}",
                evidence=(Evidence("static check", f.location.display(), "", "lint"),),
                expected_gain=f.gain,
            )
        )
    return out


def lint_findings(nginx_conf: Path | None, engine_cmd: str | None) -> list[DoctorFinding]:
    found: list[DoctorFinding] = []
    if nginx_conf is not None:
        from ttft.lint.nginx.config import load
        from ttft.lint.nginx.rules import lint_config

        found += to_doctor(lint_config(load(nginx_conf)), "nginx")
    if engine_cmd:
        from ttft.engines.cmdline import COMMAND_LINE, parse, tokens_from_argv
        from ttft.lint.engine.run import lint_command

        tokens = tokens_from_argv(shlex.split(engine_cmd))
        found += to_doctor(lint_command(parse(tokens, None, COMMAND_LINE)), "engine")
    return found
