"""One worker's side of ``/metrics`` across ``--workers N``: write its snapshot, merge all.

Each worker writes its registry's samples to its file (``metrics_files.py``) every
``WRITE_EVERY_S`` when a counter or histogram moved since the last write, and at least every
``GAUGE_EVERY_S`` when only gauges did (health, cache sizes); also before it merges for a
scrape, and once more when it stops. A scrape then costs the answering worker one read of each
other worker's file, and its rendering is kept for ``CACHE_S``: a flood of scrapes costs one
merge per ``CACHE_S``. What another worker counted shows after its next write, within about
``WRITE_EVERY_S``; what any scrape has shown is on disk, so a worker killed after it cannot
make the next scrape read less (its last snapshot is folded into ``retired.json``).

The merged text goes through ``prometheus_client``'s own exposition, fed by a collector of the
merged families.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

import prometheus_client as prom
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

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
        self._cache: tuple[float, bytes] | None = None

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
        """Every worker's metrics and the retired totals, merged; cached for ``CACHE_S``."""
        now = self.clock()
        if self._cache is not None and now - self._cache[0] < CACHE_S:
            return self._cache[1]
        own = self.write(force=True)
        others = read_others(self.share.directory, exclude=self.share.name)
        text = render(merge([own, *others]))
        self._cache = (now, text)
        return text
