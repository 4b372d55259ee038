"""Compare two bench summaries: per cell, metric and percentile, is B different from A?

A difference is "likely real" when the bootstrap confidence intervals of A and B do not overlap,
and "within noise" when they do. Non-overlap is a conservative test (intervals can overlap a
little while the difference is still real), so "within noise" means "not shown", not "equal".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ttft.core.stats import Interval
from ttft.core.summary import BenchSummary, CellSummary, MetricStats
from ttft.core.units import DURATION_UNIT

LIKELY_REAL = "likely real"
WITHIN_NOISE = "within noise"
TOO_FEW = "too few samples"
MIN_SAMPLES = 5  # below this a bootstrap interval is a point, and any change would look real
COMPARED_STATS = ("p50", "p95")


@dataclass(frozen=True, slots=True)
class StatComparison:
    """One percentile of one metric in one cell, in A and in B (values in the metric's unit)."""

    cell: str
    phase: str
    metric: str
    unit: str
    stat: str  # "p50" or "p95"
    a: float
    b: float
    a_ci: Interval
    b_ci: Interval
    verdict: str  # LIKELY_REAL or WITHIN_NOISE

    @property
    def delta(self) -> float:
        """B minus A."""
        return self.b - self.a

    @property
    def ratio(self) -> float | None:
        """B over A, ``None`` when A is zero."""
        return None if self.a == 0 else self.b / self.a

    @property
    def improved(self) -> bool | None:
        """For durations, whether B is lower (better) by a likely real margin; else ``None``."""
        if self.unit != DURATION_UNIT or self.verdict != LIKELY_REAL:
            return None
        return self.b < self.a


@dataclass(slots=True)
class Comparison:
    """All rows of a comparison, and the cells only one side has."""

    a_label: str
    b_label: str
    rows: list[StatComparison] = field(default_factory=list)
    only_in_a: list[tuple[str, str]] = field(default_factory=list)
    only_in_b: list[tuple[str, str]] = field(default_factory=list)

    def regressions(self, metric: str = "ttft") -> list[StatComparison]:
        """Rows of ``metric`` where B is worse than A by a likely real margin."""
        return [r for r in self.rows if r.metric == metric and r.improved is False]


def _phases(summary: BenchSummary) -> dict[tuple[str, str], CellSummary]:
    found: dict[tuple[str, str], CellSummary] = {}
    for cell in summary.cells:
        for part in (cell, cell.cold):
            if part is not None:
                found[(part.cell, part.phase)] = part
    return found


def _row(
    key: tuple[str, str], name: str, stat: str, a: MetricStats, b: MetricStats
) -> StatComparison:
    a_ci: Interval = getattr(a.stats, f"{stat}_ci")
    b_ci: Interval = getattr(b.stats, f"{stat}_ci")
    return StatComparison(
        cell=key[0],
        phase=key[1],
        metric=name,
        unit=a.unit,
        stat=stat,
        a=float(getattr(a.stats, stat)),
        b=float(getattr(b.stats, stat)),
        a_ci=a_ci,
        b_ci=b_ci,
        verdict=(
            TOO_FEW
            if min(a.stats.n, b.stats.n) < MIN_SAMPLES
            else WITHIN_NOISE
            if a_ci.overlaps(b_ci)
            else LIKELY_REAL
        ),
    )


def _label(summary: BenchSummary, fallback: str) -> str:
    label = summary.meta.get("label")
    return str(label) if label else fallback


def compare(
    a: BenchSummary,
    b: BenchSummary,
    *,
    metrics: Sequence[str] | None = None,
    a_label: str | None = None,
    b_label: str | None = None,
) -> Comparison:
    """Compare B against A for every cell and phase both have, metric by metric.

    ``metrics`` limits and orders the metrics; by default every metric both sides have, in A's
    order. A metric whose units differ between the two sides is skipped.
    """
    result = Comparison(a_label or _label(a, "A"), b_label or _label(b, "B"))
    a_cells, b_cells = _phases(a), _phases(b)
    result.only_in_a = [key for key in a_cells if key not in b_cells]
    result.only_in_b = [key for key in b_cells if key not in a_cells]
    for key, a_cell in a_cells.items():
        b_cell = b_cells.get(key)
        if b_cell is None:
            continue
        names = list(metrics) if metrics is not None else list(a_cell.metrics)
        for name in names:
            a_metric, b_metric = a_cell.metrics.get(name), b_cell.metrics.get(name)
            if a_metric is None or b_metric is None or a_metric.unit != b_metric.unit:
                continue
            for stat in COMPARED_STATS:
                result.rows.append(_row(key, name, stat, a_metric, b_metric))
    return result


def compare_json(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    metrics: Sequence[str] | None = None,
    a_label: str | None = None,
    b_label: str | None = None,
) -> Comparison:
    """Compare two summary JSON documents (as parsed); raises ``TtftError`` on a foreign schema."""
    return compare(
        BenchSummary.from_dict(a),
        BenchSummary.from_dict(b),
        metrics=metrics,
        a_label=a_label,
        b_label=b_label,
    )
