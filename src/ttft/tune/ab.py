"""``tune ab``: an ordered chain of changes, measured in sequence and each alone.

Step 0 is the baseline; step k adds change k to step k-1. Each change after the first is also
measured alone on the baseline, so the table shows where gains overlap: the gains of the changes
alone need not add up to the gain of the whole chain. Arms are measured in interleaved repeats
(A B C ... A B C ...) so that slow drift of the machine spreads over every arm instead of
favouring whichever ran last. Each arm pools the TTFT samples of its repeats.

A change ttft cannot apply itself (a proxy it does not run, an engine it did not start) splits
the chain: the arms before it are measured, then the run pauses (``Paused``) with the exact change
for a person to apply; ``--resume`` continues from there. Arms measured before a pause are on
disk and never measured again. A change alone is only measured on the untouched baseline, so
alone-arms exist for changes ttft applies itself.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ttft.core.changes import Change, order_by_cost
from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import TrialRunner, TrialSession
from ttft.tune.space import config_id
from ttft.tune.trial import FAILED, OK, TrialResult
from ttft.tune.workload import TuneWorkload


class ArmRunner(Protocol):
    """What ``run_ab`` needs to measure one arm: a server in the arm's state, and whether a
    change is one it can apply itself (None) or one a person must apply (the reason)."""

    def manual_reason(self, change: Change) -> str | None: ...

    def open_arm(
        self, change: Change, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> contextlib.AbstractContextManager[TrialSession]: ...


@dataclass
class ConfigArmRunner:
    """A sweep's ``TrialRunner`` as an arm runner: engine flags and another target URL only."""

    runner: TrialRunner
    engine_flags: bool = True  # False: the runner measures a service ttft does not start

    def manual_reason(self, change: Change) -> str | None:
        if change.edits:
            return "ttft runs no proxy here: apply the edit to your proxy and reload it"
        if change.gateway is not None:
            return "start `ttft gateway` in front of the engine, then resume"
        if (change.flags or change.unset) and not self.engine_flags:
            return "ttft does not start this engine: restart it with the new flags"
        return None

    @contextlib.contextmanager
    def open_arm(
        self, change: Change, workload: TuneWorkload, records: Path, slos: Sequence[Slo]
    ) -> Iterator[TrialSession]:
        with self.runner.open(arm_config(change), workload, records, slos) as session:
            yield session


def arm_config(change: Change) -> dict[str, str]:
    """Engine flags plus the target URL, as a sweep's configuration spells them."""
    config = dict(change.flags)
    if change.url is not None:
        config["url"] = change.url
    return config


@dataclass(frozen=True)
class Arm:
    """One configuration to measure: a step of the chain, or one change alone."""

    name: str  # "step 2" or "alone 2"
    label: str
    change: Change  # the baseline with every change of this arm merged in
    members: tuple[int, ...] = ()  # the chain's changes (1-based) this arm applies

    @property
    def flags(self) -> dict[str, str]:
        return arm_config(self.change)

    @property
    def transforms(self) -> tuple[str, ...]:
        return self.change.transforms


def order_changes(changes: Sequence[Change], *, fixed: bool) -> list[Change]:
    return list(changes) if fixed else order_by_cost(changes)


def merge(base: Change, changes: Sequence[Change], label: str = "") -> Change:
    """``base`` with ``changes`` applied in order: later flags win, edits and transforms add up."""
    flags = dict(base.flags)
    unset = list(base.unset)
    edits = list(base.edits)
    transforms = list(base.transforms)
    url, gateway, client = base.url, base.gateway, dict(base.client)
    for change in changes:
        for flag in change.unset:
            flags.pop(flag, None)
            if flag not in unset:
                unset.append(flag)
        flags.update(change.flags)
        unset = [f for f in unset if f not in change.flags]
        edits.extend(e for e in change.edits if e not in edits)
        transforms.extend(t for t in change.transforms if t not in transforms)
        url = change.url or url
        gateway = change.gateway if change.gateway is not None else gateway
        client.update(change.client)
    return Change(
        label or base.label,
        flags,
        tuple(unset),
        tuple(edits),
        tuple(transforms),
        url,
        gateway,
        client,
        engine=base.engine or next((c.engine for c in changes if c.engine), None),
    )


def arms(
    baseline: Change,
    changes: Sequence[Change],
    alone: Sequence[int] | None = None,
    undone: Collection[int] = (),
) -> list[Arm]:
    """The steps of the chain, then each change of ``alone`` (1-based; default: every change
    after the first) on the baseline by itself. A step in ``undone`` (it regressed) is measured
    once, on top of the steps before it, and left out of every later step."""
    out = [Arm("step 0", baseline.label, merge(baseline, []))]
    for k, change in enumerate(changes, start=1):
        members = tuple(j for j in range(1, k + 1) if j == k or j not in undone)
        label = "+" + change.label + (" (regressed: undone after)" if k in undone else "")
        merged = merge(baseline, [changes[j - 1] for j in members])
        out.append(Arm(f"step {k}", label, merged, members))
    for k in range(2, len(changes) + 1) if alone is None else alone:
        if k < 2 or k > len(changes):
            continue
        change = changes[k - 1]
        out.append(Arm(f"alone {k}", change.label + " alone", merge(baseline, [change]), (k,)))
    return out


@dataclass
class Paused(Exception):
    """The chain reached a change that a person must apply; everything before it is on disk."""

    step: int  # 1-based index of the change to apply
    change: Change
    reason: str
    measured: dict[str, list[TrialResult]] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"step {self.step} ({self.change.label}) needs you: {self.reason}"


OnRun = Callable[[int, int, Arm, int, TrialResult | None], None]
APPLIED_FILE = "applied.json"  # steps a person applied by hand
PAUSED_FILE = "paused.json"  # the step the run waits at


def run_ab(
    baseline: Change,
    changes: Sequence[Change],
    runner: TrialRunner | ArmRunner,
    exp: ExperimentDir,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    *,
    concurrency: int,
    repeats: int,
    on_run: OnRun | None = None,
    undone: Collection[int] = (),
) -> dict[str, list[TrialResult]]:
    """Every arm ``repeats`` times, interleaved; results by arm name (finished ones resume).

    Raises ``Paused`` at a change ttft cannot apply that the experiment has not been told is
    applied (``mark_applied``); the results measured so far are in ``Paused.measured``."""
    arm_runner = as_arm_runner(runner)
    manual = manual_steps(changes, arm_runner)
    reason = arm_runner.manual_reason(baseline)
    if reason is not None:
        raise TtftError(f"the baseline ({baseline.label}) cannot be measured here: {reason}")
    plan = chain_arms(baseline, changes, arm_runner, undone)
    # Segments: the arms measured between two changes applied by hand.
    cuts = sorted(manual)
    segments: list[list[Arm]] = []
    for start, end in zip([0, *cuts], [*cuts, len(changes) + 1], strict=True):
        segment = [a for a in plan if a.name.startswith("step") and start <= _k(a) < end]
        if start == 0:
            segment += [a for a in plan if a.name.startswith("alone")]
        segments.append(segment)
    applied = applied_steps(exp)
    by_arm: dict[str, list[TrialResult]] = {arm.name: [] for arm in plan}
    total, done = repeats * len(plan), [0]
    for start, segment in zip([0, *cuts], segments, strict=True):
        if start and start not in applied:
            _write_json(exp, PAUSED_FILE, {"step": start, "label": changes[start - 1].label})
            raise Paused(start, changes[start - 1], manual[start], by_arm)
        for repeat in range(repeats):
            for arm in segment:
                # What ttft itself applies: the arm minus the changes a person already made.
                own = merge(baseline, [changes[k - 1] for k in arm.members if k not in manual])

                def report(result: TrialResult | None, a: Arm = arm, r: int = repeat) -> None:
                    if on_run is not None:
                        on_run(done[0], total, a, r, result)

                result = _run_arm(
                    arm_runner, exp, arm, own, workload, slos, concurrency, repeat, report
                )
                by_arm[arm.name].append(result)
                done[0] += 1
    return by_arm


def manual_steps(changes: Sequence[Change], runner: TrialRunner | ArmRunner) -> dict[int, str]:
    """The chain's changes (1-based) a person must apply, with the reason."""
    arm_runner = as_arm_runner(runner)
    return {
        k: reason
        for k, change in enumerate(changes, start=1)
        if (reason := arm_runner.manual_reason(change)) is not None
    }


def chain_arms(
    baseline: Change,
    changes: Sequence[Change],
    runner: TrialRunner | ArmRunner,
    undone: Collection[int] = (),
) -> list[Arm]:
    """The arms ``run_ab`` measures: alone-arms only for changes ttft applies itself."""
    manual = manual_steps(changes, runner)
    automatic = [k for k in range(2, len(changes) + 1) if k not in manual]
    return arms(baseline, changes, alone=automatic, undone=undone)


def _k(arm: Arm) -> int:
    return int(arm.name.split()[1])


def _run_arm(
    runner: ArmRunner,
    exp: ExperimentDir,
    arm: Arm,
    own: Change,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    concurrency: int,
    repeat: int,
    report: Callable[[TrialResult | None], object],
) -> TrialResult:
    arm_workload = workload.with_transforms(arm.change.transforms)
    level = int(arm.change.client.get("concurrency", concurrency))
    key: dict[str, object] = {
        "workload": arm_workload.describe(),
        "slos": [s.text for s in slos],
        "concurrency": level,
        "repeat": repeat,
    }
    extra = arm.change.to_dict()
    for name in ("edits", "gateway", "unset"):
        if name in extra:
            key[name] = extra[name]
    trial_id = config_id(arm.flags, key)
    result = exp.finished(trial_id)
    if result is None:
        report(None)
        result = _measure(runner, exp, trial_id, arm, own, arm_workload, slos, level)
        exp.save(result)
    report(result)
    return result


def as_arm_runner(runner: TrialRunner | ArmRunner) -> ArmRunner:
    if hasattr(runner, "open_arm"):
        return runner  # type: ignore[return-value]
    return ConfigArmRunner(runner)


def _read_json(exp: ExperimentDir, name: str) -> dict[str, Any] | None:
    path = exp.root / name
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _write_json(exp: ExperimentDir, name: str, data: dict[str, Any]) -> None:
    exp.write_report(name, json.dumps(data, indent=2))


def applied_steps(exp: ExperimentDir) -> set[int]:
    """Changes a person has applied by hand (recorded when they resumed after a pause)."""
    data = _read_json(exp, APPLIED_FILE) or {}
    return {int(k) for k in data.get("applied", [])}


def paused_at(exp: ExperimentDir) -> int | None:
    """The step the last run paused at (waiting for a person), if it paused."""
    data = _read_json(exp, PAUSED_FILE)
    return None if data is None else int(data["step"])


def confirm_applied(exp: ExperimentDir) -> int | None:
    """Resuming a paused experiment means the person applied the change it waited for: record
    that, and return the step (None when the experiment was not paused)."""
    step = paused_at(exp)
    if step is None:
        return None
    _write_json(exp, APPLIED_FILE, {"applied": sorted(applied_steps(exp) | {step})})
    (exp.root / PAUSED_FILE).unlink()
    return step


def _measure(
    runner: ArmRunner,
    exp: ExperimentDir,
    trial_id: str,
    arm: Arm,
    own: Change,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    concurrency: int,
) -> TrialResult:
    result = TrialResult(trial_id, dict(arm.flags), OK)
    records = exp.begin(trial_id)
    try:
        with runner.open_arm(own, workload, records, slos) as session:
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
