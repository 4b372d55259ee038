"""Several workers: each holds its part of a split limit, and the parts add up to the limit."""

from __future__ import annotations

import dataclasses

import pytest

from ttft.core.errors import TtftError
from ttft.gateway.admission.lanes import Admission
from ttft.gateway.admission.partition import Partition
from ttft.gateway.config import auto_workers, from_mapping
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.runtime import build_runtime


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("total", [0, 1, 2, 3, 5, 64, 65])
def test_the_parts_of_every_worker_add_up_to_the_total(count: int, total: int) -> None:
    for offset in range(3):
        parts = [Partition(i, count).part(total, offset) for i in range(count)]
        assert sum(parts) == total
        assert max(parts) - min(parts) <= 1


def test_left_over_slots_rotate_with_the_replica_so_each_worker_gets_its_fair_total() -> None:
    # Two replicas of 3 slots, 2 workers: 2+1 and 1+2, not 2+2 and 1+1.
    totals = [sum(Partition(i, 2).part(3, replica) for replica in (0, 1)) for i in (0, 1)]
    assert totals == [3, 3]


def test_a_per_client_limit_keeps_none_and_zero_and_is_at_least_one() -> None:
    part = Partition(1, 4)
    assert part.limit(None) is None and part.limit(0) == 0
    assert part.limit(2) == 1  # 2 over 4 workers: worker 1 would get 0, a key must be servable
    assert [Partition(i, 2).limit(5) for i in (0, 1)] == [3, 2]


def test_a_worker_builds_its_part_of_each_replicas_queue_and_of_a_keys_share() -> None:
    """The slots themselves are shared (test_gateway_shared_slots.py); queues are not."""
    raw = {
        "model": [{"name": "m", "upstreams": ["http://127.0.0.1:1", "http://127.0.0.1:2"]}],
        "admission": {"max_in_flight": 3, "queue_size": 5, "max_slots_per_client": 2},
        "workers": 2,
    }
    config = from_mapping(raw)
    queues = []
    for index in (0, 1):
        worker = dataclasses.replace(config, partition=Partition(index, 2))
        runtime = build_runtime(worker, worker.models[0], GatewayMetrics())
        queues.append([r.admission.queue_size for r in runtime.replicas])
        assert all(r.admission.client_slots == 1 for r in runtime.replicas)
    assert queues == [[3, 2], [2, 3]]
    assert [sum(q) for q in zip(*queues, strict=True)] == [5, 5]


def test_a_worker_with_no_slot_of_a_replica_has_no_room_there() -> None:
    assert not Admission(0, 8).has_room  # no waiting for a slot that never comes
    assert Admission(1, 0).has_room


def test_workers_is_checked_in_the_file() -> None:
    base = {"model": [{"name": "m", "upstreams": ["http://127.0.0.1:1"]}]}
    assert from_mapping(base).workers == auto_workers()  # one per core, by default
    assert from_mapping({**base, "workers": "auto"}).workers == auto_workers()
    assert from_mapping({**base, "workers": 3}).workers == 3
    with pytest.raises(TtftError, match="workers"):
        from_mapping({**base, "workers": 0})
    with pytest.raises(ValueError, match="worker 2 of 2"):
        Partition(2, 2)
