"""The ``ttft bench`` flow: resolve the target, run the session with a progress bar, report."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ttft.cli.bench_workers import print_workers
from ttft.core.records import RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.engines.llamacpp.on_demand import EMBEDDED_SLOTS, EmbeddedSize, target_or_embedded
from ttft.load import bench_plan
from ttft.load.bench_options import BenchOptions, worker_setup
from ttft.load.bench_workload import check_fits, describe_workload, make_tokenizer, workload_spec
from ttft.load.cells import expected_requests
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.runner import CellPlan
from ttft.load.session import SessionHooks, SessionResult, run_session
from ttft.workload.spec import WorkloadSpec


@contextlib.contextmanager
def _target(
    options: BenchOptions, spec: WorkloadSpec, console: Console
) -> Iterator[tuple[Target, bool]]:
    """The user's server, or the embedded engine sized for the workload (stopped afterwards)."""
    given, headers = options.target.target(), options.target.header_dict()
    size = functools.partial(bench_plan.embedded_size, spec)
    with target_or_embedded(given, size, headers=headers, on_start=_starting(console)) as served:
        if served.engine is not None:
            ready = f"ready in {served.engine.startup_s:.2f} s at {served.engine.base_url}"
            console.print(f"[dim]{ready}[/dim]")
        yield served.target, served.engine is not None


def _starting(console: Console) -> Callable[[EmbeddedSize], None]:
    def say(size: EmbeddedSize) -> None:
        console.print(f"[dim]starting the embedded engine ({size.describe()}) ...[/dim]")

    return say


def _cold_mode(options: BenchOptions, spec: WorkloadSpec, console: Console, out_dir: Path) -> None:
    """Restart the engine before each sample; report only first requests and start-up times."""
    from ttft.engines.llamacpp.embedded import launch_embedded
    from ttft.load.cold import run_cold_bench

    plan = bench_plan.cold_plan(options, spec)
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    with Progress(
        TextColumn("cold starts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("cold", total=plan.samples)
        cold = run_cold_bench(
            lambda: launch_embedded(ctx_size=plan.ctx_size, parallel=EMBEDDED_SLOTS),
            plan.samples,
            plan.prompt_tokens,
            out_dir / "records.jsonl",
            slos,
            on_sample=lambda _: progress.advance(task),
        )
    startups = cold.startups_s
    console.print(
        f"engine start-up to healthy: median {startups[len(startups) // 2]:.2f} s "
        f"(min {startups[0]:.2f}, max {startups[-1]:.2f})"
    )
    _write_report(cold.summary, [], out_dir, console, options.html_path)
    if bench_plan.slos_missed(slos, cold.summary):
        raise click.exceptions.Exit(1)


def execute(options: BenchOptions) -> None:
    console = Console(stderr=True)
    if options.cold_samples is not None:
        worker_setup(options)  # refuses --workers/--ray with --cold
        profile = options.profile or "quick"
        out = bench_plan.results_dir(options, cold=True)
        _cold_mode(options, workload_spec(options, profile), console, out)
        return
    profile = options.profile_name
    spec = workload_spec(options, profile)
    workers = worker_setup(options)
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    out_dir = bench_plan.results_dir(options)
    records_path = out_dir / "records.jsonl"
    console.print(
        f"[bold]ttft bench[/bold] ({profile} defaults): {describe_workload(spec)}; "
        f"records -> {records_path}; seed {spec.seed} (--seed builds the same prompts)"
    )
    with _target(options, spec, console) as (target, fresh):
        check_fits(spec, ControlClient(target).context_limit())
        tokenizer = None
        if bench_plan.needs_server_tokenizer(options, spec):
            tokenizer = make_tokenizer(options.tokenizer_path, target)
        result = _run_with_progress(
            target, spec, tokenizer, records_path, fresh, slos, options, console, workers
        )
    bench_plan.add_reuse_note(result, spec)
    _write_report(result.summary, result.notes, out_dir, console, options.html_path)
    print_workers(result.summary, console)
    health = result.summary.client_health
    if bench_plan.client_suspect(options, result.summary) and health is not None:
        console.print(f"[bold red]client {health.level}[/bold red]: --fail-on-client-suspect")
        raise click.exceptions.Exit(bench_plan.CLIENT_SUSPECT_EXIT)
    if bench_plan.slos_missed(slos, result.summary):
        raise click.exceptions.Exit(1)


def _run_with_progress(
    target: Target,
    spec: WorkloadSpec,
    tokenizer: Any,
    path: Path,
    fresh: bool,
    slos: Any,
    options: BenchOptions,
    console: Console,
    workers: WorkerSetup | None = None,
) -> SessionResult:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        build = progress.add_task("building prompts", total=None, status="")
        cell_task: dict[str, Any] = {"id": None, "ok": 0, "failed": 0}

        def on_build(done: int, total: int) -> None:
            progress.update(build, completed=done, total=total)

        def on_cell_start(plan: CellPlan) -> None:
            if cell_task["id"] is not None:
                progress.stop_task(cell_task["id"])  # a timed cell's bar has no total to reach
                progress.update(cell_task["id"], visible=plan.phase == "warm")
            name = plan.cell if plan.phase == "warm" else f"{plan.cell} ({plan.phase})"
            cell_task.update(ok=0, failed=0)
            cell_task["id"] = progress.add_task(name, total=expected_requests(plan), status="")

        def on_record(record: RequestRecord) -> None:
            key = "ok" if record.error is None else "failed"
            cell_task[key] += 1
            status = f"{cell_task['ok']} ok" + (
                f", [red]{cell_task['failed']} failed[/red]" if cell_task["failed"] else ""
            )
            progress.update(cell_task["id"], advance=1, status=status)

        hooks = SessionHooks(on_build=on_build, on_cell_start=on_cell_start, on_record=on_record)
        return run_session(
            target,
            spec,
            tokenizer,
            path,
            fresh_server=fresh,
            slos=slos,
            hooks=hooks,
            timeout_s=options.timeout_s,
            run_meta={"profile": options.profile_name},
            workers=workers,
        )


def _write_report(
    summary: Any, notes: list[str], out_dir: Path, console: Console, html: str | None = None
) -> None:
    from ttft.cli.html_output import write_saved_page
    from ttft.report.saved import save_summary
    from ttft.report.terminal import print_summary

    print_summary(summary, Console())
    save_summary(summary, out_dir)
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {out_dir}/ (records.jsonl, summary.json, summary.csv, summary.md)")
    write_saved_page(html, out_dir, out_dir, console)
