"""``--engine`` choices read from the engine registry when the command runs, not when it is
imported, so a kind registered later (a plug-in, a test) is offered like the built-in ones."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ttft.engines.registry import adapters


class EngineKind(click.Choice):  # type: ignore[type-arg]
    """The registry's engine kinds (optionally only those with a flag table), plus ``extra``."""

    def __init__(self, *, extra: Sequence[str] = (), with_flags: bool = False) -> None:
        self._extra = tuple(extra)
        self._with_flags = with_flags
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        kinds = tuple(a.kind for a in adapters() if a.flags or not self._with_flags)
        return (*self._extra, *kinds)

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        pass  # click.Choice.__init__ assigns; the registry is the only source
