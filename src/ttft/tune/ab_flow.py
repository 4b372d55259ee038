"""``tune ab`` decided: the chain from ``--baseline``/``--change`` text or from a plan file,
and the report of a finished chain.

The CLI asks ``chain_from_changes`` or ``chain_from_plan`` (every refusal happens there,
before anything runs), runs ``run_chain`` with its progress display, then ``chain_report``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.changes import Change
from ttft.core.errors import TtftError
from ttft.core.findings import CostTier
from ttft.core.slo import Slo, parse_slos
from ttft.tune.ab import ArmRunner, order_changes
from ttft.tune.attribution import overlap_note, total_cut
from ttft.tune.chain import ChainResult
from ttft.tune.experiment import ExperimentDir
from ttft.tune.options import AbOptions
from ttft.tune.runner import TrialRunner
from ttft.tune.space import parse_param
from ttft.tune.sweep_flow import open_experiment, trial_runner, tune_workload, write_summary
from ttft.tune.tables import AB_COLUMNS, ab_json, ab_rows, to_csv, to_markdown
from ttft.tune.workload import TRANSFORMS, TuneWorkload


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


@dataclass
class Chain:
    """A chain ready to run: its steps, what runs them, and the experiment it lands in."""

    baseline: Change
    changes: list[Change]
    runner: TrialRunner | ArmRunner
    exp: ExperimentDir
    workload: TuneWorkload
    slos: tuple[Slo, ...]
    concurrency: int
    repeats: int
    runner_note: str | None = None  # what runs the steps, when it is not ttft's own engine


def chain_from_changes(options: AbOptions) -> Chain:
    if not options.changes:
        raise TtftError("tune ab needs --change (one per step) or --plan PLAN.toml")
    text = options.baseline
    baseline = parse_change(text if "|" in text else text + " |")
    changes = order_changes([parse_change(c) for c in options.changes], fixed=options.fixed_order)
    slos: tuple[Slo, ...] = parse_slos(options.slo_texts) if options.slo_texts else ()
    workload = tune_workload(options)
    if options.repeats < 1 or options.concurrency < 1:
        raise TtftError("--repeats and --concurrency must be at least 1")
    spec = {"kind": "ab", "baseline": options.baseline, "changes": [c.label for c in changes],
            "change_specs": list(options.changes), "slos": [s.text for s in slos],
            "workload": workload.describe(), "concurrency": options.concurrency}  # fmt: skip
    exp = open_experiment(options, "ab", spec)
    runner = trial_runner(options)
    return Chain(baseline, changes, runner, exp, workload, slos, options.concurrency,
                 options.repeats)  # fmt: skip


def chain_from_plan(options: AbOptions) -> Chain:
    """The plan's service, workload and enabled steps, in the order written."""
    from ttft.core.plan import load_plan
    from ttft.tune.service import ServiceRunner

    assert options.plan is not None
    path = options.plan
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
    exp = open_experiment(options, "ab", spec)
    return Chain(Change("baseline"), steps, runner, exp, workload, slos, service.concurrency,
                 service.repeats, runner.describe())  # fmt: skip


def chain_from_options(options: AbOptions) -> Chain:
    return chain_from_plan(options) if options.plan is not None else chain_from_changes(options)


def chain_report(exp: ExperimentDir, chain: ChainResult) -> tuple[list[dict[str, str]], list[str]]:
    """Write the summary files; the table's rows and the lines said under it (overlap,
    total cut, undone steps, failed runs)."""
    rows = chain.rows
    table = ab_rows(rows)
    note = overlap_note(rows)
    total = total_cut(rows)
    lines = [f"non-additive: {note}" if note else "", total.text() if total else ""]
    lines += [f"step {k} regressed and was undone in the steps after it" for k in chain.undone]
    lines += [f"{r.name}: a run failed: {reason}" for r in rows for reason in r.failures]
    said = [line for line in lines if line]
    md = to_markdown("tune ab", AB_COLUMNS, table) + "".join(f"\n{x}\n" for x in said)
    data: dict[str, Any] = ab_json(rows, note, chain.by_arm, total, chain.undone)
    write_summary(exp, data, md, to_csv(AB_COLUMNS, table))
    return table, said
