from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.core.errors import TtftError
from ttft.tune.ab_flow import parse_change


def test_parse_change_reads_flags_transforms_targets_and_tiers() -> None:
    change = parse_change("moved and more slots | move-dynamic -np=4 tier=3")
    assert change.label == "moved and more slots"
    assert change.flags == {"-np": "4"} and change.transforms == ("move-dynamic",)
    assert change.tier == 3 and change.cost_key() == (3, 2)
    assert parse_change("other | url=http://10.0.0.2:8000").url == "http://10.0.0.2:8000"
    with pytest.raises(TtftError, match="LABEL"):
        parse_change("-np=4")
    with pytest.raises(TtftError, match="one value"):
        parse_change("slots | -np=2,4")


def test_dry_run_prints_one_launch_command_per_configuration() -> None:
    result = CliRunner().invoke(
        cli,
        ["tune", "sweep", "--engine", "vllm", "--launch", "vllm serve m", "--dry-run",
         "--param", "max-num-seqs=64,128", "--param", "enable-prefix-caching=on,off"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "vllm serve m --max-num-seqs 64 --enable-prefix-caching",
        "vllm serve m --max-num-seqs 64 --no-enable-prefix-caching",
        "vllm serve m --max-num-seqs 128 --enable-prefix-caching",
        "vllm serve m --max-num-seqs 128 --no-enable-prefix-caching",
    ]


def test_engines_ttft_cannot_start_need_dry_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["tune", "sweep", "--engine", "sglang", "--out", str(tmp_path / "x")]
    )
    assert isinstance(result.exception, TtftError)
    assert "--dry-run" in str(result.exception)


def test_a_bad_plan_entry_is_one_error_naming_its_line_and_nothing_runs(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        'schema = "ttft.plan/1"\n\n[service]\nurl = "http://127.0.0.1:9"\n\n'
        '[[step]]\nlabel = "slots"\nflagz = { "-np" = "4" }\n'
    )
    out = tmp_path / "ab"
    result = CliRunner().invoke(cli, ["tune", "ab", "--plan", str(plan), "--out", str(out)])
    # main() prints a TtftError as one line and exits 2.
    assert isinstance(result.exception, TtftError), result.output
    assert f"{plan}:8" in str(result.exception) and "flagz" in str(result.exception)
    assert not out.exists()


def test_tune_ab_without_changes_or_a_plan_says_what_it_needs() -> None:
    result = CliRunner().invoke(cli, ["tune", "ab"])
    assert isinstance(result.exception, TtftError)
    assert "--plan" in str(result.exception) and "--change" in str(result.exception)


def test_the_resume_command_is_this_command_with_the_experiment_and_resume() -> None:
    from ttft.cli.tune_ab import resume_command

    argv = ["tune", "ab", "--plan", "p.toml", "--out", "old", "--resume"]
    assert resume_command(Path("res/ab"), argv) == (
        "ttft tune ab --plan p.toml --out res/ab --resume"
    )


def test_a_sweep_of_the_whole_default_space_is_refused_with_the_axes_named() -> None:
    result = CliRunner().invoke(cli, ["tune", "sweep"])
    assert isinstance(result.exception, TtftError)
    assert "configurations to run" in str(result.exception) and "-np (3)" in str(result.exception)
    assert "--param" in (result.exception.fix or "")
