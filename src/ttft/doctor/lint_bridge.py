"""Static findings (nginx configuration, engine flags) joining the doctor's list.

Lint's warnings and errors become doctor findings with a cost tier by area (a proxy setting is
transport, a scheduler flag is scheduling, a cache flag is cache, precision and kernel flags are
the most expensive); lint's info notes stay out of the doctor's list.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ttft.core.findings import Confidence, CostTier, Evidence, Finding, Severity

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


def to_doctor(findings: Sequence[Finding], source: str) -> list[Finding]:
    """The same findings with what doctor ranks by: a cost tier, a confidence, where they came
    from (the static check's place as evidence, and in the title)."""
    out = []
    for f in findings:
        if f.severity < Severity.WARNING:
            continue
        where = f.location.display() if f.location is not None else source
        out.append(
            replace(
                f,
                title=f"{f.title} ({where})",
                action=f.action or "see `ttft lint` for details",
                tier=_tier(f.rule),
                confidence=Confidence.HIGH if f.severity == Severity.ERROR else Confidence.MEDIUM,
                step=f"lint {source}",
                evidence=(Evidence("static check", where, "", "lint"),),
            )
        )
    return out


def lint_findings(
    nginx_conf: Path | None, engine_cmd: str | None, engine_url: str | None = None
) -> list[Finding]:
    """Lint's warnings on the proxy configuration and the engine's launch command. With
    ``engine_url`` on loopback, the running engine's own process (its environment, its
    executable) tells whether it is on a GPU, so GPU-only advice stays off a CPU engine."""
    found: list[Finding] = []
    if nginx_conf is not None:
        from ttft.lint.nginx.config import load
        from ttft.lint.nginx.rules import lint_config

        # Absolute paths: the plan's edits must name the files wherever tune ab runs from.
        found += to_doctor(lint_config(load(nginx_conf.resolve())), "nginx")
    if engine_cmd:
        from ttft.engines.cmdline import COMMAND_LINE, parse, tokens_from_argv
        from ttft.engines.local_process import launch_command_of_url
        from ttft.engines.rulekit import EngineLintOptions
        from ttft.lint.engine.run import lint_command

        tokens = tokens_from_argv(shlex.split(engine_cmd))
        live = launch_command_of_url(engine_url) if engine_url else None
        options = EngineLintOptions(live=live)
        found += to_doctor(lint_command(parse(tokens, None, COMMAND_LINE), options), "engine")
    return found
