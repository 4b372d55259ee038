"""Restart an engine ttft does not start itself, through the user's own command template.

A remote engine (another host, a container, a systemd unit) can still be tuned when the user
says how to restart it: ``--restart 'ssh gpu1 "systemctl restart vllm" '`` or, with the flags of
the run, ``--restart 'ssh gpu1 docker run ... vllm/vllm-openai {args}'``. Placeholders:

- ``{launch}``: the launch command (``service.launch``) with the run's flags set, shell-quoted;
- ``{args}``: only the run's flags, shell-quoted (for templates that hold the rest themselves).

The command runs in a shell before each run (the baseline too, so every run starts from a known
configuration); then ttft waits until the service answers ``/health`` (or ``/v1/models``). A
command that fails, or a service that does not come back, fails that run with the command's own
output, and the experiment goes on.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from ttft.core.errors import TtftError
from ttft.engines.argv_edit import set_flags

PLACEHOLDERS = ("{launch}", "{args}")


def restart_command(
    template: str,
    launch: Sequence[str],
    flags: Mapping[str, str],
    unset: Sequence[str] = (),
    *,
    kind: str | None,
) -> str:
    """The shell command for one run: the template with its placeholders filled."""
    args: list[str] = []
    for flag, value in flags.items():
        args += [flag] if value == "" else [flag, value]
    full = set_flags(launch, flags, unset, kind=kind) if launch else args
    if "{launch}" in template and not launch:
        raise TtftError(
            "the restart command uses {launch} but there is no launch command",
            "give the engine's launch command (service.launch / --launch), or use {args}",
        )
    return template.replace("{launch}", shlex.join(full)).replace("{args}", shlex.join(args))


def run_restart(command: str, timeout_s: float = 300.0) -> None:
    try:
        done = subprocess.run(
            command, shell=True, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise TtftError(
            f"the restart command did not finish within {timeout_s:.0f} s: {command}",
            "make it return once the engine is starting (e.g. systemctl restart, docker run -d)",
        ) from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise TtftError(f"the restart command exited with {done.returncode}: {command}\n{tail}")


def wait_until_serving(
    root: str, timeout_s: float, headers: Mapping[str, str] | None = None
) -> float:
    """Poll ``/health``, then ``/v1/models``, until one answers 200; seconds waited."""
    started = time.monotonic()
    deadline = started + timeout_s
    last = "no answer yet"
    while time.monotonic() < deadline:
        for path in ("/health", "/v1/models"):
            request = urllib.request.Request(root.rstrip("/") + path, headers=dict(headers or {}))
            try:
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} from {path}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
        time.sleep(0.25)
    raise TtftError(
        f"{root} did not answer /health or /v1/models within {timeout_s:.0f} s after the "
        f"restart (last: {last})",
        "check the restart command, or raise the start-up timeout",
    )
