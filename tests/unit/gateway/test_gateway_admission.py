"""Admission: slots, two lanes, priorities, bounded queue, timeouts; nothing leaks a slot."""

from __future__ import annotations

import asyncio

import pytest

from ttft.gateway.admission.lanes import LONG, SHORT, Admission, Shed, lane_for


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _grant_order(adm: Admission, waiting: list[tuple[str, str, int]]) -> list[str]:
    """Fill the slot, queue ``(name, lane, priority)`` in order, then free slots one by one."""
    assert await adm.acquire(SHORT) == 0
    order: list[str] = []
    holding = [SHORT]  # the lanes of the granted requests, oldest first

    async def wait(name: str, lane: str, priority: int) -> None:
        await adm.acquire(lane, priority)
        order.append(name)
        holding.append(lane)

    tasks = []
    for name, lane, priority in waiting:
        tasks.append(asyncio.create_task(wait(name, lane, priority)))
        await asyncio.sleep(0)
    for _ in waiting:
        adm.release(holding.pop(0))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    return order


def test_a_free_slot_is_taken_without_waiting() -> None:
    async def scenario() -> tuple[int, int]:
        adm = Admission(2, 4)
        waited = await adm.acquire(SHORT)
        return waited, adm.in_flight

    assert run(scenario()) == (0, 1)


def test_short_requests_overtake_long_ones_that_queued_before_them() -> None:
    adm = Admission(1, 8)
    order = run(_grant_order(adm, [("L1", LONG, 0), ("L2", LONG, 0), ("S1", SHORT, 0)]))
    assert order == ["S1", "L1", "L2"]


def test_without_lanes_the_queue_is_first_come_first_served() -> None:
    adm = Admission(1, 8, split_lanes=False)
    order = run(_grant_order(adm, [("L1", LONG, 0), ("L2", LONG, 0), ("S1", SHORT, 0)]))
    assert order == ["L1", "L2", "S1"]


def test_a_waiting_long_request_gets_a_turn_after_a_burst_of_short_ones() -> None:
    adm = Admission(1, 16, short_burst=2)
    waiting = [("L1", LONG, 0)] + [(f"S{i}", SHORT, 0) for i in range(5)]
    order = run(_grant_order(adm, waiting))
    assert order == ["S0", "S1", "L1", "S2", "S3", "S4"]


def test_a_lower_priority_number_goes_first_within_a_lane() -> None:
    adm = Admission(1, 8)
    order = run(_grant_order(adm, [("a", SHORT, 5), ("b", SHORT, -1), ("c", SHORT, 5)]))
    assert order == ["b", "a", "c"]


def test_a_full_queue_refuses_at_once() -> None:
    async def scenario() -> str:
        adm = Admission(1, 1)
        await adm.acquire(SHORT)
        waiter = asyncio.create_task(adm.acquire(SHORT))
        await asyncio.sleep(0)
        try:
            await adm.acquire(LONG)
        except Shed as exc:
            waiter.cancel()
            return exc.reason
        return "admitted"

    assert run(scenario()) == "queue_full"


def test_a_request_that_waits_too_long_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> tuple[str, int, int]:
        adm = Admission(1, 4)
        await adm.acquire(SHORT)
        with pytest.raises(Shed) as info:
            await adm.acquire(SHORT, timeout_s=0.02)
        return info.value.reason, adm.waiting, adm.in_flight

    assert run(scenario()) == ("queue_timeout", 0, 1)


def test_a_cancelled_waiter_leaves_no_trace_and_the_next_one_is_served() -> None:
    async def scenario() -> tuple[int, int, bool]:
        adm = Admission(1, 4)
        await adm.acquire(SHORT)
        gone = asyncio.create_task(adm.acquire(SHORT))
        stays = asyncio.create_task(adm.acquire(SHORT))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        adm.release(SHORT)
        await stays
        return adm.waiting, adm.in_flight, gone.cancelled()

    assert run(scenario()) == (0, 1, True)


def test_a_slot_granted_to_a_waiter_cancelled_at_that_instant_is_passed_on() -> None:
    async def scenario() -> tuple[int, int]:
        adm = Admission(1, 4)
        await adm.acquire(SHORT)
        first = asyncio.create_task(adm.acquire(SHORT))
        second = asyncio.create_task(adm.acquire(SHORT))
        await asyncio.sleep(0)
        adm.release(SHORT)  # grants ``first``...
        first.cancel()  # ...which is cancelled before it runs again
        await asyncio.gather(first, return_exceptions=True)
        await second
        return adm.in_flight, adm.waiting

    assert run(scenario()) == (1, 0)


def test_many_timeouts_do_not_grow_the_queue_beyond_its_bound() -> None:
    async def scenario() -> int:
        adm = Admission(1, 4)
        await adm.acquire(SHORT)
        for _ in range(50):
            results = await asyncio.gather(
                *(adm.acquire(SHORT, timeout_s=0.001) for _ in range(4)), return_exceptions=True
            )
            assert all(isinstance(r, Shed) for r in results)
        return max(len(lane) for lane in adm._lanes.values())

    assert run(scenario()) <= 2 * 4 + 16 + 4


def test_lanes_split_at_the_threshold() -> None:
    assert lane_for(1024, 1024) == SHORT
    assert lane_for(1025, 1024) == LONG


def test_long_requests_leave_the_reserved_slot_to_a_short_one() -> None:
    """Saturating long traffic: the short request starts at once, not after a long prefill."""

    async def scenario() -> tuple[int, int, int, int]:
        adm = Admission(2, 8, long_reserve=1)
        assert await adm.acquire(LONG) == 0
        held_back = asyncio.create_task(adm.acquire(LONG))
        await asyncio.sleep(0)
        short_waited = await asyncio.wait_for(adm.acquire(SHORT), 0.5)
        state = adm.in_flight, adm.long_in_flight, adm.queued[LONG]
        held_back.cancel()
        return (short_waited, *state)

    assert run(scenario()) == (0, 2, 1, 1)


def test_a_held_back_long_request_starts_when_a_long_slot_frees() -> None:
    async def scenario() -> tuple[int, int, int]:
        adm = Admission(3, 8, long_reserve=1)
        await adm.acquire(LONG)
        await adm.acquire(LONG)
        third = asyncio.create_task(adm.acquire(LONG))
        await asyncio.sleep(0)
        assert not third.done() and adm.in_flight == 2  # the third slot stays reserved
        adm.release(LONG)
        await third
        return adm.in_flight, adm.long_in_flight, adm.waiting

    assert run(scenario()) == (2, 2, 0)


def test_a_freed_short_slot_skips_long_requests_at_their_cap() -> None:
    async def scenario() -> list[str]:
        adm = Admission(2, 8, long_reserve=1)
        await adm.acquire(SHORT)
        await adm.acquire(LONG)
        order: list[str] = []

        async def wait(name: str, lane: str) -> None:
            await adm.acquire(lane)
            order.append(name)

        tasks = [asyncio.create_task(wait("L", LONG)), asyncio.create_task(wait("S", SHORT))]
        await asyncio.sleep(0)
        adm.release(SHORT)  # the long lane is at its cap of 1: the short one takes the slot
        await asyncio.sleep(0)
        adm.release(LONG)
        await asyncio.gather(*tasks)
        return order

    assert run(scenario()) == ["S", "L"]


def test_the_reserve_never_shuts_long_requests_out() -> None:
    assert Admission(1, 4, long_reserve=1).long_cap == 1
    assert Admission(4, 4, long_reserve=9).long_cap == 1
    assert Admission(4, 4, long_reserve=1).long_cap == 3
    assert Admission(4, 4, split_lanes=False, long_reserve=1).long_cap == 4


def test_one_client_holds_only_its_share_of_the_slots_and_others_pass_its_queued_requests() -> None:
    """Four slow streams from one key held every slot of a replica and other keys waited 30 s
    (issue 28): with client_slots, a key's next request waits while another key's starts."""

    async def scenario() -> tuple[list[str], int]:
        adm = Admission(4, 16, client_slots=None)  # None: half the slots
        assert adm.client_slots == 2
        for _ in range(2):
            assert await adm.acquire(SHORT, client="key:a") == 0
        started: list[str] = []

        async def wait(name: str, client: str) -> None:
            await adm.acquire(SHORT, client=client, timeout_s=5)
            started.append(name)

        third = asyncio.create_task(wait("a3", "key:a"))
        await asyncio.sleep(0)
        other = asyncio.create_task(wait("b1", "key:b"))
        await asyncio.sleep(0.01)
        assert started == ["b1"]  # a3 waits: its key holds 2 of 4 slots already
        adm.release(SHORT, "key:a")
        await asyncio.gather(third, other)
        return started, adm.in_flight

    started, in_flight = run(scenario())  # type: ignore[misc]
    assert started == ["b1", "a3"] and in_flight == 3


def test_without_a_client_share_one_client_may_take_every_slot() -> None:
    async def scenario() -> int:
        adm = Admission(4, 16)  # the default: 0, no share (a gateway without keys)
        for _ in range(4):
            assert await adm.acquire(SHORT, client="addr:127.0.0.1") == 0
        return adm.in_flight

    assert run(scenario()) == 4
