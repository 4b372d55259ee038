"""A two-node Ray cluster on loopback for the --ray tests: a head and a second node process,
one CPU each, in a private temp dir; both stopped by killing their process groups."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 90.0
_COMMON = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
_LIGHT = ["--object-store-memory", "80000000", "--block"]  # 80 MB: records are small


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_cli() -> str:
    found = shutil.which("ray")
    if found is None:
        raise RuntimeError("the ray command is missing: pip install 'ttft[distributed]'")
    return found


def _alive_nodes(address: str) -> int:
    code = (
        f"import ray; ray.init(address={address!r}, log_to_driver=False, configure_logging=False)"
        "; print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    lines = out.stdout.strip().splitlines()
    return int(lines[-1]) if out.returncode == 0 and lines and lines[-1].isdigit() else 0


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    # `ray start --block` takes 10 s and more to stop gracefully; its processes (GCS, raylet,
    # workers) share its process group, which is ours alone: end the group.
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.1, deadline - time.monotonic()))
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def local_cluster() -> Iterator[str]:
    """Yields the head's ``127.0.0.1:PORT`` once both nodes are alive.

    Token authentication is off for this cluster and its drivers (``RAY_AUTH_MODE=disabled``,
    set in this process while the cluster lives): Ray turns it on for ``ray start`` when a
    token file from an earlier local Ray sits in ~/.ray, and a driver without the variable then
    cannot connect. The test must not depend on that machine state."""
    ray = _ray_cli()
    before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    # Short: Ray puts Unix sockets under it, and their paths are limited to ~107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="ttft-ray-", dir="/tmp"))
    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with (temp / "head.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [ray, "start", "--head", "--port", str(port), "--include-dashboard=false",
                     "--temp-dir", str(temp), *_COMMON, *_LIGHT],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _port_open(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        while _alive_nodes(address) < 1:
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError(f"the Ray head did not start: {(temp / 'head.log').read_text()}")
            time.sleep(1.0)
        with (temp / "node.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [ray, "start", "--address", address, *_COMMON, *_LIGHT],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        while _alive_nodes(address) < 2:
            if time.monotonic() > deadline or procs[1].poll() is not None:
                log_text = (temp / "node.log").read_text()
                raise RuntimeError(f"the second node did not join: {log_text}")
            time.sleep(1.0)
        yield address
    finally:
        _stop(procs)
        shutil.rmtree(temp, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = before
