"""``ttft tune ab`` on the terminal: progress over the runs, a pause where a person must apply
a change, and the attribution table. The chain (from ``--change`` options or a plan), the
refusals and the report files are ``ttft.tune.ab_flow``'s."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console

from ttft.cli.tune_run import print_table, sigterm_stops_cleanly, trial_progress, write_page
from ttft.tune.ab import Arm, Paused, confirm_applied
from ttft.tune.ab_flow import Chain, chain_from_options, chain_report
from ttft.tune.chain import ChainResult, run_chain
from ttft.tune.experiment import ExperimentDir
from ttft.tune.options import AbOptions
from ttft.tune.tables import AB_COLUMNS
from ttft.tune.trial import TrialResult

PAUSED_EXIT = 3  # the chain waits for a person to apply a change (see the printed command)


def execute_ab(options: AbOptions) -> None:
    chain = chain_from_options(options)
    console = Console(stderr=True)
    if chain.runner_note is not None:
        console.print(f"[dim]ttft {chain.runner_note}[/dim]")
    exp, changes = chain.exp, chain.changes
    applied = confirm_applied(exp)
    if applied is not None:
        console.print(f"step {applied} ({changes[applied - 1].label}): applied by you, going on")
    console.print(
        f"[bold]ttft tune ab[/bold]: {chain.baseline.label} -> "
        + " -> ".join("+" + c.label for c in changes)
        + f" at concurrency {chain.concurrency}, {chain.repeats} interleaved repeats; "
        f"experiment -> {exp.root}"
    )
    result = _run(chain, console)
    table, lines = chain_report(exp, result)
    print_table("tune ab: TTFT per step (ms, 95% bootstrap CIs)", AB_COLUMNS, table)
    for line in lines:
        click.echo(line)
    write_page(options.html_path, exp)
    console.print(f"results: {exp.root}/ (summary.json, summary.md, summary.csv, trials/)")


def _run(chain: Chain, console: Console) -> ChainResult:
    with sigterm_stops_cleanly(), trial_progress(console) as progress:
        task = progress.add_task("runs", total=None, status="")

        def on_run(n: int, total: int, arm: Arm, repeat: int, result: TrialResult | None) -> None:
            text = f"{arm.name} ({arm.label}) #{repeat + 1}"
            if result is None:
                progress.update(task, total=total, status=text)
            else:
                progress.update(task, total=total, completed=n + 1, status=f"{text}: done")

        try:
            return run_chain(chain.baseline, chain.changes, chain.runner, chain.exp,
                             chain.workload, chain.slos, concurrency=chain.concurrency,
                             repeats=chain.repeats, on_run=on_run)  # fmt: skip
        except Paused as paused:
            progress.stop()
            _print_pause(paused, chain.exp, console)
            raise click.exceptions.Exit(PAUSED_EXIT) from None


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
