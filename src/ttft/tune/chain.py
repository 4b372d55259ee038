"""A whole A/B chain: measure, judge each step, undo what regressed, measure again.

``run_ab`` measures a fixed set of arms. A step judged ``regressed`` must not stay in the steps
after it, so the chain is planned again without it and only the arms that changed are measured
(the others are found on disk by their ids). This repeats until no new step regresses; each
round can only add a regressed step, so it ends after at most one round per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ttft.core.changes import Change
from ttft.core.slo import Slo
from ttft.tune.ab import ArmRunner, OnRun, chain_arms, manual_steps, run_ab
from ttft.tune.attribution import REGRESSED, AttributionRow, attribution
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import TrialRunner
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TuneWorkload


@dataclass
class ChainResult:
    rows: list[AttributionRow]
    by_arm: dict[str, list[TrialResult]]
    undone: list[int] = field(default_factory=list)  # steps that regressed and were left out


def run_chain(
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
) -> ChainResult:
    """Measure the chain; a regressed step is undone in the steps after it (see module doc).
    ``ab.Paused`` propagates: what was measured is on disk."""
    undone: list[int] = []
    manual = sorted(manual_steps(changes, runner))
    while True:
        by_arm = run_ab(baseline, changes, runner, exp, workload, slos,
                        concurrency=concurrency, repeats=repeats, on_run=on_run,
                        undone=undone)  # fmt: skip
        plan = chain_arms(baseline, changes, runner, undone)
        rows = attribution(plan, by_arm, manual)
        # A change a person applied stays applied: ttft cannot undo it, the note says so.
        fresh = [
            k
            for k in (int(r.name.split()[1]) for r in rows[1:] if r.verdict == REGRESSED)
            if k not in undone and k not in manual
        ]
        # The last step undone changes no later step: no arm to measure again.
        if not fresh or fresh[0] == len(changes):
            return ChainResult(rows, by_arm, undone + fresh[:1])
        undone.append(fresh[0])
