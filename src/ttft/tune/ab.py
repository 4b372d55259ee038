"""``tune ab``: an ordered chain of changes, measured in sequence and each alone.

Step 0 is the baseline; step k adds change k to step k-1. Each change after the first is also
measured alone on the baseline, so the table shows where gains overlap: the gains of the changes
alone need not add up to the gain of the whole chain. Arms are measured in interleaved repeats
(A B C ... A B C ...) so that slow drift of the machine spreads over every arm instead of
favouring whichever ran last. Each arm pools the TTFT samples of its repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ttft.core.changes import Change, order_by_cost
from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.core.stats import Stats, describe
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import TrialRunner
from ttft.tune.space import config_id
from ttft.tune.trial import FAILED, OK, TrialResult
from ttft.tune.workload import TuneWorkload


@dataclass(frozen=True)
class Arm:
    """One configuration to measure: a step of the chain, or one change alone."""

    name: str  # "step 2" or "alone 2"
    label: str
    flags: dict[str, str]
    transforms: tuple[str, ...]


def order_changes(changes: Sequence[Change], *, fixed: bool) -> list[Change]:
    return list(changes) if fixed else order_by_cost(changes)


def _merge(base: Change, changes: Sequence[Change]) -> tuple[dict[str, str], tuple[str, ...]]:
    flags = dict(base.flags)
    transforms = list(base.transforms)
    url = base.url
    for change in changes:
        flags.update(change.flags)
        for flag in change.unset:
            flags.pop(flag, None)
        transforms.extend(t for t in change.transforms if t not in transforms)
        url = change.url or url
    if url is not None:
        flags["url"] = url
    return flags, tuple(transforms)


def arms(baseline: Change, changes: Sequence[Change]) -> list[Arm]:
    out = [Arm("step 0", baseline.label, *_merge(baseline, []))]
    for k, change in enumerate(changes, start=1):
        out.append(Arm(f"step {k}", "+" + change.label, *_merge(baseline, changes[:k])))
    for k, change in enumerate(changes[1:], start=2):
        out.append(Arm(f"alone {k}", change.label + " alone", *_merge(baseline, [change])))
    return out


OnRun = Callable[[int, int, Arm, int, TrialResult | None], None]


def run_ab(
    baseline: Change,
    changes: Sequence[Change],
    runner: TrialRunner,
    exp: ExperimentDir,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    *,
    concurrency: int,
    repeats: int,
    on_run: OnRun | None = None,
) -> dict[str, list[TrialResult]]:
    """Every arm ``repeats`` times, interleaved; results by arm name (finished ones resume)."""
    plan = arms(baseline, changes)
    by_arm: dict[str, list[TrialResult]] = {arm.name: [] for arm in plan}
    total, n = repeats * len(plan), 0
    for repeat in range(repeats):
        for arm in plan:
            arm_workload = workload.with_transforms(arm.transforms)
            key = {
                "workload": arm_workload.describe(),
                "slos": [s.text for s in slos],
                "concurrency": concurrency,
                "repeat": repeat,
            }
            trial_id = config_id(arm.flags, key)
            result = exp.finished(trial_id)
            if result is None:
                if on_run is not None:
                    on_run(n, total, arm, repeat, None)
                result = _measure(runner, exp, trial_id, arm, arm_workload, slos, concurrency)
                exp.save(result)
            by_arm[arm.name].append(result)
            if on_run is not None:
                on_run(n, total, arm, repeat, result)
            n += 1
    return by_arm


def _measure(
    runner: TrialRunner,
    exp: ExperimentDir,
    trial_id: str,
    arm: Arm,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    concurrency: int,
) -> TrialResult:
    result = TrialResult(trial_id, dict(arm.flags), OK)
    records = exp.begin(trial_id)
    try:
        with runner.open(arm.flags, workload, records, slos) as session:
            result.launch_command = list(session.launch_command)
            result.startup_s = session.startup_s
            level = session.measure(concurrency)
    except TtftError as exc:
        result.status, result.reason = FAILED, str(exc)
        return result
    result.levels = [level]
    result.best = level if level.slo_passed else None
    if level.ok == 0:
        result.status, result.reason = FAILED, "every request failed"
    return result


@dataclass
class AttributionRow:
    name: str
    label: str
    ttft: Stats | None  # pooled over repeats, in ms
    failed: int
    vs_previous_ms: float | None  # p50 change against the previous step (negative: faster)
    vs_baseline_ms: float | None
    alone_vs_baseline_ms: float | None  # the change alone on the baseline (steps 1..)
    significant: bool | None  # p50 CI apart from the previous step's


def _stats(results: Sequence[TrialResult]) -> tuple[Stats | None, int]:
    samples = [v for r in results for level in r.levels for v in level.ttft_ms]
    failed = sum(level.n - level.ok for r in results for level in r.levels)
    return describe(samples), failed


def attribution(
    baseline: Change, changes: Sequence[Change], by_arm: dict[str, list[TrialResult]]
) -> list[AttributionRow]:
    plan = arms(baseline, changes)
    stats = {arm.name: _stats(by_arm.get(arm.name, [])) for arm in plan}
    base = stats["step 0"][0]
    rows: list[AttributionRow] = []
    previous: Stats | None = None
    for arm in plan:
        if not arm.name.startswith("step"):
            continue
        k = int(arm.name.split()[1])
        current, failed = stats[arm.name]
        alone_name = "step 1" if k == 1 else f"alone {k}"
        alone = stats.get(alone_name, (None, 0))[0] if k >= 1 else None
        rows.append(
            AttributionRow(
                name=arm.name,
                label=arm.label,
                ttft=current,
                failed=failed,
                vs_previous_ms=_delta(current, previous),
                vs_baseline_ms=_delta(current, base) if k else None,
                alone_vs_baseline_ms=_delta(alone, base) if k else None,
                significant=(
                    None
                    if current is None or previous is None
                    else not current.p50_ci.overlaps(previous.p50_ci)
                ),
            )
        )
        previous = current
    return rows


def _delta(current: Stats | None, reference: Stats | None) -> float | None:
    if current is None or reference is None:
        return None
    return current.p50 - reference.p50


def overlap_note(rows: Sequence[AttributionRow]) -> str | None:
    """How far the gains alone differ from the chain's total (they do not add up)."""
    steps = [r for r in rows if r.name != "step 0"]
    if not steps or any(r.alone_vs_baseline_ms is None for r in steps):
        return None
    total = steps[-1].vs_baseline_ms
    if total is None:
        return None
    alone_sum = sum(r.alone_vs_baseline_ms or 0.0 for r in steps)
    return (
        f"changes alone sum to {alone_sum:+.0f} ms of p50; together they give {total:+.0f} ms: "
        f"{'overlapping' if abs(alone_sum) > abs(total) else 'compounding'} by "
        f"{abs(alone_sum - total):.0f} ms"
    )
