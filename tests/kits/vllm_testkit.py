"""Helpers for the tests that drive a real vLLM (tests/e2e/vllm)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ttft.engines.vllm.local import RunningVllm, VllmConfig, launch_vllm


def start(config: VllmConfig, tmp: Path) -> RunningVllm:
    """vLLM with ``config``, its log kept beside the test's files."""
    return launch_vllm(config, log_path=tmp / "vllm.log", startup_timeout_s=600)


def ttft_cli(*args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from ttft.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def doctor(*args: str, timeout: float = 420) -> dict[str, Any]:
    done = ttft_cli("doctor", "--format", "json", *args, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def rules(report: dict[str, Any]) -> list[str]:
    return [f["rule"] for f in report["findings"]]


def evidence(finding: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in finding["evidence"]}
