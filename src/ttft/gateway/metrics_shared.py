"""One worker's side of ``/metrics`` across ``--workers N``: write its snapshot, merge all.

Each worker writes its registry's samples to its file (``metrics_files.py``) every
``WRITE_EVERY_S`` when a counter or histogram moved since the last write, and at least every
``GAUGE_EVERY_S`` when only gauges did (health, cache sizes); also before it merges for a
scrape, and once more when it stops. A scrape then costs the answering worker one read of each
other worker's file. What another worker counted shows after its next write, within about
``WRITE_EVERY_S``; what any scrape has shown is on disk, so a scrape on another worker, or
after the answering one was killed (its last snapshot is folded into ``retired.json``), cannot
count less.

The rendering is kept for up to ``CACHE_S`` while the directory holds the same files (each
write is a new file: its inode changes): a flood of scrapes costs one merge per ``CACHE_S``,
or per snapshot written, and a cached answer never counts less than another worker showed.

The merged text goes through ``prometheus_client``'s own exposition, fed by a collector of the
merged families.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import prometheus_client as prom
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from ttft.gateway.log_limit import ThrottledLog
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.metrics_files import MetricsShare, read_others, write_snapshot
from ttft.gateway.metrics_merge import Family, merge

log = logging.getLogger("ttft.gateway")

WRITE_EVERY_S = 0.5
GAUGE_EVERY_S = 5.0
CACHE_S = 0.5


def families_of(registry: prom.CollectorRegistry) -> list[Family]:
    """A registry's samples now, as plain families."""
    families = []
    for metric in registry.collect():
        family = Family(metric.name, metric.type, metric.documentation)
        for s in metric.samples:
            family.samples[(s.name, tuple(s.labels.items()))] = float(s.value)
        families.append(family)
    return families


class _Families(Collector):
    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        for family in self.families:
            metric = Metric(family.name, family.help, family.type)
            for (name, labels), value in family.samples.items():
                metric.add_sample(name, dict(labels), value)
            yield metric


def render(families: list[Family]) -> bytes:
    """Prometheus text of ``families``, by ``prometheus_client``'s exposition."""
    registry = prom.CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return prom.generate_latest(registry)


class SharedMetrics:
    """A worker's snapshot writer and merged ``/metrics``; ``run()`` is its background task."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        share: MetricsShare,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.share = share
        self.clock = clock
        self._written_changes = -1  # metrics.changes.count at the last write
        self._written_at = -float("inf")
        self._written: list[Family] | None = None
        self._cache: tuple[float, tuple[tuple[str, int], ...], bytes] | None = None
        self._log = ThrottledLog(log, 60.0)  # a bad file would otherwise log at every scrape

    def _warn(self, path: Path, exc: Exception) -> None:
        self._log.log(path.name, logging.WARNING, "metrics snapshot %s ignored: %s", path, exc)

    def write(self, *, force: bool = False) -> list[Family]:
        """This worker's families now; written to its file when they may differ from the last
        write (``force``: a scrape or a stop needs the file to be current)."""
        changes = self.metrics.changes.count
        now = self.clock()
        moved = changes != self._written_changes
        fresh = now - self._written_at < GAUGE_EVERY_S
        if self._written is not None and not moved and not force and fresh:
            return self._written
        families = families_of(self.metrics.registry)
        if moved or self._written is None or families != self._written:
            try:
                write_snapshot(self.share, families)
            except OSError as exc:
                log.warning("cannot write this worker's metrics snapshot: %s", exc)
                return families  # tried again at the next tick
            self._written_changes = changes
        self._written, self._written_at = families, now
        return families

    async def run(self) -> None:
        """Until cancelled: write when something changed, at most every ``WRITE_EVERY_S``."""
        while True:
            self.write()
            await asyncio.sleep(WRITE_EVERY_S)

    def render_merged(self) -> bytes:
        """Every worker's metrics and the retired totals, merged; cached (see the module)."""
        now = self.clock()
        cache = self._cache
        if cache is not None and now - cache[0] < CACHE_S and cache[1] == self._files():
            return cache[2]
        own = self.write(force=True)
        files = self._files()  # before the reads: a write during them is a change next time
        others = read_others(self.share.directory, self.share.name, self._warn)
        text = render(merge([own, *others]))
        self._cache = (now, files, text)
        return text

    def _files(self) -> tuple[tuple[str, int], ...]:
        """The directory's files and their inodes (``os.replace`` puts a new one there)."""
        try:
            with os.scandir(self.share.directory) as entries:
                return tuple(sorted((e.name, e.inode()) for e in entries))
        except OSError:
            return ()
