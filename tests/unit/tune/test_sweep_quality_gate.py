"""`tune sweep --quality-gate`: a configuration that fails the quality check against the
sweep's baseline is marked "quality fail" in the table and never chosen, however fast it is;
its verdict is kept with the trial, so a resumed sweep does not check it again."""

from __future__ import annotations

import json
from pathlib import Path

from tune_testkit import FakeRunner

from ttft.core.slo import parse_slos
from ttft.tune.experiment import ExperimentDir
from ttft.tune.quality_gate import gate_side, quality_gate
from ttft.tune.space import Config, configurations, parse_space
from ttft.tune.sweep import SearchSettings, chosen, pareto_ids, run_sweep
from ttft.tune.tables import sweep_rows
from ttft.tune.trial import TrialResult
from ttft.tune.workload import TuneWorkload

SLOS = parse_slos("ttft:p99<600ms")
SPACE = ["-ctk=f16,q8_0,q4_0", "-np=1,4"]


def service(config: Config, workload: TuneWorkload) -> float:
    # smaller KV is faster here, so the fastest configuration is the one that breaks answers
    return {"f16": 140.0, "q8_0": 120.0, "q4_0": 100.0}[config["-ctk"]]


def verdict(config: Config) -> str | None:
    return {"f16": None, "q8_0": "pass", "q4_0": "fail"}[config["-ctk"]]


def sweep(tmp_path: Path, gate_calls: list[Config], resume: bool = False) -> list[TrialResult]:
    def gate(config: Config) -> str | None:
        gate_calls.append(config)
        return verdict(config)

    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=resume)
    configs = configurations(parse_space(SPACE))
    return run_sweep(
        configs,
        FakeRunner(service),
        exp,
        TuneWorkload(requests=8),
        SLOS,
        SearchSettings(max_load=8),
        gate=gate,
    )


def test_a_quality_fail_is_marked_and_never_chosen(tmp_path: Path) -> None:
    calls: list[Config] = []
    results = sweep(tmp_path, calls)
    assert len(calls) == 6
    fastest = max((r for r in results if r.best), key=lambda r: r.best.goodput_per_s)  # type: ignore[union-attr]
    assert fastest.config["-ctk"] == "q4_0" and fastest.quality == "fail"
    best = chosen(results)
    assert best is not None and best.config["-ctk"] == "q8_0"
    assert not any(r.trial_id in pareto_ids(results) for r in results if r.quality_failed)
    rows = sweep_rows(results)
    failed = [row for row in rows if "q4_0" in row["config"]]
    assert all(row["status"] == "quality fail" for row in failed)
    assert all("never chosen" in row["note"] for row in failed)
    assert rows[0]["config"].startswith("-ctk q8_0")  # failing ones rank below every pass
    saved = json.loads(next((tmp_path / "exp" / "trials").glob("*/trial.json")).read_text())
    assert "quality" in saved


def test_a_resumed_sweep_keeps_the_verdicts_without_checking_again(tmp_path: Path) -> None:
    first: list[Config] = []
    results = sweep(tmp_path, first)
    again: list[Config] = []
    resumed = sweep(tmp_path, again, resume=True)
    checked = [r for r in results if r.quality is not None]
    assert len(checked) == 4  # f16 ones are the baseline's numerics: nothing to check
    # only the baseline-like trials (verdict None) are asked again; their answer stays None
    assert len(again) == 2 and all(c["-ctk"] == "f16" for c in again)
    assert [r.quality for r in resumed] == [r.quality for r in results]


def test_gate_sides_differ_only_in_what_changes_numerics() -> None:
    base = gate_side({"-ctk": "f16", "-np": "1"}, None)
    assert gate_side({"-ctk": "f16", "-np": "4", "-t": "2"}, None).overrides == base.overrides
    q4 = gate_side({"-ctk": "q4_0", "-ctv": "q4_0", "-np": "4"}, None)
    assert q4.overrides == {"cache_type_k": "q4_0", "cache_type_v": "q4_0"}
    assert q4.label == "q4_0 KV"
    # a configuration equal to the baseline in numerics is not checked (no engine starts)
    gate = quality_gate({"-ctk": "f16", "-np": "1"}, threads=None, model_path=None)
    assert gate({"-ctk": "f16", "-np": "4"}) is None
