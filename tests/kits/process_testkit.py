"""Which processes a test started are still alive: found by a marker in their environment.

A test sets ``NAME=<uuid>`` in its environment; every process it starts (engines, proxies, the
ttft CLI and what that starts) inherits it. Scanning /proc for the marker checks exactly those
processes, whatever else runs on the machine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path


def alive_with(
    variable: str, marker: str, names: Sequence[bytes] = (b"llama-server",)
) -> list[int]:
    """Live (not zombie) processes whose command line names one of ``names`` and whose
    environment carries ``variable=marker``."""
    wanted = f"{variable}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(n in cmdline for n in names) and wanted in environ:
            found.append(int(entry.name))
    return found


def wait_gone(
    variable: str, marker: str, names: Sequence[bytes] = (b"llama-server",), timeout_s: float = 15.0
) -> list[int]:
    """The processes still alive after waiting up to ``timeout_s`` for them to end."""
    deadline = time.monotonic() + timeout_s
    while (left := alive_with(variable, marker, names)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
