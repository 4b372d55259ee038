"""The rows and words every renderer shows for a summary, so the formats agree with each other.

Values leave here in display units (ms for durations) as text, or as numbers for CSV.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ttft.core.metrics import get_metric, metric_names
from ttft.core.slo import SloVerdict
from ttft.core.stats import percentile_label
from ttft.core.summary import BenchSummary, CellSummary, MetricStats
from ttft.core.units import (
    display_unit,
    format_duration_s,
    format_percent,
    format_rate,
    format_value,
    to_display,
)

STAT_COLUMNS = ("p50", "p90", "p95", "p99", "mean", "min", "max")


def phases(summary: BenchSummary) -> Iterator[CellSummary]:
    """Every cell in run order, each followed by its cold phase when it has one."""
    for cell in summary.cells:
        yield cell
        if cell.cold is not None:
            yield cell.cold


def cell_title(cell: CellSummary) -> str:
    label = cell.cell or "(no cell label)"
    return f"{label} · {cell.phase}"


def ordered_metrics(
    cell: CellSummary, only: Sequence[str] | None = None
) -> list[tuple[str, MetricStats]]:
    """The cell's metrics in the registry's order (unknown ones last), optionally a subset."""
    known = list(metric_names())
    names = sorted(cell.metrics, key=lambda n: known.index(n) if n in known else len(known))
    if only is not None:
        names = [name for name in only if name in cell.metrics]
    return [(name, cell.metrics[name]) for name in names]


def stat_texts(entry: MetricStats) -> list[str]:
    """p50 .. max of one metric as display text."""
    return [format_value(getattr(entry.stats, column), entry.unit) for column in STAT_COLUMNS]


def stat_numbers(entry: MetricStats) -> dict[str, float]:
    """Every statistic of one metric in display units, for machine-readable formats."""
    stats = entry.stats
    values = {column: float(getattr(stats, column)) for column in STAT_COLUMNS}
    values.update(
        stdev=stats.stdev,
        outlier_fence=stats.outlier_fence,
        p50_ci_low=stats.p50_ci.low,
        p50_ci_high=stats.p50_ci.high,
        p95_ci_low=stats.p95_ci.low,
        p95_ci_high=stats.p95_ci.high,
    )
    return {name: to_display(value, entry.unit) for name, value in values.items()}


def errors_text(cell: CellSummary) -> str:
    if not cell.errors:
        return "0"
    kinds = ", ".join(f"{kind} {count}" for kind, count in cell.errors.items())
    return f"{cell.failed} ({kinds})"


def cell_facts(cell: CellSummary) -> list[tuple[str, str]]:
    """The cell's counts and rates as (label, text) pairs, in reading order."""
    facts = [
        ("requests", str(cell.n)),
        ("ok", str(cell.ok)),
        ("errors", errors_text(cell)),
    ]
    if cell.warmup:
        facts.append(("warm-up excluded", str(cell.warmup)))
    facts += [
        ("duration", format_duration_s(cell.duration_ns)),
        ("throughput", f"{format_rate(cell.request_throughput)} req/s"),
        ("output", f"{format_rate(cell.output_token_throughput)} tok/s"),
    ]
    if cell.goodput is not None:
        facts.append(
            (
                "goodput",
                f"{format_rate(cell.goodput.per_s)} req/s "
                f"({format_percent(cell.goodput.fraction)} good)",
            )
        )
    return facts


def verdict_text(verdict: SloVerdict, unit: str) -> str:
    """``ttft:p99<600ms: p99 = 512.3 ms (n 200) pass``."""
    mark = "pass" if verdict.passed else "FAIL"
    label = percentile_label(verdict.percentile)
    if verdict.observed is None:
        return f"{verdict.slo}: no samples, {mark}"
    observed = f"{format_value(verdict.observed, unit)} {display_unit(unit)}"
    return f"{verdict.slo}: {label} = {observed} (n {verdict.n}) {mark}"


def verdict_unit(cell: CellSummary, verdict: SloVerdict) -> str:
    entry = cell.metrics.get(verdict.metric)
    if entry is not None:
        return entry.unit
    # No samples: the threshold's unit is the metric's, which the registry knows.
    metric = get_metric(verdict.metric)
    return metric.unit if metric is not None else ""
