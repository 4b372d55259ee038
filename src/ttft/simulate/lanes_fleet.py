"""The fleet's event loop with ``ttft gateway``'s lanes in front (``gateway_sim``): arrivals,
replica step ends and queue timeouts, in time order.

Each arrival is routed and admitted by the gateway's rules at once (steps that ended by then
applied first, so the router sees the loads the gateway would); each step end releases the slots
of the requests it finished, and the requests the lanes start then go to that replica at the
step's end; a timeout sheds a request still waiting at its deadline.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import replace

from ttft.core.errors import TtftError
from ttft.gateway.admission.lanes import default_max_in_flight
from ttft.gateway.routing import Router
from ttft.simulate.fleet_base import (
    FleetResult,
    Policy,
    affinity_key,
    first_arrivals,
    fleet_result,
    gc_paused,
    make_replica,
)
from ttft.simulate.gateway_sim import GatewayState, Lanes
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest

_INF = float("inf")


def simulate_lanes(
    requests: Sequence[SimRequest],
    cost: CostModel,
    settings: EngineSettings,
    lanes: Lanes,
    *,
    replicas: int,
    policy: Policy,
    speed_factor: float,
    load_factor: float,
    concurrency: int | None,
    max_in_flight: int | None,
    names: Sequence[str],
) -> FleetResult:
    """``fleet.simulate`` with the gateway's lanes per replica (its arguments, checked there).

    ``max_in_flight`` None: the gateway's own cap, the slots llama-server reports (another
    engine: the gateway's default for it)."""
    cap = max_in_flight or (
        settings.slots if settings.kind == "llamacpp" else default_max_in_flight(settings.kind)
    )
    fleet = [make_replica(cost, settings, i) for i in range(replicas)]
    for replica in fleet:
        replica.speed = speed_factor
    if names and len(names) != replicas:
        raise TtftError(f"{len(names)} replica names for {replicas} replicas")
    router = Router(
        list(names) or [f"replica-{i}" for i in range(replicas)], load_factor=load_factor
    )
    gate = GatewayState(replicas, lanes, cap, router, policy)
    steps: list[tuple[float, int, int, int]] = []  # (end, order, replica, its version)
    order = itertools.count()
    arrivals, pending = first_arrivals(requests, concurrency, order)

    def submit(sends: list[tuple[int, SimRequest]], t: float) -> None:
        for i, request in sends:
            end = fleet[i].submit(request, t)
            if end is not None:
                heapq.heappush(steps, (end, next(order), i, fleet[i].version))
            if fleet[i].finished:  # refused by the engine at once: its slot frees now
                finished(i, t)

    def next_request(t: float) -> None:
        """Closed loop: a client whose request ended sends its next one."""
        follow = next(pending, None)
        if follow is not None:
            heapq.heappush(arrivals, (t, next(order), replace(follow, arrival_s=t)))

    def finished(i: int, t: float) -> None:
        done = list(fleet[i].finished)
        fleet[i].finished.clear()
        for _ in done:
            next_request(t)
        submit(gate.done(i, done), t)

    with gc_paused():
        while arrivals or steps or gate.timeouts:
            t_step = steps[0][0] if steps else _INF
            t_arrive = arrivals[0][0] if arrivals else _INF
            t_out = gate.timeouts[0][0] if gate.timeouts else _INF
            if t_out <= t_step and t_out < t_arrive:
                shed_before = len(gate.shed)
                gate.time_out(t_out)
                for _ in range(len(gate.shed) - shed_before):
                    next_request(t_out)
                continue
            if t_step < t_arrive:
                _, _, i, version = heapq.heappop(steps)
                if version != fleet[i].version:
                    continue  # the step was cut short by an arrival: a newer event stands for it
                t_end = fleet[i].step_end or 0.0
                end = fleet[i].finish_step()
                if end is not None:
                    heapq.heappush(steps, (end, next(order), i, fleet[i].version))
                finished(i, t_end)
                continue
            t, _, request = heapq.heappop(arrivals)
            shed_before = len(gate.shed)
            submit(gate.arrive(request, affinity_key(request), t), t)
            if len(gate.shed) > shed_before:
                next_request(t)
    return fleet_result(fleet, policy, gate.hits, gate.shed)
