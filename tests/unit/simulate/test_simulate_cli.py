"""`ttft simulate run` from the command line: a table from a calibration file, and clear
errors (exit 2, one message, no traceback) on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ttft.cli.main import main
from ttft.simulate.model import Calibration, CostModel, EngineSettings, FitReport

CAL = Calibration(
    CostModel(step_base_s=0.01, prefill_token_s=1 / 440, decode_seq_s=0.02, overhead_s=0.02),
    EngineSettings(slots=4, ctx_per_slot=2048),
    FitReport(10, 0.99, 0.05, 0.1),
    {"embedded": False},
)


def ttft(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["ttft", *args])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture
def cal(tmp_path: Path) -> Path:
    path = tmp_path / "cal.json"
    CAL.save(path)
    return path


def test_a_grid_prints_one_row_per_point_and_writes_json(
    cal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pred.json"
    page = tmp_path / "pred.html"
    code = ttft(
        [
            "simulate",
            "run",
            "-c",
            str(cal),
            "--rate",
            "0.5,1",
            "--requests",
            "60",
            "--prompt-tokens",
            "300",
            "--slots",
            "2,4",
            "--runs",
            "2",
            "--json",
            str(out),
            "--html",
            str(page),
        ],
        monkeypatch,
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert text.count("slots=") == 4
    data = json.loads(out.read_text())
    assert len(data["points"]) == 4
    assert data["points"][0]["ttft_s"]["p95"]["interval"]["high"] > 0
    html = page.read_text()
    assert 'data-report="simulate"' in html and html.count("<tr>") == 5


def test_fewest_replicas_names_a_count(
    cal: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = ttft(
        [
            "simulate",
            "run",
            "-c",
            str(cal),
            "--rate",
            "2",
            "--requests",
            "120",
            "--prompt-tokens",
            "300",
            "--slo",
            "ttft:p95<3s",
            "--fewest-replicas",
            "--runs",
            "2",
        ],
        monkeypatch,
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "fewest replicas holding ttft:p95<3s:" in text


def test_the_long_reserve_sweeps_and_each_row_names_its_lanes(
    cal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lanes.json"
    args = ["simulate", "run", "-c", str(cal), "--rate", "0.5", "--requests", "40"]
    args += ["--prompt-tokens", "300", "--long-prompt-tokens", "200", "--long-reserve", "0,1"]
    code = ttft([*args, "--runs", "2", "--json", str(out)], monkeypatch)
    text = capsys.readouterr().out
    assert code == 0, text
    assert "lanes long>200 reserve=0 burst=4" in text
    assert "lanes long>200 reserve=1 burst=4" in text
    points = json.loads(out.read_text())["points"]
    assert len(points) == 2 and all(p["shed"] == {} for p in points)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "--rate values must be above 0"),
        (["--rate", "x"], "is not a number"),
        (["--policy", "random"], "unknown --policy"),
        (["--rate", "1", "--slo", "tpot:p99<50ms"], "the simulator predicts"),
        (["--rate", "1", "--fewest-replicas"], "needs an SLO"),
        (["--trace", "/nonexistent.jsonl"], "trace not found"),
        ([], "no workload"),
        (["--rate", "1", "--shared-prefix", "900"], "--shared-prefix must be"),
        (["--rate", "1", "--long-reserve", "-1"], "--long-reserve values must be at least 0"),
        (["--rate", "1", "--queue-size", "8"], "lanes' queue"),
    ],
)
def test_bad_input_is_one_clear_error(
    cal: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = ttft(["simulate", "run", "-c", str(cal), "--runs", "1", *args], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err


def test_a_missing_calibration_says_how_to_make_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = ttft(["simulate", "run", "-c", str(tmp_path / "none.json"), "--rate", "1"], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and "ttft simulate calibrate" in err


def test_a_mooncake_and_a_jsonl_trace_drive_the_model(
    cal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mooncake = tmp_path / "mooncake.jsonl"
    mooncake.write_text(
        "".join(
            json.dumps(
                {
                    "timestamp": 800 * i,
                    "input_length": 600,
                    "output_length": 8,
                    "hash_ids": [i % 3, 10 + i],
                }
            )
            + "\n"
            for i in range(30)
        )
    )
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text(
        "".join(
            json.dumps({"arrival_s": 0.7 * i, "prompt": "word " * 300, "max_tokens": 8}) + "\n"
            for i in range(20)
        )
    )
    for trace in (mooncake, bodies):
        code = ttft(
            [
                "simulate",
                "run",
                "-c",
                str(cal),
                "--trace",
                str(trace),
                "--replicas",
                "2",
                "--policy",
                "round-robin,prefix-affinity",
                "--runs",
                "1",
            ],
            monkeypatch,
        )
        text = capsys.readouterr().out
        assert code == 0, text
        assert "round-robin" in text and "prefix-affinity" in text


def test_calibrate_refuses_threads_for_an_engine_it_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--threads sets the embedded engine's -t: with --url it would be silently ignored."""
    out = tmp_path / "cal.json"
    code = ttft(
        [
            "simulate",
            "calibrate",
            "--url",
            "http://127.0.0.1:9",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        monkeypatch,
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--threads sets the embedded engine's threads" in err and "Traceback" not in err
    assert not out.exists()


def test_an_sglang_calibration_compares_schedule_policies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sglang.json"
    Calibration(CAL.cost, EngineSettings(kind="sglang", slots=4, block_tokens=1), CAL.fit, {}).save(
        path
    )
    args = ["simulate", "run", "-c", str(path), "--rate", "1", "--requests", "40"]
    code = ttft(
        [
            *args,
            "--prompt-tokens",
            "300",
            "--shared-prefix",
            "256",
            "--runs",
            "1",
            "--schedule-policy",
            "fcfs,lpm",
        ],
        monkeypatch,
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "schedule=fcfs" in out and "schedule=lpm" in out


def test_an_sglang_calibration_needs_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ttft starts no SGLang (no CPU build): `--engine sglang` without --url says so and
    starts nothing."""
    code = ttft(
        ["simulate", "calibrate", "--engine", "sglang", "--out", str(tmp_path / "c.json")],
        monkeypatch,
    )
    assert code == 2
    assert "an SGLang calibration needs --url" in capsys.readouterr().err
