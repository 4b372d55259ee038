"""The ``ttft doctor`` flow: the options parsed, the library asked for the target and context
(``doctor/prepare``), the steps run with progress, the report printed and written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult
from ttft.doctor.options import DoctorOptions, doctor_ask, engine_url, report_plan
from ttft.doctor.prepare import doctor_target, open_context
from ttft.doctor.run import STEPS, run_doctor
from ttft.engines.llamacpp.on_demand import EmbeddedSize
from ttft.load.gpu_sampler import DcgmSource


def execute(options: DoctorOptions) -> None:
    console = Console(stderr=True)
    ask = doctor_ask(options)
    if options.budget <= 0:
        raise click.BadParameter("must be above 0 minutes", param_hint="--budget")
    lint_findings = _lint(options)
    if options.gpu_metrics_url:
        # A wrong --gpu-metrics-url is an input error before anything starts, not a note at the end.
        DcgmSource(options.gpu_metrics_url).read()

    def say(size: EmbeddedSize) -> None:
        console.print(f"[dim]starting the embedded engine ({size.describe()}) ...[/dim]")

    with doctor_target(ask, on_start=say) as served:
        ctx = open_context(ask, served)
        report = run_doctor(ctx, on_step=_progress(console), extra_findings=lint_findings)
    _emit(report, options, console)
    if options.plan is not None:
        _write_plan(report, options, ctx, served.launch, console)
    if options.fail_on_findings and report.findings:
        raise click.exceptions.Exit(1)
    if report.failed_steps and not any(s.status == "ok" for s in report.steps):
        raise click.exceptions.Exit(1)  # nothing could be measured: not a success


def _progress(console: Console) -> Any:
    total = len(STEPS)
    names = [name for name, _ in STEPS]

    def on_step(name: str, result: StepResult | None) -> None:
        number = names.index(name) + 1
        if result is None:
            console.print(f"[dim][{number}/{total}] {name} ...[/dim]")
        else:
            console.print(
                f"[dim][{number}/{total}] {name}: {result.status} in {result.seconds:.1f} s[/dim]"
            )

    return on_step


def _lint(options: DoctorOptions) -> list[Any]:
    from ttft.doctor.lint_bridge import lint_findings

    return lint_findings(options.nginx_conf, options.engine_cmd, engine_url(options))


def _emit(report: Any, options: DoctorOptions, console: Console) -> None:
    from ttft.report.doctor import document_text, print_doctor, write_report_files

    if options.fmt == "text":
        print_doctor(report, Console())
    else:
        click.echo(document_text(report, options.fmt))
    out: Path | None = options.out_dir
    if out is not None:
        write_report_files(report, out)
        console.print(f"report: {out}/report.json, {out}/report.md")
    _write_html(report, options, console)


def _write_html(report: Any, options: DoctorOptions, console: Console) -> None:
    """The page from report.json when --out wrote one (what `ttft report` reads), else from the
    same document through JSON, so both ways give the same page."""
    from ttft.cli.html_output import html_target, write_page
    from ttft.report.saved import generated_now, render_document, render_saved

    folder = options.out_dir or Path.cwd()
    target = html_target(options.html_path, folder)
    if target is None:
        return
    if options.out_dir is not None:
        text = render_saved(options.out_dir / "report.json")
    else:
        document = json.loads(json.dumps(report.to_dict()))
        text = render_document(document, generated=generated_now(), source="report.json")
    write_page(text, target, console)


def _write_plan(
    report: Any, options: DoctorOptions, ctx: DoctorContext, launch: str | None, console: Console
) -> None:
    """The findings' changes as a plan, with the service as doctor measured it."""
    from ttft.core.plan import plan_to_toml

    plan = report_plan(report, options, ctx, launch)
    assert options.plan is not None
    options.plan.parent.mkdir(parents=True, exist_ok=True)
    options.plan.write_text(plan_to_toml(plan), encoding="utf-8")
    console.print(
        f"plan: {options.plan} ({len(plan.steps)} step(s), {len(plan.unapplied)} to do by hand); "
        f"run it with: ttft tune ab --plan {options.plan}"
    )
