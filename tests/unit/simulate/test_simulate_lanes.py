"""The simulator's gateway lanes are the gateway's own: the reserve, the short burst and the
shedding, and the same decisions as ``ttft gateway``'s Admission on the same events."""

from __future__ import annotations

import asyncio
import random
import tomllib

import pytest

from ttft.core.errors import TtftError
from ttft.core.slo import parse_slos
from ttft.gateway.admission.lanes import LONG, SHORT, Admission, Shed
from ttft.gateway.config import from_mapping
from ttft.gateway.routing import Router
from ttft.simulate.engine import SimOutcome
from ttft.simulate.fleet import simulate
from ttft.simulate.gateway_sim import GatewayState, Lanes, shed_counts
from ttft.simulate.live_fleet import gateway_toml
from ttft.simulate.model import Calibration, CostModel, EngineSettings, FitReport
from ttft.simulate.requests import SimRequest
from ttft.simulate.sweep import lanes_axis
from ttft.simulate.whatif import Config, predict

COST = CostModel(
    step_base_s=0.01, prefill_token_s=1 / 440, decode_seq_s=0.02, overhead_s=0.02, noise_cv=0.1
)
LONG_TOKENS, SHORT_TOKENS = 1800, 100


def _req(index: int, long_: bool, at: float = 0.0, output: int = 8) -> SimRequest:
    return SimRequest(at, LONG_TOKENS if long_ else SHORT_TOKENS, output, (), 512, index)


def _gate(cap: int, lanes: Lanes, replicas: int = 1) -> GatewayState:
    names = [f"replica-{i}" for i in range(replicas)]
    return GatewayState(replicas, lanes, cap, Router(names), "least-loaded")


def _done(request: SimRequest) -> list[SimOutcome]:
    return [SimOutcome(request)]


def test_a_short_request_arriving_while_longs_hold_all_unreserved_slots_starts_at_once() -> None:
    gate = _gate(2, Lanes(long_reserve=1))
    assert gate.arrive(_req(0, True), None, 0.0) == [(0, _req(0, True))]
    assert gate.arrive(_req(1, True), None, 0.0) == []  # long requests hold 2 - 1 slots
    assert gate.arrive(_req(2, False), None, 0.1) == [(0, _req(2, False))]  # the reserve


def test_without_a_reserve_the_short_request_waits_for_a_whole_long_one() -> None:
    gate = _gate(2, Lanes(long_reserve=0))
    gate.arrive(_req(0, True), None, 0.0)
    gate.arrive(_req(1, True), None, 0.0)
    assert gate.arrive(_req(2, False), None, 0.1) == []
    assert gate.done(0, _done(_req(0, True))) == [(0, _req(2, False))]


def test_after_short_burst_shorts_in_a_row_a_waiting_long_one_gets_its_turn() -> None:
    gate = _gate(1, Lanes(long_reserve=0, short_burst=2))
    running = _req(0, False)
    gate.arrive(running, None, 0.0)
    waiting = [_req(1, True), _req(2, False), _req(3, False), _req(4, False), _req(5, False)]
    for r in waiting:
        assert gate.arrive(r, None, 0.0) == []
    order = []
    for _ in waiting:
        ((_, running),) = gate.done(0, _done(running))
        order.append(running.index)
    assert order == [2, 3, 1, 4, 5]


def test_in_a_fleet_the_reserve_lets_a_short_request_pass_long_prefills() -> None:
    """Two long prompts take the one unreserved slot of two in turn; the short one arriving
    behind them runs in the reserve instead of after both."""
    reqs = [_req(0, True), _req(1, True), _req(2, False, at=0.1, output=2)]
    ttft = {}
    for reserve in (0, 1):
        lanes = Lanes(long_prompt_tokens=400, long_reserve=reserve)
        result = simulate(reqs, COST, EngineSettings(slots=2), lanes=lanes)
        by_index = {o.request.index: o for o in result.outcomes}
        ttft[reserve] = by_index[2].ttft_s or 0.0
        if reserve == 1:
            assert (by_index[2].first_token_s or 0.0) < (by_index[1].admitted_s or 0.0)
    assert ttft[1] < ttft[0]


def test_requests_the_gateway_sheds_are_counted_not_dropped() -> None:
    """A full queue refuses at once (429, queue_full); a request that waited queue_timeout_s is
    refused too (503, queue_timeout). Every request has an outcome, and the prediction says how
    many were shed."""
    reqs = [_req(i, True, at=0.01 * i) for i in range(6)]
    lanes = Lanes(long_prompt_tokens=400, long_reserve=0, queue_size=2, queue_timeout_s=5.0)
    result = simulate(reqs, COST, EngineSettings(slots=1), lanes=lanes)
    assert len(result.outcomes) == 6
    # one runs (about 4 s), two wait: the first of them starts in time, the second times out;
    # the three that arrived to a full queue are refused at once
    assert shed_counts(result.outcomes) == {"queue_full": 3, "queue_timeout": 1}
    timed_out = next(o for o in result.outcomes if o.refused == "queue_timeout")
    assert timed_out.done_s == timed_out.request.arrival_s + 5.0

    cal = Calibration(COST, EngineSettings(slots=1), FitReport(10, 0.99, 0.05, 0.1))
    config = Config(lanes=lanes)
    p = predict(cal, lambda _seed: reqs, config, runs=1, slos=parse_slos("ttft:p99<60s"))
    assert p.shed == {"queue_full": 3, "queue_timeout": 1} and p.requests == 6
    assert p.good_fraction is not None and p.good_fraction.value == 2 / 6
    assert any("shed 4 of 6" in note for note in p.notes)
    assert "lanes long>400 reserve=0 burst=4" in config.describe()


def test_no_replica_with_room_sheds_the_request_at_arrival() -> None:
    gate = _gate(1, Lanes(queue_size=1), replicas=2)
    for i in range(4):  # two replicas, each one running and one waiting
        gate.arrive(_req(i, False), None, 0.0)
    assert gate.arrive(_req(4, False), None, 0.0) == []
    assert [(o.replica, o.refused) for o in gate.shed] == [(-1, "queue_full")]


def _events(seed: int, n: int) -> list[tuple[str, int]]:
    """A random sequence: ("short"|"long", request index) arrivals and ("done", k) ends, where
    k picks one of the running requests."""
    rng = random.Random(seed)
    out: list[tuple[str, int]] = []
    for i in range(n):
        kind = rng.choice((SHORT, LONG, "done", "done"))
        out.append((kind, i if kind != "done" else rng.randrange(1 << 30)))
    return out


def _through_the_gateway(events: list[tuple[str, int]], cap: int, lanes: Lanes) -> list[str]:
    """The events on ``ttft gateway``'s Admission, as its proxy calls it: the log of starts and
    refusals, in order."""
    log: list[str] = []

    async def main() -> None:
        adm = Admission(
            cap,
            lanes.queue_size,
            short_burst=lanes.short_burst,
            long_reserve=lanes.reserve(cap),
        )
        running: list[tuple[int, str]] = []

        async def one(index: int, lane: str) -> None:
            try:
                if not adm.try_start(lane):
                    await adm.acquire(lane, 0, 1e6)
            except Shed as exc:
                log.append(f"shed {index} {exc.reason}")
                return
            log.append(f"start {index}")
            running.append((index, lane))

        tasks = []
        for kind, value in events:
            if kind == "done":
                if running:
                    index, lane = running.pop(value % len(running))
                    log.append(f"done {index}")
                    adm.release(lane)
            else:
                tasks.append(asyncio.create_task(one(value, kind)))
            for _ in range(3):
                await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    return log


def _through_the_simulator(events: list[tuple[str, int]], cap: int, lanes: Lanes) -> list[str]:
    log: list[str] = []
    gate = _gate(cap, lanes)
    running: list[SimRequest] = []

    def started(sends: list[tuple[int, SimRequest]]) -> None:
        for _, request in sends:
            log.append(f"start {request.index}")
            running.append(request)

    for kind, value in events:
        if kind == "done":
            if running:
                request = running.pop(value % len(running))
                log.append(f"done {request.index}")
                started(gate.done(0, _done(request)))
        else:
            before = len(gate.shed)
            started(gate.arrive(_req(value, kind == LONG), None, 0.0))
            log.extend(f"shed {o.request.index} {o.refused}" for o in gate.shed[before:])
    return log


def test_the_simulator_and_the_gateway_make_the_same_decisions_on_the_same_events() -> None:
    """Random arrivals of short and long requests and request ends, through the gateway's
    Admission (asyncio) and through the simulator's gateway: the same starts, in the same
    order, and the same requests refused."""
    settings = [
        (2, Lanes(long_prompt_tokens=400, long_reserve=1, short_burst=2, queue_size=4)),
        (4, Lanes(long_prompt_tokens=400, long_reserve=2, short_burst=1, queue_size=6)),
        (3, Lanes(long_prompt_tokens=400, long_reserve=0, short_burst=4, queue_size=3)),
        (1, Lanes(long_prompt_tokens=400, queue_size=5)),
    ]
    for seed, (cap, lanes) in enumerate(settings):
        events = _events(seed, 300)
        real = _through_the_gateway(events, cap, lanes)
        simulated = _through_the_simulator(events, cap, lanes)
        assert simulated == real
        assert any(line.startswith("shed") for line in real)  # the queue did fill
        assert sum(line.startswith("start") for line in real) > 100


def test_the_lane_options_sweep_as_a_product_and_bad_values_are_refused() -> None:
    assert lanes_axis(False, None, None, None) == [None]  # no lanes unless asked
    assert lanes_axis(True, None, None, None) == [Lanes()]  # the gateway's defaults
    swept = lanes_axis(False, "400,800", "0,1", None, queue_size=8)
    assert [(x.long_prompt_tokens, x.long_reserve) for x in swept if x is not None] == [
        (400, 0),
        (400, 1),
        (800, 0),
        (800, 1),
    ]
    assert all(x is not None and x.queue_size == 8 for x in swept)
    for args, message in (
        ((False, None, "-1", None), "--long-reserve values must be at least 0"),
        ((False, None, None, "0"), "--short-burst values must be at least 1"),
        ((False, "many", None, None), "'many' is not a whole number"),
    ):
        with pytest.raises(TtftError, match=message):
            lanes_axis(*args)
    with pytest.raises(TtftError, match="lanes' queue"):
        lanes_axis(False, None, None, None, queue_size=8)


def test_a_lanes_point_runs_the_real_gateway_with_its_lanes_and_no_slot_pins() -> None:
    lanes = Lanes(long_prompt_tokens=400, long_reserve=1, short_burst=3, queue_size=9)
    text = gateway_toml(["http://127.0.0.1:18001"], "m", "least-loaded", 2, lanes)
    admission = from_mapping(tomllib.loads(text.replace("{port}", "8000"))).admission
    assert admission.split_lanes and not admission.pin_slots
    assert (admission.long_prompt_tokens, admission.long_reserve, admission.short_burst) == (
        400,
        1,
        3,
    )
    assert (admission.queue_size, admission.queue_timeout_s, admission.max_in_flight) == (
        9,
        30.0,
        2,
    )
    plain = gateway_toml(["http://127.0.0.1:18001"], "m", "least-loaded", 2)
    assert not from_mapping(tomllib.loads(plain.replace("{port}", "8000"))).admission.split_lanes
