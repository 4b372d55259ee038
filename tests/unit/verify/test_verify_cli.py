"""`ttft verify quality` refuses bad input before any engine starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ttft.cli.main import COMMANDS, cli
from ttft.cli.verify import _lengths
from ttft.core.errors import TtftError


def test_registered_in_the_lazy_command_table() -> None:
    assert COMMANDS["verify"][0] == "ttft.cli.verify:verify"
    assert "quality" in CliRunner().invoke(cli, ["verify", "--help"]).output


def test_lengths_accept_k_suffixes() -> None:
    assert _lengths("512, 1k,4K") == (512, 1024, 4096)
    for bad in ("", "a,b", ","):
        with pytest.raises(TtftError):
            _lengths(bad)


def test_a_length_beyond_the_window_is_refused_up_front() -> None:
    args = ["verify", "quality", "--candidate", "embedded:-c=1024", "--lengths", "512,2048"]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, TtftError)
    assert "per-slot window of 1024 tokens" in str(result.exception)


def test_a_bad_side_names_the_syntax() -> None:
    result = CliRunner().invoke(cli, ["verify", "quality", "--candidate", "vllm://x"])
    assert isinstance(result.exception, TtftError)
    assert "embedded[:-ctk=q8_0" in str(result.exception)
