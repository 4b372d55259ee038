"""A sweep's summary shows each trial's engine start-up, and its cost counts the start-ups."""

from __future__ import annotations

from pathlib import Path

from tune_testkit import FakeRunner

from ttft.core.slo import parse_slos
from ttft.tune.experiment import ExperimentDir
from ttft.tune.space import Config, configurations, parse_space
from ttft.tune.sweep import SearchSettings, run_sweep
from ttft.tune.tables import (
    SWEEP_COLUMNS,
    sweep_cost,
    sweep_json,
    sweep_rows,
    to_csv,
    to_markdown,
)
from ttft.tune.trial import FAILED, OK, TrialResult
from ttft.tune.workload import TuneWorkload


def test_the_table_has_a_start_up_column_and_the_cost_counts_start_ups() -> None:
    results = [
        TrialResult("a", {"--max-num-seqs": "1"}, OK, startup_s=52.4, trial_s=80.0),
        TrialResult("b", {"--max-num-seqs": "4"}, OK, startup_s=47.6, trial_s=70.0),
        # read back from an experiment written before trial_s: its start-up still counts
        TrialResult("c", {"--max-num-seqs": "8"}, FAILED, reason="exited", startup_s=30.0),
        TrialResult("d", {"--max-num-seqs": "16"}, FAILED, reason="no start", trial_s=5.0),
    ]
    rows = sweep_rows(results)
    assert SWEEP_COLUMNS.index("startup_s") == SWEEP_COLUMNS.index("status") + 1
    assert {r["config"]: r["startup_s"] for r in rows} == {
        "--max-num-seqs 1": "52.4",
        "--max-num-seqs 4": "47.6",
        "--max-num-seqs 8": "30.0",
        "--max-num-seqs 16": "",  # never started: no start-up to show
    }
    cost = sweep_cost(results)
    assert (cost.trials, cost.seconds, cost.startup_seconds, cost.started) == (4, 185.0, 130.0, 3)
    assert (
        cost.text() == "cost: 4 trials, 185 s, of which 130 s (70%) engine start-up (3 start-ups)"
    )
    assert sweep_json(results, [], None)["cost"] == {
        "trials": 4, "seconds": 185.0, "startup_seconds": 130.0, "startup_share": 0.7027,
    }  # fmt: skip
    md = to_markdown("tune sweep", SWEEP_COLUMNS, rows)
    assert "| rank | config | status | startup_s |" in md and "| 52.4 |" in md
    assert to_csv(SWEEP_COLUMNS, rows).splitlines()[0].startswith("rank,config,status,startup_s,")


def test_each_trial_records_its_wall_time_including_a_failed_start(tmp_path: Path) -> None:
    def fail(config: Config) -> str | None:
        return "the engine exited" if config["-np"] == "2" else None

    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=False)
    configs = configurations(parse_space(["-np=1,2"]))
    runner = FakeRunner(lambda config, workload: 100.0, fail)
    results = run_sweep(configs, runner, exp, TuneWorkload(requests=4),
                        parse_slos("ttft:p99<600ms"), SearchSettings(max_load=2))  # fmt: skip
    assert all(r.trial_s is not None and r.trial_s >= 0 for r in results)
    ok = next(r for r in results if r.status == OK)
    assert ok.startup_s == 0.5  # the fake session's start-up, shown in the table
    assert sweep_rows(results)[0]["startup_s"] == "0.5"
    # and it survives the experiment directory (a resumed sweep reports the same cost)
    again = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=True)
    back = again.finished(ok.trial_id)
    assert back is not None and back.trial_s == ok.trial_s
    assert sweep_cost(results).startup_seconds == 0.5
