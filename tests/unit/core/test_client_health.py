"""The client-health verdict: each signal crosses its named threshold into suspect or invalid,
the reason carries the numbers and the threshold, and a run is as bad as its worst cell."""

from __future__ import annotations

from ttft.core import client_health as ch
from ttft.core.client_health import assess, overall
from ttft.core.client_verdict import HealthSample
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.core.summary import BenchSummary, summarize_run

MS = 1_000_000


def _sample(**fields: object) -> HealthSample:
    base: dict[str, object] = {
        "worker": "main",
        "wall_ns": 1_000 * MS,
        "cpu_ns": 200 * MS,
        "loop_lag_p99_ns": 1 * MS,
        "loop_lag_max_ns": 2 * MS,
        "loop_samples": 200,
    }
    base.update(fields)
    return HealthSample(**base)  # type: ignore[arg-type]


def _records(n: int, gap_ms: float = 10.0, lag_ms: float = 0.5) -> list[RequestRecord]:
    out = []
    for i in range(n):
        scheduled = int(i * gap_ms * MS)
        record = RequestRecord(index=i, cell="rate=100/s", scheduled_ns=scheduled)
        record.sent_ns = scheduled + int(lag_ms * MS)
        record.first_content_ns = record.sent_ns + 20 * MS
        record.done_ns = record.first_content_ns
        out.append(record)
    return out


def test_an_easy_run_is_healthy_and_says_which_numbers_it_checked() -> None:
    verdict = assess([_sample()], _records(50), open_loop_rate=100.0)
    assert verdict.level == ch.HEALTHY
    assert "loop lag p99 1.0 ms" in verdict.reason and "CPU 20%" in verdict.reason
    assert "delivered 100% of schedule" in verdict.reason
    assert verdict.fix == "none needed"


def test_loop_lag_over_the_threshold_is_suspect_and_names_the_threshold_and_fix() -> None:
    verdict = assess([_sample(loop_lag_p99_ns=25 * MS, cpu_ns=600 * MS)], _records(20))
    assert verdict.level == ch.SUSPECT
    assert "25.0 ms" in verdict.reason and "suspect above 10.0 ms" in verdict.reason
    assert "--workers" in verdict.fix


def test_a_lagging_loop_in_an_idle_client_blames_the_neighbours() -> None:
    """20% CPU and a late loop: other processes held the CPU, more workers would not help."""
    verdict = assess([_sample(loop_lag_p99_ns=25 * MS)], _records(20))
    assert verdict.level == ch.SUSPECT
    assert "used 20% of a core" in verdict.reason
    assert "taskset" in verdict.fix and "--workers" not in verdict.fix


def test_kernel_stamped_reads_give_loop_lag_a_wider_margin() -> None:
    """With every read stamped by the kernel, a late loop moves no rung by itself: 20 ms is
    tolerated, 60 ms is still suspect."""
    assert assess([_sample(loop_lag_p99_ns=20 * MS, kernel_stamped=True)], _records(20)).trusted
    late = assess([_sample(loop_lag_p99_ns=60 * MS, kernel_stamped=True)], _records(20))
    assert late.level == ch.SUSPECT and "reads kernel-stamped" in late.reason


def test_loop_lag_far_over_is_invalid() -> None:
    verdict = assess([_sample(loop_lag_p99_ns=150 * MS)], _records(20))
    assert verdict.level == ch.INVALID


def test_a_saturated_core_is_suspect() -> None:
    verdict = assess([_sample(cpu_ns=950 * MS)], _records(20))
    assert verdict.level == ch.SUSPECT
    assert "client CPU 95%" in verdict.reason


def test_the_worst_worker_decides_and_is_named() -> None:
    samples = [_sample(worker="w0"), _sample(worker="w1", loop_lag_p99_ns=30 * MS)]
    verdict = assess(samples, _records(20))
    assert verdict.level == ch.SUSPECT
    assert "(worker w1)" in verdict.reason
    assert [w.worker for w in verdict.workers] == ["w0", "w1"]


def test_open_loop_schedule_lag_and_short_delivery_are_judged() -> None:
    late = assess([_sample()], _records(50, lag_ms=30.0), open_loop_rate=100.0)
    assert late.level == ch.SUSPECT and "schedule lag" in late.reason
    # Sends that drift ever later: the last goes out long after it was due.
    drifting = _records(50)
    for i, record in enumerate(drifting):
        record.sent_ns = (record.scheduled_ns or 0) + i * 5 * MS
    short = assess([_sample()], drifting, open_loop_rate=100.0)
    assert short.level == ch.INVALID
    assert "delivered" in short.reason and "invalid below 80%" in short.reason


def test_a_max_in_flight_cap_is_not_taken_for_a_lagging_client() -> None:
    verdict = assess([_sample()], _records(50, lag_ms=300.0), open_loop_rate=100.0, capped=True)
    assert verdict.level == ch.HEALTHY
    assert "not judged" in verdict.reason


def test_closed_loop_cells_skip_the_schedule_checks() -> None:
    verdict = assess([_sample()], _records(50, lag_ms=300.0), open_loop_rate=None)
    assert verdict.level == ch.HEALTHY
    assert not [c for c in verdict.checks if c.name in ("schedule_lag", "delivered_load")]


def test_running_out_of_descriptors_or_ports_makes_the_run_invalid() -> None:
    records = _records(20)
    for record, text in zip(records, ch.SOCKET_ERROR_TEXTS, strict=False):
        record.error = ErrorInfo("connect", f"could not connect to 127.0.0.1:80: {text}")
    verdict = assess([_sample()], records)
    assert verdict.level == ch.INVALID
    assert "ulimit -n" in verdict.fix


def test_a_lost_worker_is_suspect_and_counted() -> None:
    records = _records(20)
    for record in records[:3]:
        record.error = ErrorInfo(ch.WORKER_LOST, "client worker w1 was lost")
    verdict = assess([_sample()], records)
    assert verdict.level == ch.SUSPECT
    assert "3 of its requests" in verdict.reason


def test_nothing_measured_is_never_called_healthy() -> None:
    assert assess([], []).level == ch.SUSPECT


def test_read_gaps_count_only_when_kernel_stamps_existed() -> None:
    unstamped = assess([_sample(read_gap_p99_ns=30 * MS, reads=0)], _records(20))
    assert unstamped.level == ch.HEALTHY
    stamped = assess([_sample(read_gap_p99_ns=30 * MS, reads=400)], _records(20))
    assert stamped.level == ch.SUSPECT and "over 400 reads" in stamped.reason


def test_the_run_is_as_bad_as_its_worst_cell() -> None:
    good = assess([_sample()], _records(20))
    bad = assess([_sample(loop_lag_p99_ns=40 * MS)], _records(20))
    run = overall({"a": good, "b": bad})
    assert run.level == ch.SUSPECT and run.reason.startswith("b: ")
    assert overall({"a": good}).level == ch.HEALTHY


def test_verdicts_survive_the_summary_json_round_trip() -> None:
    summary = summarize_run(_records(20))
    verdict = assess([_sample(loop_lag_p99_ns=40 * MS)], _records(20))
    summary.cells[0].client_health = verdict
    summary.client_health = overall({"rate=100/s": verdict})
    again = BenchSummary.from_dict(summary.to_dict())
    assert again.cells[0].client_health == verdict
    assert again.client_health is not None and again.client_health.level == ch.SUSPECT
    assert again.to_dict()["cells"][0]["client_health"]["workers"][0]["cpu_share"] == 0.2


def test_open_loop_schedule_lag_names_the_worst_worker() -> None:
    samples = [
        _sample(worker="w0", schedule_lag_p99_ns=1 * MS),
        _sample(worker="w1", schedule_lag_p99_ns=300 * MS),
    ]
    verdict = assess(samples, _records(50, lag_ms=150.0), open_loop_rate=100.0)
    assert verdict.level == ch.INVALID
    assert "worst worker w1: p99 300.0 ms" in verdict.reason
