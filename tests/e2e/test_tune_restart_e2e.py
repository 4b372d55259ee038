"""A service ttft does not start, tuned through the user's restart command.

The "remote" engine is a real llama-server that a shell script (the kind users keep next to a
systemd unit or a docker-compose file) stops and starts on a fixed port with the flags it is
given. ``ttft tune sweep --url ... --restart 'sh restart.sh {args}'`` must restart it once per
trial with that trial's flags, wait until it serves, and measure each configuration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ttft.engines.llamacpp.embedded import embedded_model_path, llama_server_binary
from ttft.engines.process import free_loopback_port

pytestmark = pytest.mark.e2e

SCRIPT = """#!/bin/sh
# Restart the engine with the flags given: stop the old one, start the new one in the background.
dir="$(dirname "$0")"
if [ -f "$dir/engine.pid" ]; then
    old="$(cat "$dir/engine.pid")"
    kill "$old" 2>/dev/null
    while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
fi
nohup {binary} -m {model} --host 127.0.0.1 --port {port} -c 2048 -t {threads} -fit off "$@" \\
    > "$dir/engine.log" 2>&1 &
echo $! > "$dir/engine.pid"
"""


def test_a_sweep_restarts_the_remote_engine_with_each_trials_flags(
    tmp_path: Path, engine_threads: int
) -> None:
    port = free_loopback_port()
    script = tmp_path / "restart.sh"
    binary, model = llama_server_binary(), embedded_model_path()
    script.write_text(SCRIPT.format(binary=binary, model=model, port=port, threads=engine_threads))
    out = tmp_path / "sweep"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ttft", "tune", "sweep", "--url", f"http://127.0.0.1:{port}",
             "--restart", f"sh {script} {{args}}", "--param", "-np=1,2", "--max-load", "2",
             "--prefix-words", "40", "--suffix-words", "6", "--max-tokens", "4",
             "--requests", "4", "--out", str(out)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr[-3000:]
        summary = json.loads((out / "summary.json").read_text())
        trials = {t["config"]["-np"]: t for t in summary["trials"]}
        assert set(trials) == {"1", "2"}
        for slots, trial in trials.items():
            assert trial["status"] == "ok", trial["reason"]
            assert f"-np {slots}" in " ".join(trial["launch_command"])
            assert trial["startup_s"] is not None and trial["startup_s"] > 0
        # The engine left running is the last trial's configuration.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=5) as response:
            props = json.load(response)
        assert props["total_slots"] == 2
    finally:
        pid_file = tmp_path / "engine.pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
