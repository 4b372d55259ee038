"""Token counting with the target's own tokenizer.

Implementations: a running server's ``POST /tokenize`` (llama-server, and vLLM's ``/tokenize``), and
more may follow (a ``tokenizer.json`` via the Rust ``tokenizers`` package, a GGUF vocabulary).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Protocol, runtime_checkable

from ttft.core.errors import TtftError


@runtime_checkable
class Tokenizer(Protocol):
    """What workloads and lint need from a tokenizer: ids for a text, without special tokens."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class ServerTokenizer:
    """Tokenizes through a server's ``/tokenize`` and ``/detokenize`` endpoints (llama-server)."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def _post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        data = json.dumps(body).encode()
        req = urllib.request.Request(
            self.base_url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                parsed = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise TtftError(
                f"could not tokenize through {self.base_url}{path}: {exc}",
                "give a server that offers /tokenize (llama-server does), or a tokenizer.json",
            ) from exc
        if not isinstance(parsed, dict):
            raise TtftError(f"{self.base_url}{path} answered {parsed!r}, not a JSON object")
        return parsed

    def encode(self, text: str) -> list[int]:
        out = self._post("/tokenize", {"content": text, "add_special": False})
        tokens = out.get("tokens")
        if not isinstance(tokens, list):
            raise TtftError(f"{self.base_url}/tokenize answered without a 'tokens' list")
        return [int(t) for t in tokens]

    def decode(self, ids: list[int]) -> str:
        out = self._post("/detokenize", {"tokens": ids})
        content = out.get("content")
        if not isinstance(content, str):
            raise TtftError(f"{self.base_url}/detokenize answered without 'content'")
        return content
