"""``tune sweep --load rate`` without a server: the open-loop search per configuration, trial
ids that keep the load modes apart, old trial.json files, and rates in the tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tune_testkit import FakeRunner

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.tune.experiment import ExperimentDir
from ttft.tune.options import SweepOptions
from ttft.tune.runner import rate_requests
from ttft.tune.space import Config, config_id, configurations, parse_space
from ttft.tune.sweep import SearchSettings, chosen, rank, run_sweep, trial_key
from ttft.tune.sweep_flow import search_settings
from ttft.tune.tables import SWEEP_COLUMNS, sweep_json, sweep_rows, to_csv, to_markdown
from ttft.tune.trial import LevelResult, TrialResult, rate_label
from ttft.tune.workload import TuneWorkload

SLOS = parse_slos("ttft:p99<600ms")
WORKLOAD = TuneWorkload(requests=8)
RATE = SearchSettings(load="rate", start_rate=0.5, max_rate=16, level_s=10)


def service(config: Config, workload: TuneWorkload) -> float:
    return 100.0  # ms per request and slot: -np 1 serves 10/s, -np 4 serves 40/s


def rate_sweep(tmp_path: Path, runner: FakeRunner, *, resume: bool = False) -> list[TrialResult]:
    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=resume)
    configs = configurations(parse_space(["-np=1,4"]))
    return run_sweep(configs, runner, exp, WORKLOAD, SLOS, RATE)


def test_each_configuration_gets_the_highest_rate_it_holds(tmp_path: Path) -> None:
    runner = FakeRunner(service)
    one, four = rate_sweep(tmp_path, runner)
    assert one.best is not None and four.best is not None
    # -np 1 keeps up to 10/s (a queue grows above): 8 held, 16 broke, 12 and 11 broke, 10 held.
    assert [lv.rate for lv in one.levels] == [0.5, 1, 2, 4, 8, 16, 12, 10, 11]
    assert one.best.rate == 10
    # -np 4 holds every rate up to --max-rate.
    assert [lv.rate for lv in four.levels] == [0.5, 1, 2, 4, 8, 16]
    assert four.best.rate == 16 and four.best.load_label() == "16.0/s"
    assert chosen([one, four]) is four
    assert all(lv.client_lag_p50_ms == lv.client_lag_p99_ms == 0 for lv in one.levels)
    assert all(lv.n == rate_requests(lv.rate or 0, requests=8, seconds=10) for lv in one.levels)


def test_requests_per_rate_level_cover_the_level_seconds() -> None:
    assert rate_requests(0.5, requests=8, seconds=10) == 8  # --requests is the floor
    assert rate_requests(4, requests=8, seconds=10) == 40
    assert rate_requests(2.25, requests=8, seconds=10) == 23  # rounded up


def test_trial_ids_keep_the_load_modes_apart_and_closed_loop_ids_unchanged() -> None:
    closed = SearchSettings()
    # The key closed-loop trials always had: old experiments resume with the same ids.
    assert trial_key(WORKLOAD, SLOS, closed) == {
        "workload": WORKLOAD.describe(),
        "slos": ["ttft:p99<600ms"],
        "search": [1, 16, 0.05],
    }
    rate_key = trial_key(WORKLOAD, SLOS, RATE)
    assert rate_key["load"] == "rate"
    config = {"-np": "4"}
    assert config_id(config, rate_key) != config_id(config, trial_key(WORKLOAD, SLOS, closed))
    other = SearchSettings(load="rate", start_rate=0.5, max_rate=16, level_s=5)
    assert config_id(config, rate_key) != config_id(config, trial_key(WORKLOAD, SLOS, other))


def test_a_rate_sweep_resumes_its_own_trials_only(tmp_path: Path) -> None:
    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=False)
    configs = configurations(parse_space(["-np=1,4"]))
    run_sweep(configs, FakeRunner(service), exp, WORKLOAD, SLOS, SearchSettings(max_load=4))
    again = FakeRunner(service)
    run_sweep(configs, again, exp, WORKLOAD, SLOS, RATE)
    assert again.opened == configs  # closed-loop trials on disk are not rate trials
    third = FakeRunner(service)
    resumed = run_sweep(configs, third, exp, WORKLOAD, SLOS, RATE)
    assert third.opened == [] and all(r.best and r.best.rate for r in resumed)


def test_rates_in_the_tables_and_json(tmp_path: Path) -> None:
    results = rate_sweep(tmp_path, FakeRunner(service))
    rows = sweep_rows(results)
    assert [row["best_load"] for row in rows] == ["16.0/s", "10.0/s"]
    assert "| 16.0/s |" in to_markdown("sweep", SWEEP_COLUMNS, rows)
    assert ",10.0/s," in to_csv(SWEEP_COLUMNS, rows)
    data = sweep_json(results, ["ttft:p99<600ms"], chosen(results), "rate")
    assert data["schema"] == "ttft.tune.sweep/1" and data["load"] == "rate"
    assert data["chosen"]["best"]["rate"] == 16 and data["table"][0]["best_load"] == "16.0/s"
    assert [rate_label(r) for r in (2, 0.75, 1.5, 12, 0.333)] == [
        "2.0/s", "0.75/s", "1.5/s", "12.0/s", "0.33/s"
    ]  # fmt: skip


def test_closed_loop_tables_name_the_concurrency() -> None:
    level = LevelResult(4, 8, 8, 100.0, 200.0, 300.0, None, None, 3.5, 1.0, True)
    result = TrialResult("t", {"-np": "4"}, "ok", levels=[level], best=level)
    assert sweep_rows([result])[0]["best_load"] == "c=4"
    assert level.load == 4.0 and level.rate is None


def test_an_old_trial_json_without_rates_still_reads(tmp_path: Path) -> None:
    level = LevelResult(4, 8, 8, 100.0, 200.0, 300.0, (90.0, 110.0), None, 3.5, 1.0, True)
    old = level.to_dict()
    for key in ("rate", "client_lag_p50_ms", "client_lag_p99_ms"):
        del old[key]  # as written before open-loop levels
    back = LevelResult.from_dict(json.loads(json.dumps(old)))
    assert back == level and back.rate is None and back.load_label() == "c=4"
    rated = LevelResult(3, 20, 20, 1.0, 2.0, 3.0, None, None, 2.0, 1.0, True, rate=2.0)
    assert LevelResult.from_dict(json.loads(json.dumps(rated.to_dict()))) == rated


def test_rate_options_are_checked_before_anything_runs() -> None:
    base = {
        "load_mode": "rate", "start_load": 1, "max_load": 16, "start_rate": 0.5,
        "max_rate": 16.0, "rate_tolerance": 0.1, "level_seconds": 10.0, "burstiness": 1.0,
        "max_client_lag_ms": 10.0,
    }  # fmt: skip
    settings = search_settings(SweepOptions(**base))
    assert settings.load == "rate" and settings.tolerance == 0.1 and settings.level_s == 10
    assert search_settings(SweepOptions(**{**base, "load_mode": "concurrency"})) == SearchSettings()
    bad_options = [
        {"start_rate": 8.0, "max_rate": 4.0}, {"start_rate": 0.0}, {"rate_tolerance": 1.5},
        {"level_seconds": 0.0}, {"max_client_lag_ms": -1.0},
    ]  # fmt: skip
    for bad in bad_options:
        with pytest.raises(TtftError):
            search_settings(SweepOptions(**{**base, **bad}))


def test_the_sweep_command_takes_the_rate_options() -> None:
    result = CliRunner().invoke(cli, ["tune", "sweep", "--help"])
    assert result.exit_code == 0
    for option in ("--load", "--start-rate", "--max-rate", "--rate-tolerance",
                   "--level-seconds", "--burstiness", "--max-client-lag-ms"):  # fmt: skip
        assert option in result.output


def test_open_loop_trials_rank_by_the_rate_they_held_then_goodput() -> None:
    def trial(name: str, rate: float, goodput: float) -> TrialResult:
        lv = LevelResult(2, 8, 8, 100.0, 200.0, 300.0, None, None, goodput, 1.0, True, rate=rate)
        return TrialResult(name, {"-np": name}, "ok", levels=[lv], best=lv)

    # A short level's goodput counts the tail: 2.0/s held can show less goodput than 1.75/s.
    low, high, tie = trial("1", 1.75, 1.75), trial("4", 2.0, 1.49), trial("2", 2.0, 1.6)
    assert [r.trial_id for r in rank([low, high, tie])] == ["2", "4", "1"]
    assert chosen([low, high]) is high
