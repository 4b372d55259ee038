"""Engine adapters by kind, and a guess of the kind from a metrics scrape."""

from __future__ import annotations

from ttft.core.errors import TtftError
from ttft.engines.base import EngineAdapter
from ttft.engines.llamacpp import LlamaCppAdapter
from ttft.engines.prometheus import Scrape
from ttft.engines.sglang import SglangAdapter
from ttft.engines.tgi import TgiAdapter
from ttft.engines.vllm import VllmAdapter

ADAPTERS: dict[str, EngineAdapter] = {
    "llamacpp": LlamaCppAdapter(),
    "vllm": VllmAdapter(),
    "sglang": SglangAdapter(),
    "tgi": TgiAdapter(),
}

_PREFIXES = {"llamacpp:": "llamacpp", "vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi"}


def adapter_for(kind: str) -> EngineAdapter:
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise TtftError(
            f"unknown engine kind {kind!r}", f"use one of: {', '.join(sorted(ADAPTERS))}"
        ) from None


def detect_kind(scrape: Scrape) -> str | None:
    """The engine whose metric prefix dominates a scrape, or None when nothing matches."""
    counts: dict[str, int] = {}
    for name in scrape.names():
        for prefix, kind in _PREFIXES.items():
            if name.startswith(prefix):
                counts[kind] = counts.get(kind, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None
