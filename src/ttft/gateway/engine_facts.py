"""What an upstream's own launch command and model listing say: its concurrency cap and where
its chat template lives.

Read from the engine itself, never guessed from documentation:

- the in-flight cap: the engine's concurrency flag (vLLM ``--max-num-seqs``, SGLang
  ``--max-running-requests``: the adapter's ``concurrency_cap`` role) in the launch command of
  the process listening on a loopback upstream (``ttft.engines.local_process``). Without the
  flag the engine's default applies, which depends on the device (vLLM 0.32: 128 on CPU, 256
  or 1024 on GPUs by memory), so it is not claimed;
- the chat template: the launch command's ``--chat-template`` (a file, or an inline template),
  else the ``tokenizer_config.json`` (or ``chat_template.jinja``) of the model folder, named by
  the launch command's ``--tokenizer`` or model argument, or by the ``root`` that vLLM's
  ``/v1/models`` lists, when that folder is on this machine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.engines.cmdline import parse, tokens_from_argv
from ttft.engines.command import EngineCommand
from ttft.engines.local_process import LaunchCommand
from ttft.engines.registry import adapter_for
from ttft.engines.rulekit import parse_count

log = logging.getLogger("ttft.gateway")

MAX_CAP = 65536


@dataclass(frozen=True)
class EngineCommandLine:
    """A parsed launch command of a live engine, and which process it came from."""

    launch: LaunchCommand
    command: EngineCommand

    @property
    def engine(self) -> str:
        return self.command.engine


def parse_launch(launch: LaunchCommand) -> EngineCommandLine | None:
    """The launch command parsed as an engine's; None when it starts no engine ttft knows."""
    try:
        command = parse(tokens_from_argv(list(launch.argv)), None)
    except TtftError:
        return None
    return EngineCommandLine(launch, command)


def concurrency_cap(line: EngineCommandLine) -> tuple[int, str] | None:
    """The engine's own cap on running requests and where it was read, when its launch
    command sets it."""
    flag = adapter_for(line.engine).roles.concurrency_cap
    arg = line.command.get(flag) if flag else None
    if arg is None or arg.value is None:
        return None
    value = parse_count(arg.value)
    if value is None or not 1 <= value <= MAX_CAP:
        return None
    return value, f"{arg.flag} {arg.value} in {line.launch.describe()}"


def no_cap_reason(line: EngineCommandLine | None, engine: str) -> str:
    """Why the engine's own cap is unknown, for the log line that names the fallback."""
    if line is None:
        return (
            f"{engine} exposes no max_num_seqs over HTTP and its launch command is not "
            "readable here (not on loopback, or another user's process)"
        )
    flag = adapter_for(line.engine).roles.concurrency_cap
    if not flag:
        return f"{line.engine} has no concurrency flag ttft knows"
    return (
        f"{line.launch.describe()} has no --{flag}, and the engine's default depends on its "
        "device, so it is not assumed"
    )


@dataclass(frozen=True)
class TemplatePlace:
    """Where a chat template can be read: a file, or an inline template text."""

    origin: str  # for log lines: where it was found
    path: Path | None = None
    text: str | None = None


def _template_file_in(folder: Path) -> Path | None:
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        if (folder / name).is_file():
            return folder / name
    return None


def template_place(
    line: EngineCommandLine | None, models: dict[str, dict[str, Any]]
) -> tuple[TemplatePlace | None, str]:
    """The engine's chat template's place, or None and why none was found."""
    tried: list[str] = []
    if line is not None:
        given = line.command.value("chat-template")
        if given:
            path, where = line.launch.path(given), line.launch.describe()
            if path.is_file():
                return TemplatePlace(f"--chat-template {given} ({where})", path), ""
            if "{" in given:  # vLLM takes an inline Jinja template as well as a file
                return TemplatePlace(f"--chat-template ({where})", text=given), ""
            return None, f"--chat-template {given} of {line.launch.describe()} is no file here"
        # vLLM: --tokenizer, else the model (argument or --model); SGLang: --tokenizer-path,
        # --model-path.
        names = ("tokenizer", "tokenizer-path", "model-path", "model")
        folders = [line.command.value(f) for f in names]
        folders.append(next((p.text for p in line.command.positionals), None))
        tried += [str(line.launch.path(f)) for f in folders if f]
    tried += [str(m["root"]) for m in models.values() if isinstance(m.get("root"), str)]
    for name in dict.fromkeys(tried):
        folder_path = Path(name).expanduser()
        if not folder_path.is_dir():
            continue
        found = _template_file_in(folder_path)
        if found is not None:
            return TemplatePlace(str(found), found), ""
    if not tried:
        return None, "the upstream names no model folder (no readable launch command, no root)"
    return None, (
        f"no tokenizer_config.json or chat_template.jinja in a local folder "
        f"({', '.join(dict.fromkeys(tried))}: a hub name, or a folder on another machine)"
    )
