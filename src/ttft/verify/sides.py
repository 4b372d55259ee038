"""A side of the comparison: a running service by URL, or an embedded engine ttft starts.

Syntax (``--baseline`` / ``--candidate``):

    http://HOST:PORT                      a running llama-server (its /completion endpoint)
    embedded                              the embedded llama-server with its defaults (f16 KV)
    embedded:-ctk=q4_0,-ctv=q4_0          ... with llama-server flags, comma separated, flag=value

Flags accepted after ``embedded:`` are the ones that change numerics or the window: -ctk, -ctv,
-fa, -c, -np, -t, -b, -ub. Both sides get the same slot count and context unless a side names
its own, so the two differ only in the lever under test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target

# flag -> LlamaServerConfig field; int-valued fields are converted, the rest stay strings.
_FLAGS: dict[str, str] = {
    "-ctk": "cache_type_k",
    "-ctv": "cache_type_v",
    "-fa": "flash_attn",
    "-c": "ctx_size",
    "-np": "parallel",
    "-t": "threads",
    "-b": "batch_size",
    "-ub": "ubatch_size",
}
_INT_FIELDS = {"ctx_size", "parallel", "threads", "batch_size", "ubatch_size"}
SYNTAX = "a URL (http://HOST:PORT) or embedded[:-ctk=q8_0,-ctv=q8_0,...]"


@dataclass(frozen=True)
class SideSpec:
    """What one side is; ``overrides`` are LlamaServerConfig fields for an embedded side;
    ``api_key`` and ``headers`` go with every request to a URL side (a service behind a key)."""

    spec: str
    url: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        return self.url is None

    def target(self) -> Target:
        """The URL side as a Target (its auth included); an embedded side has none yet."""
        if self.url is None:
            raise TtftError(f"side {self.spec!r} is embedded: it has no URL before it starts")
        return Target(self.url, api_key=self.api_key, headers=dict(self.headers))

    @property
    def label(self) -> str:
        """A short name for the trade line: "q4_0 KV", "K q8_0 / V f16 KV", or the URL."""
        if self.url is not None:
            return self.url
        k = str(self.overrides.get("cache_type_k", "f16"))
        v = str(self.overrides.get("cache_type_v", "f16"))
        name = f"{k} KV" if k == v else f"K {k} / V {v} KV"
        rest = [
            f"{flag}={self.overrides[f]}"
            for flag, f in _FLAGS.items()
            if f in self.overrides and f not in ("cache_type_k", "cache_type_v")
        ]
        return " ".join([name, *rest])

    def window(self, default_ctx: int, default_parallel: int) -> int:
        """Tokens per slot an embedded side will have (llama-server gives each slot c/np)."""
        ctx = int(self.overrides.get("ctx_size", default_ctx))
        slots = int(self.overrides.get("parallel", default_parallel))
        return ctx // max(slots, 1)


def parse_side(
    spec: str, *, api_key: str | None = None, headers: Mapping[str, str] | None = None
) -> SideSpec:
    """Parse one ``--baseline``/``--candidate`` value; a clear error names the syntax.
    ``api_key`` and ``headers`` are kept for a URL side (an embedded engine asks for no key)."""
    text = spec.strip()
    if text.startswith(("http://", "https://")):
        return SideSpec(text, text.rstrip("/"), api_key=api_key, headers=dict(headers or {}))
    head, _, tail = text.partition(":")
    if head != "embedded":
        raise TtftError(f"cannot read side {spec!r}", f"give {SYNTAX}")
    overrides: dict[str, str | int] = {}
    for item in filter(None, (part.strip() for part in tail.split(","))):
        flag, eq, value = item.partition("=")
        if not eq:  # "-ctk q4_0" reads as naturally as "-ctk=q4_0"
            flag, _, value = item.partition(" ")
        name = _FLAGS.get(flag.strip())
        if name is None or not value.strip():
            known = ", ".join(_FLAGS)
            raise TtftError(
                f"cannot read {item!r} in side {spec!r}", f"use flag=value with {known}"
            )
        value = value.strip()
        if name in _INT_FIELDS:
            if not value.isdigit():
                raise TtftError(f"{flag} wants a number, not {value!r}")
            overrides[name] = int(value)
        else:
            overrides[name] = value
    return SideSpec(spec=text, overrides=overrides)
