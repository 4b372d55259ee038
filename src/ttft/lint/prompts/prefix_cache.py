"""Simulate a prefix cache over a sequence of tokenized prompts, and describe their shared prefixes.

Two cache models, both reported, because real engines sit between them:

- ``ideal``: every earlier prompt stays cached; a request reuses its longest common prefix with
  any earlier request. vLLM's automatic prefix caching approaches this until its KV blocks are
  evicted; llama-server approaches it through its host-memory prompt cache.
- ``one slot``: only the previous request's prompt is cached, as in a single llama-server slot
  (``-np 1`` or a pinned ``id_slot``) without a host-memory prompt cache. With several slots,
  llama-server keeps one prompt per slot and routes a request to the most similar one.

Engines always compute the last prompt token again (its logits start the answer), vLLM reuses only
whole KV blocks, and llama-server with a sliding-window-attention model (Gemma 2/3, gpt-oss) can
restore a prefix only at a context checkpoint: the start of a user message, or a few tokens before
the end of the earlier prompt (its server-context.cpp). :class:`CacheModel` states these rules.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheModel:
    """How an engine turns a shared prefix into reused tokens."""

    name: str = "token"
    block_size: int = 1  # vLLM reuses whole blocks of 16 tokens
    recompute_last: bool = True  # a fully cached prompt still computes its last token
    # Reuse only at context checkpoints: user-message starts, and a few tokens before the end of
    # the earlier prompt (llama-server checkpoints 4 and 4 + n_ubatch tokens before the end, and
    # resumes one token before a checkpoint's end: it recomputes that position).
    checkpoints_only: bool = False
    checkpoint_lag: int = 1
    checkpoint_tails: tuple[int, ...] = (4, 4 + 512)

    def reusable(
        self, shared: int, prompt_len: int, earlier_len: int = 0, restore_points: Sequence[int] = ()
    ) -> int:
        """Tokens reused when ``shared`` leading tokens match an earlier prompt's."""
        if self.checkpoints_only:
            ends = list(restore_points)
            if earlier_len:
                ends += [earlier_len - tail for tail in self.checkpoint_tails]
            resume = [end - self.checkpoint_lag for end in ends]
            shared = max((r for r in resume if 0 < r <= shared), default=0)
        usable = min(shared, prompt_len - 1) if self.recompute_last else min(shared, prompt_len)
        usable = max(usable, 0)
        return usable - usable % self.block_size


CACHE_MODELS: dict[str, CacheModel] = {
    "token": CacheModel("token"),
    "vllm": CacheModel("vllm", block_size=16),
    "checkpoint": CacheModel("checkpoint", checkpoints_only=True),
}
CACHE_MODEL_HELP = {
    "token": "any shared token is reused (llama-server with full-attention models, SGLang)",
    "vllm": "whole 16-token KV blocks are reused (vLLM automatic prefix caching)",
    "checkpoint": "reuse restarts at user-message starts (llama-server with sliding-window "
    "models such as Gemma 3, the embedded engine)",
}


def cache_model_for(name: str | None, sliding_window: bool) -> CacheModel:
    """The model asked for; else checkpoint when the server's model (its GGUF) has a sliding
    window, token otherwise."""
    return CACHE_MODELS[name or ("checkpoint" if sliding_window else "token")]


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class CacheSimulation:
    """Per-request outcome of replaying prompts in order through a prefix cache."""

    prompt_tokens: list[int]
    shared_ideal: list[int]  # longest common prefix with any earlier request
    best_earlier: list[int | None]  # index of that earlier request
    cached_ideal: list[int]
    cached_one_slot: list[int]

    @property
    def total_tokens(self) -> int:
        return sum(self.prompt_tokens)

    @property
    def hit_rate_ideal(self) -> float:
        return sum(self.cached_ideal) / self.total_tokens if self.total_tokens else 0.0

    @property
    def hit_rate_one_slot(self) -> float:
        return sum(self.cached_one_slot) / self.total_tokens if self.total_tokens else 0.0


def simulate(
    sequences: Sequence[Sequence[int]],
    model: CacheModel = CACHE_MODELS["token"],
    restore_points: Sequence[Sequence[int]] | None = None,
) -> CacheSimulation:
    """Replay ``sequences`` in order; each request hits what the cache holds when it arrives.

    ``restore_points[i]`` are the token positions of request ``i`` where a checkpoint model may
    resume (user-message starts). The ideal cache finds the longest common prefix with all earlier
    prompts through their sorted order: the best match in a sorted set is one of two neighbours.
    """
    seen: list[tuple[tuple[int, ...], int]] = []
    shared_ideal: list[int] = []
    best: list[int | None] = []
    cached_ideal: list[int] = []
    cached_one: list[int] = []
    for index, seq in enumerate(sequences):
        points = restore_points[index] if restore_points is not None else ()
        key = (tuple(seq), index)
        pos = bisect.bisect_left(seen, key)
        top, top_index = 0, None
        for neighbour in (pos - 1, pos):
            if 0 <= neighbour < len(seen):
                other, other_index = seen[neighbour]
                shared = common_prefix_len(seq, other)
                if shared > top:
                    top, top_index = shared, other_index
        seen.insert(pos, key)
        shared_ideal.append(top)
        best.append(top_index)
        top_len = len(sequences[top_index]) if top_index is not None else 0
        cached_ideal.append(model.reusable(top, len(seq), top_len, points))
        if index:
            previous = sequences[index - 1]
            shared_prev = common_prefix_len(seq, previous)
            cached_one.append(model.reusable(shared_prev, len(seq), len(previous), points))
        else:
            cached_one.append(0)
    return CacheSimulation(
        prompt_tokens=[len(s) for s in sequences],
        shared_ideal=shared_ideal,
        best_earlier=best,
        cached_ideal=cached_ideal,
        cached_one_slot=cached_one,
    )


@dataclass(frozen=True)
class PrefixGroup:
    """Requests that share a prefix of at least the grouping threshold."""

    members: list[int]  # request indexes, in log order
    shared_tokens: int  # the prefix all members have in common


def prefix_groups(sequences: Sequence[Sequence[int]], min_shared: int = 16) -> list[PrefixGroup]:
    """Partition requests into groups whose members share at least ``min_shared`` leading tokens.

    In sorted order, the prefix shared by a run of sequences is the smallest LCP of neighbours,
    so a group ends where two neighbours share fewer than ``min_shared`` tokens. Largest first.
    """
    order = sorted(range(len(sequences)), key=lambda i: tuple(sequences[i]))
    groups: list[PrefixGroup] = []
    run: list[int] = []
    run_shared = 0
    for i in order:
        shared = common_prefix_len(sequences[run[-1]], sequences[i]) if run else 0
        if run and shared < min_shared:
            groups.append(PrefixGroup(sorted(run), run_shared))
            run = []
        run_shared = min(run_shared, shared) if run else len(sequences[i])
        run.append(i)
    if run:
        groups.append(PrefixGroup(sorted(run), run_shared))
    groups.sort(key=lambda g: (-len(g.members), -g.shared_tokens, g.members[0]))
    return groups


def distribution(values: Sequence[int]) -> dict[str, float]:
    """Summary of a list of token counts: min, p50, p90, max, mean (empty -> zeros)."""
    if not values:
        return {"min": 0, "p50": 0, "p90": 0, "max": 0, "mean": 0.0}
    ordered = sorted(values)

    def pct(q: float) -> float:
        # Nearest rank: a value that occurred, which reads better for token counts.
        return float(ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1])

    return {
        "min": float(ordered[0]),
        "p50": pct(0.5),
        "p90": pct(0.9),
        "max": float(ordered[-1]),
        "mean": sum(ordered) / len(ordered),
    }
