"""A bounded soak of the gateway process: memory stays flat, steady clients never see a 5xx, and
slow readers and disconnecting clients leave no upstream connection behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttft.testing.gateway_soak import SoakReport, run_soak


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.mark.parametrize(("workers", "duration_s"), [(1, 75.0), (2, 60.0)])
def test_a_soak_with_slow_readers_and_disconnects_stays_bounded_and_clean(
    tmp_path: Path, workers: int, duration_s: float
) -> None:
    """With 2 workers the same bounds hold for each worker process (its RSS sampled apart),
    and no worker is replaced: the clients' faults stay inside their connections."""
    report: SoakReport = run_soak(tmp_path, duration_s=duration_s, streams=12, workers=workers)
    summary = (
        f"RSS start {report.start_mb:.1f} peak {report.peak_mb:.1f} end {report.end_mb:.1f} "
        f"MiB; curve {report.curve()}; statuses {dict(report.statuses)}; errors "
        f"{dict(report.errors)}; slow {report.slow_readers_dropped}/{report.slow_readers}; "
        f"disconnects {report.disconnects}; upstream open {report.upstream_open_end}"
    )
    assert report.requests > 4 * duration_s, summary
    if workers > 1:
        assert len(report.worker_pids) == workers, summary  # none died and none was replaced
        per_worker = [len(sample) for sample in report.worker_rss_mb]
        assert min(per_worker) == workers, summary
    assert report.server_errors == 0 and not report.errors, summary
    assert set(report.statuses) == {200}, summary
    # Every slow reader was dropped by the gateway's write timeout, not served 4 MB.
    assert report.slow_readers >= duration_s / 10 and (
        report.slow_readers_dropped == report.slow_readers
    ), summary
    assert report.disconnects >= 0.6 * duration_s, summary
    # Bounded memory: each slow reader once cost the whole answer; 12 of them are ~48 MB.
    assert report.peak_mb - report.start_mb < 30, summary
    # No leak: the last third holds no more than the second third, give or take the allocator.
    samples = [mb for _, mb in report.rss_mb]
    third = len(samples) // 3
    assert _mean(samples[2 * third :]) - _mean(samples[third : 2 * third]) < 4, summary
    # Upstream connections left: the steady clients' idle keep-alive ones at most.
    assert report.upstream_open_end <= 12, summary
