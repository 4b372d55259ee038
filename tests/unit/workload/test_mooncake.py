"""Mooncake prompt synthesis: a hash id names one fixed block of tokens everywhere it appears,
blocks join without moving token boundaries, and the implied cache reuse is what the blocks say.
"""

from __future__ import annotations

import re

import pytest

from ttft.core.errors import TtftError
from ttft.workload.mooncake import (
    Block,
    blocks_of,
    implied_cached_tokens,
    join_tolerance,
    mooncake_items,
)
from ttft.workload.trace import TraceRequest


class SpaceWordTokenizer:
    """Word pieces that carry their leading space (as SentencePiece's '▁word'): a text that
    starts with a space joins another without merging, like real tokenizers at word starts."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.pieces: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in re.findall(r" ?[^ ]+| +", text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.pieces)
                self.pieces.append(piece)
            ids.append(self.vocab[piece])
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


class CollapsingTokenizer(SpaceWordTokenizer):
    """Merges across joins: any text past 70 pieces counts as half as many tokens."""

    def encode(self, text: str) -> list[int]:
        ids = super().encode(text)
        return ids if len(ids) <= 70 else ids[: len(ids) // 2]


def request(line: int, length: int, ids: list[int], output: int = 3) -> TraceRequest:
    return TraceRequest(line, 0, input_length=length, output_length=output, hash_ids=tuple(ids))


def test_blocks_are_full_except_the_last_which_holds_the_rest() -> None:
    blocks = blocks_of(request(1, 150, [7, 8, 9]), 64)
    assert blocks == [Block(7, 64), Block(8, 64), Block(9, 22)]
    assert sum(b.tokens for b in blocks) == 150


def test_implied_reuse_counts_leading_blocks_seen_before_consecutively_from_block_0() -> None:
    trace = [
        request(1, 192, [1, 2, 3]),
        request(2, 192, [1, 2, 4]),  # blocks 1, 2 seen: 128
        request(3, 192, [5, 2, 3]),  # block 0 unseen: nothing, although 2 and 3 were seen
        request(4, 100, [1, 6]),  # block 1 seen: 64
        request(5, 150, [1, 2, 3]),  # 1, 2 full; the last block is 22 tokens, never seen: 128
        request(6, 192, [1, 2, 3]),  # all three full blocks seen (request 1): 192
    ]
    assert implied_cached_tokens(trace, 64) == [0, 128, 0, 64, 128, 192]


def test_requests_sharing_hash_ids_share_those_blocks_of_text_exactly() -> None:
    tok = SpaceWordTokenizer()
    trace = [request(1, 192, [1, 2, 3]), request(2, 160, [1, 2, 4]), request(3, 64, [9])]
    items, notes = mooncake_items(trace, tok, block_size=64, api="completions")
    prompts = [str(item.body["prompt"]) for item in items]
    ids = [tok.encode(p) for p in prompts]
    assert ids[0][:128] == ids[1][:128]  # the shared blocks, token for token
    assert ids[0][128] != ids[1][128]  # block 3 and block 4 differ from their first token
    assert ids[2][0] != ids[0][0]
    assert [len(x) for x in ids] == [192, 160, 64]  # exactly input_length, joins included
    assert [item.prompt_tokens for item in items] == [192, 160, 64]
    assert [item.meta["implied_cached_tokens"] for item in items] == [0, 128, 0]
    assert "3 of 3 match input_length exactly" in notes[0]
    assert "5 distinct blocks" in notes[0]


def test_a_partial_last_block_is_its_own_text_not_a_cut_of_the_full_block() -> None:
    tok = SpaceWordTokenizer()
    trace = [request(1, 100, [1, 2]), request(2, 128, [1, 2])]
    items, _ = mooncake_items(trace, tok, block_size=64)
    short, full = (tok.encode(str(item.body["prompt"])) for item in items)
    assert short[:64] == full[:64] and short[64] != full[64]
    assert items[1].meta["implied_cached_tokens"] == 64


def test_the_same_seed_gives_the_same_prompts_and_another_seed_others() -> None:
    trace = [request(1, 64, [1])]

    def prompt(seed: str) -> str:
        return str(mooncake_items(trace, SpaceWordTokenizer(), block_size=64, seed=seed)[0][0]
                   .body["prompt"])  # fmt: skip

    assert prompt("a") == prompt("a") != prompt("b")


def test_output_length_is_max_tokens_unless_capped_and_never_below_1() -> None:
    trace = [request(1, 64, [1], output=40), request(2, 64, [2], output=0)]
    own, _ = mooncake_items(trace, SpaceWordTokenizer(), block_size=64)
    capped, _ = mooncake_items(trace, SpaceWordTokenizer(), block_size=64, max_tokens=8)
    assert [i.body["max_tokens"] for i in own] == [40, 1]
    assert [i.body["max_tokens"] for i in capped] == [8, 1]


def test_chat_requests_carry_the_prompt_as_the_user_message() -> None:
    items, _ = mooncake_items([request(1, 64, [1])], SpaceWordTokenizer(), block_size=64,
                              api="chat")  # fmt: skip
    assert items[0].api == "chat"
    assert items[0].body["messages"][0]["role"] == "user"


def test_a_tokenizer_that_merges_across_joins_beyond_the_tolerance_is_an_error() -> None:
    trace = [request(5, 192, [1, 2, 3])]
    assert join_tolerance(3) == 2
    with pytest.raises(TtftError, match=r"trace line 5.*96 tokens, not the trace's 192"):
        mooncake_items(trace, CollapsingTokenizer(), block_size=64)
