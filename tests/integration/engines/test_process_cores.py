"""A server process started on chosen cores: the server and what it spawns run only there."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ttft.engines.process import ServerProcess


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux affinity API")
def test_a_server_and_the_processes_it_starts_run_on_the_cores_given(tmp_path: Path) -> None:
    core = min(os.sched_getaffinity(0))
    out = tmp_path / "allowed"
    # the shell reports its own cores and those of a child it starts, as vLLM's engine core is
    script = (
        f"grep Cpus_allowed_list /proc/self/status > {out}.parent; "
        f"sh -c 'grep Cpus_allowed_list /proc/self/status' > {out}.child; sleep 30"
    )
    server = ServerProcess(
        ["/bin/sh", "-c", script],
        health_url="http://127.0.0.1:9/health",
        name="cores",
        cpu_cores=[core],
    )
    server.start()
    try:
        for _ in range(100):
            if Path(f"{out}.child").exists() and Path(f"{out}.child").read_text():
                break
            time.sleep(0.05)
        for which in ("parent", "child"):
            allowed = Path(f"{out}.{which}").read_text().split(":")[1].strip()
            assert allowed == str(core), which
    finally:
        server.stop()
    assert os.sched_getaffinity(0) != {core} or len(os.sched_getaffinity(0)) == 1  # ours unchanged
