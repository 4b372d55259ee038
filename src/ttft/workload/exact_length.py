"""Text of an exact token length, built with the target's own tokenizer."""

from __future__ import annotations

from ttft.core.errors import TtftError
from ttft.workload.text_source import sentence_text
from ttft.workload.tokenizer import Tokenizer


def text_of_tokens(tokenizer: Tokenizer, n_tokens: int, seed: str, lead: str = "") -> str:
    """A prose text that ``tokenizer`` encodes to exactly ``n_tokens`` tokens.

    Cutting token ids and decoding can merge differently at the cut when re-encoded, so the text
    is re-checked and the cut moved until the count is exact. ``lead`` starts the text (a space
    makes a block that joins cleanly after another one: see ``workload/mooncake.py``).
    """
    if n_tokens <= 0:
        return ""
    n_words = max(8, int(n_tokens * 1.1) + 8)
    ids = tokenizer.encode(lead + sentence_text(seed, n_words))
    while len(ids) < n_tokens + 4:
        n_words *= 2
        ids = tokenizer.encode(lead + sentence_text(seed, n_words))
    cut = n_tokens
    for _ in range(12):
        text = tokenizer.decode(ids[:cut])
        got = len(tokenizer.encode(text))
        if got == n_tokens:
            return text
        cut += n_tokens - got
        if cut <= 0 or cut > len(ids):
            break
    raise TtftError(
        f"could not build a text of exactly {n_tokens} tokens with this tokenizer",
        "use another --tokenizer, or a prompt file with texts of the lengths you need",
    )
