"""/metrics across --workers: snapshots merged, dead workers' counters kept, bad files ignored."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ttft.gateway import metrics_files
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.metrics_files import (
    RETIRED,
    MetricsShare,
    create_share_dir,
    fold_retired,
    read_others,
    remove_share_dir,
    write_snapshot,
)
from ttft.gateway.metrics_merge import families_from_json, merge
from ttft.gateway.metrics_shared import CACHE_S, SharedMetrics, families_of, render

U = "http://u:1"


def _samples(text: str | bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _worker(index: int, count: int = 2) -> GatewayMetrics:
    metrics = GatewayMetrics()
    metrics.worker.track(lambda: float(count), str(index))
    return metrics


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


REQ = ("ttft_gateway_requests_total", (("endpoint", "chat"), ("model", "m"), ("status", "200")))


def test_counters_are_summed_over_workers() -> None:
    a, b = _worker(0), _worker(1)
    a.requests.inc("m", "chat", "200", by=3)
    b.requests.inc("m", "chat", "200", by=4)
    b.requests.inc("m", "chat", "503")
    merged = _samples(render(merge([families_of(a.registry), families_of(b.registry)])))
    assert merged[REQ] == 7
    assert merged[REQ[0], (("endpoint", "chat"), ("model", "m"), ("status", "503"))] == 1


def test_histograms_sum_their_buckets_sums_and_counts_and_stay_in_order() -> None:
    a, b = _worker(0), _worker(1)
    for v in (0.0002, 0.02):
        a.ttft.observe(v, "m", "short")
    b.ttft.observe(3.0, "m", "short")
    b.ttft.observe(0.02, "m", "long")  # a label set only one worker has
    text = render(merge([families_of(a.registry), families_of(b.registry)])).decode()
    merged = _samples(text)
    short = (("lane", "short"), ("model", "m"))
    name = "ttft_gateway_ttft_seconds"
    assert merged[name + "_count", short] == 3
    assert merged[name + "_sum", short] == pytest.approx(3.0202)
    assert merged[name + "_bucket", (*short[:1], ("le", "0.0005"), short[1])] == 1
    assert merged[name + "_bucket", (*short[:1], ("le", "0.025"), short[1])] == 2
    assert merged[name + "_bucket", (*short[:1], ("le", "+Inf"), short[1])] == 3
    assert merged[name + "_count", (("lane", "long"), ("model", "m"))] == 1
    # Each label set's buckets are cumulative in le order, then its count and sum.
    lines = [line for line in text.splitlines() if line.startswith(name) and 'lane="short"' in line]
    buckets = [float(merged_value) for *_, merged_value in (line.split(" ") for line in lines)]
    assert len(lines) == 17 + 2  # 16 buckets and +Inf, count, sum
    assert buckets[:17] == sorted(buckets[:17])
    assert lines[17].startswith(name + "_count") and lines[18].startswith(name + "_sum")


def test_gauges_sum_counts_take_the_minimum_of_health_and_keep_one_series_per_worker() -> None:
    a, b = _worker(0), _worker(1)
    a.in_flight.track(lambda: 2, U)
    b.in_flight.track(lambda: 3, U)
    a.healthy.track(lambda: 1, U)
    b.healthy.track(lambda: 0, U)  # one worker's checks fail: not healthy
    a.frame_bytes.track(lambda: 100, "m")
    b.frame_bytes.track(lambda: 50, "m")
    stale = _worker(0)  # a dead worker 0's last snapshot beside its replacement's
    merged = _samples(
        render(
            merge([families_of(a.registry), families_of(b.registry), families_of(stale.registry)])
        )
    )
    assert merged["ttft_gateway_in_flight", (("upstream", U),)] == 5
    assert merged["ttft_gateway_upstream_healthy", (("upstream", U),)] == 0
    assert merged["ttft_gateway_prerender_cache_bytes", (("model", "m"),)] == 150
    assert merged["ttft_gateway_worker", (("worker", "0"),)] == 2
    assert merged["ttft_gateway_worker", (("worker", "1"),)] == 2


def test_a_snapshot_round_trips_through_json() -> None:
    a = _worker(0)
    a.requests.inc('m"x\n', "chat", "200")
    a.ttft.observe(0.1, "m", "short")
    families = families_of(a.registry)
    again = families_from_json(json.loads(json.dumps([f.to_json() for f in families])))
    assert again == families


@pytest.mark.parametrize(
    "bad",
    [
        "",
        '{"version": 1, "families": [{"name": "x", "type": "counter"',  # cut short
        "[]",
        '{"version": 2, "families": []}',
        '{"version": 1, "families": [{"name": "x", "type": "summary", "help": "", "samples": []}]}',
        '{"version": 1, "families": [{"name": "x", "type": "counter", "help": "", '
        '"samples": [["x_total", {}, "7"]]}]}',
        '{"version": 1, "families": [{"name": "x", "type": "counter", "help": "", '
        '"samples": [["y_total", {}, 7]]}]}',
        '{"version": 1, "families": [{"name": "x", "type": "counter", "help": "", '
        '"samples": [["x_total", {"a": 1}, 7]]}]}',
        "\x00\xff not json",
    ],
)
def test_a_corrupt_or_partial_snapshot_is_ignored_without_failing_the_scrape(
    tmp_path: Path, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = _worker(0), _worker(1)
    a.requests.inc("m", "chat", "200", by=2)
    b.requests.inc("m", "chat", "200", by=5)
    write_snapshot(MetricsShare(str(tmp_path), "w1g2"), families_of(b.registry))
    (tmp_path / "w2g3.json").write_text(bad, errors="surrogateescape")
    (tmp_path / ".w0g1.json.tmp").write_text('{"version": 1, "fami')  # a write cut short
    clock = _Clock()
    shared = SharedMetrics(a, MetricsShare(str(tmp_path), "w0g1"), clock=clock)
    with caplog.at_level(logging.WARNING, logger="ttft.gateway"):
        for _ in range(3):
            assert _samples(shared.render_merged())[REQ] == 7
            clock.now += CACHE_S
    assert len([r for r in caplog.records if "w2g3.json" in r.getMessage()]) == 1  # throttled


def test_a_dead_workers_counters_are_folded_into_retired_and_never_go_back(tmp_path: Path) -> None:
    directory = str(tmp_path)
    dead, live = _worker(0), _worker(1)
    dead.requests.inc("m", "chat", "200", by=3)
    dead.in_flight.track(lambda: 9, U)
    live.requests.inc("m", "chat", "200", by=2)
    write_snapshot(MetricsShare(directory, "w0g1"), families_of(dead.registry))
    before = _samples(render(merge([families_of(live.registry), *read_others(directory, "-")])))
    assert before[REQ] == 5

    fold_retired(directory, "w0g1")
    assert not (tmp_path / "w0g1.json").exists()
    retired = json.loads((tmp_path / RETIRED).read_text())
    assert retired["folded"] == ["w0g1"]
    assert {f["type"] for f in retired["families"]} <= {"counter", "histogram"}  # no gauges

    replacement = _worker(0)  # starts from zero
    replacement.requests.inc("m", "chat", "200")
    write_snapshot(MetricsShare(directory, "w0g3"), families_of(replacement.registry))
    after = _samples(render(merge([families_of(live.registry), *read_others(directory, "-")])))
    assert after[REQ] == 6
    assert ("ttft_gateway_in_flight", (("upstream", U),)) in before
    assert ("ttft_gateway_in_flight", (("upstream", U),)) not in after  # gauges die with it

    # Its replacement dies too: the totals still add up, and folding twice counts once.
    fold_retired(directory, "w0g3")
    fold_retired(directory, "w0g3")
    again = _samples(render(merge([families_of(live.registry), *read_others(directory, "-")])))
    assert again[REQ] == 6


def test_a_snapshot_already_folded_is_not_counted_twice(tmp_path: Path) -> None:
    """A reader between the fold's write of retired.json and its removal of the snapshot."""
    directory = str(tmp_path)
    dead = _worker(0)
    dead.requests.inc("m", "chat", "200", by=3)
    share = MetricsShare(directory, "w0g1")
    write_snapshot(share, families_of(dead.registry))
    content = share.snapshot_path().read_bytes()
    fold_retired(directory, "w0g1")
    share.snapshot_path().write_bytes(content)  # as if not removed yet
    assert _samples(render(merge(read_others(directory, "-"))))[REQ] == 3


def test_a_worker_writes_only_when_something_changed_and_scrapes_are_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    real = metrics_files.write_atomic

    def counting(path: Path, data: dict[str, object]) -> None:
        writes.append(path.name)
        real(path, data)

    monkeypatch.setattr(metrics_files, "write_atomic", counting)
    clock = _Clock()
    own, other = _worker(0), _worker(1)
    shared = SharedMetrics(own, MetricsShare(str(tmp_path), "w0g1"), clock=clock)
    shared.write()
    assert writes == ["w0g1.json"]  # the first tick always writes
    clock.now += 0.5
    shared.write()
    assert writes == ["w0g1.json"]  # nothing moved
    own.requests.inc("m", "chat", "200")
    shared.write()
    assert len(writes) == 2

    first = shared.render_merged()
    assert len(writes) == 2  # the scrape found its own file current
    assert _samples(first)[REQ] == 1
    own.requests.inc("m", "chat", "200")  # not written yet: the next tick would
    clock.now += CACHE_S / 2
    assert shared.render_merged() is first  # cached: the directory holds the same files
    other.requests.inc("m", "chat", "200", by=10)
    write_snapshot(MetricsShare(str(tmp_path), "w1g2"), families_of(other.registry))
    assert _samples(shared.render_merged())[REQ] == 12  # another worker wrote: merged again
    cached = shared.render_merged()
    assert shared.render_merged() is cached
    own.requests.inc("m", "chat", "200")
    clock.now += CACHE_S
    assert _samples(shared.render_merged())[REQ] == 13  # too old: merged again
    on_disk = read_others(str(tmp_path), "-")
    assert _samples(render(merge(on_disk)))[REQ] == 13  # what a scrape showed is on disk


def test_the_share_directory_is_private_and_removed(tmp_path: Path) -> None:
    directory = create_share_dir()
    try:
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    finally:
        remove_share_dir(directory)
    assert not os.path.exists(directory)
