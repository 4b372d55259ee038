"""Server metric snapshots around each cell, mapped to common names through the engine adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ttft.core.errors import TtftError
from ttft.engines.adapter import EngineAdapter
from ttft.engines.metrics import metric_deltas
from ttft.engines.prometheus import Scrape, scrape_url
from ttft.engines.registry import adapter_for, detect_kind

GAUGE_SAMPLE_S = 0.25


@dataclass
class MetricsWatcher:
    """Scrapes before and after a cell. Unreachable metrics are a note, not a failed run."""

    url: str | None
    engine_kind: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # the target's auth headers
    notes: list[str] = field(default_factory=list)
    _adapter: EngineAdapter | None = None
    _disabled: bool = False

    def snapshot(self) -> Scrape | None:
        if self.url is None or self._disabled:
            return None
        try:
            scrape = scrape_url(self.url, headers=self.headers)
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
        if self._adapter is None and self.engine_kind is not None:
            self._adapter = adapter_for(self.engine_kind)  # a given kind needs no detection
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


def update_gauge_peaks(kind: str, scrape: Scrape, peaks: dict[str, float]) -> None:
    """Raise each common gauge's peak (running, waiting, KV usage) to what ``scrape`` shows."""
    for metric, source in adapter_for(kind).metric_sources().items():
        if source.kind != "gauge":
            continue
        for metric_name in source.names:
            value = scrape.total(metric_name)
            if value is not None:
                peaks[metric.value] = max(peaks.get(metric.value, 0.0), value)
                break


async def track_gauge_peaks(
    url: str,
    kind: str,
    peaks: dict[str, float],
    every_s: float = GAUGE_SAMPLE_S,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Keep the highest value of each gauge (running, waiting, KV usage) until cancelled.

    A snapshot after a cell sees an idle server; the peaks are what the cell did to it.
    """
    while True:
        try:
            scrape = await asyncio.to_thread(scrape_url, url, 2.0, headers)
        except TtftError:  # a missed sample must not end the run
            scrape = Scrape()
        update_gauge_peaks(kind, scrape, peaks)
        await asyncio.sleep(every_s)
