"""The ``ttft bench`` flow: resolve the target, run the session with a progress bar, report."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ttft.cli.bench_workers import print_workers
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord
from ttft.core.slo import parse_slos
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.engines.llamacpp.on_demand import (
    EMBEDDED_SLOTS,
    EmbeddedSize,
    context_for,
    target_or_embedded,
)
from ttft.load.bench_options import BenchOptions, worker_setup
from ttft.load.bench_trace import embedded_settings, reuse_note
from ttft.load.bench_workload import (
    check_fits,
    describe_workload,
    longest_prompt,
    make_tokenizer,
    workload_spec,
)
from ttft.load.cells import expected_requests
from ttft.load.fleet_setup import WorkerSetup
from ttft.load.runner import CellPlan
from ttft.load.session import SessionHooks, SessionResult, run_session
from ttft.load.trace_plan import load_trace, needs_tokenizer
from ttft.workload.spec import WorkloadSpec

CLIENT_SUSPECT_EXIT = 3  # --fail-on-client-suspect: the client, not the server, was in doubt


@contextlib.contextmanager
def _target(
    options: BenchOptions, spec: WorkloadSpec, console: Console
) -> Iterator[tuple[Target, bool]]:
    """The user's server, or the embedded engine sized for the workload (stopped afterwards)."""
    given, headers = options.target.target(), options.target.header_dict()
    size = functools.partial(_embedded_size, spec)
    with target_or_embedded(given, size, headers=headers, on_start=_starting(console)) as served:
        if served.engine is not None:
            ready = f"ready in {served.engine.startup_s:.2f} s at {served.engine.base_url}"
            console.print(f"[dim]{ready}[/dim]")
        yield served.target, served.engine is not None


def _embedded_size(spec: WorkloadSpec) -> EmbeddedSize:
    """Every slot fits the longest prompt and its answer (a trace: its longest request)."""
    if spec.trace is not None:
        longest, extra = embedded_settings(spec)
        return EmbeddedSize(context_for(longest + 64), extra_args=extra)
    return EmbeddedSize(context_for(longest_prompt(spec) + spec.max_tokens + 64))


def _starting(console: Console) -> Callable[[EmbeddedSize], None]:
    def say(size: EmbeddedSize) -> None:
        console.print(f"[dim]starting the embedded engine ({size.describe()}) ...[/dim]")

    return say


def _cold_mode(options: BenchOptions, spec: WorkloadSpec, console: Console, out_dir: Path) -> None:
    """Restart the engine before each sample; report only first requests and start-up times."""
    from ttft.engines.llamacpp.embedded import launch_embedded
    from ttft.load.cold import run_cold_bench

    if options.target.url:
        raise TtftError(
            "--cold restarts the engine between samples, so it needs an engine ttft manages",
            "drop --url to use the embedded engine (or restart your server yourself and run "
            "bench with --requests 1)",
        )
    samples, tokens = options.cold_samples or 0, min(spec.buckets)
    if samples < 1:
        raise TtftError("--cold needs at least 1 sample")
    ctx = context_for(tokens + 1 + 64)
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    with Progress(
        TextColumn("cold starts"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("cold", total=samples)
        cold = run_cold_bench(
            lambda: launch_embedded(ctx_size=ctx, parallel=EMBEDDED_SLOTS),
            samples,
            tokens,
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
    if slos and not cold.summary.slos_passed:
        raise click.exceptions.Exit(1)


def execute(options: BenchOptions) -> None:
    console = Console(stderr=True)
    if options.cold_samples is not None:
        worker_setup(options)  # refuses --workers/--ray with --cold
        profile = options.profile or "quick"
        out = options.out_dir or Path("results") / time.strftime("bench-cold-%Y%m%d-%H%M%S")
        out.mkdir(parents=True, exist_ok=True)
        _cold_mode(options, workload_spec(options, profile), console, out)
        return
    profile = options.profile or ("article" if options.target.url else "quick")
    spec = workload_spec(options, profile)
    workers = worker_setup(options)
    slos = parse_slos(options.slo_texts) if options.slo_texts else ()
    out_dir: Path = options.out_dir or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    records_path = out_dir / "records.jsonl"
    console.print(
        f"[bold]ttft bench[/bold] ({profile} defaults): {describe_workload(spec)}; "
        f"records -> {records_path}"
    )
    with _target(options, spec, console) as (target, fresh):
        check_fits(spec, ControlClient(target).context_limit())
        uses_files = any(f is not None for f in (options.prompt_file, options.sharegpt))
        uses_files = uses_files or options.conversations is not None
        if spec.trace is not None:
            uses_files = not needs_tokenizer(load_trace(spec.trace))
        tokenizer = None if uses_files else make_tokenizer(options.tokenizer_path, target)
        result = _run_with_progress(
            target, spec, tokenizer, records_path, fresh, slos, options, console, workers
        )
    reuse = reuse_note(result.bench) if spec.trace is not None else None
    if reuse is not None:
        result.notes.append(reuse[0])
        result.summary.meta["trace_reuse"] = reuse[1]
    _write_report(result.summary, result.notes, out_dir, console, options.html_path)
    print_workers(result.summary, console)
    health = result.summary.client_health
    if options.fail_on_client_suspect and health is not None and not health.trusted:
        console.print(f"[bold red]client {health.level}[/bold red]: --fail-on-client-suspect")
        raise click.exceptions.Exit(CLIENT_SUSPECT_EXIT)
    if slos and not all(cell.slos_passed for cell in result.summary.cells):
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
            run_meta={"profile": options.profile or ("article" if options.target.url else "quick")},
            workers=workers,
        )


def _write_report(
    summary: Any, notes: list[str], out_dir: Path, console: Console, html: str | None = None
) -> None:
    from ttft.cli.html_output import write_saved_page
    from ttft.report.csv import summary_to_csv
    from ttft.report.markdown import summary_to_markdown
    from ttft.report.terminal import print_summary

    print_summary(summary, Console())
    (out_dir / "summary.json").write_text(json.dumps(summary.to_dict(), indent=2))
    (out_dir / "summary.csv").write_text(summary_to_csv(summary))
    (out_dir / "summary.md").write_text(summary_to_markdown(summary))
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {out_dir}/ (records.jsonl, summary.json, summary.csv, summary.md)")
    write_saved_page(html, out_dir, out_dir, console)
