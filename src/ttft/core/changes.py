"""A Change: one edit that can be applied and measured; a Finding may carry one, a Plan orders them.

A change touches one or more of: the engine's flags (set or unset, for its launch command), the
proxy's configuration (text edits anchored at a directive, checked against what the file says
there), the requests (a named transform such as ``move-dynamic``), the route (``ttft gateway`` in
front, or another target URL) and the client (e.g. a concurrency cap). ``tune ab`` applies a chain
of them cumulatively; ``ttft doctor --plan`` writes them as an editable TOML plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ttft.core.cost_tier import CostTier
from ttft.core.errors import TtftError
from ttft.core.text_edits import TextEdit

# Within a cost tier: what needs nothing restarted comes before a restart, before a new target.
_REQUEST, _CONFIG, _RESTART, _TARGET = 0, 1, 2, 3


@dataclass(frozen=True)
class Change:
    label: str
    flags: Mapping[str, str] = field(default_factory=dict)  # engine flags to set ("": a switch)
    unset: tuple[str, ...] = ()  # engine flags to remove from the launch command
    edits: tuple[TextEdit, ...] = ()  # proxy configuration edits
    transforms: tuple[str, ...] = ()  # request transforms, e.g. "move-dynamic"
    url: str | None = None  # another target: the same service reached another way
    gateway: Mapping[str, str] | None = None  # routing: `ttft gateway` in front, these options
    client: Mapping[str, str] = field(default_factory=dict)  # client settings ("concurrency")
    tier: CostTier | None = None  # None: from what the change touches
    rule: str = ""  # the finding it came from, if any
    engine: str | None = None  # the engine kind the flags are spelled for

    @property
    def kinds(self) -> tuple[str, ...]:
        """What the change touches: ``engine``, ``proxy``, ``request``, ``routing``, ``client``."""
        out = []
        if self.flags or self.unset:
            out.append("engine")
        if self.edits:
            out.append("proxy")
        if self.transforms:
            out.append("request")
        if self.url is not None or self.gateway is not None:
            out.append("routing")
        if self.client:
            out.append("client")
        return tuple(out)

    @property
    def empty(self) -> bool:
        return not self.kinds

    def cost_key(self) -> tuple[int, int]:
        """Cheapest first: the cost tier, then request-side before config before a restart."""
        if self.url is not None or self.gateway is not None:
            within = _TARGET
        elif self.flags or self.unset:
            within = _RESTART
        elif self.edits:
            within = _CONFIG
        else:
            within = _REQUEST
        if self.tier is not None:
            return (self.tier.value, within)
        default = CostTier.SCHEDULING if within == _RESTART else CostTier.TRANSPORT
        return (default.value, within)

    def summary(self) -> str:
        """One line: what a person would do by hand."""
        parts = []
        if self.flags:
            parts.append("set " + " ".join(_flag_text(k, v) for k, v in self.flags.items()))
        if self.unset:
            parts.append("remove " + " ".join(self.unset))
        if self.edits:
            files = sorted({e.file for e in self.edits})
            parts.append(f"{len(self.edits)} edit(s) to {', '.join(files)}")
        if self.transforms:
            parts.append("requests: " + ", ".join(self.transforms))
        if self.gateway is not None:
            options = " ".join(f"--{k} {v}" for k, v in self.gateway.items())
            parts.append(f"route through ttft gateway {options}".rstrip())
        if self.url is not None:
            parts.append(f"target {self.url}")
        if self.client:
            parts.append("client " + " ".join(f"{k}={v}" for k, v in self.client.items()))
        return "; ".join(parts) or "nothing"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "kinds": list(self.kinds)}
        if self.flags:
            out["flags"] = dict(self.flags)
        if self.unset:
            out["unset"] = list(self.unset)
        if self.edits:
            out["edits"] = [e.to_dict() for e in self.edits]
        if self.transforms:
            out["transforms"] = list(self.transforms)
        if self.url is not None:
            out["url"] = self.url
        if self.gateway is not None:
            out["gateway"] = dict(self.gateway)
        if self.client:
            out["client"] = dict(self.client)
        if self.tier is not None:
            out["tier"] = self.tier.value
        if self.rule:
            out["rule"] = self.rule
        if self.engine:
            out["engine"] = self.engine
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        try:
            tier = data.get("tier")
            return cls(
                label=str(data["label"]),
                flags={str(k): str(v) for k, v in dict(data.get("flags", {})).items()},
                unset=tuple(str(f) for f in data.get("unset", ())),
                edits=tuple(TextEdit.from_dict(e) for e in data.get("edits", ())),
                transforms=tuple(str(t) for t in data.get("transforms", ())),
                url=data.get("url"),
                gateway=(
                    None
                    if data.get("gateway") is None
                    else {str(k): str(v) for k, v in dict(data["gateway"]).items()}
                ),
                client={str(k): str(v) for k, v in dict(data.get("client", {})).items()},
                tier=None if tier is None else CostTier(int(tier)),
                rule=str(data.get("rule", "")),
                engine=data.get("engine"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TtftError(f"not a change: {exc}") from None


def _flag_text(flag: str, value: str) -> str:
    return flag if value == "" else f"{flag} {value}"


def order_by_cost(changes: Iterable[Change]) -> list[Change]:
    """Cheapest first; changes of equal cost keep their order (a stable sort)."""
    return sorted(changes, key=lambda c: c.cost_key())
