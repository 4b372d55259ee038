"""What every engine lint rule is written with: options, the Rule type, finding helpers, limits.

Each rule reads a parsed ``EngineCommand`` and returns findings pointing at the token (or, for a
missing flag, at the launcher). The numbers quoted come from the seed article (an 8B model on one
80 GB GPU, 2400-token prompts at concurrency 32) and from the embedded llama-server on this
project's CPU machines (DESIGN.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ttft.core.findings import Finding, Location, Severity
from ttft.engines.command import Arg, EngineCommand
from ttft.engines.local_process import LaunchCommand

# The range worth sweeping for the per-step token budget: start at 2048, sweep 1024/2048/4096.
BUDGET_LOW, BUDGET_START, BUDGET_HIGH = 1024, 2048, 4096
# Above this fraction of GPU memory for weights + KV, a burst leaves no headroom: preemption.
MEMORY_RISKY = 0.92


@dataclass(frozen=True)
class EngineLintOptions:
    expected_concurrency: int | None = None
    # A GPU deployment; False: CPU-only, where GPU levers are moot. None: detected from the
    # command (and ``live``) by ``ttft.engines.device``; a GPU where nothing tells.
    gpu: bool | None = None
    # The running engine's own launch command and environment, when it listens on this machine.
    live: LaunchCommand | None = None


Rule = Callable[[EngineCommand, EngineLintOptions], list[Finding]]


def finding_at(
    cmd: EngineCommand,
    rule: str,
    severity: Severity,
    title: str,
    message: str,
    at: Arg | None,
    fix: str,
    gain: str = "",
) -> Finding:
    loc: Location = cmd.location(at.token if at else None)
    return Finding(rule, severity, title, message, loc, fix, gain)


def parse_count(text: str | None) -> int | None:
    """``2048``, ``2k`` (2000), ``2K`` (2048), ``1M``: vLLM's human-readable integers."""
    if text is None:
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgG]?)", text.strip())
    if not m:
        return None
    scale = {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 2**20, "g": 10**9, "G": 2**30}
    return int(float(m.group(1)) * scale[m.group(2)])


def parse_float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def is_false(value: str | None) -> bool:
    return value is not None and value.lower() in ("false", "0", "off", "no", "disabled")
