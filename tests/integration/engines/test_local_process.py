"""The launch command of a process listening on loopback, read from the real ``/proc``: how the
gateway learns a local vLLM's ``--max-num-seqs``, which vLLM exposes on no endpoint."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ttft.engines.local_process import DEVICE_VARIABLES, launch_command, listening_pids
from ttft.gateway.engine_facts import concurrency_cap, parse_launch

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")


@contextmanager
def listening(env: dict[str, str] | None = None) -> Iterator[tuple[int, int]]:
    """A real process listening on loopback whose command line reads like ``vllm serve``."""
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
    )
    argv = [sys.executable, "-c", code, "vllm", "serve", "/m", "--max-num-seqs", "5"]
    environ = {k: v for k, v in os.environ.items() if k not in DEVICE_VARIABLES}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**environ, **(env or {})})
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield proc.pid, port
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture()
def fake_vllm() -> Iterator[tuple[int, int]]:
    with listening() as found:
        yield found


def test_the_listening_process_and_its_flags_are_read_from_proc(
    fake_vllm: tuple[int, int],
) -> None:
    pid, port = fake_vllm
    assert listening_pids(port) == [pid]
    launch = launch_command("127.0.0.1", port)
    assert launch is not None and launch.pid == pid
    line = parse_launch(launch)
    assert line is not None and line.engine == "vllm"
    assert concurrency_cap(line) == (5, f"--max-num-seqs 5 in the launch command of pid {pid}")
    assert launch_command("10.0.0.5", port) is None  # another machine's port: never looked up


def test_a_port_nobody_listens_on_has_no_launch_command() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening
        started = time.perf_counter()
        assert launch_command("127.0.0.1", port) is None
    assert time.perf_counter() - started < 5


def test_doctor_lint_gives_no_cuda_graph_advice_for_an_engine_running_on_a_cpu() -> None:
    """The same ``--engine-cmd`` with ``--enforce-eager``: the running process decides."""
    from ttft.doctor.lint_bridge import lint_findings

    cmd = "vllm serve /m --enforce-eager --max-num-seqs 5"
    for env, expected in (({"VLLM_TARGET_DEVICE": "cpu"}, []), ({}, ["vllm/cuda-graphs"])):
        with listening(env) as (_, port):
            launch = launch_command("127.0.0.1", port)
            assert launch is not None and dict(launch.environ) == env
            found = lint_findings(None, cmd, f"http://127.0.0.1:{port}/v1")
        assert [f.rule for f in found if "cuda-graphs" in f.rule] == expected, env
