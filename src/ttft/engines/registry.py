"""The one list of engine kinds. Adding an engine: a folder ``engines/<kind>/`` whose
``adapter.py`` builds an ``EngineAdapter``, plus one line in ``_BUILTIN`` below.

CLI choices, lint, doctor, bench and the gateway all read this list, so a kind registered here
(or at run time with ``register``) appears everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ttft.core.errors import TtftError
from ttft.engines.adapter import EngineAdapter
from ttft.engines.llamacpp.adapter import ADAPTER as LLAMACPP
from ttft.engines.prometheus import Scrape
from ttft.engines.sglang.adapter import ADAPTER as SGLANG
from ttft.engines.tgi.adapter import ADAPTER as TGI
from ttft.engines.vllm.adapter import ADAPTER as VLLM

_BUILTIN: tuple[EngineAdapter, ...] = (LLAMACPP, VLLM, SGLANG, TGI)
_ADAPTERS: dict[str, EngineAdapter] = {a.kind: a for a in _BUILTIN}


def engine_kinds() -> tuple[str, ...]:
    """Every known kind, in registration order (the built-in ones first)."""
    return tuple(_ADAPTERS)


def adapters() -> tuple[EngineAdapter, ...]:
    return tuple(_ADAPTERS.values())


def adapter_for(kind: str) -> EngineAdapter:
    try:
        return _ADAPTERS[kind]
    except KeyError:
        raise TtftError(
            f"unknown engine kind {kind!r}", f"use one of: {', '.join(sorted(_ADAPTERS))}"
        ) from None


def register(adapter: EngineAdapter) -> None:
    """Add a kind (a plug-in, or a test's minimal engine); a kind already known is an error."""
    if adapter.kind in _ADAPTERS:
        raise TtftError(f"engine kind {adapter.kind!r} is already registered")
    _ADAPTERS[adapter.kind] = adapter


def unregister(kind: str) -> None:
    """Remove a kind added with ``register``; the built-in kinds stay."""
    if any(a.kind == kind for a in _BUILTIN):
        raise TtftError(f"engine kind {kind!r} is built in and cannot be removed")
    _ADAPTERS.pop(kind, None)


@contextmanager
def registered(adapter: EngineAdapter) -> Iterator[EngineAdapter]:
    """``register`` for the length of a ``with`` block."""
    register(adapter)
    try:
        yield adapter
    finally:
        unregister(adapter.kind)


def detect_kind(scrape: Scrape) -> str | None:
    """The engine whose metric prefix dominates a scrape, or None when nothing matches."""
    counts: dict[str, int] = {}
    for name in scrape.names():
        for adapter in _ADAPTERS.values():
            if adapter.metric_prefix and name.startswith(adapter.metric_prefix):
                counts[adapter.kind] = counts.get(adapter.kind, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None
