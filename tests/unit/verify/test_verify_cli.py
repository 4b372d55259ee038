"""`ttft verify quality` refuses bad input before any engine starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ttft.cli.main import COMMANDS, cli
from ttft.core.errors import TtftError
from ttft.verify.run import parse_lengths


def test_registered_in_the_lazy_command_table() -> None:
    assert COMMANDS["verify"][0] == "ttft.cli.verify:verify"
    assert "quality" in CliRunner().invoke(cli, ["verify", "--help"]).output


def test_lengths_accept_k_suffixes() -> None:
    assert parse_lengths("512, 1k,4K") == (512, 1024, 4096)
    for bad in ("", "a,b", ","):
        with pytest.raises(TtftError):
            parse_lengths(bad)


def test_a_length_beyond_the_window_is_refused_up_front() -> None:
    args = ["verify", "quality", "--candidate", "embedded:-c=1024", "--lengths", "512,2048"]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, TtftError)
    assert "per-slot window of 1024 tokens" in str(result.exception)


def test_a_bad_side_names_the_syntax() -> None:
    result = CliRunner().invoke(cli, ["verify", "quality", "--candidate", "vllm://x"])
    assert isinstance(result.exception, TtftError)
    assert "embedded[:-ctk=q8_0" in str(result.exception)


def test_a_bad_request_log_is_refused_before_any_engine_starts(tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    args = ["verify", "quality", "--candidate", "embedded:-ctk=q8_0,-ctv=q8_0"]
    result = CliRunner().invoke(cli, [*args, "--requests-log", str(missing)])
    assert isinstance(result.exception, TtftError)
    assert "request log not found" in str(result.exception)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\nnot json\n')
    result = CliRunner().invoke(cli, [*args, "--requests-log", str(bad)])
    assert isinstance(result.exception, TtftError)
    assert "bad.jsonl:2" in str(result.exception)


def test_the_quality_gate_refuses_a_service_ttft_does_not_start() -> None:
    args = ["tune", "sweep", "--param", "-ctk=f16,q8_0", "--url", "http://127.0.0.1:9"]
    result = CliRunner().invoke(cli, [*args, "--restart", "true", "--quality-gate"])
    assert isinstance(result.exception, TtftError)
    assert "--quality-gate starts each configuration itself" in str(result.exception)
