"""Percentiles, bootstrap intervals, outliers and sample-level warnings in ttft.core.stats."""

from __future__ import annotations

import math
import random
import statistics
import time

import pytest

from ttft.core.stats import (
    Interval,
    bootstrap_difference,
    bootstrap_interval,
    count_outliers,
    describe,
    few_samples_notice,
    outlier_notice,
    percentile,
    samples_needed,
    spread_notice,
)


def _fmt(value: float) -> str:
    return f"{value:g}"


@pytest.mark.parametrize("size", [2, 3, 7, 100, 1001])
def test_percentile_matches_statistics_quantiles_inclusive(size: int) -> None:
    rng = random.Random(size)
    data = sorted(rng.lognormvariate(0, 1) for _ in range(size))
    expected = statistics.quantiles(data, n=100, method="inclusive")
    for q in range(1, 100):
        assert percentile(data, q) == pytest.approx(expected[q - 1], rel=1e-12)


def test_percentile_ends_are_min_and_max_and_one_value_is_itself() -> None:
    data = [1.0, 2.0, 10.0]
    assert percentile(data, 0) == 1.0
    assert percentile(data, 100) == 10.0
    assert percentile([5.0], 99) == 5.0
    assert percentile(data, 50) == 2.0
    assert percentile(data, 75) == 6.0  # halfway between 2 and 10


def test_percentile_rejects_no_values_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_describe_matches_statistics_module_and_keeps_every_sample() -> None:
    rng = random.Random(7)
    data = [rng.gauss(100, 10) for _ in range(500)]
    stats = describe(data)
    assert stats is not None
    assert stats.n == 500
    assert stats.mean == pytest.approx(statistics.fmean(data))
    assert stats.stdev == pytest.approx(statistics.stdev(data))
    assert (stats.min, stats.max) == (min(data), max(data))
    assert stats.p50 == pytest.approx(statistics.median(data))
    assert stats.p50_ci.low <= stats.p50 <= stats.p50_ci.high
    assert stats.p95_ci.low <= stats.p95 <= stats.p95_ci.high


def test_describe_of_nothing_is_none_and_of_one_sample_is_degenerate() -> None:
    assert describe([]) is None
    one = describe([42.0])
    assert one is not None
    assert (one.stdev, one.p99, one.p50_ci.low, one.p50_ci.high) == (0.0, 42.0, 42.0, 42.0)


def test_bootstrap_interval_contains_true_median_most_of_the_time() -> None:
    """95% intervals for the median of Exp(1) (true median ln 2) cover it in ~95% of trials."""
    rng = random.Random(11)
    trials, covered = 200, 0
    for trial in range(trials):
        data = sorted(rng.expovariate(1.0) for _ in range(100))
        interval = bootstrap_interval(data, 50, resamples=300, seed=trial)
        covered += interval.low <= math.log(2) <= interval.high
    assert 0.85 <= covered / trials <= 0.995


def test_bootstrap_interval_agrees_with_resampling_the_data() -> None:
    """The O(1)-per-replicate shortcut has the distribution of the classic resample-and-sort."""
    rng = random.Random(3)
    data = sorted(rng.expovariate(1.0) for _ in range(40))
    spread = data[-1] - data[0]
    for q in (50.0, 95.0):
        naive_rng = random.Random(1)
        replicates = sorted(
            percentile(sorted(naive_rng.choices(data, k=len(data))), q) for _ in range(5000)
        )
        naive = (percentile(replicates, 2.5), percentile(replicates, 97.5))
        fast = bootstrap_interval(data, q, resamples=5000, seed=2)
        assert fast.low == pytest.approx(naive[0], abs=0.05 * spread)
        assert fast.high == pytest.approx(naive[1], abs=0.05 * spread)


def test_bootstrap_interval_is_reproducible_for_a_seed() -> None:
    rng = random.Random(5)
    data = sorted(rng.random() for _ in range(200))
    assert bootstrap_interval(data, 50, seed=1) == bootstrap_interval(data, 50, seed=1)
    assert bootstrap_interval(data, 50, seed=1) != bootstrap_interval(data, 50, seed=2)


def test_describe_of_ten_thousand_samples_takes_well_under_a_second() -> None:
    rng = random.Random(1)
    data = [rng.lognormvariate(0, 1) for _ in range(10_000)]
    start = time.perf_counter()
    describe(data, resamples=1000)
    assert time.perf_counter() - start < 1.0


def test_interval_overlap() -> None:
    assert Interval(1, 3).overlaps(Interval(2, 4))
    assert Interval(1, 3).overlaps(Interval(3, 4))
    assert not Interval(1, 2).overlaps(Interval(2.5, 4))


def test_outliers_beyond_q3_plus_three_iqr_are_counted_not_dropped() -> None:
    rng = random.Random(2)
    data = [rng.uniform(90, 110) for _ in range(100)] + [1000.0, 2000.0, 5000.0]
    stats = describe(data)
    assert stats is not None
    assert stats.outliers == 3
    assert stats.n == 103
    assert stats.max == 5000.0
    assert stats.mean > 110  # the outliers stay in the mean
    assert 110 < stats.outlier_fence < 1000
    assert count_outliers(sorted(data[:100])).count == 0


def test_samples_needed_for_one_sample_beyond_the_percentile() -> None:
    assert samples_needed(99) == 100
    assert samples_needed(95) == 20
    assert samples_needed(90) == 10
    assert samples_needed(99.9) == 1000
    assert samples_needed(50) == 2


def test_few_samples_notice_names_the_percentile_and_the_count_to_run() -> None:
    notice = few_samples_notice("ttft", 20, [50, 90, 95, 99])
    assert notice is not None
    assert notice.kind == "few_samples"
    assert "p99 from 20 samples is in effect the max" in notice.message
    assert "run >= 100 requests for a real p99" in notice.message
    several = few_samples_notice("ttft", 5, [90, 95, 99])
    assert several is not None
    assert "p90, p95 and p99 from 5 samples are" in several.message


def test_few_samples_notice_is_silent_with_enough_samples() -> None:
    assert few_samples_notice("ttft", 100, [50, 90, 95, 99]) is None
    assert few_samples_notice("ttft", 0, [99]) is None


def test_spread_notice_fires_on_a_bimodal_cell_only() -> None:
    mixed = describe([25.0] * 50 + [1300.0] * 50)  # cache hits and misses together
    steady = describe([100.0 + i % 5 for i in range(100)])
    assert mixed is not None and steady is not None
    notice = spread_notice("ttft", mixed, _fmt)
    assert notice is not None and "varies widely" in notice.message
    assert spread_notice("ttft", steady, _fmt) is None


def test_outlier_notice_reports_count_and_fence() -> None:
    with_outliers = describe([100.0 + i % 7 for i in range(100)] + [9000.0])
    without = describe([100.0 + i % 7 for i in range(100)])
    assert with_outliers is not None and without is not None
    notice = outlier_notice("ttft", with_outliers, _fmt)
    assert notice is not None
    assert "1 of 101 samples beyond Q3 + 3 IQR" in notice.message
    assert "kept in the statistics" in notice.message
    assert outlier_notice("ttft", without, _fmt) is None


def test_the_difference_of_a_clear_gain_excludes_zero_and_holds_the_point() -> None:
    point, ci = bootstrap_difference([900.0, 950, 1000, 1020, 980], [100.0, 120, 90, 110, 105])
    assert point == 875 and ci.low <= point <= ci.high and ci.low > 0


def test_the_difference_of_two_alike_groups_spans_zero() -> None:
    _, ci = bootstrap_difference([100.0, 140, 90, 130, 110], [120.0, 100, 135, 95, 115])
    assert ci.low < 0 < ci.high


def test_the_difference_interval_brackets_a_shift() -> None:
    a = [40.0, 42.0, 38.0, 41.0, 39.0, 40.0]
    diff, ci = bootstrap_difference([x + 25 for x in a], a)
    assert diff == 25 and ci.low <= 25 <= ci.high and ci.low > 20


def test_the_difference_resamples_each_group_on_its_own_first_then_second() -> None:
    """The draws doctor's steps made before this function: ``choices`` of the first group, then
    of the second, per replicate (so a seed gives the same replicates as then)."""
    first, second = [5.0, 9.0, 1.0, 7.0], [2.0, 3.0, 8.0]
    rng = random.Random(16)
    replicates = sorted(
        statistics.mean(rng.choices(first, k=4)) - statistics.mean(rng.choices(second, k=3))
        for _ in range(50)
    )
    _, ci = bootstrap_difference(first, second, statistics.mean, resamples=50, seed=16, level=0.5)
    assert ci.low == percentile(replicates, 25.0) and ci.high == percentile(replicates, 75.0)
    with pytest.raises(ValueError):
        bootstrap_difference([], second)
