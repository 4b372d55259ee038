"""Stand-ins for the unit tests of ``ttft lint prompts``: a word tokenizer and template loaders.

The acceptance numbers come from the real llama-server's /tokenize (tests/e2e); these tests pin the
logic with a tokenizer whose token boundaries are obvious: every word and every run of whitespace
is one token, and special tokens written in the text are single tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from tokenizer_testkit import build_tokenizer_json, model_dir  # noqa: F401 (fixtures)

from ttft.lint.prompts.tokens import PromptTokens
from ttft.prompts.chat_template import ChatTemplate
from ttft.prompts.sources import load_template

TEMPLATES = Path(__file__).resolve().parents[2] / "data" / "templates"
REQUESTS = Path(__file__).resolve().parents[2] / "data" / "requests"

_SPECIAL = r"<\|[a-z_]+\|>|<(?:start|end)_of_turn>|<bos>"


class WordTokenizer:
    """Words, whitespace runs and special tokens are one token each; ids come from a vocabulary."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.pieces: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in re.findall(rf"{_SPECIAL}|\w+|\s+|[^\w\s]", text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.pieces)
                self.pieces.append(piece)
            ids.append(self.vocab[piece])
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


@pytest.fixture
def tokens() -> PromptTokens:
    return PromptTokens(WordTokenizer())


@pytest.fixture
def template() -> Callable[[str], ChatTemplate]:
    """A test-data template by name, with the special tokens its model uses."""
    special = {
        "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>"},
        "llama3_2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
        "llama_server_chatml": {"bos_token": "<bos>", "eos_token": "<eos>"},
    }

    def load(name: str) -> ChatTemplate:
        return replace(load_template(TEMPLATES / f"{name}.jinja"), special_tokens=special[name])

    return load
