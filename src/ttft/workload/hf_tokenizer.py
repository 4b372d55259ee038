"""Token counting from a Hugging Face ``tokenizer.json`` through the Rust ``tokenizers`` package.

Exact for models that ship a ``tokenizer.json`` and no server round trip per prompt. Special tokens
written in the text (``<|im_start|>``, ``<start_of_turn>``) are recognised as the single tokens they
are, as when an engine tokenizes a rendered chat template; no BOS/EOS is added (``encode`` returns
the text's own tokens, like :class:`ttft.workload.tokenizer.ServerTokenizer`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ttft.core.errors import MissingExtraError, TtftError


class HFTokenizer:
    """A :class:`ttft.workload.tokenizer.Tokenizer` backed by a ``tokenizer.json`` file."""

    def __init__(self, backend: Any, origin: str = "tokenizer.json") -> None:
        self._tok = backend
        self.origin = origin

    @classmethod
    def from_file(cls, path: Path) -> HFTokenizer:
        """Load ``path`` (a ``tokenizer.json``, or a folder holding one)."""
        try:
            tokenizers = importlib.import_module("tokenizers")
        except ImportError:
            raise MissingExtraError("counting tokens with a tokenizer.json", "tokenizers") from None
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise TtftError(
                f"tokenizer file not found: {file}",
                "give the model's tokenizer.json (or the folder that holds it)",
            )
        try:
            backend = tokenizers.Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust side raises plain Exception subclasses
            raise TtftError(
                f"{file}: not a loadable tokenizer.json: {exc}",
                "give the tokenizer.json the model was trained with",
            ) from None
        return cls(backend, origin=str(file))

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self._tok.encode(text, add_special_tokens=False).ids]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Many texts at once: the Rust side tokenizes them in parallel."""
        encodings = self._tok.encode_batch(texts, add_special_tokens=False)
        return [[int(i) for i in enc.ids] for enc in encodings]

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))

    def token_id(self, token: str) -> int | None:
        """The id of one vocabulary entry (e.g. the BOS token's text), or None."""
        found = self._tok.token_to_id(token)
        return int(found) if found is not None else None
