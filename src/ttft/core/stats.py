"""Descriptive statistics for latency samples, in pure Python.

Percentiles use linear interpolation between order statistics at rank ``(n - 1) * q / 100`` (the
``inclusive`` method of ``statistics.quantiles``, numpy's default). Confidence intervals come from a
seeded percentile bootstrap. Outliers are counted (beyond Q3 + 3 IQR) and never dropped.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0
REPORTED_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
OUTLIER_IQR_FACTOR = 3.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside 0..100")
    rank = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(rank)
    fraction = rank - low
    if fraction == 0.0:
        return float(sorted_values[low])
    below, above = sorted_values[low], sorted_values[low + 1]
    return below + (above - below) * fraction


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval for one statistic."""

    low: float
    high: float
    level: float = DEFAULT_LEVEL

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high, "level": self.level}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Interval:
        return cls(float(data["low"]), float(data["high"]), float(data["level"]))


def _resampled_percentile(sorted_values: Sequence[float], q: float, rng: random.Random) -> float:
    # One bootstrap replicate of the percentile without building the resample. Drawing n indices
    # uniformly with replacement and sorting them gives index floor(n * U_(k)) at sorted position
    # k, where U_(k) is the k-th order statistic of n uniforms: U_(k) ~ Beta(k, n - k + 1), and
    # the next one is U_(k) + (1 - U_(k)) * (min of n - k uniforms). So each replicate costs O(1)
    # instead of O(n log n), and its distribution is exactly that of the classic bootstrap.
    n = len(sorted_values)
    rank = (n - 1) * q / 100.0
    low = math.floor(rank)
    fraction = rank - low
    k = low + 1  # 1-based order statistic
    u = rng.betavariate(k, n - k + 1)
    below = sorted_values[min(int(n * u), n - 1)]
    if fraction == 0.0 or k >= n:
        return float(below)
    u_next = u + (1.0 - u) * (1.0 - rng.random() ** (1.0 / (n - k)))
    above = sorted_values[min(int(n * u_next), n - 1)]
    return below + (above - below) * fraction


def bootstrap_interval(
    sorted_values: Sequence[float],
    q: float,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile-bootstrap confidence interval for the ``q``-th percentile of sorted values."""
    if not sorted_values:
        raise ValueError("confidence interval of no values")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if len(sorted_values) == 1:
        only = float(sorted_values[0])
        return Interval(only, only, level)
    rng = random.Random(seed)
    replicates = [_resampled_percentile(sorted_values, q, rng) for _ in range(resamples)]
    return replicate_interval(replicates, level)


def replicate_interval(replicates: Iterable[float], level: float = DEFAULT_LEVEL) -> Interval:
    """The central ``level`` share of bootstrap replicates: the percentile interval."""
    ordered = sorted(replicates)
    tail = (1.0 - level) / 2.0 * 100.0
    return Interval(percentile(ordered, tail), percentile(ordered, 100.0 - tail), level)


def bootstrap_statistic(
    values: Sequence[float],
    statistic: Callable[[Sequence[float]], float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Interval:
    """Percentile-bootstrap interval of any ``statistic`` (a mean, a share), by resampling the
    values with replacement; seeded, so runs repeat exactly. Percentiles have the faster
    ``bootstrap_interval``."""
    if not values:
        raise ValueError("confidence interval of no values")
    if len(values) == 1 or min(values) == max(values):
        return Interval(float(values[0]), float(values[0]), level)
    rng = random.Random(seed)
    n = len(values)
    replicates = (statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    return replicate_interval(replicates, level)


def bootstrap_difference(
    first: Sequence[float],
    second: Sequence[float],
    statistic: Callable[[Sequence[float]], float] = statistics.median,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> tuple[float, Interval]:
    """``statistic(first) - statistic(second)`` and its percentile-bootstrap interval, for two
    independent groups (A/B arms, before/after): each replicate resamples ``first``, then
    ``second``, with replacement and on its own; seeded, so runs repeat exactly."""
    if not first or not second:
        raise ValueError("a difference needs values in both groups")
    rng = random.Random(seed)
    replicates = (
        statistic(rng.choices(first, k=len(first))) - statistic(rng.choices(second, k=len(second)))
        for _ in range(resamples)
    )
    return statistic(first) - statistic(second), replicate_interval(replicates, level)


@dataclass(frozen=True, slots=True)
class Outliers:
    """Samples beyond the upper fence Q3 + 3 IQR: counted and reported, kept in every statistic."""

    count: int
    fence: float


def count_outliers(sorted_values: Sequence[float], factor: float = OUTLIER_IQR_FACTOR) -> Outliers:
    q1, q3 = percentile(sorted_values, 25.0), percentile(sorted_values, 75.0)
    fence = q3 + factor * (q3 - q1)
    # Values are sorted: count from the top until one is inside the fence.
    count = 0
    for value in reversed(sorted_values):
        if value <= fence:
            break
        count += 1
    return Outliers(count, fence)


@dataclass(frozen=True, slots=True)
class Stats:
    """Statistics of one metric's samples in one cell. Values are in the metric's unit."""

    n: int
    mean: float
    stdev: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float
    p50_ci: Interval
    p95_ci: Interval
    outliers: int
    outlier_fence: float

    def percentile(self, q: float) -> float | None:
        """A reported percentile by number (50, 90, 95, 99), or ``None`` if not kept."""
        return {50.0: self.p50, 90.0: self.p90, 95.0: self.p95, 99.0: self.p99}.get(float(q))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stats:
        return cls(
            n=int(data["n"]),
            mean=float(data["mean"]),
            stdev=float(data["stdev"]),
            min=float(data["min"]),
            max=float(data["max"]),
            p50=float(data["p50"]),
            p90=float(data["p90"]),
            p95=float(data["p95"]),
            p99=float(data["p99"]),
            p50_ci=Interval.from_dict(data["p50_ci"]),
            p95_ci=Interval.from_dict(data["p95_ci"]),
            outliers=int(data["outliers"]),
            outlier_fence=float(data["outlier_fence"]),
        )


def describe(
    values: Iterable[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
) -> Stats | None:
    """Statistics of the samples, or ``None`` when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    outliers = count_outliers(ordered)
    return Stats(
        n=len(ordered),
        mean=statistics.fmean(ordered),
        stdev=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
        min=float(ordered[0]),
        max=float(ordered[-1]),
        p50=percentile(ordered, 50.0),
        p90=percentile(ordered, 90.0),
        p95=percentile(ordered, 95.0),
        p99=percentile(ordered, 99.0),
        p50_ci=bootstrap_interval(ordered, 50.0, resamples=resamples, level=level, seed=seed),
        p95_ci=bootstrap_interval(ordered, 95.0, resamples=resamples, level=level, seed=seed),
        outliers=outliers.count,
        outlier_fence=outliers.fence,
    )


def samples_needed(q: float) -> int:
    """How many samples put at least one sample beyond the ``q``-th percentile: 100 for p99."""
    if q >= 100.0:
        raise ValueError("no sample count puts a sample beyond the maximum")
    return math.ceil(100.0 / (100.0 - q) - 1e-9)


def percentile_label(q: float) -> str:
    """``p99``, ``p99.9``: the percentile as users write it."""
    return f"p{q:g}"


# Warnings in words about a metric's samples. ``fmt`` shows a value in the metric's display unit;
# the statistics themselves stay unit-agnostic.

HIGH_SPREAD_CV = 0.5  # stdev above half the mean: the cell mixes different cases
MIN_SAMPLES_FOR_SPREAD = 10


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning a user can act on; ``kind`` is a stable tag, ``metric`` the metric it is about."""

    kind: str
    message: str
    metric: str | None = None


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def few_samples_notice(metric: str, n: int, percentiles: Iterable[float]) -> Notice | None:
    """Warn when a percentile has no sample beyond it: p99 needs at least 100 samples."""
    short = sorted({q for q in percentiles if 0.0 < q < 100.0 and n < samples_needed(q)})
    if not short or n == 0:
        return None
    labels = [percentile_label(q) for q in short]
    verb = "is" if len(labels) == 1 else "are"
    top = short[-1]
    return Notice(
        "few_samples",
        f"{metric} {_join(labels)} from {n} samples {verb} in effect the max; run >= "
        f"{samples_needed(top)} requests for a real {percentile_label(top)}",
        metric,
    )


def spread_notice(metric: str, stats: Stats, fmt: Callable[[float], str]) -> Notice | None:
    """Warn when the spread is so wide that one number hides several behaviours."""
    if stats.n < MIN_SAMPLES_FOR_SPREAD or stats.mean <= 0:
        return None
    cv = stats.stdev / stats.mean
    if cv <= HIGH_SPREAD_CV:
        return None
    return Notice(
        "high_spread",
        f"{metric} varies widely (stdev {cv:.0%} of the mean; p50 {fmt(stats.p50)}, "
        f"p99 {fmt(stats.p99)}): the cell likely mixes cache hits with misses, or requests "
        "queued behind others; split the cell (by prefix or length) or lower the concurrency",
        metric,
    )


def outlier_notice(metric: str, stats: Stats, fmt: Callable[[float], str]) -> Notice | None:
    """Report samples beyond Q3 + 3 IQR; they stay in every statistic."""
    if stats.outliers == 0:
        return None
    return Notice(
        "outliers",
        f"{metric}: {stats.outliers} of {stats.n} samples beyond Q3 + 3 IQR "
        f"(> {fmt(stats.outlier_fence)}), kept in the statistics; look at the slowest requests "
        "in the records (cold cache, retries, a busy machine) before trusting p99",
        metric,
    )
