"""``ttft tune sweep`` on the terminal: progress over trials and the tables; what to run, the
refusals and the report files are ``ttft.tune.sweep_flow``'s."""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Iterator
from dataclasses import replace
from types import FrameType

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ttft.cli.html_output import write_saved_page
from ttft.load.bench_options import parse_int_list
from ttft.tune.experiment import ExperimentDir
from ttft.tune.options import SweepOptions
from ttft.tune.space import Config, config_label
from ttft.tune.sweep import run_sweep
from ttft.tune.sweep_flow import (
    SweepPlan,
    dry_run_commands,
    open_experiment,
    plan_sweep,
    predict_selection,
    run_bucket_axis,
    sweep_reports,
    trial_runner,
)
from ttft.tune.tables import SWEEP_COLUMNS, sweep_cost
from ttft.tune.trial import TrialResult


@contextlib.contextmanager
def sigterm_stops_cleanly() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the running trial's engine is stopped on the way out."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def trial_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
    )


def print_table(title: str, columns: tuple[str, ...], rows: list[dict[str, str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(_HEADERS.get(column, column.replace("_", " ")))
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    # Piped output gets rich's 80 columns; these tables need more to stay readable.
    console = Console()
    Console(width=max(console.width, 150)).print(table)


_HEADERS = {
    "startup_s": "start-up s",
    "goodput_per_s": "goodput/s",
    "ttft_p50_ms": "p50 ms",
    "ttft_p95_ms": "p95 ms",
    "ttft_p99_ms": "p99 ms",
    "p50_ci_ms": "p50 95% CI",
    "p95_ci_ms": "p95 95% CI",
    "vs_previous_ms": "vs prev",
    "vs_baseline_ms": "vs base",
    "alone_vs_baseline_ms": "alone vs base",
    "ci_apart": "CI apart",
}


def write_page(html: str | None, exp: ExperimentDir) -> None:
    write_saved_page(html, exp.root / "summary.json", exp.root, Console(stderr=True))


def execute_sweep(options: SweepOptions) -> None:
    console = Console(stderr=True)
    if options.dry_run:
        for command in dry_run_commands(options):
            click.echo(shlex.join(command))
        return
    plan = plan_sweep(options)
    selection = predict_selection(options, plan)
    configs = plan.configs if selection is None else selection.measure
    gate = None
    if options.quality_gate:
        from ttft.tune.quality_gate import quality_gate

        gate = quality_gate(plan.configs[0], threads=options.threads, model_path=options.model_path)
    exp = open_experiment(options, "sweep", plan.spec)
    console.print(
        f"[bold]ttft tune sweep[/bold]: {len(plan.configs)} configurations of {plan.kind}; "
        f"SLOs {', '.join(s.text for s in plan.slos) or '(none: goodput = throughput)'}; "
        f"experiment -> {exp.root}"
    )
    if selection is not None:
        console.print(selection.headline(str(options.predict_path)))
    with sigterm_stops_cleanly(), trial_progress(console) as progress:
        task = progress.add_task("trials", total=len(configs), status="")

        def on_trial(
            n: int, total: int, config: Config, result: TrialResult | None, resumed: bool
        ) -> None:
            if result is None:
                progress.update(task, status=config_label(config))
                return
            state = "resumed" if resumed else result.status
            progress.update(task, advance=1, status=f"{config_label(config)}: {state}")

        results = run_sweep(configs, trial_runner(options), exp, plan.workload, plan.slos,
                            plan.search, on_trial, gate)  # fmt: skip
    predict = None
    if selection is not None:
        results = selection.merge(results)
        predict = {"calibration": str(options.predict_path), **selection.summary()}
    rows, choice = sweep_reports(exp, plan, results, predict)
    unit = "rate" if plan.search.load == "rate" else "load"
    print_table(f"tune sweep (best {unit} per configuration)", SWEEP_COLUMNS, rows)
    console.print(sweep_cost(results).text())
    write_page(options.html_path, exp)
    if options.buckets:
        _bucket_axis(options, replace(plan, configs=configs), exp, console)
    console.print(f"results: {exp.root}/ (summary.json, summary.md, summary.csv, trials/)")
    if choice is None:
        console.print("[red]no configuration held the SLOs at any load[/red]")
        raise click.exceptions.Exit(1)
    click.echo(f"chosen: {config_label(choice.config)}")
    if choice.launch_command:
        click.echo(f"launch: {shlex.join(choice.launch_command)}")


def _bucket_axis(
    options: SweepOptions, plan: SweepPlan, exp: ExperimentDir, console: Console
) -> None:
    """The prompt-length axis, with its own progress bar and table."""
    with sigterm_stops_cleanly(), trial_progress(console) as progress:
        assert options.buckets is not None
        words = list(parse_int_list(options.buckets, "--buckets"))
        task = progress.add_task("prompt lengths", total=len(words) * len(plan.configs), status="")

        def on_trial(n: int, config: Config, result: TrialResult | None) -> None:
            if result is not None:
                progress.update(task, advance=1, status=f"{n} words {config_label(config)}")

        columns, rows = run_bucket_axis(options, plan, exp, words, on_trial)
    print_table("prompt-length axis (p50 at the lowest load)", tuple(columns), rows)
