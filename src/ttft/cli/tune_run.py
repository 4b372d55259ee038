"""The ``ttft tune`` flows: options to a runner and an experiment, progress over trials,
tables on the terminal and in the experiment directory (JSON, Markdown, CSV)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ttft.cli.bench_setup import parse_int_list
from ttft.core.errors import TtftError
from ttft.core.slo import Slo, parse_slos
from ttft.core.target import Target
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import ClientOnlyRunner, LlamaCppRunner, TrialRunner
from ttft.tune.space import (
    Config,
    config_label,
    configurations,
    default_space,
    launch_command,
    parse_space,
)
from ttft.tune.sweep import SearchSettings, chosen, run_sweep
from ttft.tune.tables import (
    SWEEP_COLUMNS,
    bucket_rows,
    sweep_json,
    sweep_rows,
    to_csv,
    to_markdown,
)
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TuneWorkload


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


def tune_workload(opts: dict[str, Any]) -> TuneWorkload:
    if opts["shape"] == "log" and opts["request_log"] is None:
        raise TtftError("--workload log needs --request-log FILE")
    return TuneWorkload(
        shape=opts["shape"],
        prefix_words=opts["prefix_words"],
        suffix_words=opts["suffix_words"],
        max_tokens=opts["max_tokens"],
        requests=opts["requests"],
        log_path=opts["request_log"],
    )


def trial_runner(opts: dict[str, Any]) -> TrialRunner:
    if opts.get("engine_kind") == "vllm" and not opts["url"]:
        from ttft.tune.vllm_runner import VllmRunner

        return VllmRunner(launch=tuple(shlex.split(opts.get("launch") or "")))
    if opts["url"]:
        launch = tuple(shlex.split(opts.get("launch") or ""))
        return ClientOnlyRunner(Target(opts["url"]), restart=opts.get("restart"), launch=launch)
    if opts.get("restart"):
        raise TtftError("--restart is for a service ttft does not start: give its --url too")
    return LlamaCppRunner(
        per_slot_ctx=opts["per_slot_ctx"], threads=opts["threads"], model_path=opts["model_path"]
    )


def open_experiment(opts: dict[str, Any], kind: str, spec: dict[str, Any]) -> ExperimentDir:
    out: Path = opts["out_dir"] or Path("results") / time.strftime(f"tune-{kind}-%Y%m%d-%H%M%S")
    if opts["resume"] and opts["out_dir"] is None:
        raise TtftError("--resume needs --out DIR (the experiment to continue)")
    return ExperimentDir.open(out, spec, resume=opts["resume"])


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


def write_reports(
    exp: ExperimentDir, data: dict[str, Any], md: str, csv_text: str, html: str | None = None
) -> None:
    from ttft.cli.html_output import write_saved_page

    exp.write_report("summary.json", json.dumps(data, indent=2))
    exp.write_report("summary.md", md)
    exp.write_report("summary.csv", csv_text)
    write_saved_page(html, exp.root / "summary.json", exp.root, Console(stderr=True))


def search_settings(opts: dict[str, Any]) -> SearchSettings:
    """The load search the sweep options ask for (closed loop unless --load rate)."""
    if opts.get("load_mode", "concurrency") != "rate":
        return SearchSettings(start=opts["start_load"], max_load=opts["max_load"])
    start, top = opts["start_rate"], opts["max_rate"]
    if not 0 < start <= top:
        raise TtftError(
            f"--start-rate {start:g} and --max-rate {top:g} need 0 < start <= max",
            "e.g. --start-rate 0.5 --max-rate 16 (requests/s)",
        )
    if not 0 < opts["rate_tolerance"] < 1:
        raise TtftError(f"--rate-tolerance must be between 0 and 1, not {opts['rate_tolerance']}")
    if opts["level_seconds"] <= 0 or opts["burstiness"] <= 0 or opts["max_client_lag_ms"] <= 0:
        raise TtftError("--level-seconds, --burstiness and --max-client-lag-ms must be above 0")
    return SearchSettings(
        load="rate",
        start_rate=start,
        max_rate=top,
        tolerance=opts["rate_tolerance"],
        level_s=opts["level_seconds"],
        burstiness=opts["burstiness"],
        max_lag_ms=opts["max_client_lag_ms"],
    )


def execute_sweep(opts: dict[str, Any]) -> None:
    console = Console(stderr=True)
    kind = opts["engine_kind"]
    space = parse_space(opts["params"]) if opts["params"] else default_space(kind)
    configs = configurations(space)
    limit = opts.get("max_configs") or 64
    if not opts["dry_run"] and len(configs) > limit:
        axes = ", ".join(f"{flag} ({len(values)})" for flag, values in space.items())
        raise TtftError(
            f"{len(configs)} configurations to run ({axes}): each is a trial with a restart, a "
            "warm-up and a load search",
            "choose the axes with --param (e.g. --param -np=1,2,4 --param -ub=128,512), or "
            f"raise --max-configs above {limit}",
        )
    if opts["dry_run"]:
        base = shlex.split(opts["launch"] or ("llama-server" if kind == "llamacpp" else kind))
        for config in configs:
            click.echo(shlex.join(launch_command(kind, base, config)))
        return
    if opts["url"] and not opts.get("restart"):
        raise TtftError(
            "a sweep of a service ttft does not start needs --restart 'COMMAND'",
            "e.g. --restart 'ssh gpu1 systemctl restart vllm' or --restart 'docker restart ... "
            "{args}' ({args}: the trial's flags; {launch}: --launch with them set)",
        )
    if kind not in ("llamacpp", "vllm") and not opts["url"]:
        raise TtftError(
            f"ttft starts only llama-server and vLLM itself; {kind} trials need --dry-run here",
            "print the launch commands with --dry-run --launch '...', or measure a running "
            "service with --url (request-side changes only)",
        )
    if opts.get("quality_gate") and opts["url"]:
        raise TtftError(
            "--quality-gate starts each configuration itself: it needs a sweep ttft starts",
            "drop --url, or check a running service with ttft verify quality --candidate URL",
        )
    gate = None
    if opts.get("quality_gate"):
        from ttft.cli.tune_gate import quality_gate

        gate = quality_gate(configs[0], threads=opts["threads"], model_path=opts["model_path"])
    slos = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    workload = tune_workload(opts)
    search = search_settings(opts)
    spec = {"kind": "sweep", "engine": kind, "space": {k: list(v) for k, v in space.items()},
            "slos": [s.text for s in slos], "workload": workload.describe(),
            "search": search.describe()}  # fmt: skip
    if search.load != "concurrency":
        spec["load"] = search.load  # absent: closed loop, as experiments before --load
    exp = open_experiment(opts, "sweep", spec)
    console.print(
        f"[bold]ttft tune sweep[/bold]: {len(configs)} configurations of {kind}; "
        f"SLOs {', '.join(s.text for s in slos) or '(none: goodput = throughput)'}; "
        f"experiment -> {exp.root}"
    )
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

        results = run_sweep(
            configs, trial_runner(opts), exp, workload, slos, search, on_trial, gate
        )
    rows = sweep_rows(results)
    unit = "rate" if search.load == "rate" else "load"
    print_table(f"tune sweep (best {unit} per configuration)", SWEEP_COLUMNS, rows)
    choice = chosen(results)
    write_reports(
        exp,
        sweep_json(results, [s.text for s in slos], choice, search.load),
        to_markdown("tune sweep", SWEEP_COLUMNS, rows),
        to_csv(SWEEP_COLUMNS, rows),
        opts.get("html_path"),
    )
    if opts["buckets"]:
        _bucket_axis(opts, configs, exp, workload, slos, search, console)
    console.print(f"results: {exp.root}/ (summary.json, summary.md, summary.csv, trials/)")
    if choice is None:
        console.print("[red]no configuration held the SLOs at any load[/red]")
        raise click.exceptions.Exit(1)
    click.echo(f"chosen: {config_label(choice.config)}")
    if choice.launch_command:
        click.echo(f"launch: {shlex.join(choice.launch_command)}")


def _bucket_axis(
    opts: dict[str, Any],
    configs: list[dict[str, str]],
    exp: ExperimentDir,
    workload: TuneWorkload,
    slos: tuple[Slo, ...],
    search: SearchSettings,
    console: Console,
) -> None:
    """The prompt-length axis: the same configurations on unique prompts of each length."""
    by_bucket: dict[int, list[TrialResult]] = {}
    with sigterm_stops_cleanly(), trial_progress(console) as progress:
        words = parse_int_list(opts["buckets"], "--buckets")
        task = progress.add_task("prompt lengths", total=len(words) * len(configs), status="")
        for n in words:
            bucket = dataclasses.replace(workload, shape="unique", prefix_words=n)

            def on_trial(
                i: int, t: int, c: Config, r: TrialResult | None, resumed: bool, n: int = n
            ) -> None:
                if r is not None:
                    progress.update(task, advance=1, status=f"{n} words {config_label(c)}")

            runner = trial_runner(opts)
            by_bucket[n] = run_sweep(configs, runner, exp, bucket, slos, search, on_trial)
    columns, rows = bucket_rows(by_bucket)
    print_table("prompt-length axis (p50 at the lowest load)", tuple(columns), rows)
    exp.write_report("buckets.md", to_markdown("prompt-length axis", columns, rows))
    exp.write_report("buckets.csv", to_csv(columns, rows))
