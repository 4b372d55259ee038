from __future__ import annotations

import json
from pathlib import Path

import pytest
from tune_testkit import FakeRunner

from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.tune.experiment import ExperimentDir
from ttft.tune.space import Config, configurations, parse_space
from ttft.tune.sweep import SearchSettings, chosen, pareto_ids, rank, run_sweep
from ttft.tune.tables import (
    SWEEP_COLUMNS,
    bucket_rows,
    sweep_json,
    sweep_rows,
    to_csv,
    to_markdown,
)
from ttft.tune.workload import TuneWorkload

SLOS = parse_slos("ttft:p99<600ms")
WORKLOAD = TuneWorkload(requests=8)


def service(config: Config, workload: TuneWorkload) -> float:
    # Bigger micro-batches help a little; more slots help a lot (until the SLO).
    return 100.0 if config.get("-ub") == "512" else 120.0


def sweep(tmp_path: Path, runner: FakeRunner, *, resume: bool = False) -> list:  # type: ignore[type-arg]
    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=resume)
    configs = configurations(parse_space(["-np=1,2,4", "-ub=128,512"]))
    return run_sweep(configs, runner, exp, WORKLOAD, SLOS, SearchSettings(max_load=16))


def test_the_chosen_configuration_has_the_most_goodput(tmp_path: Path) -> None:
    results = sweep(tmp_path, FakeRunner(service))
    best = chosen(results)
    assert best is not None and best.best is not None
    assert best.config == {"-np": "4", "-ub": "512"}
    assert best.best.goodput_per_s == max(r.best.goodput_per_s for r in results if r.best)
    assert best.best.ttft_p99_ms is not None and best.best.ttft_p99_ms < 600
    ranked = rank(results)
    goodputs = [r.best.goodput_per_s for r in ranked if r.best]
    assert goodputs == sorted(goodputs, reverse=True)


def test_resume_runs_only_missing_trials_and_gives_the_same_table(tmp_path: Path) -> None:
    first = FakeRunner(service)
    results = sweep(tmp_path, first)
    table = sweep_rows(results)
    # As if SIGKILL hit during the last trial: its result never reached trial.json.
    last = results[-1].trial_id
    (tmp_path / "exp" / "trials" / last / "trial.json").unlink()
    again = FakeRunner(service)
    resumed = sweep(tmp_path, again, resume=True)
    assert again.opened == [results[-1].config]
    assert sweep_rows(resumed) == table
    assert (tmp_path / "exp" / "trials" / last / "records.interrupted-1.jsonl").exists()


def test_an_existing_experiment_needs_resume(tmp_path: Path) -> None:
    sweep(tmp_path, FakeRunner(service))
    with pytest.raises(TtftError, match="--resume"):
        sweep(tmp_path, FakeRunner(service))
    with pytest.raises(TtftError, match="other settings"):
        ExperimentDir.open(tmp_path / "exp", {"kind": "other"}, resume=True)


def test_a_trial_that_cannot_start_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    def fail(config: Config) -> str | None:
        return "llama-server exited with code 1" if config["-np"] == "2" else None

    results = sweep(tmp_path, FakeRunner(service, fail))
    failed = [r for r in results if r.status == "failed"]
    assert len(failed) == 2 and "exited with code 1" in failed[0].reason
    assert len(results) == 6
    rows = sweep_rows(results)
    assert [row["status"] for row in rows][-2:] == ["failed", "failed"]
    saved = json.loads(
        (tmp_path / "exp" / "trials" / failed[0].trial_id / "trial.json").read_text()
    )
    assert saved["status"] == "failed"


def test_pareto_front_and_reports(tmp_path: Path) -> None:
    results = sweep(tmp_path, FakeRunner(service))
    front = pareto_ids(results)
    best = chosen(results)
    assert best is not None and best.trial_id in front
    # -np 1 at -ub 512 has the lowest p99 (no queueing behind a second slot's work) or is
    # dominated; either way every front member is undominated:
    held = [r for r in results if r.best]
    for r in held:
        if r.trial_id in front:
            assert r.best is not None
            assert not any(
                o.best is not None
                and o.best.ttft_p99_ms is not None
                and r.best.ttft_p99_ms is not None
                and o.best.ttft_p99_ms < r.best.ttft_p99_ms
                and o.best.goodput_per_s > r.best.goodput_per_s
                for o in held
            )
    rows = sweep_rows(results)
    md = to_markdown("sweep", SWEEP_COLUMNS, rows)
    assert "| rank | config |" in md and "-np 4 -ub 512" in md
    csv_text = to_csv(SWEEP_COLUMNS, rows)
    assert csv_text.splitlines()[0].startswith("rank,config,status")
    data = sweep_json(results, ["ttft:p99<600ms"], best)
    assert data["schema"] == "ttft.tune.sweep/1" and data["chosen"]["config"]["-np"] == "4"


def test_prompt_length_axis_compares_each_configuration_across_lengths(tmp_path: Path) -> None:
    def by_length(config: Config, workload: TuneWorkload) -> float:
        per_word = 0.5 if config.get("-fa") == "on" else 0.8
        return workload.prefix_words * per_word

    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=False)
    configs = configurations(parse_space(["-fa=on,off"]))
    by_bucket = {
        words: run_sweep(
            configs,
            FakeRunner(by_length),
            exp,
            TuneWorkload(shape="unique", prefix_words=words, requests=4),
            (),
            SearchSettings(max_load=1),
        )
        for words in (400, 1850)
    }
    columns, rows = bucket_rows(by_bucket)
    assert columns == [
        "config", "400w_p50_ms", "400w_goodput_per_s", "1850w_p50_ms", "1850w_goodput_per_s"
    ]  # fmt: skip
    assert [r["config"] for r in rows] == ["-fa on", "-fa off"]
    assert rows[0]["400w_p50_ms"] == "200" and rows[1]["1850w_p50_ms"] == "1480"
    items = TuneWorkload(shape="unique", prefix_words=20).items(2, "c=1")
    assert items[0].body["messages"][0] != items[1].body["messages"][0]
