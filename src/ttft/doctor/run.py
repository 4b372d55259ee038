"""The troubleshooting order, in order: each step a small procedure with its own evidence."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ttft import __version__
from ttft.core.errors import TtftError
from ttft.core.findings import Finding, rank_by_cost
from ttft.doctor import (
    step_cache,
    step_dynamic,
    step_latency,
    step_sampling,
    step_server,
    step_transport,
)
from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult, StepStatus, doctor_dict

Step = Callable[[DoctorContext], StepResult]

# The article's order of investigation (seed 5.3), the sampling chain's cost (its lever 4), then
# cold start and head-of-line blocking.
STEPS: list[tuple[str, Step]] = [
    ("transport", step_transport.run),
    ("timeline", step_server.timeline),
    ("capacity", step_server.capacity),
    ("prefix_cache", step_cache.prefix_cache),
    ("dynamic_prefix", step_dynamic.dynamic_prefix),
    ("control", step_cache.control),
    ("sampling", step_sampling.sampling),
    ("cold_start", step_latency.cold_start),
    ("head_of_line", step_latency.head_of_line),
]
STEP_MIN_SECONDS = 10.0  # a step needs at least this much budget left to start


@dataclass
class DoctorReport:
    target: str
    steps: list[StepResult]
    findings: list[Finding]
    lint_findings: list[Finding] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def failed_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.status == StepStatus.FAILED]

    @property
    def unfinished_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.status == StepStatus.OUT_OF_BUDGET]

    @property
    def healthy(self) -> bool:
        """No finding, and every step could measure or chose to skip: a failed step, or one the
        budget cut, is no clean bill of health."""
        return not self.findings and not self.failed_steps and not self.unfinished_steps

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ttft.doctor/1",
            "ttft_version": __version__,
            "target": self.target,
            "healthy": self.healthy,
            "failed_steps": [s.name for s in self.failed_steps],
            "unfinished_steps": [s.name for s in self.unfinished_steps],
            "findings": [doctor_dict(f) for f in self.findings],
            "steps": [s.to_dict() for s in self.steps],
            "meta": self.meta,
        }


def run_doctor(
    ctx: DoctorContext,
    *,
    steps: list[tuple[str, Step]] | None = None,
    on_step: Callable[[str, StepResult | None], None] | None = None,
    extra_findings: list[Finding] | None = None,
) -> DoctorReport:
    """Run each step while budget remains; a step that fails is reported, never fatal."""
    results: list[StepResult] = []
    for name, step in steps or STEPS:
        if on_step is not None:
            on_step(name, None)
        if ctx.seconds_left() < STEP_MIN_SECONDS:
            result = StepResult(name, name, status=StepStatus.OUT_OF_BUDGET)
            result.notes.append("the time budget ran out before this step (raise --budget)")
        else:
            started = time.monotonic()
            try:
                result = step(ctx)
            except TtftError as exc:
                result = StepResult(name, name, status=StepStatus.FAILED)
                result.notes.append(str(exc))
            except Exception as exc:  # one broken step must not lose the others
                result = StepResult(name, name, status=StepStatus.FAILED)
                result.notes.append(
                    f"internal error in this step ({type(exc).__name__}: {exc}); the other "
                    "steps' results stand - please report this"
                )
            result.seconds = time.monotonic() - started
        results.append(result)
        if on_step is not None:
            on_step(name, result)
    found = [f for r in results for f in r.findings] + list(extra_findings or [])
    return DoctorReport(
        target=ctx.target.root,
        steps=results,
        findings=rank_by_cost(found),
        lint_findings=list(extra_findings or []),
        meta={"engine": ctx.engine_kind, "model": ctx.target.model, "levels": list(ctx.levels)},
    )
