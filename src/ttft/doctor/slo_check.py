"""The user's SLOs against the capacity step's load levels: up to where do they hold?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.metrics import get_metric
from ttft.core.records import RequestRecord
from ttft.core.slo import Slo, SloVerdict, evaluate
from ttft.core.units import display_unit, to_display
from ttft.doctor.changes import admission_cap
from ttft.doctor.findings import StepResult


def _verdict(slo: Slo, records: Sequence[RequestRecord]) -> SloVerdict | None:
    metric = get_metric(slo.metric)
    if metric is None:
        return None
    values = sorted(v for r in records if r.ok for v in metric.values(r))
    return evaluate(slo, values) if values else None


def check_slos(
    step: StepResult, slos: Sequence[Slo], by_level: Mapping[int, Sequence[RequestRecord]]
) -> set[int]:
    """Evidence per SLO and level; a finding where an SLO stops holding as load rises. Returns
    the levels at which some SLO failed."""
    failed: set[int] = set()
    for slo in slos:
        verdicts = {c: v for c, v in ((c, _verdict(slo, r)) for c, r in by_level.items()) if v}
        if not verdicts:
            continue
        metric = get_metric(slo.metric)
        unit = metric.unit if metric is not None else ""

        def shown(v: SloVerdict, unit: str = unit) -> str:
            if v.observed is None:
                return "n/a"
            return f"{to_display(v.observed, unit):.0f} {display_unit(unit)}"

        step.evidence.append(
            Evidence(
                f"SLO {slo.text}",
                ", ".join(
                    f"c={c}: {shown(v)} {'ok' if v.passed else 'FAIL'}"
                    for c, v in sorted(verdicts.items())
                ),
                "",
                "client",
            )
        )
        failing = sorted(c for c, v in verdicts.items() if not v.passed)
        failed.update(failing)
        if not failing:
            continue
        holding = [c for c in sorted(verdicts) if verdicts[c].passed and c < failing[0]]
        if holding:
            cap = holding[-1]
            step.add_finding(
                rule="capacity/slo-limit",
                title=f"the SLO {slo.text} holds up to concurrency {cap} and fails at "
                f"{failing[0]} ({shown(verdicts[failing[0]])})",
                message="beyond that load, requests wait or share prefill compute, and the "
                "tail grows past the SLO",
                action=f"admit at most {cap} concurrent requests per replica (e.g. "
                f"`ttft gateway --max-in-flight {cap}`) and add replicas for more load; "
                "or apply the scheduling findings above",
                tier=CostTier.SCHEDULING,
                confidence=Confidence.MEDIUM,
                change=admission_cap(cap),
            )
        else:
            step.add_finding(
                rule="capacity/slo-unmet-unloaded",
                title=f"the SLO {slo.text} fails even at concurrency {failing[0]} "
                f"({shown(verdicts[failing[0]])})",
                message="the prompts' prefill alone takes longer than the SLO allows on this "
                "deployment",
                action="shorten or cache the prompts' prefixes (see the prefix-cache step), "
                "or faster hardware / kernels; admission control cannot fix this",
                tier=CostTier.PRECISION,
                confidence=Confidence.MEDIUM,
            )
    return failed
