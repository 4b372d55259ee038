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
from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.findings import CostTier
from ttft.core.slo import Slo, parse_slos
from ttft.core.target import Target
from ttft.tune.ab import Arm, attribution, order_changes, overlap_note, run_ab
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import ClientOnlyRunner, LlamaCppRunner, TrialRunner
from ttft.tune.space import (
    Config,
    config_label,
    configurations,
    default_space,
    launch_command,
    parse_param,
    parse_space,
)
from ttft.tune.sweep import SearchSettings, chosen, run_sweep
from ttft.tune.tables import (
    AB_COLUMNS,
    SWEEP_COLUMNS,
    ab_json,
    ab_rows,
    bucket_rows,
    sweep_json,
    sweep_rows,
    to_csv,
    to_markdown,
)
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TRANSFORMS, TuneWorkload


@contextlib.contextmanager
def _sigterm_stops_cleanly() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the running trial's engine is stopped on the way out."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _workload(opts: dict[str, Any]) -> TuneWorkload:
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


def _runner(opts: dict[str, Any]) -> TrialRunner:
    if opts["url"]:
        return ClientOnlyRunner(Target(opts["url"]))
    return LlamaCppRunner(
        per_slot_ctx=opts["per_slot_ctx"], threads=opts["threads"], model_path=opts["model_path"]
    )


def _experiment(opts: dict[str, Any], kind: str, spec: dict[str, Any]) -> ExperimentDir:
    out: Path = opts["out_dir"] or Path("results") / time.strftime(f"tune-{kind}-%Y%m%d-%H%M%S")
    if opts["resume"] and opts["out_dir"] is None:
        raise TtftError("--resume needs --out DIR (the experiment to continue)")
    return ExperimentDir.open(out, spec, resume=opts["resume"])


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
    )


def _print_table(title: str, columns: tuple[str, ...], rows: list[dict[str, str]]) -> None:
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


def _write(exp: ExperimentDir, data: dict[str, Any], md: str, csv_text: str) -> None:
    exp.write_report("summary.json", json.dumps(data, indent=2))
    exp.write_report("summary.md", md)
    exp.write_report("summary.csv", csv_text)


def execute_sweep(opts: dict[str, Any]) -> None:
    console = Console(stderr=True)
    kind = opts["engine_kind"]
    space = parse_space(opts["params"]) if opts["params"] else default_space(kind)
    configs = configurations(space)
    if opts["dry_run"]:
        base = shlex.split(opts["launch"] or ("llama-server" if kind == "llamacpp" else kind))
        for config in configs:
            click.echo(shlex.join(launch_command(kind, base, config)))
        return
    if kind != "llamacpp" and not opts["url"]:
        raise TtftError(
            f"ttft starts only llama-server itself; {kind} trials need --dry-run here",
            "print the launch commands with --dry-run --launch '...', or measure a running "
            "service with --url (request-side changes only)",
        )
    slos = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    workload = _workload(opts)
    search = SearchSettings(start=opts["start_load"], max_load=opts["max_load"])
    spec = {"kind": "sweep", "engine": kind, "space": {k: list(v) for k, v in space.items()},
            "slos": [s.text for s in slos], "workload": workload.describe(),
            "search": [search.start, search.max_load, search.min_gain]}  # fmt: skip
    exp = _experiment(opts, "sweep", spec)
    console.print(
        f"[bold]ttft tune sweep[/bold]: {len(configs)} configurations of {kind}; "
        f"SLOs {', '.join(s.text for s in slos) or '(none: goodput = throughput)'}; "
        f"experiment -> {exp.root}"
    )
    with _sigterm_stops_cleanly(), _progress(console) as progress:
        task = progress.add_task("trials", total=len(configs), status="")

        def on_trial(
            n: int, total: int, config: Config, result: TrialResult | None, resumed: bool
        ) -> None:
            if result is None:
                progress.update(task, status=config_label(config))
                return
            state = "resumed" if resumed else result.status
            progress.update(task, advance=1, status=f"{config_label(config)}: {state}")

        results = run_sweep(configs, _runner(opts), exp, workload, slos, search, on_trial)
    rows = sweep_rows(results)
    _print_table("tune sweep (best load per configuration)", SWEEP_COLUMNS, rows)
    choice = chosen(results)
    _write(
        exp,
        sweep_json(results, [s.text for s in slos], choice),
        to_markdown("tune sweep", SWEEP_COLUMNS, rows),
        to_csv(SWEEP_COLUMNS, rows),
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
    with _sigterm_stops_cleanly(), _progress(console) as progress:
        words = parse_int_list(opts["buckets"], "--buckets")
        task = progress.add_task("prompt lengths", total=len(words) * len(configs), status="")
        for n in words:
            bucket = dataclasses.replace(workload, shape="unique", prefix_words=n)

            def on_trial(
                i: int, t: int, c: Config, r: TrialResult | None, resumed: bool, n: int = n
            ) -> None:
                if r is not None:
                    progress.update(task, advance=1, status=f"{n} words {config_label(c)}")

            by_bucket[n] = run_sweep(configs, _runner(opts), exp, bucket, slos, search, on_trial)
    columns, rows = bucket_rows(by_bucket)
    _print_table("prompt-length axis (p50 at the lowest load)", tuple(columns), rows)
    exp.write_report("buckets.md", to_markdown("prompt-length axis", columns, rows))
    exp.write_report("buckets.csv", to_csv(columns, rows))


def parse_change(text: str) -> Change:
    """``'LABEL | ITEM ...'`` with ITEM = FLAG=VALUE, a transform, url=URL or tier=N."""
    label, sep, items = text.partition("|")
    label = label.strip()
    if not sep or not label:
        raise TtftError(
            f"change {text!r} is not 'LABEL | ITEM ...'",
            "e.g. --change '-np 4 | -np=4' or --change 'moved | move-dynamic'",
        )
    flags: dict[str, str] = {}
    transforms: list[str] = []
    url, tier = None, None
    for item in shlex.split(items):
        if item in TRANSFORMS:
            transforms.append(item)
        elif item.startswith("url="):
            url = item[4:]
        elif item.startswith("tier="):
            try:
                tier = int(item[5:])
            except ValueError:
                raise TtftError(f"change {label!r}: {item} is not tier=1..4") from None
        else:
            flag, values = parse_param(item)
            if len(values) != 1:
                raise TtftError(f"change {label!r}: {flag} takes one value in a step")
            flags[flag] = values[0]
    return Change(
        label,
        flags,
        transforms=tuple(transforms),
        url=url,
        tier=None if tier is None else _tier(tier),
    )


def _tier(number: int) -> CostTier:
    try:
        return CostTier(number)
    except ValueError:
        raise TtftError(
            f"tier={number} is not a cost tier",
            "use 1 (transport/template), 2 (scheduling), 3 (cache) or 4 (precision/kernels)",
        ) from None


def execute_ab(opts: dict[str, Any]) -> None:
    console = Console(stderr=True)
    baseline = parse_change(
        opts["baseline"] if "|" in opts["baseline"] else opts["baseline"] + " |"
    )
    changes = order_changes([parse_change(c) for c in opts["changes"]], fixed=opts["fixed_order"])
    slos: tuple[Slo, ...] = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    workload = _workload(opts)
    if opts["repeats"] < 1 or opts["concurrency"] < 1:
        raise TtftError("--repeats and --concurrency must be at least 1")
    spec = {"kind": "ab", "baseline": opts["baseline"], "changes": [c.label for c in changes],
            "change_specs": list(opts["changes"]), "slos": [s.text for s in slos],
            "workload": workload.describe(), "concurrency": opts["concurrency"]}  # fmt: skip
    exp = _experiment(opts, "ab", spec)
    console.print(
        f"[bold]ttft tune ab[/bold]: {baseline.label} -> "
        + " -> ".join("+" + c.label for c in changes)
        + f" at concurrency {opts['concurrency']}, {opts['repeats']} interleaved repeats; "
        f"experiment -> {exp.root}"
    )
    with _sigterm_stops_cleanly(), _progress(console) as progress:
        task = progress.add_task("runs", total=None, status="")

        def on_run(n: int, total: int, arm: Arm, repeat: int, result: TrialResult | None) -> None:
            text = f"{arm.name} ({arm.label}) #{repeat + 1}"
            if result is None:
                progress.update(task, total=total, status=text)
            else:
                progress.update(task, total=total, completed=n + 1, status=f"{text}: done")

        by_arm = run_ab(
            baseline,
            changes,
            _runner(opts),
            exp,
            workload,
            slos,
            concurrency=opts["concurrency"],
            repeats=opts["repeats"],
            on_run=on_run,
        )
    rows = attribution(baseline, changes, by_arm)
    table = ab_rows(rows)
    _print_table("tune ab: TTFT per step (ms, 95% bootstrap CIs)", AB_COLUMNS, table)
    note = overlap_note(rows)
    if note:
        click.echo(f"non-additive: {note}")
    md = to_markdown("tune ab", AB_COLUMNS, table) + (f"\n{note}\n" if note else "")
    _write(exp, ab_json(rows, note, by_arm), md, to_csv(AB_COLUMNS, table))
    console.print(f"results: {exp.root}/ (summary.json, summary.md, summary.csv, trials/)")
