"""How a vLLM trial's command line is made from the user's launch command (no vLLM started)."""

from __future__ import annotations

from typing import Any

import pytest

from ttft.tune import vllm_runner
from ttft.tune.vllm_runner import VllmRunner


def test_tuned_flags_replace_the_launch_commands_own(monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}

    def fake_start(argv: list[str], config: Any, name: str, **_: Any) -> Any:
        started["argv"], started["port"] = argv, config.port
        return None

    monkeypatch.setattr(vllm_runner, "runnable_vllm_argv", lambda argv: (argv, ""))
    monkeypatch.setattr(vllm_runner, "start_argv", fake_start)
    monkeypatch.setattr(vllm_runner, "free_loopback_port", lambda: 45678)
    launch = ("vllm", "serve", "m", "--max_num_seqs", "1", "--no-enable-prefix-caching")
    runner = VllmRunner(launch=launch)
    runner._start({"--max-num-seqs": "8", "enable-prefix-caching": "on"})
    argv = started["argv"]
    assert argv[:3] == ["vllm", "serve", "m"]
    assert "--max_num_seqs" not in argv and "--no-enable-prefix-caching" not in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "8"
    assert "--enable-prefix-caching" in argv
    assert argv[argv.index("--port") + 1] == "45678" and started["port"] == 45678
