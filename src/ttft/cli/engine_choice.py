"""``--engine`` choices read from the engine registry when the command runs, not when it is
imported, so a kind registered later (a plug-in, a test) is offered like the built-in ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from ttft.engines.registry import adapters


class EngineKind(click.Choice):  # type: ignore[type-arg]
    """The registry's engine kinds (optionally only those with a flag table), plus ``extra``."""

    def __init__(
        self,
        *,
        extra: Sequence[str] = (),
        with_flags: bool = False,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self._extra = tuple(extra)
        self._aliases = dict(aliases or {})
        self._with_flags = with_flags
        super().__init__((), case_sensitive=True)

    @property
    def choices(self) -> tuple[str, ...]:
        kinds = tuple(a.kind for a in adapters() if a.flags or not self._with_flags)
        return (*self._extra, *kinds)

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        pass  # click.Choice.__init__ assigns; the registry is the only source

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """An older spelling (the gateway's ``llama.cpp``) is read as the registry's kind."""
        if isinstance(value, str):
            value = self._aliases.get(value, value)
        return super().convert(value, param, ctx)
