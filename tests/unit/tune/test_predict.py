"""``tune sweep --predict``: the grid ranked by the simulator, only the top measured, and the
table saying which rows were measured and which predicted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tune_testkit import FakeRunner

from ttft.cli.main import cli, main
from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.simulate.model import Calibration, CostModel, EngineSettings, FitReport
from ttft.tune.experiment import ExperimentDir
from ttft.tune.predict import (
    default_measure_top,
    engine_settings,
    load_calibration,
    select,
)
from ttft.tune.space import configurations, parse_space
from ttft.tune.sweep import SearchSettings, chosen, run_sweep, trial_key
from ttft.tune.tables import SWEEP_COLUMNS, sweep_cost, sweep_json, sweep_rows, to_csv
from ttft.tune.trial import MEASURED, PREDICTED
from ttft.tune.workload import TuneWorkload

# about the embedded engine: ~2.3 ms a prompt token, 20 ms a decode step
COST = CostModel(
    step_base_s=0.01,
    prefill_token_s=0.0023,
    decode_seq_s=0.002,
    attention_s=0.0002,
    overhead_s=0.02,
)
FIT = FitReport(samples=10, r2=0.99, rel_residual_p50=0.05, rel_residual_p95=0.1)
WORKLOAD = TuneWorkload(prefix_words=120, suffix_words=12, max_tokens=8, requests=8)
SEARCH = SearchSettings(max_load=8)
SLOS = parse_slos(["ttft:p99<3s"])


def calibration(kind: str = "llamacpp") -> Calibration:
    return Calibration(COST, EngineSettings(kind=kind, slots=4), FIT)  # type: ignore[arg-type]


def grid(*params: str) -> list[dict[str, str]]:
    return configurations(parse_space(params))


def key() -> dict[str, object]:
    return trial_key(WORKLOAD, SLOS, SEARCH)


def test_the_modelled_flags_set_the_simulators_settings() -> None:
    cal = calibration()
    settings = engine_settings(cal, "llamacpp", {"-np": "2", "-b": "512"}, 2048)
    assert isinstance(settings, EngineSettings)
    assert (settings.slots, settings.batch_tokens, settings.ctx_per_slot) == (2, 512, 2048)
    vllm = engine_settings(
        calibration("vllm"),
        "vllm",
        {"--max-num-seqs": "8", "--enable-chunked-prefill": "off"},
        None,
    )
    assert isinstance(vllm, EngineSettings) and vllm.slots == 8 and not vllm.chunked_prefill


def test_sglang_flags_set_the_sglang_models_settings() -> None:
    sglang = engine_settings(
        calibration("sglang"),
        "sglang",
        {
            "--max-running-requests": "32",
            "--chunked-prefill-size": "2048",
            "--schedule-policy": "lpm",
        },
        None,
    )
    assert isinstance(sglang, EngineSettings)
    assert (sglang.slots, sglang.batch_tokens, sglang.schedule_policy) == (32, 2048, "lpm")
    off = engine_settings(calibration("sglang"), "sglang", {"--chunked-prefill-size": "-1"}, None)
    assert isinstance(off, EngineSettings) and not off.chunked_prefill
    why = engine_settings(calibration("sglang"), "sglang", {"--schedule-policy": "lof"}, None)
    assert why == "not predicted: --schedule-policy lof (the model knows fcfs, lpm)"


def test_a_flag_the_model_does_not_cover_is_named() -> None:
    why = engine_settings(calibration(), "llamacpp", {"-np": "2", "-ub": "128"}, None)
    assert why == "not predicted: the model does not cover -ub"
    bad = engine_settings(calibration(), "llamacpp", {"-np": "two"}, None)
    assert isinstance(bad, str) and "'two' is not a whole number" in bad


def test_half_the_grid_rounded_up_is_measured_by_default() -> None:
    assert [default_measure_top(n) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]


def test_the_grid_is_ranked_by_prediction_and_only_the_top_is_measured() -> None:
    configs = grid("-np=1,2,4")
    selection = select(configs, calibration(), "llamacpp", WORKLOAD, SLOS, SEARCH, key())
    assert len(selection.ranked) == 3 and not selection.unpredictable
    assert all(r.source == PREDICTED for r in selection.ranked)
    # more slots serve a closed loop of short answers with more goodput
    assert [r.config["-np"] for r in selection.ranked] == ["4", "2", "1"]
    assert selection.measure == [{"-np": "2"}, {"-np": "4"}]  # the top 2, in the grid's order
    one = select(configs, calibration(), "llamacpp", WORKLOAD, SLOS, SEARCH, key(), measure_top=1)
    assert one.measure == [{"-np": "4"}]


def test_configurations_the_model_cannot_predict_are_measured_with_a_note() -> None:
    configs = grid("-np=1,4", "-fa=on,off")
    selection = select(
        configs, calibration(), "llamacpp", WORKLOAD, SLOS, SEARCH, key(), measure_top=1
    )
    assert selection.measure == configs and not selection.ranked
    assert set(selection.unpredictable.values()) == {"not predicted: the model does not cover -fa"}


def test_a_prediction_is_shown_as_such_and_never_chosen(tmp_path: Path) -> None:
    configs = grid("-np=1,2,4")
    selection = select(
        configs, calibration(), "llamacpp", WORKLOAD, SLOS, SEARCH, key(), measure_top=1
    )
    runner = FakeRunner(service_ms=lambda config, workload: 100.0)
    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=False)
    measured = run_sweep(selection.measure, runner, exp, WORKLOAD, SLOS, SEARCH)
    assert runner.opened == [{"-np": "4"}]  # one real trial, not three
    results = selection.merge(measured)
    rows = sweep_rows(results)
    assert [(r["config"], r["source"]) for r in rows] == [
        ("-np 4", MEASURED),
        ("-np 2", PREDICTED),
        ("-np 1", PREDICTED),
    ]
    assert all(r["pareto"] == "" for r in rows[1:])  # the front is of measured trials only
    assert "source" in to_csv(SWEEP_COLUMNS, rows).splitlines()[0]
    choice = chosen(results)
    assert choice is not None and choice.config == {"-np": "4"}
    assert sweep_cost(results).trials == 1
    data = sweep_json(results, [s.text for s in SLOS], choice, predict=selection.summary())
    assert [t["source"] for t in data["trials"]] == [MEASURED, PREDICTED, PREDICTED]
    assert data["predict"]["measured"] == 1 and data["predict"]["predicted_only"] == 2
    assert data["predict"]["predicted_order"] == ["-np 4", "-np 2", "-np 1"]


def test_an_unpredictable_configuration_keeps_its_note_in_the_table(tmp_path: Path) -> None:
    configs = grid("-np=1,4", "-ub=128")
    selection = select(configs, calibration(), "llamacpp", WORKLOAD, SLOS, SEARCH, key())
    runner = FakeRunner(service_ms=lambda config, workload: 100.0)
    exp = ExperimentDir.open(tmp_path / "exp", {"kind": "sweep"}, resume=False)
    results = selection.merge(run_sweep(selection.measure, runner, exp, WORKLOAD, SLOS, SEARCH))
    rows = sweep_rows(results)
    assert len(rows) == 2 and all(r["source"] == MEASURED for r in rows)
    assert all("the model does not cover -ub" in r["note"] for r in rows)


def test_a_missing_or_bad_calibration_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TtftError) as missing:
        load_calibration(tmp_path / "nope.json", "llamacpp")
    assert "calibration file not found" in str(missing.value)
    assert "ttft simulate calibrate" in (missing.value.fix or "")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TtftError) as unreadable:
        load_calibration(bad, "llamacpp")
    assert "--predict" in str(unreadable.value)
    assert "ttft simulate calibrate" in (unreadable.value.fix or "")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something/1"}))
    with pytest.raises(TtftError, match="not a ttft simulate calibration"):
        load_calibration(other, "llamacpp")


def test_a_calibration_of_another_engine_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    calibration("vllm").save(path)
    with pytest.raises(TtftError) as exc:
        load_calibration(path, "llamacpp")
    assert "calibrates a vllm engine, but this sweep is of llamacpp" in str(exc.value)
    assert "calibrate the llamacpp engine" in (exc.value.fix or "")


def test_the_cli_refuses_before_any_engine_starts(tmp_path: Path) -> None:
    out = tmp_path / "exp"
    result = CliRunner().invoke(
        cli, ["tune", "sweep", "--param", "-np=1,2", "--measure-top", "1", "--out", str(out)]
    )
    assert isinstance(result.exception, TtftError)
    assert "--measure-top needs --predict" in str(result.exception)
    path = tmp_path / "cal.json"
    calibration("vllm").save(path)
    result = CliRunner().invoke(
        cli, ["tune", "sweep", "--param", "-np=1,2", "--predict", str(path), "--out", str(out)]
    )
    assert isinstance(result.exception, TtftError) and "calibrates a vllm" in str(result.exception)
    assert not out.exists()


def test_a_missing_calibration_exits_2_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    argv = ["ttft", "tune", "sweep", "--param", "-np=1,2", "--predict", str(missing)]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path / "exp")])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "calibration file not found" in err
    assert "ttft simulate calibrate" in err and "Traceback" not in err


def test_open_loop_sweeps_are_predicted_with_the_rate_search() -> None:
    rate = SearchSettings(load="rate", start_rate=0.5, max_rate=8.0, level_s=5.0)
    configs = grid("--max-num-seqs=1,8")
    selection = select(
        configs,
        calibration("vllm"),
        "vllm",
        WORKLOAD,
        SLOS,
        rate,
        trial_key(WORKLOAD, SLOS, rate),
        measure_top=1,
    )
    best = [r.best for r in selection.ranked]
    assert all(b is not None and b.rate is not None for b in best)
    assert selection.ranked[0].config == {"--max-num-seqs": "8"}
    assert selection.measure == [{"--max-num-seqs": "8"}]


def test_slos_the_simulator_cannot_predict_are_refused() -> None:
    with pytest.raises(TtftError, match="the simulator predicts"):
        select(
            grid("-np=1,2"), calibration(), "llamacpp", WORKLOAD, parse_slos(["itl:p99<50ms"]),
            SEARCH, key(),
        )  # fmt: skip


def test_a_rate_level_is_predicted_on_the_burstiness_the_measured_level_sends() -> None:
    """--burstiness below 1 bunches arrivals (gamma gaps): at the same mean rate the predicted
    p99 grows, as the measured one does; 1 stays Poisson."""
    from ttft.tune.predict import SimSession

    session = SimSession(calibration(), EngineSettings(slots=2), WORKLOAD, SLOS)
    poisson = session.measure_rate(1.5, seconds=60.0)
    again = session.measure_rate(1.5, seconds=60.0, burstiness=1.0)
    bursty = session.measure_rate(1.5, seconds=60.0, burstiness=0.1)
    assert poisson.ttft_p99_ms == again.ttft_p99_ms  # the same seeded schedule
    assert poisson.ttft_p99_ms is not None and bursty.ttft_p99_ms is not None
    assert bursty.ttft_p99_ms > 1.5 * poisson.ttft_p99_ms
