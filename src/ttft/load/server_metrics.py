"""Server metric snapshots around each cell, mapped to common names through the engine adapter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.engines.base import EngineAdapter, metric_deltas
from ttft.engines.prometheus import Scrape, scrape_url
from ttft.engines.registry import adapter_for, detect_kind


@dataclass
class MetricsWatcher:
    """Scrapes before and after a cell. Unreachable metrics are a note, not a failed run."""

    url: str | None
    engine_kind: str | None = None
    notes: list[str] = field(default_factory=list)
    _adapter: EngineAdapter | None = None
    _disabled: bool = False

    def snapshot(self) -> Scrape | None:
        if self.url is None or self._disabled:
            return None
        try:
            scrape = scrape_url(self.url)
        except TtftError as exc:
            self._disabled = True
            self.notes.append(f"server metrics unavailable: {exc}")
            return None
        if self._adapter is None:
            kind = self.engine_kind or detect_kind(scrape)
            if kind is None:
                self._disabled = True
                self.notes.append(f"{self.url} exports no metrics of a known engine")
                return None
            self.engine_kind = kind
            self._adapter = adapter_for(kind)
        return scrape

    def deltas(self, before: Scrape | None, after: Scrape | None) -> dict[str, Any] | None:
        """JSON-ready deltas per common metric, plus what this engine cannot provide."""
        if before is None or after is None or self._adapter is None:
            return None
        out: dict[str, Any] = {"engine": self.engine_kind, "metrics": {}, "unavailable": {}}
        for metric, delta in metric_deltas(self._adapter, before, after).items():
            entry: dict[str, Any] = {
                "source": delta.source_name,
                "kind": delta.kind,
                "value": delta.value,
            }
            if delta.kind == "histogram":
                entry["count"] = delta.count
                entry["mean"] = delta.mean
                entry["buckets"] = [[le, n] for le, n in delta.buckets]
            out["metrics"][metric.value] = entry
        out["unavailable"] = {m.value: why for m, why in self._adapter.unavailable().items()}
        return out
