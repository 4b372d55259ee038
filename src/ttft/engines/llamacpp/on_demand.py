"""The user's service, or the embedded engine started for the length of one command.

Every command that measures or reads a service (bench, doctor, lint prompts, tune frontend)
takes ``--url`` or, without one, starts the embedded llama-server (Gemma 3 270M) and stops it
afterwards. The slot count, the context sizing and the Target built around the started engine
are decided here once, so the commands cannot drift apart on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.target import Target
from ttft.engines.control import complete_target
from ttft.engines.llamacpp.embedded import RunningEngine, launch_embedded

# Slots of an engine started to be measured: enough for concurrency to show queueing and
# batching on a 2-core machine, few enough that each slot keeps a useful window.
EMBEDDED_SLOTS = 4
_CONTEXT_STEP = 1024


def context_for(per_slot_tokens: int, slots: int = EMBEDDED_SLOTS) -> int:
    """A context (``-c``) that gives each of ``slots`` at least ``per_slot_tokens`` (llama-server
    splits the context evenly), in whole KiB of tokens."""
    total = per_slot_tokens * slots
    return -(-total // _CONTEXT_STEP) * _CONTEXT_STEP


@dataclass(frozen=True)
class EmbeddedSize:
    """How to start the embedded engine when no URL is given."""

    ctx_size: int
    slots: int = EMBEDDED_SLOTS
    extra_args: tuple[str, ...] = ()
    model_path: Path | None = None  # None: the embedded Gemma 3 270M

    def describe(self) -> str:
        """What is being started, in words, for the line the user sees while it loads."""
        extra = "".join(" " + a for a in self.extra_args)
        return f"llama-server, Gemma 3 270M, {self.slots} slots, context {self.ctx_size}{extra}"


@dataclass(frozen=True)
class Served:
    """The service a command talks to; ``engine`` is set when ttft started it."""

    target: Target
    engine: RunningEngine | None = None


@contextlib.contextmanager
def target_or_embedded(
    given: Target | None,
    size: EmbeddedSize | Callable[[], EmbeddedSize],
    *,
    headers: Mapping[str, str] | None = None,
    complete: bool = True,
    on_start: Callable[[EmbeddedSize], None] | None = None,
) -> Iterator[Served]:
    """``given`` (its model and metrics filled in from the server unless ``complete`` is
    False), or the embedded engine started with ``size`` and stopped on the way out; its
    Target carries ``headers`` and names the engine kind, so nothing has to guess it.
    ``size`` may be a function, asked only when the engine is started (sizing can mean
    reading a whole trace). ``on_start`` is told just before the engine starts (loading takes
    a second or more)."""
    if given is not None:
        yield Served(complete_target(given) if complete else given)
        return
    if not isinstance(size, EmbeddedSize):
        size = size()
    if on_start is not None:
        on_start(size)
    settings: dict[str, Any] = {"ctx_size": size.ctx_size, "parallel": size.slots}
    if size.extra_args:
        settings["extra_args"] = size.extra_args
    if size.model_path is not None:
        settings["model_path"] = size.model_path
    with launch_embedded(**settings) as engine:
        target = Target(
            engine.base_url,
            engine.model_name,
            engine.metrics_url,
            "llamacpp",
            None,
            dict(headers or {}),
        )
        yield Served(target, engine)
