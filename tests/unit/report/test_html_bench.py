"""The bench page: every chart drawn, tables equal to the JSON, offline, fast on big runs."""

from __future__ import annotations

import json
import time

from html_testkit import MS, make_records, mask_generated, read_page, resolve, summary_doc

from ttft.core.records import RequestRecord
from ttft.report import bench_charts as bc
from ttft.report.html_bench import bench_page

BENCH_CHARTS = {
    "ttft-cdf",
    "ttft-cdf-log",
    "staircase-concurrency",
    "goodput-concurrency",
    "ladder",
    "itl-cdf",
    "timeline",
}


def test_every_chart_is_present_and_has_marks() -> None:
    records = make_records()
    page = read_page(bench_page(summary_doc(records), records, generated="now"))
    assert set(page.charts) == BENCH_CHARTS
    assert all(marks > 0 for marks in page.charts.values()), page.charts


def test_numbers_in_the_tables_are_the_json_numbers() -> None:
    records = make_records()
    doc = summary_doc(records)
    page = read_page(bench_page(doc, records, generated="now"))
    assert len(page.cells) > 6 * 8  # n, ok, five TTFT statistics, goodput for each cell
    for _, key, value in page.cells:
        assert json.loads(value) == resolve(doc, key), key


def test_the_page_fetches_nothing() -> None:
    records = make_records()
    text = bench_page(summary_doc(records), records, generated="now")
    page = read_page(text)
    assert page.sources == []  # no script src, no stylesheet link, no image
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text


def test_same_input_same_page_but_for_the_generation_time() -> None:
    records = make_records()
    doc = summary_doc(records)
    one = bench_page(doc, records, generated="2025-01-01 00:00:00 UTC")
    two = bench_page(doc, records, generated="2025-01-02 00:00:00 UTC")
    assert one != two
    assert mask_generated(one) == mask_generated(two)


def test_without_records_the_cdf_comes_from_the_percentiles() -> None:
    doc = summary_doc(make_records())
    page = read_page(bench_page(doc, None, generated="now"))
    assert "timeline" not in page.charts and "itl-cdf" not in page.charts
    assert page.charts["ttft-cdf"] > 0


def test_the_ttft_slo_is_drawn_on_the_cdf_and_the_staircase() -> None:
    records = make_records()
    text = bench_page(summary_doc(records, "ttft:p99<400ms"), records, generated="now")
    assert text.count("SLO ttft:p99&lt;400ms") >= 3  # linear CDF, log CDF, staircase


def test_ten_thousand_requests_render_fast_and_small() -> None:
    records = [
        RequestRecord(
            index=i,
            cell=f"512 tok c={1 + i // 2500}",
            scheduled_ns=i * 10 * MS,
            sent_ns=i * 10 * MS,
            headers_ns=i * 10 * MS + MS,
            first_content_ns=i * 10 * MS + (100 + i % 97) * MS,
            chunk_ns=[i * 10 * MS + (100 + i % 97 + k * 20) * MS for k in range(8)],
            done_ns=i * 10 * MS + 300 * MS,
        )
        for i in range(10_000)
    ]
    doc = summary_doc(records)
    started = time.perf_counter()
    text = bench_page(doc, records, generated="now")
    assert time.perf_counter() - started < 5.0
    assert len(text.encode()) < 5_000_000
    assert read_page(text).charts["timeline"] <= 3 * bc.TIMELINE_ROWS


def test_cell_labels_split_into_bucket_and_load() -> None:
    assert bc.parse_cell("512 tok c=8") == bc.CellLoad("512 tok", "concurrency", 8.0)
    assert bc.parse_cell("64 tok rate=2.5/s") == bc.CellLoad("64 tok", "rate", 2.5)
    assert bc.parse_cell("replay").kind == ""


def test_the_cdf_is_thinned_to_quantiles_but_keeps_its_ends() -> None:
    values = [float(v) for v in range(10_000)]
    points = bc.thin_cdf(values)
    assert len(points) == bc.CDF_POINTS + 1
    assert points[0][0] == 0.0 and points[-1] == (9999.0, 1.0)
    assert bc.thin_cdf([3.0, 1.0][::-1]) == [(1.0, 0.5), (3.0, 1.0)]


def test_the_knee_is_the_last_load_before_latency_takes_off() -> None:
    assert bc.knee([(1, 100.0), (2, 110.0), (4, 400.0), (8, 900.0)]) == 2
    assert bc.knee([(1, 100.0), (2, 120.0)]) is None


def test_the_ladder_segments_add_up_to_the_mean_ttft() -> None:
    doc = summary_doc(make_records())
    metrics = doc["cells"][0]["metrics"]
    segments = bc.ladder_segments(metrics)
    assert [name for name, _, _ in segments] == [name for name, _ in bc.LADDER]
    wait = metrics["client_wait"]["mean"] / MS
    assert abs(segments[-1][2] - (wait + metrics["ttft"]["mean"] / MS)) < 1e-6


def test_the_timeline_samples_evenly_in_send_order() -> None:
    records = make_records(per_cell=100)
    rows = bc.timeline(records, rows=50)
    assert len(rows) == 50
    starts = [row.ttft[0] for row in rows if row.ttft is not None]
    assert starts == sorted(starts)
    assert any(row.failed for row in bc.timeline(records))
