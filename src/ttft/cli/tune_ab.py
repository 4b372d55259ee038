"""The ``ttft tune ab`` flow: a chain from ``--change`` options or from a plan (``--plan``),
measured with progress, paused where a person must apply a change, and reported as the
attribution table (terminal, summary.json / .md / .csv in the experiment directory)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ttft.cli.tune_run import (
    open_experiment,
    print_table,
    sigterm_stops_cleanly,
    trial_progress,
    trial_runner,
    tune_workload,
    write_reports,
)
from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.findings import CostTier
from ttft.core.slo import Slo, parse_slos
from ttft.tune.ab import Arm, ArmRunner, Paused, confirm_applied, order_changes
from ttft.tune.attribution import overlap_note, total_cut
from ttft.tune.chain import run_chain
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import TrialRunner
from ttft.tune.space import parse_param
from ttft.tune.tables import AB_COLUMNS, ab_json, ab_rows, to_csv, to_markdown
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TRANSFORMS, TuneWorkload

PAUSED_EXIT = 3  # the chain waits for a person to apply a change (see the printed command)


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
    if opts.get("plan") is not None:
        execute_plan(opts)
        return
    if not opts["changes"]:
        raise TtftError("tune ab needs --change (one per step) or --plan PLAN.toml")
    baseline = parse_change(
        opts["baseline"] if "|" in opts["baseline"] else opts["baseline"] + " |"
    )
    changes = order_changes([parse_change(c) for c in opts["changes"]], fixed=opts["fixed_order"])
    slos: tuple[Slo, ...] = parse_slos(opts["slo_texts"]) if opts["slo_texts"] else ()
    workload = tune_workload(opts)
    if opts["repeats"] < 1 or opts["concurrency"] < 1:
        raise TtftError("--repeats and --concurrency must be at least 1")
    spec = {"kind": "ab", "baseline": opts["baseline"], "changes": [c.label for c in changes],
            "change_specs": list(opts["changes"]), "slos": [s.text for s in slos],
            "workload": workload.describe(), "concurrency": opts["concurrency"]}  # fmt: skip
    exp = open_experiment(opts, "ab", spec)
    run_and_report(baseline, changes, trial_runner(opts), exp, workload, slos,
                   concurrency=opts["concurrency"], repeats=opts["repeats"],
                   html=opts.get("html_path"))  # fmt: skip


def execute_plan(opts: dict[str, Any]) -> None:
    from ttft.core.plan import load_plan
    from ttft.tune.service import ServiceRunner

    path: Path = opts["plan"]
    plan = load_plan(path)
    service = plan.service
    steps = [s.change for s in plan.enabled_steps()]
    if not steps:
        raise TtftError(f"{path} has no enabled step", "set enabled = true on a step")
    base_dir = path.resolve().parent
    log = service.requests_log
    log_path = None if log is None else (Path(log) if Path(log).is_absolute() else base_dir / log)
    workload = TuneWorkload(
        shape="log" if log_path is not None else "shared-prefix",
        max_tokens=service.max_tokens,
        requests=service.requests,
        log_path=log_path,
    )
    slos = parse_slos(service.slos) if service.slos else ()
    runner = ServiceRunner(service, base_dir=base_dir)
    spec = {"kind": "ab-plan", "plan": [s.to_dict() for s in steps],
            "service": repr(service), "workload": workload.describe()}  # fmt: skip
    exp = open_experiment(opts, "ab", spec)
    Console(stderr=True).print(f"[dim]ttft {runner.describe()}[/dim]")
    run_and_report(Change("baseline"), steps, runner, exp, workload, slos,
                   concurrency=service.concurrency, repeats=service.repeats,
                   html=opts.get("html_path"))  # fmt: skip


def run_and_report(
    baseline: Change,
    changes: Sequence[Change],
    runner: TrialRunner | ArmRunner,
    exp: ExperimentDir,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    *,
    concurrency: int,
    repeats: int,
    html: str | None = None,
) -> None:
    console = Console(stderr=True)
    applied = confirm_applied(exp)
    if applied is not None:
        console.print(f"step {applied} ({changes[applied - 1].label}): applied by you, going on")
    console.print(
        f"[bold]ttft tune ab[/bold]: {baseline.label} -> "
        + " -> ".join("+" + c.label for c in changes)
        + f" at concurrency {concurrency}, {repeats} interleaved repeats; "
        f"experiment -> {exp.root}"
    )
    with sigterm_stops_cleanly(), trial_progress(console) as progress:
        task = progress.add_task("runs", total=None, status="")

        def on_run(n: int, total: int, arm: Arm, repeat: int, result: TrialResult | None) -> None:
            text = f"{arm.name} ({arm.label}) #{repeat + 1}"
            if result is None:
                progress.update(task, total=total, status=text)
            else:
                progress.update(task, total=total, completed=n + 1, status=f"{text}: done")

        try:
            chain = run_chain(baseline, changes, runner, exp, workload, slos,
                              concurrency=concurrency, repeats=repeats, on_run=on_run)  # fmt: skip
        except Paused as paused:
            progress.stop()
            _print_pause(paused, exp, console)
            raise click.exceptions.Exit(PAUSED_EXIT) from None
    rows = chain.rows
    table = ab_rows(rows)
    print_table("tune ab: TTFT per step (ms, 95% bootstrap CIs)", AB_COLUMNS, table)
    note = overlap_note(rows)
    total = total_cut(rows)
    lines = [f"non-additive: {note}" if note else "", total.text() if total else ""]
    lines += [f"step {k} regressed and was undone in the steps after it" for k in chain.undone]
    lines += [f"{r.name}: a run failed: {reason}" for r in rows for reason in r.failures]
    for line in filter(None, lines):
        click.echo(line)
    md = to_markdown("tune ab", AB_COLUMNS, table) + "".join(f"\n{x}\n" for x in lines if x)
    data = ab_json(rows, note, chain.by_arm, total, chain.undone)
    write_reports(exp, data, md, to_csv(AB_COLUMNS, table), html)
    console.print(f"results: {exp.root}/ (summary.json, summary.md, summary.csv, trials/)")


def _print_pause(paused: Paused, exp: ExperimentDir, console: Console) -> None:
    change = paused.change
    console.print(f"[yellow]paused before step {paused.step}[/yellow]: {paused.reason}")
    click.echo(f"step {paused.step}: {change.label}")
    click.echo(f"  change: {change.summary()}")
    if change.edits:
        from ttft.proxy.nginx_edit import edits_diff

        click.echo(edits_diff(change.edits))
    measured = sum(len(v) for v in paused.measured.values())
    click.echo(f"{measured} run(s) measured so far are kept in {exp.root}/trials/")
    click.echo("apply the change, then resume with:")
    click.echo("  " + resume_command(exp.root))


def resume_command(out: Path, argv: Sequence[str] | None = None) -> str:
    """This command line again, with ``--out`` the experiment and ``--resume``."""
    args = list(sys.argv[1:] if argv is None else argv)
    cleaned: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--out", "--resume"):
            skip = arg == "--out"
            continue
        if arg.startswith("--out="):
            continue
        cleaned.append(arg)
    return shlex.join(["ttft", *cleaned, "--out", str(out), "--resume"])
