"""The runner decides when to send; these pin concurrency, schedules and never losing a record."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path

import pytest

from ttft.core.records import RequestRecord, RunAnchor
from ttft.load.runner import CellPlan, Runner, max_overlap
from ttft.load.sink import JsonlSink, read_results
from ttft.workload.arrival import ClosedLoop, OpenLoop
from ttft.workload.requests import WorkItem


class SleepSender:
    """Takes ``seconds`` per request and stamps sent/first/done on the run's clock."""

    def __init__(self, anchor: RunAnchor, seconds: float) -> None:
        self.anchor = anchor
        self.seconds = seconds

    def _now(self) -> int:
        return time.perf_counter_ns() - self.anchor.monotonic_ns

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        record.sent_ns = self._now()
        await asyncio.sleep(self.seconds)
        record.first_content_ns = self._now()
        record.done_ns = self._now()


def _items(n: int) -> list[WorkItem]:
    return [WorkItem({"messages": [], "max_tokens": 1}) for _ in range(n)]


def _run(plan: CellPlan, seconds: float = 0.05) -> list[RequestRecord]:
    anchor = RunAnchor.now()
    seen: list[RequestRecord] = []
    runner = Runner(SleepSender(anchor, seconds), anchor, seen.append)
    out = asyncio.run(runner.run_cell(plan))
    assert len(seen) == len(out)
    return out


def test_closed_loop_keeps_exactly_the_concurrency_in_flight() -> None:
    records = _run(CellPlan("c=4", _items(12), ClosedLoop(4)))
    assert len(records) == 12
    assert max_overlap(records) == 4


def test_closed_loop_never_exceeds_the_number_of_items() -> None:
    records = _run(CellPlan("c=32", _items(3), ClosedLoop(32)))
    assert max_overlap(records) == 3


def test_open_loop_sends_on_the_precomputed_schedule() -> None:
    """A constant 50/s schedule: sends 20 ms apart whatever the server's latency (100 ms)."""
    plan = CellPlan("rate", _items(6), OpenLoop(50.0, distribution="constant"))
    records = sorted(_run(plan, seconds=0.1), key=lambda r: r.scheduled_ns or 0)
    gaps = [(b.scheduled_ns or 0) - (a.scheduled_ns or 0) for a, b in itertools.pairwise(records)]
    assert all(abs(g - 20_000_000) < 1_000 for g in gaps)
    assert max_overlap(records) >= 4  # arrivals did not wait for answers


def test_open_loop_cap_shows_client_waiting_instead_of_hiding_it() -> None:
    """With max_in_flight=1, later requests wait in the client: sent - scheduled grows."""
    plan = CellPlan("rate", _items(4), OpenLoop(100.0, distribution="constant"), max_in_flight=1)
    records = sorted(_run(plan, seconds=0.05), key=lambda r: r.index)
    waits = [(r.sent_ns or 0) - (r.scheduled_ns or 0) for r in records]
    assert waits[-1] > 80_000_000  # the 4th waited for three 50 ms requests minus its 30 ms offset


def test_poisson_schedule_is_reproducible_and_has_the_asked_rate() -> None:
    a = OpenLoop(10.0, seed=7).schedule_ns(2000)
    assert a == OpenLoop(10.0, seed=7).schedule_ns(2000)
    mean_gap_s = a[-1] / 1999 / 1e9
    assert 0.09 < mean_gap_s < 0.11


def test_gamma_burstiness_below_one_is_burstier_than_poisson() -> None:
    def cv(offsets: list[int]) -> float:
        gaps = [b - a for a, b in itertools.pairwise(offsets)]
        mean = sum(gaps) / len(gaps)
        var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
        return float(var**0.5 / mean)

    bursty = OpenLoop(10.0, burstiness=0.25, distribution="gamma", seed=1).schedule_ns(3000)
    poisson = OpenLoop(10.0, seed=1).schedule_ns(3000)
    assert cv(bursty) > 1.5 * cv(poisson)


def test_cancelled_run_writes_in_flight_requests_as_cancelled(tmp_path: Path) -> None:
    """Ctrl-C mid-cell: finished records are on disk, in-flight ones are marked, none lost."""
    out = tmp_path / "run.jsonl"
    anchor = RunAnchor.now()

    async def main() -> None:
        with JsonlSink(out) as sink:
            runner = Runner(SleepSender(anchor, 0.2), anchor, sink.write_record)
            task = asyncio.create_task(runner.run_cell(CellPlan("c", _items(10), ClosedLoop(2))))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    loaded = read_results(out)
    kinds = [r.error.kind if r.error else "ok" for r in loaded.records]
    assert kinds.count("ok") == 2 and kinds.count("cancelled") == 2


def test_a_half_written_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    rec = RequestRecord(index=0, sent_ns=1, first_content_ns=5)
    out.write_text(
        json.dumps({"type": "run", "schema": "x"})
        + "\n"
        + json.dumps({"type": "request", "record": rec.to_dict()})
        + "\n"
        + '{"type": "request", "rec'
    )
    loaded = read_results(out)
    assert len(loaded.records) == 1 and loaded.damaged_lines == 1 and not loaded.finished


def test_a_target_url_that_is_not_http_is_a_clear_error() -> None:
    from ttft.core.errors import TtftError
    from ttft.core.target import Target

    for url in ("notaurl", "ftp://host/x", "http://"):
        with pytest.raises(TtftError, match="is not an http"):
            Target(url)


def test_requests_waiting_for_a_max_in_flight_slot_are_recorded_when_the_run_stops(
    tmp_path: Path,
) -> None:
    """Open loop with a cap of 1: a stop mid-cell records the one that finished, the one in
    flight and the ones still waiting for the slot (never sent), not just the first two."""
    out = tmp_path / "run.jsonl"
    anchor = RunAnchor.now()

    async def main() -> None:
        with JsonlSink(out) as sink:
            runner = Runner(SleepSender(anchor, 0.2), anchor, sink.write_record)
            plan = CellPlan("c", _items(6), OpenLoop(200.0, distribution="constant"))
            plan.max_in_flight = 1
            task = asyncio.create_task(runner.run_cell(plan))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    records = read_results(out).records
    kinds = [r.error.kind if r.error else "ok" for r in records]
    assert len(records) == 6
    assert kinds.count("ok") == 1 and kinds.count("cancelled") == 5
    assert sum(1 for r in records if r.sent_ns is None) == 4  # waited for the slot, never sent
