"""``ttft gateway`` in a child process, as a user runs it: started, waited for, always stopped.

Benchmarks and tests that measure the gateway as a process (its own event loop, its own RSS, its
own CPU time) share this instead of each keeping a start-wait-stop loop.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO


@dataclass
class GatewayChild:
    """The running gateway. Its stderr goes to a file, not a pipe: a pipe nobody reads fills
    up on a long run and blocks the gateway's logging, and with it the gateway."""

    proc: subprocess.Popen[bytes]
    _log: IO[bytes]
    _final: str | None = None  # all it printed, kept once it stopped and the file closed

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self) -> str:
        if self._final is not None:
            return self._final
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")


@contextlib.contextmanager
def gateway_child(
    args: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    startup_s: float = 30.0,
) -> Iterator[GatewayChild]:
    """Run ``ttft gateway ARGS`` (which must listen on 127.0.0.1:``port``) until the block ends.

    What it printed is ``stderr_text()``, also after the block; a gateway that exits before it
    listens is an error carrying what it printed.
    """
    cmd = [sys.executable, "-m", "ttft", "gateway", *args]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **(env or {})}
        )
        child = GatewayChild(proc, log)
        try:
            yield _listening(child, port, startup_s)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            child._final = child.stderr_text()


def _listening(child: GatewayChild, port: int, startup_s: float) -> GatewayChild:
    """``child`` once its port accepts connections; an error if it exits or takes too long."""
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if child.proc.poll() is not None:
            detail = child.stderr_text()
            raise RuntimeError(f"the gateway exited with {child.proc.returncode}: {detail}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return child
        time.sleep(0.05)
    raise RuntimeError(f"the gateway did not listen within {startup_s:g} s")


__all__ = ["GatewayChild", "gateway_child"]
