"""Tokenize rendered prompts the way the engine will, and map character offsets to token positions.

An engine tokenizes the whole rendered prompt (plus a BOS token if the model adds one), so a token
can straddle the boundary between two parts of the prompt. Positions are therefore found in the
full prompt's tokens: the first token that differs from the tokens of the text before the offset.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttft.lint.prompts.prefix_cache import common_prefix_len
from ttft.workload.tokenizer import Tokenizer


class PromptTokens:
    """Memoized ``prefix_ids + tokenizer.encode(text)``: lint asks for the same text many times."""

    def __init__(self, tokenizer: Tokenizer, prefix_ids: Sequence[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.prefix_ids = tuple(prefix_ids)
        self._memo: dict[str, tuple[int, ...]] = {}
        self.calls = 0

    def tokens(self, text: str) -> tuple[int, ...]:
        found = self._memo.get(text)
        if found is None:
            self.calls += 1
            found = self.prefix_ids + tuple(self.tokenizer.encode(text))
            self._memo[text] = found
        return found

    def many(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        """Tokens of each text; a tokenizer with ``encode_batch`` gets the new ones in one call."""
        batch = getattr(self.tokenizer, "encode_batch", None)
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if callable(batch) and len(todo) > 1:
            self.calls += 1
            for text, ids in zip(todo, batch(todo), strict=True):
                self._memo[text] = self.prefix_ids + tuple(ids)
        return [self.tokens(t) for t in texts]

    def position(self, text: str, char_offset: int) -> int:
        """Token position in ``tokens(text)`` of the token that holds ``text[char_offset]``."""
        if char_offset <= 0:
            return len(self.prefix_ids)
        full = self.tokens(text)
        if char_offset >= len(text):
            return len(full)
        return common_prefix_len(full, self.tokens(text[:char_offset]))
