"""Start a server process that can never outlive us, and wait until it is healthy.

The server runs in its own process group (so Ctrl-C in a terminal reaches only us, and we stop
the whole group), and on Linux it also gets PR_SET_PDEATHSIG so that even a SIGKILL of this
process takes the server down with it: no orphaned servers, ever.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ttft.core.errors import TtftError

_PR_SET_PDEATHSIG = 1


def free_loopback_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just handed out on loopback (free at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(host: str, port: int) -> None:
    """Raise a clear error when ``host:port`` cannot be bound (something already listens)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers bind with SO_REUSEADDR, so a port whose last connections are in TIME_WAIT (an
        # engine just restarted on it) is free for them: probe the same way.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise TtftError(
                    f"port {port} on {host} is not available ({exc.strerror})",
                    "choose another with --port, or stop the process that holds it",
                ) from exc
            raise


def _die_with_parent() -> None:
    """In the child before exec: own process group, and SIGTERM when the parent dies (Linux)."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ServerProcess:
    """A child server process with a log file, a health check and a guaranteed stop."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        health_url: str,
        name: str = "server",
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        cpu_cores: Sequence[int] | None = None,
    ) -> None:
        self.argv = list(argv)
        # The cores the server and every process it starts may run on (None: any). Set in the
        # child before exec, so processes it spawns at start-up inherit them (vLLM's engine
        # core and worker), which pinning its pid afterwards would miss.
        self.cpu_cores = tuple(cpu_cores) if cpu_cores is not None else None
        self.health_url = health_url
        self.name = name
        self.env = env
        self.log_path = log_path or Path(tempfile.mkstemp(prefix=f"ttft-{name}-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_ns: int | None = None
        self.ready_ns: int | None = None

    def start(self) -> None:
        if not Path(self.argv[0]).exists():
            raise TtftError(f"{self.name} binary not found at {self.argv[0]}")
        log = self.log_path.open("wb")
        try:
            self.started_ns = time.perf_counter_ns()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                preexec_fn=self._before_exec,
            )
        finally:
            log.close()

    def _before_exec(self) -> None:
        _die_with_parent()  # setpgrp + pdeathsig
        if self.cpu_cores is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(self.cpu_cores))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_healthy(self, timeout_s: float = 60.0) -> float:
        """Poll the health URL until it answers 200; return seconds from start to healthy."""
        assert self.proc is not None and self.started_ns is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise TtftError(
                    f"{self.name} exited with code {code} before it became healthy. "
                    f"Last log lines:\n{self.log_tail()}",
                    "check the model path and flags above; full log: " + str(self.log_path),
                )
            try:
                with urllib.request.urlopen(self.health_url, timeout=2) as resp:
                    if resp.status == 200:
                        self.ready_ns = time.perf_counter_ns()
                        return (self.ready_ns - self.started_ns) / 1e9
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"  # 503 while the model loads
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.05)
        self.stop()
        raise TtftError(
            f"{self.name} did not become healthy within {timeout_s:.0f} s (last: {last}). "
            f"Last log lines:\n{self.log_tail()}",
            "raise the start-up timeout, or read the log: " + str(self.log_path),
        )

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s``."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace_s)
        # Anything the server forked stays in its group; make sure none of it survives.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
