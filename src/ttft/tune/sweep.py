"""``tune sweep``: every configuration of a space gets a trial; rank by goodput under the SLOs.

Each trial searches the highest load its configuration holds within the SLOs: closed-loop
concurrency (``search.search_load``) or, with ``SearchSettings(load="rate")``, the open-loop
arrival rate (``search.search_rate``). The ranking puts the most goodput first; a configuration
is on the Pareto front when no other has both a lower TTFT p99 and more goodput at its best
load.
Finished trials are read back from the experiment directory instead of being run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ttft.core.errors import TtftError
from ttft.core.slo import Slo
from ttft.tune.experiment import ExperimentDir
from ttft.tune.runner import TrialRunner, TrialSession
from ttft.tune.search import SearchOutcome, search_load, search_rate
from ttft.tune.space import Config, config_id
from ttft.tune.trial import FAILED, MEASURED, OK, TrialResult
from ttft.tune.workload import TuneWorkload

LoadMode = Literal["concurrency", "rate"]


@dataclass(frozen=True)
class SearchSettings:
    start: int = 1
    max_load: int = 16
    min_gain: float = 0.05
    load: LoadMode = "concurrency"
    # Open loop (load="rate"): requests/s, and each level lasts about level_s seconds of
    # arrivals (at least the workload's requests).
    start_rate: float = 0.5
    max_rate: float = 16.0
    tolerance: float = 0.1  # bisection stops when the bad rate is within this of the good one
    level_s: float = 10.0
    burstiness: float = 1.0  # gamma shape of the gaps; 1 is Poisson
    max_lag_ms: float = 10.0  # the client fell behind: median scheduled -> sent above this

    def describe(self) -> list[float]:
        """The settings that change a trial's result (in trial ids and the experiment spec)."""
        if self.load == "rate":
            return [self.start_rate, self.max_rate, self.tolerance, self.min_gain,
                    self.level_s, self.burstiness, self.max_lag_ms]  # fmt: skip
        return [self.start, self.max_load, self.min_gain]

    def run(self, session: TrialSession) -> SearchOutcome:
        if self.load == "rate":
            return search_rate(
                lambda rate: session.measure_rate(
                    rate, seconds=self.level_s, burstiness=self.burstiness
                ),
                start=self.start_rate,
                max_rate=self.max_rate,
                tolerance=self.tolerance,
                min_gain=self.min_gain,
                max_lag_ms=self.max_lag_ms,
            )
        return search_load(
            session.measure, start=self.start, max_load=self.max_load, min_gain=self.min_gain
        )


# (index, total, config, result or None while it starts, resumed from disk?)
OnTrial = Callable[[int, int, Config, TrialResult | None, bool], None]
# A configuration's quality verdict against the sweep's baseline ("pass", "degraded", "fail"),
# or None where there is nothing to check (the same numerics as the baseline). The CLI builds
# it from ``ttft verify quality``; the sweep only records it and never chooses a "fail".
QualityGate = Callable[[Config], str | None]


def trial_key(
    workload: TuneWorkload, slos: Sequence[Slo], search: SearchSettings
) -> dict[str, object]:
    """Everything besides the configuration that changes a trial's result. The load mode is
    named only for rate searches, so closed-loop trial ids stay what they were."""
    key: dict[str, object] = {
        "workload": workload.describe(),
        "slos": [s.text for s in slos],
        "search": search.describe(),
    }
    if search.load != "concurrency":
        key["load"] = search.load
    return key


def run_trial(
    runner: TrialRunner,
    exp: ExperimentDir,
    trial_id: str,
    config: Config,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    search: SearchSettings,
) -> TrialResult:
    """One trial: start, search the load, stop. A trial that fails is recorded with its reason
    (the engine did not start, every request failed) and the sweep goes on."""
    records = exp.begin(trial_id)
    result = TrialResult(trial_id, dict(config), OK)
    started = time.perf_counter()
    try:
        with runner.open(config, workload, records, slos) as session:
            result.launch_command = list(session.launch_command)
            result.startup_s = session.startup_s
            outcome = search.run(session)
    except TtftError as exc:
        result.status, result.reason = FAILED, str(exc)
        return result
    finally:
        # A trial that failed to start cost its time too.
        result.trial_s = time.perf_counter() - started
    result.levels, result.best, result.saturated = outcome.levels, outcome.best, outcome.saturated
    if all(level.ok == 0 for level in outcome.levels):
        errors = sorted({kind for lv in outcome.levels for kind in lv.errors})
        result.status = FAILED
        result.reason = "every request failed" + (f" ({', '.join(errors)})" if errors else "")
    return result


def run_sweep(
    configs: Sequence[Config],
    runner: TrialRunner,
    exp: ExperimentDir,
    workload: TuneWorkload,
    slos: Sequence[Slo],
    search: SearchSettings = SearchSettings(),
    on_trial: OnTrial | None = None,
    gate: QualityGate | None = None,
) -> list[TrialResult]:
    key = trial_key(workload, slos, search)
    results: list[TrialResult] = []
    for n, config in enumerate(configs):
        trial_id = config_id(config, key)
        done = exp.finished(trial_id)
        if done is None:
            if on_trial is not None:
                on_trial(n, len(configs), config, None, False)
            done = run_trial(runner, exp, trial_id, config, workload, slos, search)
            exp.save(done)
            resumed = False
        else:
            resumed = True
        if gate is not None and done.status == OK and done.quality is None:
            # after the trial's engine stopped: the gate starts engines of its own
            done.quality = gate(config)
            exp.save(done)
        results.append(done)
        if on_trial is not None:
            on_trial(n, len(configs), config, done, resumed)
    return results


def _p99(result: TrialResult) -> float:
    best = result.best
    return float("inf") if best is None or best.ttft_p99_ms is None else best.ttft_p99_ms


def _goodput(result: TrialResult) -> float:
    return 0.0 if result.best is None else result.best.goodput_per_s


def _served(result: TrialResult) -> float:
    """What a configuration is ranked on: the open-loop rate it held (requests/s offered), or
    the goodput at its best closed-loop load. An open-loop level's goodput is its good requests
    over the level's span, tail included, so over a short level it understates the rate held."""
    best = result.best
    if best is None:
        return 0.0
    return best.rate if best.rate is not None else best.goodput_per_s


def rank(results: Sequence[TrialResult]) -> list[TrialResult]:
    """Most goodput at the best load first (open loop: the highest rate held, then goodput),
    then lower TTFT p99; trials that failed the quality gate next, then trials that never held
    the SLOs, failed trials last. Predicted configurations (``--predict``: not run) come after
    every measured one, ranked the same way among themselves."""

    def key(r: TrialResult) -> tuple[bool, int, float, float, float]:
        held, ran = r.best is not None, r.status == OK
        tier = (1 if r.quality_failed else 0) if held else (2 if ran else 3)
        return r.source != MEASURED, tier, -_served(r), -_goodput(r), _p99(r)

    return sorted(results, key=key)


def pareto_ids(results: Sequence[TrialResult]) -> set[str]:
    """Measured trials no other beats on both TTFT p99 (lower) and goodput (higher; open loop:
    the rate held) at their best load."""
    held = [
        r for r in results if r.best is not None and not r.quality_failed and r.source == MEASURED
    ]
    front: set[str] = set()
    for r in held:
        dominated = any(
            _p99(o) <= _p99(r)
            and _served(o) >= _served(r)
            and (_p99(o) < _p99(r) or _served(o) > _served(r))
            for o in held
        )
        if not dominated:
            front.add(r.trial_id)
    return front


def chosen(results: Sequence[TrialResult]) -> TrialResult | None:
    """The best-ranked measured trial that held the SLOs and did not fail the quality gate (a
    prediction alone is never chosen)."""
    ranked = rank(results)
    top = ranked[0] if ranked else None
    if top is None or top.best is None or top.quality_failed or top.source != MEASURED:
        return None
    return top
