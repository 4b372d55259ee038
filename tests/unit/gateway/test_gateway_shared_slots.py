"""Several workers share a replica's slots through one mapped table (``admission/slot_table.py``).

Each test opens the table once per simulated worker, as each worker process does: a lock
belongs to an open file, so two opens in one process exclude each other like two processes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ttft.gateway.admission.lane_rules import LaneRules
from ttft.gateway.admission.lanes import LONG, SHORT, Admission
from ttft.gateway.admission.partition import Partition
from ttft.gateway.admission.shared_slots import SharedPins, SharedSlots
from ttft.gateway.admission.slot_host import SlotHost
from ttft.gateway.admission.slot_table import SlotShare, SlotTable
from ttft.gateway.config import GatewayConfig, from_mapping
from ttft.gateway.discover import apply_slots
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.runtime import build_runtime


def _config(upstreams: int = 1, **extra: object) -> GatewayConfig:
    urls = [f"http://127.0.0.1:{9000 + i}" for i in range(upstreams)]
    return from_mapping({"model": [{"name": "m", "upstreams": urls}], "workers": 2, **extra})


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SlotHost]:
    slot_host = SlotHost(str(tmp_path), 2)
    yield slot_host
    slot_host.close()


Worker = tuple[SlotShare, SlotTable]


def _two_workers(host: SlotHost) -> tuple[Worker, Worker]:
    """Two workers' rows of one replica's table, each with the table opened by itself."""
    layout = _config().slot_layout()
    shares = host.claim(layout), host.claim(layout)
    return (shares[0], SlotTable.open(shares[0].path)), (shares[1], SlotTable.open(shares[1].path))


def _admission(share: SlotShare, table: SlotTable, cap: int, index: int) -> Admission:
    admission = Admission(cap, 8, long_reserve=1)
    admission.shared = SharedSlots(table, share, 0, Partition(index, 2))
    return admission


def test_two_workers_together_never_start_more_than_the_replicas_cap(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _admission(a_share, a_table, 3, 0), _admission(b_share, b_table, 3, 1)
    assert a.try_start(SHORT) and a.try_start(SHORT)
    assert b.try_start(SHORT)  # more than any fixed part of 3 would allow a worker: shared
    assert not b.try_start(SHORT) and not a.try_start(SHORT)
    assert (a.in_flight, b.in_flight, a.busy, b.busy) == (2, 1, 3, 3)
    a.release(SHORT)
    assert b.try_start(SHORT)
    assert a.busy == 3


def test_long_requests_keep_out_of_the_short_lanes_reserve_across_workers(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _admission(a_share, a_table, 3, 0), _admission(b_share, b_table, 3, 1)
    assert a.try_start(LONG) and b.try_start(LONG)
    assert not a.try_start(LONG) and not b.try_start(LONG)  # 2 of 3: one kept for short ones
    assert b.try_start(SHORT)


def test_a_release_in_one_worker_wakes_the_other_workers_waiter(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _admission(a_share, a_table, 1, 0), _admission(b_share, b_table, 1, 1)
    assert a.try_start(SHORT)

    async def scenario() -> None:
        waiter = asyncio.ensure_future(b.acquire(SHORT, timeout_s=5))
        await asyncio.sleep(0)
        assert not waiter.done() and b.waiting == 1
        a.release(SHORT)
        assert os.read(b_share.wake_read_fd, 16)  # the supervisor's pipe: worker b is told
        b.dispatch()  # what the worker does when its wake pipe is readable
        assert await waiter >= 0

    asyncio.run(scenario())
    assert (a.busy, b.in_flight, b.waiting) == (1, 1, 0)


def test_no_wake_up_without_waiters_in_another_worker(host: SlotHost) -> None:
    (a_share, a_table), (b_share, _) = _two_workers(host)
    a = _admission(a_share, a_table, 1, 0)
    assert a.try_start(SHORT)
    a.release(SHORT)
    with pytest.raises(BlockingIOError):
        os.read(b_share.wake_read_fd, 16)


def test_a_dead_workers_row_is_cleared_and_its_waiting_peers_woken(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _admission(a_share, a_table, 2, 0), _admission(b_share, b_table, 2, 1)
    pins = SharedPins(a_table, a_share.row, 0, 2)
    assert a.try_start(SHORT) and a.try_start(SHORT) and pins.take(SHORT) == 0
    b.enqueue(SHORT, 0, "", asyncio.Future(loop=asyncio.new_event_loop()))  # b waits now
    host.release(a_share)  # worker a died: its row is cleared by the supervisor
    assert os.read(b_share.wake_read_fd, 16)
    assert b.busy == 0 and SharedPins(b_table, b_share.row, 0, 2).free == 2


def test_pinned_slots_are_never_given_to_two_workers(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a = SharedPins(a_table, a_share.row, 0, 4, reserve=1)
    b = SharedPins(b_table, b_share.row, 0, 4, reserve=1)
    assert a.take(SHORT) == 0 and b.take(SHORT) == 1  # the lowest free slot for short ones
    assert b.take(LONG, key=7) == 3 and a.take(LONG, key=8) == 2  # the highest for long ones
    assert a.take(SHORT) is None and a.free == 0
    b.give_back(2)  # not b's: ignored
    assert a.free == 0
    b.give_back(3)
    assert a.take(LONG, key=7) == 3


def test_a_long_request_goes_back_to_the_slot_that_served_its_prefix(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a = SharedPins(a_table, a_share.row, 0, 4, reserve=1)
    b = SharedPins(b_table, b_share.row, 0, 4, reserve=1)
    key = -(2**70)  # any int: stored masked to 63 bits, compared the same way
    assert a.take(LONG, key) == 3 and a.take(LONG, 1) == 2
    a.give_back(3)
    a.give_back(2)
    assert b.take(LONG, key) == 3


def test_the_same_replicas_share_a_table_and_new_ones_get_a_new_one(host: SlotHost) -> None:
    one = host.claim(_config().slot_layout())
    same = host.claim(dataclasses.replace(_config(), api_keys=("sk-a",)).slot_layout())
    other = host.claim(_config(upstreams=2).slot_layout())
    assert one.path == same.path != other.path
    assert len({one.row, same.row, other.row}) == 3
    for share in (one, same, other):
        host.release(share)
    assert host.free_rows == host.rows


def test_every_row_held_is_an_error_not_a_shared_row(host: SlotHost) -> None:
    config = _config()
    for _ in range(host.rows):
        host.claim(config.slot_layout())
    with pytest.raises(LookupError, match="draining"):
        host.claim(config.slot_layout())


def test_a_worker_with_the_table_admits_against_the_whole_cap(host: SlotHost) -> None:
    config = _config(upstreams=2, admission={"max_in_flight": 3, "queue_size": 5})
    caps, queues, parts = [], [], []
    for index in (0, 1):
        share = host.claim(config.slot_layout())
        worker = dataclasses.replace(config, partition=Partition(index, 2), slot_share=share)
        runtime = build_runtime(
            worker, worker.models[0], GatewayMetrics(), SlotTable.open(share.path)
        )
        caps.append([r.admission.max_in_flight for r in runtime.replicas])
        queues.append([r.admission.queue_size for r in runtime.replicas])
        parts.append([r.admission.own_part for r in runtime.replicas])
        assert all(r.admission.shared is not None for r in runtime.replicas)
    assert caps == [[3, 3], [3, 3]]  # counted together in the table
    assert [sum(q) for q in zip(*queues, strict=True)] == [5, 5]  # each worker's own queue
    # Per-client defaults follow each worker's part of the slots, and the parts add up.
    assert parts == [[2, 1], [1, 2]]


def test_slots_learned_from_the_engine_are_pinned_through_the_table(host: SlotHost) -> None:
    config = _config()
    pins = []
    for index in (0, 1):
        share = host.claim(config.slot_layout())
        worker = dataclasses.replace(config, partition=Partition(index, 2), slot_share=share)
        table = SlotTable.open(share.path)
        runtime = build_runtime(worker, worker.models[0], GatewayMetrics(), table)
        replica = runtime.replicas[0]
        apply_slots(replica, 4, None, pin=True, partition=Partition(index, 2))
        assert replica.admission.max_in_flight == 4
        assert isinstance(replica.slot_pins, SharedPins)
        pins.append(replica.slot_pins)
    assert [pins[0].take(SHORT), pins[1].take(SHORT)] == [0, 1]


def test_without_the_table_partitioned_workers_pin_nothing() -> None:
    config = _config()
    runtime = build_runtime(config, config.models[0], GatewayMetrics())
    replica = runtime.replicas[0]
    apply_slots(replica, 4, None, pin=True, partition=Partition(1, 2))
    assert replica.slot_pins is None


def _rules(share: SlotShare, table: SlotTable, cap: int, index: int) -> LaneRules[str]:
    rules: LaneRules[str] = LaneRules(cap, 8, long_reserve=1)
    rules.shared = SharedSlots(table, share, 0, Partition(index, 2))
    return rules


def test_a_freed_slot_goes_to_the_request_that_waited_longest_in_any_worker(
    host: SlotHost,
) -> None:
    """Without this, the worker that released a slot gave it to its own waiters every time,
    and the other worker's clients waited out their queue timeout (measured: 3 clients with
    39 answers each in 12 s, 3 with one answer and one 503)."""
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _rules(a_share, a_table, 1, 0), _rules(b_share, b_table, 1, 1)
    assert a.try_start(SHORT)
    b.enqueue(SHORT, 0, "", "b-first")  # arrived first, in worker b
    a.enqueue(SHORT, 0, "", "a-second")
    assert not a.try_start(SHORT)  # a newcomer does not pass them either
    assert a.free(SHORT) == [] and a.yielded  # a leaves the slot to b's older request
    assert [t.item for t in b.grant()] == ["b-first"]
    assert [t.item for t in b.free(SHORT)] == []  # b has none waiting: a's is the oldest
    assert [t.item for t in a.grant()] == ["a-second"]


def test_a_yield_ends_when_the_other_worker_does_not_take_the_slot(host: SlotHost) -> None:
    """A worker busy elsewhere (its loop stalled) must not leave the slot idle: after
    ``YIELD_S`` the yielding worker takes it regardless (``grant(fair=False)``)."""
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _rules(a_share, a_table, 1, 0), _rules(b_share, b_table, 1, 1)
    assert a.try_start(SHORT)
    b.enqueue(SHORT, 0, "", "b-first")  # b never looks (no grant called)
    a.enqueue(SHORT, 0, "", "a-next")
    assert a.free(SHORT) == [] and a.yielded
    assert [t.item for t in a.grant(fair=False)] == ["a-next"]


def test_a_client_queued_beyond_its_share_does_not_make_other_workers_yield(
    host: SlotHost,
) -> None:
    """Its tickets cannot start, so they are not published as the oldest waiting: otherwise
    one key queueing more than its share in one worker taxed every start elsewhere."""
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _rules(a_share, a_table, 2, 0), _rules(b_share, b_table, 2, 1)
    b.client_slots_setting = 1
    assert b.try_start(SHORT, "greedy")
    b.enqueue(SHORT, 0, "greedy", "held-back")  # at its share: cannot start
    assert a.try_start(SHORT) and not a.yielded
    b.free(SHORT, "greedy")  # greedy's share frees: its ticket starts at once
    assert b.in_flight == 1 and b.waiting == 0


def test_a_worker_that_yields_retries_by_itself_after_the_yield(host: SlotHost) -> None:
    (a_share, a_table), (b_share, b_table) = _two_workers(host)
    a, b = _admission(a_share, a_table, 1, 0), _admission(b_share, b_table, 1, 1)

    async def scenario() -> None:
        assert a.try_start(SHORT)
        loop = asyncio.get_running_loop()
        b.enqueue(SHORT, 0, "", loop.create_future())  # older; b's worker never looks
        waiter = asyncio.ensure_future(a.acquire(SHORT, timeout_s=5))
        await asyncio.sleep(0)
        a.release(SHORT)  # the slot is left to b's older request...
        assert a.yielded and not waiter.done()
        await asyncio.wait_for(waiter, 1.0)  # ...and taken here YIELD_S later

    asyncio.run(scenario())
    assert (a.in_flight, b.in_flight) == (1, 0)
