"""The launch command of a process listening on loopback, read from the real ``/proc``: how the
gateway learns a local vLLM's ``--max-num-seqs``, which vLLM exposes on no endpoint."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ttft.gateway.engine_facts import concurrency_cap, parse_launch
from ttft.gateway.engine_process import launch_command, listening_pids

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")


@pytest.fixture()
def fake_vllm() -> Iterator[tuple[int, int]]:
    """A real process listening on loopback whose command line reads like ``vllm serve``."""
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
    )
    argv = [sys.executable, "-c", code, "vllm", "serve", "/m", "--max-num-seqs", "5"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield proc.pid, port
    finally:
        proc.kill()
        proc.wait()


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
