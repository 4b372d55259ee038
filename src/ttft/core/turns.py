"""TTFT per turn of a multi-turn run: what the prefix cache saves as a conversation grows.

Turn ``t`` of a conversation sends the whole history again. With a working prefix cache the
server reuses the history and computes only the new tokens (the last answer's template and the
new user turn), so TTFT follows the *new* tokens, not the prompt; without one it follows the
whole, growing prompt. "ns per new token" (TTFT / uncached prompt tokens) makes that visible:
flat across turns when the cache works, climbing with the history when it does not.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from ttft.core.records import RequestRecord


def cached_of(record: RequestRecord) -> int | None:
    """Prompt tokens the server reused: usage's cached_tokens, else llama-server's cache_n."""
    if record.cached_tokens is not None:
        return record.cached_tokens
    timings = record.server_timings or {}
    return int(timings["cache_n"]) if "cache_n" in timings else None


def new_tokens_of(record: RequestRecord) -> int | None:
    """Prompt tokens the server had to compute: llama-server's prompt_n (which excludes the
    cached ones), else prompt tokens minus cached ones."""
    timings = record.server_timings or {}
    if "prompt_n" in timings:
        return int(timings["prompt_n"])
    cached = cached_of(record)
    if record.prompt_tokens is None:
        return None
    return record.prompt_tokens - (cached or 0)


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


@dataclass(frozen=True, slots=True)
class TurnRow:
    """Medians over the successful requests of one turn index (durations in ns)."""

    turn: int
    n: int
    failed: int
    ttft_p50: float | None
    prompt_tokens_p50: float | None
    cached_tokens_p50: float | None
    new_tokens_p50: float | None
    ns_per_new_token_p50: float | None
    ns_per_prompt_token_p50: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnRow:
        return cls(**data)


def turn_rows(records: Iterable[RequestRecord]) -> list[TurnRow]:
    """One row per turn index of the warm multi-turn records, in turn order."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for record in records:
        if record.turn is not None and record.phase == "warm":
            by_turn.setdefault(record.turn, []).append(record)
    rows = []
    for turn in sorted(by_turn):
        group = by_turn[turn]
        ok = [r for r in group if r.ok and r.sent_ns is not None and r.first_content_ns]
        ttfts, prompts, cached, new, per_new, per_prompt = [], [], [], [], [], []
        for r in ok:
            assert r.sent_ns is not None and r.first_content_ns is not None
            ttft = r.first_content_ns - r.sent_ns
            ttfts.append(float(ttft))
            if r.prompt_tokens is not None:
                prompts.append(float(r.prompt_tokens))
                if r.prompt_tokens > 0:
                    per_prompt.append(ttft / r.prompt_tokens)
            hit = cached_of(r)
            if hit is not None:
                cached.append(float(hit))
            fresh = new_tokens_of(r)
            if fresh is not None:
                new.append(float(fresh))
                if fresh > 0:
                    per_new.append(ttft / fresh)
        rows.append(
            TurnRow(
                turn=turn,
                n=len(group),
                failed=len(group) - len(ok),
                ttft_p50=_median(ttfts),
                prompt_tokens_p50=_median(prompts),
                cached_tokens_p50=_median(cached),
                new_tokens_p50=_median(new),
                ns_per_new_token_p50=_median(per_new),
                ns_per_prompt_token_p50=_median(per_prompt),
            )
        )
    return rows
