"""Text of an exact token length, built with the target's own tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttft.core.errors import TtftError
from ttft.workload.text_source import sentence_text
from ttft.workload.tokenizer import Tokenizer

Count = Callable[[str], int]


@dataclass(frozen=True)
class PromptFrame:
    """How a server counts a prompt built around a content text.

    ``overhead``: the tokens it adds of its own (a chat template's, the BOS). ``count``, where
    the server can say: the exact total for a content, which is not always the content's own
    tokens plus ``overhead``: a tokenizer may merge across the seam (Gemma's joins a final "."
    with the "<" of a ChatML template's "<|im_end|>", one token short in ~6% of prompts).
    """

    overhead: int = 0
    count: Count | None = None

    def content(self, tokenizer: Tokenizer, total: int, seed: str, lead: str = "") -> str:
        """A content text that comes to ``total`` tokens in this frame."""
        if self.count is None:
            return text_of_tokens(tokenizer, total - self.overhead, seed, lead)
        return _fit(tokenizer, total, seed, lead, self.count, total - self.overhead)


BARE = PromptFrame()  # the content is the whole prompt, as the tokenizer counts it


def text_of_tokens(tokenizer: Tokenizer, n_tokens: int, seed: str, lead: str = "") -> str:
    """A prose text that ``tokenizer`` encodes to exactly ``n_tokens`` tokens.

    Cutting token ids and decoding can merge differently at the cut when re-encoded, so the text
    is re-checked and the cut moved until the count is exact. ``lead`` starts the text (a space
    makes a block that joins cleanly after another one: see ``workload/mooncake.py``).
    """
    return _fit(tokenizer, n_tokens, seed, lead, lambda text: len(tokenizer.encode(text)), n_tokens)


def _fit(tokenizer: Tokenizer, total: int, seed: str, lead: str, count: Count, cut: int) -> str:
    """A prefix of the seed's prose, cut at ``cut`` tokens first and moved until ``count``
    gives ``total``. Where no cut of that prose gives it (the frame merges a final "." into the
    template: one cut counts a token short, the next a token over), the joining token is
    swapped for a later one; failing that, other prose of the same seed is tried."""
    if cut <= 0:
        if cut == total:  # nothing asked for
            return ""
        raise TtftError(
            f"a prompt of {total} tokens leaves no room for content: the server adds "
            f"{total - cut} tokens of its own",
            "ask for longer prompts",
        )
    for attempt in range(4):
        text = _cut_to_count(tokenizer, total, seed if attempt == 0 else f"{seed}~{attempt}",
                             lead, count, cut)  # fmt: skip
        if text is not None:
            return text
    raise TtftError(
        f"could not build a text of exactly {total} tokens with this tokenizer",
        "use another --tokenizer, or a prompt file with texts of the lengths you need",
    )


def _cut_to_count(
    tokenizer: Tokenizer, total: int, seed: str, lead: str, count: Count, cut: int
) -> str | None:
    n_words = max(8, int(cut * 1.1) + 8)
    ids = tokenizer.encode(lead + sentence_text(seed, n_words))
    while len(ids) < cut + 8:
        n_words *= 2
        ids = tokenizer.encode(lead + sentence_text(seed, n_words))
    counted: dict[int, int] = {}
    while cut not in counted and 0 < cut <= len(ids) and len(counted) < 12:
        text = tokenizer.decode(ids[:cut])
        got = count(text)
        if got == total:
            return text
        counted[cut] = got
        cut += total - got
    # No cut gives the total: the count skips it where the last token joins the frame (a
    # final "." with the "<" of the template's "<|im_end|>": one cut a token short, the next a
    # token over). The tokens before that one, then one of the prose's next tokens instead.
    for short in (c for c, got in counted.items() if got == total - 1 and c > 1):
        for later in range(short, min(short + 4, len(ids))):
            text = tokenizer.decode([*ids[: short - 1], ids[later]])
            if count(text) == total:
                return text
    return None
