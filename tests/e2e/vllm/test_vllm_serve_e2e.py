"""`ttft serve --engine vllm`: the same vLLM a user gets, started, asked once, stopped."""

from __future__ import annotations

import pytest
from vllm_testkit import ttft_cli

pytestmark = pytest.mark.vllm


def test_serve_starts_vllm_answers_a_chat_and_stops() -> None:
    done = ttft_cli("serve", "--engine", "vllm", "--port", "0", "--parallel", "2", "--check")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vLLM ready in" in done.stdout and "/v1" in done.stdout
    assert "chat check:" in done.stdout


def test_llama_server_options_are_refused_with_the_way_to_pass_vllm_flags() -> None:
    done = ttft_cli("serve", "--engine", "vllm", "--ubatch", "512")
    assert done.returncode == 2 and "--extra-arg" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_flag_this_vllm_lacks_is_refused_before_launch() -> None:
    done = ttft_cli("serve", "--engine", "vllm", "--port", "0", "--extra-arg=--swap-space")
    assert done.returncode == 1 and "has no flag --swap-space" in done.stderr
    assert "Traceback" not in done.stderr
