"""Token counting with the target's own tokenizer.

Implementations: a running server's ``POST /tokenize`` (``ttft.engines.control.ServerTokenizer``),
a ``tokenizer.json`` via the Rust ``tokenizers`` package (``hf_tokenizer``), a GGUF's own vocabulary
(``gguf_tokenizer``).
"""

from __future__ import annotations

from typing import Protocol


class Tokenizer(Protocol):
    """What workloads and lint need from a tokenizer: ids for a text, without special tokens."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class VocabTokenizer(Tokenizer, Protocol):
    """A tokenizer that also knows its vocabulary: the id of a special token's text (``<bos>``),
    which the gateway needs to send a pre-rendered prompt as ids."""

    def token_id(self, token: str) -> int | None: ...
