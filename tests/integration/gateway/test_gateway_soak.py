"""A bounded soak of the gateway process: memory stays flat, steady clients never see a 5xx, and
slow readers and disconnecting clients leave no upstream connection behind."""

from __future__ import annotations

from pathlib import Path

from ttft.testing.gateway_soak import SoakReport, run_soak


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_a_soak_with_slow_readers_and_disconnects_stays_bounded_and_clean(tmp_path: Path) -> None:
    report: SoakReport = run_soak(tmp_path, duration_s=75.0, streams=12)
    summary = (
        f"RSS start {report.start_mb:.1f} peak {report.peak_mb:.1f} end {report.end_mb:.1f} "
        f"MiB; curve {report.curve()}; statuses {dict(report.statuses)}; errors "
        f"{dict(report.errors)}; slow {report.slow_readers_dropped}/{report.slow_readers}; "
        f"disconnects {report.disconnects}; upstream open {report.upstream_open_end}"
    )
    assert report.requests > 300, summary
    assert report.server_errors == 0 and not report.errors, summary
    assert set(report.statuses) == {200}, summary
    # Every slow reader was dropped by the gateway's write timeout, not served 4 MB.
    assert report.slow_readers >= 8 and report.slow_readers_dropped == report.slow_readers, summary
    assert report.disconnects >= 50, summary
    # Bounded memory: each slow reader once cost the whole answer; 12 of them are ~48 MB.
    assert report.peak_mb - report.start_mb < 30, summary
    # No leak: the last third holds no more than the second third, give or take the allocator.
    samples = [mb for _, mb in report.rss_mb]
    third = len(samples) // 3
    assert _mean(samples[2 * third :]) - _mean(samples[third : 2 * third]) < 4, summary
    # Upstream connections left: the steady clients' idle keep-alive ones at most.
    assert report.upstream_open_end <= 12, summary
