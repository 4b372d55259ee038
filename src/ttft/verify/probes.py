"""The regression set, built on the fly in the model's own tokens.

Each probe is a document of filler prose with a few facts planted at known depths ("The code of
room 17 is 4821.") and ends by starting one of those sentences again ("The code of room 17 is").
A base model completes it; no chat template or instruction following is needed. The same prompt
also serves greedy-continuation agreement and token-level divergence: one request per probe and
side gives every metric, which matters on a machine where prefill is the cost.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ttft.workload.text_source import sentence_text

# Distractors make recall a lookup by room, not "repeat the only number in sight".
FACTS_PER_PROBE = 4
# Words per token of the filler, a first guess only: the prompt is then measured and resized.
_TOKENS_PER_WORD = 1.3


@dataclass(frozen=True)
class Probe:
    """One prompt of the set: its context length bucket and the number it should recall."""

    length: int  # the context length bucket, in the model's tokens
    index: int
    prompt: str
    expected: str  # the planted number the continuation should start with
    depth: float  # where the asked fact sits in the document, 0 = start, 1 = end
    prompt_tokens: int  # measured with the engine's own tokenizer

    def to_dict(self) -> dict[str, object]:
        return {
            "length": self.length,
            "index": self.index,
            "expected": self.expected,
            "depth": round(self.depth, 3),
            "prompt_tokens": self.prompt_tokens,
        }


def _fact(room: int, code: int) -> str:
    return f"The code of room {room} is {code}."


def _document(seed: str, n_words: int, facts: Sequence[tuple[float, str]], query: str) -> str:
    sentences = sentence_text(seed, max(n_words, 1)).split(". ")
    for depth, fact in sorted(facts, reverse=True):  # deepest first keeps earlier indices valid
        at = round(depth * len(sentences))
        sentences.insert(at, fact.rstrip("."))
    return ". ".join(s.rstrip(".") for s in sentences) + ". " + query


def build_probes(
    count_tokens: Callable[[str], int],
    lengths: Sequence[int],
    samples: int,
    *,
    seed: str = "verify-quality",
) -> list[Probe]:
    """``samples`` probes per length, each at most ``length`` tokens by ``count_tokens``.

    The asked fact moves through the document (depths spread over 10%..90%) so a length's
    recall covers the start, the middle and the end of the context. Same seed, same set.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    probes: list[Probe] = []
    for length in lengths:
        for index in range(samples):
            probes.append(_probe(count_tokens, length, index, samples, f"{seed}/{length}/{index}"))
    return probes


def _probe(
    count_tokens: Callable[[str], int], length: int, index: int, samples: int, seed: str
) -> Probe:
    rng = random.Random(seed)
    rooms = rng.sample(range(10, 100), FACTS_PER_PROBE)
    codes = [rng.randrange(1000, 10000) for _ in rooms]
    depth = 0.1 + 0.8 * (index + 0.5) / samples
    others = [rng.uniform(0.05, 0.95) for _ in rooms[1:]]
    facts = [(d, _fact(r, c)) for d, r, c in zip([depth, *others], rooms, codes, strict=True)]
    query = f"The code of room {rooms[0]} is"
    n_words = int(length / _TOKENS_PER_WORD)
    prompt, tokens = "", 0
    # Resize twice by the measured ratio, then trim: the count must stay within the bucket so
    # the window check made up front holds for every prompt.
    for _ in range(3):
        prompt = _document(seed, n_words, facts, query)
        tokens = count_tokens(prompt)
        if tokens <= length and tokens >= length * 0.97:
            break
        n_words = max(1, int(n_words * length * 0.985 / max(tokens, 1)))
    while tokens > length and n_words > 1:
        n_words = max(1, n_words - max(1, (tokens - length)))
        prompt = _document(seed, n_words, facts, query)
        tokens = count_tokens(prompt)
    return Probe(length, index, prompt, str(codes[0]), depth, tokens)
