"""Typed options of ``ttft doctor``, built once from click's values (bench's are
``ttft.load.bench_options.BenchOptions``), and what they ask of the library: the parsed
``DoctorAsk``, and the plan ``--plan`` writes.

The flow reads attributes, never strings: a misspelled option is a type error, not a KeyError at
run time.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ttft.core.target_options import TargetOptions

if TYPE_CHECKING:  # the flow's modules load when it runs, not for `ttft doctor --help`
    from ttft.core.plan import Plan
    from ttft.doctor.context import DoctorContext
    from ttft.doctor.prepare import DoctorAsk
    from ttft.doctor.run import DoctorReport


@dataclass(frozen=True)
class DoctorOptions:
    target: TargetOptions
    direct_url: str | None
    requests_log: Path | None
    nginx_conf: Path | None
    engine_cmd: str | None
    slo_texts: tuple[str, ...]
    concurrency: str | None
    hol: bool
    budget: float
    out_dir: Path | None
    fmt: str
    fail_on_findings: bool
    plan: Path | None = None
    html_path: str | None = None
    gpu_metrics_url: str | None = None


def doctor_ask(options: DoctorOptions) -> DoctorAsk:
    """The options, parsed; a bad value is an input error before anything starts (the budget
    is checked by the caller, which knows how to name the option)."""
    from ttft.core.slo import parse_slos
    from ttft.doctor.context import asked_answer_tokens
    from ttft.doctor.prepare import DoctorAsk
    from ttft.load.bench_options import parse_int_list
    from ttft.workload.builders import from_jsonl

    log = options.requests_log
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    real = from_jsonl(log, max_tokens=1) if log else []
    asked = asked_answer_tokens(from_jsonl(log)) if log else ()
    levels = parse_int_list(options.concurrency, "--concurrency") if options.concurrency else None
    return DoctorAsk(
        service=options.target,
        deadline=time.monotonic() + 60 * options.budget,
        direct_url=options.direct_url,
        levels=levels,
        real_items=real,
        asked_answer_tokens=asked,
        slos=slos,
        gpu_metrics_url=options.gpu_metrics_url,
        force_hol=bool(options.hol),
    )


def engine_url(options: DoctorOptions) -> str | None:
    """The engine itself (behind the proxy when --direct-url names it): its running process
    tells lint the device when it listens on this machine."""
    return options.direct_url or options.target.url


def report_plan(
    report: DoctorReport, options: DoctorOptions, ctx: DoctorContext, launch: str | None
) -> Plan:
    """The findings' changes as a plan, with the service as doctor measured it."""
    from ttft.core.plan import ServiceSpec
    from ttft.doctor.plan import build_plan

    def absolute(path: Path | None) -> str | None:
        return None if path is None else str(path.resolve())

    service = ServiceSpec(
        url=options.target.url,
        engine=ctx.engine_kind,
        direct_url=options.direct_url,
        launch=launch or options.engine_cmd,
        nginx_conf=absolute(options.nginx_conf),
        requests_log=absolute(options.requests_log),
        concurrency=max(ctx.levels),
        slos=tuple(options.slo_texts),
    )
    plan = build_plan(report.findings, service, source=f"ttft doctor {report.target}")
    # A step that did not measure may have found more: the plan says so instead of looking whole.
    missing = [
        f"doctor/{step.name}: not measured ({step.notes[0] if step.notes else step.status.value}); "
        "its findings, if any, are not in this plan"
        for step in report.failed_steps + report.unfinished_steps
    ]
    if missing:
        plan = dataclasses.replace(plan, unapplied=(*plan.unapplied, *missing))
    return plan
