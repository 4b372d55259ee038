"""Run-to-run spread of a cell that ran several times (``ttft bench --repeat N``).

The within-run confidence interval says how precisely one run pins its own p50; it says nothing
about how much a second run of the same cell would differ (a busy neighbour, a frequency step,
a warmer cache). The spread across runs is what decides whether a change between two
configurations is real: a difference inside it is noise.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.metrics import HEADLINE, get_metric
from ttft.core.records import RequestRecord
from ttft.core.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, Interval, bootstrap_interval, describe


@dataclass(frozen=True, slots=True)
class RunStat:
    """One run of the cell: its p50 and that p50's within-run confidence interval."""

    repeat: int
    n: int
    p50: float
    p50_ci: Interval

    def to_dict(self) -> dict[str, Any]:
        return {
            "repeat": self.repeat,
            "n": self.n,
            "p50": self.p50,
            "p50_ci": self.p50_ci.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class RunSpread:
    """The per-run p50s of one metric and their spread: median, min-max, and a bootstrap
    confidence interval of the median across runs (a percentile bootstrap: up to 5 runs it is
    the min-max range itself; it narrows from about 8 runs on)."""

    metric: str
    unit: str
    runs: list[RunStat]
    median_p50: float
    min_p50: float
    max_p50: float
    ci: Interval

    @property
    def relative_spread(self) -> float | None:
        """(max - min) / median of the per-run p50s."""
        return (self.max_p50 - self.min_p50) / self.median_p50 if self.median_p50 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "runs": [run.to_dict() for run in self.runs],
            "median_p50": self.median_p50,
            "min_p50": self.min_p50,
            "max_p50": self.max_p50,
            "ci": self.ci.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpread:
        runs = [
            RunStat(int(r["repeat"]), int(r["n"]), float(r["p50"]), Interval.from_dict(r["p50_ci"]))
            for r in data["runs"]
        ]
        return cls(
            str(data["metric"]),
            str(data["unit"]),
            runs,
            float(data["median_p50"]),
            float(data["min_p50"]),
            float(data["max_p50"]),
            Interval.from_dict(data["ci"]),
        )


def run_spread(
    records: Sequence[RequestRecord],
    metric: str = HEADLINE,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> RunSpread | None:
    """The spread across the repeats present in ``records`` (None when fewer than two runs
    have a value)."""
    definition = get_metric(metric)
    if definition is None:
        raise ValueError(f"no metric called {metric!r}")
    by_run: dict[int, list[float]] = {}
    for record in records:
        if record.repeat is not None and record.ok:
            by_run.setdefault(record.repeat, []).extend(definition.values(record))
    runs = []
    for repeat in sorted(by_run):
        stats = describe(by_run[repeat], resamples=resamples, level=level, seed=seed)
        if stats is not None:
            runs.append(RunStat(repeat, stats.n, stats.p50, stats.p50_ci))
    if len(runs) < 2:
        return None
    p50s = sorted(run.p50 for run in runs)
    ci = bootstrap_interval(p50s, 50.0, resamples=resamples, level=level, seed=seed)
    return RunSpread(metric, definition.unit, runs, statistics.median(p50s), p50s[0], p50s[-1], ci)
