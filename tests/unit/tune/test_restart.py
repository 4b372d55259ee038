"""A remote engine is restarted through the user's command template, with each run's flags."""

from __future__ import annotations

import pytest

from ttft.core.errors import TtftError
from ttft.tune.restart import restart_command

LAUNCH = ["llama-server", "-m", "/models/m.gguf", "--parallel", "1", "--port", "8081"]


def test_launch_is_the_users_command_with_the_runs_flags_set_in_any_spelling() -> None:
    command = restart_command(
        "ssh gpu1 -- {launch}", LAUNCH, {"-np": "4", "-c": "16384"}, kind="llamacpp"
    )
    assert command == ("ssh gpu1 -- llama-server -m /models/m.gguf --port 8081 -np 4 -c 16384")


def test_args_are_only_the_runs_flags_quoted_for_a_shell() -> None:
    command = restart_command(
        "docker run -d vllm/vllm-openai {args}", [], {"--served-model-name": "a b", "--x": ""},
        kind="vllm",
    )  # fmt: skip
    assert command == "docker run -d vllm/vllm-openai --served-model-name 'a b' --x"


def test_the_baseline_restart_carries_no_flags() -> None:
    assert restart_command("systemctl restart llm {args}", [], {}, kind=None) == (
        "systemctl restart llm "
    )


def test_launch_without_a_launch_command_is_a_clear_error() -> None:
    with pytest.raises(TtftError, match="launch"):
        restart_command("ssh h {launch}", [], {"-np": "2"}, kind="llamacpp")
