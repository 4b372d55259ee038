"""``ttft serve``'s typed options (the embedded engine's launch settings) and the one chat
request its ``--check`` sends to a started engine (llama-server or vLLM)."""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ttft.engines.llamacpp.embedded import RunningEngine
    from ttft.engines.vllm.local import RunningVllm


def smoke_request(engine: RunningEngine | RunningVllm) -> dict[str, Any]:
    """One short chat request; the reply with ``_elapsed_ms`` added."""
    body = json.dumps(
        {
            "model": engine.model_name,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8,
            "temperature": 0,
        }
    ).encode()
    req = urllib.request.Request(
        engine.base_url + "/v1/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        reply: dict[str, Any] = json.loads(resp.read())
    reply["_elapsed_ms"] = (time.perf_counter() - started) * 1000
    return reply


@dataclass(frozen=True)
class ServeOptions:
    """``ttft serve``'s engine settings; None keeps the embedded engine's own default."""

    model_path: Path | None
    host: str
    port: int
    ctx_size: int
    parallel: int | None
    ubatch: int | None
    flash_attn: str | None
    load_mode: str | None
    extra_args: tuple[str, ...]

    def launch_settings(self) -> dict[str, Any]:
        """Keyword arguments for ``launch_embedded`` (its names are LlamaServerConfig's)."""
        settings: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "ctx_size": self.ctx_size,
            "parallel": self.parallel,
            "ubatch_size": self.ubatch,
            "flash_attn": self.flash_attn,
            "load_mode": self.load_mode,
            "extra_args": self.extra_args,
        }
        if self.model_path is not None:
            settings["model_path"] = self.model_path
        return settings
