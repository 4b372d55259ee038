"""doctor --plan: one step per distinct change, the proxy's edits as one step, cheapest first."""

from __future__ import annotations

from ttft.core.changes import Change
from ttft.core.findings import CostTier, Finding, Severity
from ttft.core.plan import ServiceSpec, parse_plan, plan_to_toml
from ttft.core.text_edits import TextEdit
from ttft.doctor.plan import build_plan

SITE = "/etc/nginx/sites-enabled/llm.conf"
BUFFERING = TextEdit(SITE, 12, "insert", "location / {", "proxy_buffering off;")
GZIP = TextEdit(SITE, 12, "insert", "location / {", "gzip off;")


def finding(rule: str, tier: CostTier, change: Change | None = None, gain: float = 0) -> Finding:
    return Finding(rule, Severity.WARNING, f"{rule} seen", "cause", action=f"fix {rule}",
                   tier=tier, expected_gain_ms=gain, change=change)  # fmt: skip


FINDINGS = [
    finding("transport/gzip-stream", CostTier.TRANSPORT, gain=800),
    finding("nginx/proxy-buffering", CostTier.TRANSPORT, Change("b", edits=(BUFFERING,))),
    finding("nginx/gzip-event-stream", CostTier.TRANSPORT, Change("g", edits=(GZIP, BUFFERING))),
    finding("capacity/queueing", CostTier.SCHEDULING, Change("4 slots", {"-np": "4"})),
    finding("cache/dynamic-prefix", CostTier.TRANSPORT,
            Change("moved", transforms=("move-dynamic",), tier=CostTier.TRANSPORT)),
    finding("scheduling/head-of-line", CostTier.SCHEDULING),
    finding("capacity/queueing", CostTier.SCHEDULING, Change("4 slots", {"-np": "4"})),
]  # fmt: skip


def test_the_proxy_edits_are_one_step_and_the_measured_symptom_is_not_work_by_hand() -> None:
    plan = build_plan(FINDINGS, ServiceSpec(url="http://127.0.0.1:8080"))
    labels = [s.change.label for s in plan.steps]
    assert labels == ["moved", "proxy: gzip-event-stream, proxy-buffering fixed", "4 slots"]
    proxy = plan.steps[1].change
    assert proxy.edits == (BUFFERING, GZIP)  # each edit once
    assert plan.unapplied == ("scheduling/head-of-line: fix scheduling/head-of-line",)


def test_without_the_proxy_configuration_the_stream_fault_is_left_to_do_by_hand() -> None:
    plan = build_plan(FINDINGS[:1], ServiceSpec())
    assert plan.steps == ()
    assert plan.unapplied == ("transport/gzip-stream: fix transport/gzip-stream",)


def test_the_plan_doctor_writes_reads_back_as_the_same_plan() -> None:
    plan = build_plan(FINDINGS, ServiceSpec(url="http://127.0.0.1:8080", nginx_conf=SITE))
    again = parse_plan(plan_to_toml(plan))
    assert again.steps == plan.steps and again.unapplied == plan.unapplied
