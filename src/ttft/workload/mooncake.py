"""Prompts for a Mooncake trace, built so that the trace's prefix reuse happens on the server.

A Mooncake request gives ``input_length`` and ``hash_ids``: block ``i`` of the prompt is the
``block_size`` tokens named ``hash_ids[i]``, and the last block holds what is left
(``input_length - block_size * (len(hash_ids) - 1)`` tokens). Here each block is one fixed text,
built once per (hash id, token count) with the target's own tokenizer, and a prompt is its blocks
concatenated in order. Two requests that share their first k hash ids therefore share their first
k blocks of text exactly, which is what a prefix cache needs to reuse them.

Joins must not move token boundaries: each block starts with a space (so its first token is a
word start, which tokenizers do not merge with what comes before) and is cut to an exact token
count on its own. Every whole prompt is then tokenized again and compared with the trace's
``input_length``: a prompt more than ``join_tolerance`` tokens off is an error, and the
deviations are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ttft.core.errors import TtftError
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import ApiStyle, WorkItem, chat_body, completion_body
from ttft.workload.tokenizer import Tokenizer
from ttft.workload.trace import TraceRequest

Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Block:
    """One block of a prompt: the hash id that names it and its length in tokens."""

    hash_id: int
    tokens: int


def blocks_of(request: TraceRequest, block_size: int) -> list[Block]:
    """The blocks of a Mooncake request, full ones first, the last one holding the rest."""
    length = request.input_length or 0
    ids = request.hash_ids
    out = [Block(h, block_size) for h in ids[:-1]]
    if ids:
        out.append(Block(ids[-1], length - block_size * (len(ids) - 1)))
    return out


def implied_cached_tokens(requests: Sequence[TraceRequest], block_size: int) -> list[int]:
    """Per request, the prompt tokens an unbounded prefix cache would already hold: its leading
    blocks (from block 0, consecutive) that some earlier request also had, in tokens.

    A real server keeps less (llama-server: the cache is per slot; any server: eviction), so
    this is the most reuse the trace allows, measured against what the server reported.
    """
    seen: set[Block] = set()
    out: list[int] = []
    for request in requests:
        blocks = blocks_of(request, block_size)
        reused = 0
        for block in blocks:
            if block not in seen:
                break
            reused += block.tokens
        out.append(reused)
        seen.update(blocks)
    return out


def join_tolerance(n_blocks: int) -> int:
    """Tokens a whole prompt may differ from the sum of its blocks: one per join at most."""
    return max(0, n_blocks - 1)


class BlockTexts:
    """The text of each block, built once and reused wherever its hash id appears."""

    def __init__(self, tokenizer: Tokenizer, seed: str) -> None:
        self.tokenizer = tokenizer
        self.seed = seed
        self._texts: dict[Block, str] = {}

    def __len__(self) -> int:
        return len(self._texts)

    def text(self, block: Block) -> str:
        text = self._texts.get(block)
        if text is None:
            seed = f"{self.seed}/block/{block.hash_id}/{block.tokens}"
            text = self._texts[block] = text_of_tokens(self.tokenizer, block.tokens, seed, lead=" ")
        return text


def _max_tokens(request: TraceRequest, cap: int | None) -> int:
    own = request.output_length if request.output_length is not None else 1
    return max(1, own if cap is None else min(own, cap))


def mooncake_items(
    requests: Sequence[TraceRequest],
    tokenizer: Tokenizer,
    *,
    block_size: int,
    api: ApiStyle = "completions",
    max_tokens: int | None = None,
    seed: str = "ttft",
    progress: Progress | None = None,
) -> tuple[list[WorkItem], list[str]]:
    """One request per trace line, its prompt synthesised from blocks; and notes on the build.

    ``max_tokens`` caps each request's ``output_length`` (None: the trace's own lengths). With
    ``api="chat"`` the prompt is the user message, so the server adds its template's tokens.
    """
    texts = BlockTexts(tokenizer, seed)
    implied = implied_cached_tokens(requests, block_size)
    items: list[WorkItem] = []
    deviations: list[int] = []
    for index, request in enumerate(requests):
        blocks = blocks_of(request, block_size)
        prompt = "".join(texts.text(block) for block in blocks)
        built = len(tokenizer.encode(prompt))
        expected = request.input_length or 0
        deviation = built - expected
        if abs(deviation) > join_tolerance(len(blocks)):
            raise TtftError(
                f"trace line {request.line}: the synthesised prompt is {built} tokens, not the "
                f"trace's {expected}: this tokenizer merges tokens across block joins",
                "give the model's own tokenizer with --tokenizer, or replay a JSONL trace of "
                "request bodies instead",
            )
        deviations.append(deviation)
        out = _max_tokens(request, max_tokens)
        body = (
            chat_body([{"role": "user", "content": prompt}], out)
            if api == "chat"
            else completion_body(prompt, out)
        )
        meta = {
            "trace_line": request.line,
            "input_length": expected,
            "implied_cached_tokens": implied[index],
            "hash_ids": list(request.hash_ids),
        }
        items.append(WorkItem(body, api, "trace", built, meta))
        if progress is not None:
            progress(index + 1, len(requests))
    exact = sum(1 for d in deviations if d == 0)
    notes = [
        f"synthesised {len(items)} prompts from {len(texts)} distinct blocks of {block_size} "
        f"tokens; {exact} of {len(items)} match input_length exactly"
        + ("" if exact == len(items) else f", the largest deviation {max(deviations, key=abs):+d}")
    ]
    return items, notes
