"""A pure-Python stand-in for the Rust ``tokenizers`` BPE backend of :class:`GgufTokenizer`.

It exists to be timed against the Rust backend (``ttft tune frontend``): same vocabulary, same
merge list (:func:`ttft.workload.gguf_tokenizer.spm_merges`), same special-token splitting (both
run inside :class:`GgufTokenizer`), so the only difference measured is the merge loop's language.
That is the "Python tokenizer instead of Rust" choice a service makes when it tokenizes with a
slow (pure-Python) tokenizer in its frontend.

The merge loop follows the usual BPE procedure: start from one symbol per character (a character
missing from the vocabulary becomes its ``<0xNN>`` byte tokens, or the unknown token), then
repeatedly apply the lowest-ranked merge among adjacent pairs, leftmost first on a tie. Ids are
checked against the Rust backend on the user's own prompts by the caller, never assumed equal.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from ttft.workload.gguf_tokenizer import BYTE, UNKNOWN, GgufVocab

_GONE = -1  # a symbol merged into its left neighbour (ids are never negative)


@dataclass(frozen=True, slots=True)
class Encoding:
    """The one field of a ``tokenizers.Encoding`` that :class:`GgufTokenizer` reads."""

    ids: list[int]


class PythonBpe:
    """Duck-types the part of ``tokenizers.Tokenizer`` that :class:`GgufTokenizer` uses."""

    def __init__(self, vocab: GgufVocab, merges: Sequence[tuple[int, int]]) -> None:
        tokens = vocab.tokens
        # Last id wins for a text listed twice, as in the Rust backend's vocabulary map.
        self._ids = {text: i for i, text in enumerate(tokens)}
        # (left, right) -> (rank, merged id): one dict probe per candidate pair.
        self._merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (left, right) in enumerate(merges):
            merged = self._ids.get(tokens[left] + tokens[right])
            if merged is not None and (left, right) not in self._merges:
                self._merges[(left, right)] = (rank, merged)
        self._bytes: dict[int, int] = {}
        for i, (text, kind) in enumerate(zip(tokens, vocab.types, strict=True)):
            if kind == BYTE and len(text) == 6 and text.startswith("<0x"):
                self._bytes[int(text[3:5], 16)] = i
        self._unk = next((i for i, k in enumerate(vocab.types) if k == UNKNOWN), None)

    def _symbols(self, text: str) -> list[int]:
        out: list[int] = []
        for ch in text:
            found = self._ids.get(ch)
            if found is not None:
                out.append(found)
                continue
            raw = ch.encode("utf-8")
            if all(b in self._bytes for b in raw):
                out.extend(self._bytes[b] for b in raw)
            elif self._unk is not None:
                out.append(self._unk)
        return out

    def merge(self, text: str) -> list[int]:
        """The ids of one already split, ``▁``-escaped piece."""
        symbols = self._symbols(text)
        n = len(symbols)
        if n < 2:
            return symbols
        merges = self._merges
        nxt = [*range(1, n), -1]
        prev = list(range(-1, n - 1))
        heap: list[tuple[int, int, int]] = []
        for pos in range(n - 1):
            hit = merges.get((symbols[pos], symbols[pos + 1]))
            if hit is not None:
                heap.append((hit[0], pos, hit[1]))
        heapq.heapify(heap)
        while heap:
            rank, pos, merged = heapq.heappop(heap)
            left = symbols[pos]
            right_pos = nxt[pos]
            if left < 0 or right_pos < 0:
                continue
            # A stale entry: one of its two symbols was merged into another since it was pushed.
            if merges.get((left, symbols[right_pos])) != (rank, merged):
                continue
            symbols[pos] = merged
            symbols[right_pos] = _GONE
            after = nxt[right_pos]
            nxt[pos] = after
            if after >= 0:
                prev[after] = pos
            before = prev[pos]
            if before >= 0:
                hit = merges.get((symbols[before], merged))
                if hit is not None:
                    heapq.heappush(heap, (hit[0], before, hit[1]))
            if after >= 0:
                hit = merges.get((merged, symbols[after]))
                if hit is not None:
                    heapq.heappush(heap, (hit[0], pos, hit[1]))
        return [s for s in symbols if s != _GONE]

    # -- the tokenizers.Tokenizer surface GgufTokenizer calls ------------------------------

    def encode(self, text: str, add_special_tokens: bool = False) -> Encoding:
        return Encoding(self.merge(text))

    def encode_batch(
        self, texts: Sequence[str], add_special_tokens: bool = False
    ) -> list[Encoding]:
        return [Encoding(self.merge(t)) for t in texts]

    def token_to_id(self, token: str) -> int | None:
        return self._ids.get(token)
