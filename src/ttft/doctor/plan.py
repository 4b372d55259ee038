"""``ttft doctor --plan``: the report's changes as an ordered, editable plan, cheapest first.

One step per distinct change. The proxy's edits form one step: the nginx rules and the measured
symptom (a bunched stream) are one fault seen from two sides, and the proxy is reloaded once
for all of them. A measured transport finding that the proxy step fixes is not listed again as
work to do by hand; every other finding without a change is (``Plan.unapplied``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ttft.core.changes import Change
from ttft.core.findings import CostTier, Finding
from ttft.core.plan import Plan, PlanStep, ServiceSpec
from ttft.core.text_edits import TextEdit

# Measured symptoms of a proxy that holds the stream: the proxy step is their fix.
_PROXY_SYMPTOMS = ("transport/buffered-stream", "transport/gzip-stream")


def _proxy_step(findings: Sequence[Finding]) -> PlanStep | None:
    with_edits = [f for f in findings if f.change is not None and f.change.edits]
    if not with_edits:
        return None
    edits: list[TextEdit] = []
    for f in with_edits:
        assert f.change is not None
        edits.extend(e for e in f.change.edits if e not in edits)
    rules = sorted({f.rule for f in with_edits})
    names = ", ".join(r.split("/", 1)[-1] for r in rules)
    change = Change(
        f"proxy: {names} fixed",
        edits=tuple(edits),
        tier=CostTier.TRANSPORT,
        rule=",".join(rules),
    )
    why = "; ".join(dict.fromkeys(f.title for f in with_edits))
    return PlanStep(change, why=why)


def build_plan(
    findings: Sequence[Finding], service: ServiceSpec, *, source: str | None = None
) -> Plan:
    proxy = _proxy_step(findings)
    steps: list[PlanStep] = [proxy] if proxy is not None else []
    seen: list[Change] = []
    unapplied: list[str] = []
    for f in findings:
        change = f.change
        if change is not None and change.edits:
            continue  # in the proxy step
        if change is None:
            if proxy is not None and f.rule in _PROXY_SYMPTOMS:
                continue
            unapplied.append(f"{f.rule}: {f.action or f.title}")
            continue
        if change in seen:  # the same fix found twice (e.g. by two steps)
            continue
        seen.append(change)
        steps.append(PlanStep(change, why=f.title, expected_gain_ms=f.expected_gain_ms))
    return Plan(
        service=service,
        # Cheapest first; equal costs keep the report's order (a stable sort).
        steps=tuple(sorted(steps, key=lambda s: s.change.cost_key())),
        unapplied=tuple(unapplied),
        source=source,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
