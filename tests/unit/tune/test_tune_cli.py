from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import cli
from ttft.cli.tune_ab import parse_change
from ttft.core.errors import TtftError


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
