"""The launch command (and environment) of an engine that listens on this machine, from ``/proc``.

vLLM 0.32 says nothing about its scheduler over HTTP: ``/metrics`` has ``vllm:cache_config_info``
(block size, KV size, ``kv_cache_max_concurrency``: how many *full-length* requests the KV cache
holds, not ``max_num_seqs``), ``/v1/models`` has ``max_model_len`` and the model's ``root``,
``/load`` the requests in flight, ``/version`` the version; no endpoint names ``max_num_seqs``
or the chat template. For an upstream on loopback the engine's own command line does: the
process that holds the listening socket is the server, and its ``/proc/PID/cmdline`` is what it
was started with (``vllm serve MODEL --max-num-seqs 8 --chat-template ...``), and its
``/proc/PID/environ`` the environment it runs in (``VLLM_TARGET_DEVICE=cpu``). The gateway reads
its in-flight cap and template from it, lint the device the engine runs on.

Linux only, same-host only, and best effort: anything unreadable (another user's process, a
container, another OS) is ``None``, never an error, and the caller falls back to configuration.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

PROC = Path("/proc")
_LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp
_MAX_CMDLINE = 1 << 20  # a command line is a few KB; never read more than this
# Only these variables are kept from a process's environment: what tells the device it runs on,
# never the rest (it may hold keys).
DEVICE_VARIABLES = (
    "VLLM_TARGET_DEVICE",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_CPU_OMP_THREADS_BIND",
    "CUDA_VISIBLE_DEVICES",
)


@dataclass(frozen=True)
class LaunchCommand:
    """The argv of the process listening on an upstream's port."""

    pid: int
    argv: tuple[str, ...]
    environ: Mapping[str, str] = field(default_factory=dict)  # empty when unreadable
    cwd: str | None = None  # its working directory: what its relative paths are relative to

    def describe(self) -> str:
        return f"the launch command of pid {self.pid}"

    def path(self, given: str) -> Path:
        """A path from its command line as the process sees it (relative to its cwd)."""
        path = Path(given).expanduser()
        return path if path.is_absolute() or self.cwd is None else Path(self.cwd) / path


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.x.x.x`` or ``::1``: an address only this machine can serve."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            _, _, hex_port = fields[1].rpartition(":")
            try:
                if int(hex_port, 16) == port:
                    inodes.add(fields[9])
            except ValueError:
                continue
    inodes.discard("0")
    return inodes


def listening_pids(port: int, proc: Path = PROC) -> list[int]:
    """The processes holding a socket that listens on ``port`` (any local address), lowest
    first: the server that opened it comes before children that inherited it."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port, proc)}
    if not wanted:
        return []
    pids: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:  # gone, or another user's
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in wanted:
                    pids.append(int(entry.name))
                    break
            except OSError:
                continue
    return sorted(pids)


def _nul_separated(path: Path) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_CMDLINE)
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]


def command_line(pid: int, proc: Path = PROC) -> tuple[str, ...] | None:
    argv = _nul_separated(proc / str(pid) / "cmdline")
    return tuple(argv) if argv and argv[0] else None


def device_environ(pid: int, proc: Path = PROC) -> dict[str, str]:
    """The process's device-related variables (``DEVICE_VARIABLES``); {} when unreadable."""
    pairs = (item.partition("=") for item in _nul_separated(proc / str(pid) / "environ") or [])
    return {k: v for k, sep, v in pairs if sep and k in DEVICE_VARIABLES}


def launch_command(host: str, port: int, proc: Path = PROC) -> LaunchCommand | None:
    """The command line of the process listening on ``host:port``; None when the host is not
    this machine's loopback or nothing readable listens there."""
    if not is_loopback(host):
        return None
    try:
        pids = listening_pids(port, proc)
    except OSError:
        return None
    for pid in pids:
        argv = command_line(pid, proc)
        if argv is not None:
            try:
                cwd: str | None = os.readlink(proc / str(pid) / "cwd")
            except OSError:
                cwd = None
            return LaunchCommand(pid, argv, device_environ(pid, proc), cwd)
    return None


def launch_command_of_url(url: str, proc: Path = PROC) -> LaunchCommand | None:
    """``launch_command`` for a server's base URL (``http://127.0.0.1:8000/v1``)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return launch_command(parts.hostname or "", port, proc)
