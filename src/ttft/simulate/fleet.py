"""Replicas behind a router, run as one discrete-event simulation.

Events are arrivals (in time order) and replica step ends (a heap). Before an arrival is routed,
every step that ended by then is applied, so the router sees each replica's load as the gateway
would. Routing policies: ``round-robin``, ``least-loaded`` and ``prefix-affinity`` (the
gateway's own ``Router``: a consistent-hash ring on the prompt's leading blocks, with its load
bound, least-loaded for requests without a key).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from ttft.core.errors import TtftError
from ttft.gateway.routing import Router
from ttft.simulate.engine import ReplicaSim
from ttft.simulate.fleet_base import (
    KEY_TOKENS,
    POLICIES,
    FleetResult,
    Policy,
    affinity_key,
    first_arrivals,
    fleet_result,
    gc_paused,
    make_replica,
)
from ttft.simulate.gateway_sim import Lanes
from ttft.simulate.lanes_fleet import simulate_lanes
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest

__all__ = ["KEY_TOKENS", "POLICIES", "FleetResult", "Policy", "affinity_key", "simulate"]


def _route(
    fleet: Sequence[ReplicaSim],
    loads: list[int],
    policy: Policy,
    router: Router,
    request: SimRequest,
    turn: int,
    cap: int | None,
) -> tuple[int, bool] | None:
    """The replica for ``request`` and whether it was an affinity hit; None when every replica
    is at the gateway's in-flight cap ``cap`` (the request waits in the gateway's queue).

    ``loads`` mirrors each replica's ``load`` (the fleet refreshes it after every event that can
    change one), so the common policies are a few C-level list scans rather than one property
    call per replica and request.
    """
    if policy == "prefix-affinity" and len(fleet) > 1:
        choice = router.pick(fleet, affinity_key(request))
        return None if choice is None else (choice.index, choice.affinity == "hit")
    low = min(loads)
    if cap is not None and low >= cap:
        return None  # no replica has room
    if policy == "round-robin":
        n = len(fleet)
        if cap is None:
            return turn % n, False
        return next(i for i in ((turn + k) % n for k in range(n)) if loads[i] < cap), False
    ties = loads.count(low)  # the least loaded all have room when the least load is below cap
    if ties == 1:
        return loads.index(low), False
    tied = list(itertools.compress(range(len(loads)), map(low.__eq__, loads)))
    return tied[turn % ties], False


def simulate(
    requests: Sequence[SimRequest],
    cost: CostModel,
    settings: EngineSettings,
    *,
    replicas: int = 1,
    policy: Policy = "least-loaded",
    speed_factor: float = 1.0,
    load_factor: float = 1.25,
    concurrency: int | None = None,
    max_in_flight: int | None = None,
    names: Sequence[str] = (),
    lanes: Lanes | None = None,
) -> FleetResult:
    """Run ``requests`` through ``replicas`` engines behind ``policy``.

    Open loop (default): each request arrives at its ``arrival_s``. Closed loop
    (``concurrency``): that many clients, each sending its next request (in the given order) the
    moment its previous one is done, as ``ttft bench --concurrency`` does.

    ``max_in_flight``: a gateway in front (``ttft gateway``'s per-replica cap, by default the
    replica's slots) holds requests in its own queue, first come first served, and routes each
    when a replica has room, instead of queueing them at a replica chosen on arrival.

    ``names``: the replicas' names on the prefix-affinity ring (a real gateway's upstream URLs,
    so its ring and this one agree); default ``replica-0``, ``replica-1``...

    ``lanes``: the gateway in front runs its lanes (``gateway_sim``): each request is routed on
    arrival and waits in its replica's short or long lane, as ``ttft gateway`` does; requests it
    sheds are outcomes refused with ``queue_full`` or ``queue_timeout``.
    """
    if replicas < 1:
        raise TtftError(f"--replicas must be at least 1, not {replicas}")
    if policy not in POLICIES:
        raise TtftError(
            f"unknown routing policy {policy!r}", f"choose one of {', '.join(POLICIES)}"
        )
    if concurrency is not None and concurrency < 1:
        raise TtftError(f"--concurrency must be at least 1, not {concurrency}")
    if lanes is not None:
        return simulate_lanes(
            requests,
            cost,
            settings,
            lanes,
            replicas=replicas,
            policy=policy,
            speed_factor=speed_factor,
            load_factor=load_factor,
            concurrency=concurrency,
            max_in_flight=max_in_flight,
            names=names,
        )
    fleet = [make_replica(cost, settings, i) for i in range(replicas)]
    for replica in fleet:
        replica.speed = speed_factor
        replica.max_in_flight = max_in_flight
    loads = [0] * replicas  # each replica's load, refreshed after its submits and steps
    held: deque[tuple[float, SimRequest]] = deque()  # the gateway's queue
    if names and len(names) != replicas:
        raise TtftError(f"{len(names)} replica names for {replicas} replicas")
    ring_names = list(names) or [f"replica-{i}" for i in range(replicas)]
    router = Router(ring_names, load_factor=load_factor)
    # The ring never changes during a run and hot prefixes repeat: remember each key's walk
    # (it visits every virtual node until all replicas are seen, the bulk of routing's cost).
    setattr(router.ring, "walk", functools.lru_cache(maxsize=1 << 16)(router.ring.walk))  # noqa: B010
    steps: list[tuple[float, int, int, int]] = []  # (end, order, replica, its version)
    order = itertools.count()
    arrivals, pending = first_arrivals(requests, concurrency, order)
    turn = hits = 0

    def send(request: SimRequest, t: float) -> bool:
        nonlocal turn, hits
        route = _route(fleet, loads, policy, router, request, turn, max_in_flight)
        if route is None:
            return False
        chosen, hit = route
        turn += 1
        hits += hit
        end = fleet[chosen].submit(request, t)
        loads[chosen] = fleet[chosen].load
        if end is not None:
            heapq.heappush(steps, (end, next(order), chosen, fleet[chosen].version))
        follow_up(fleet[chosen])
        return True

    def follow_up(replica: ReplicaSim) -> bool:
        """Closed loop: each finished request's client sends its next one. True if any
        finished (a slot, or room at the gateway, may have opened)."""
        done_any = bool(replica.finished)
        for done in replica.finished:
            follow = next(pending, None)
            if follow is not None:
                t = done.done_s if done.done_s is not None else 0.0
                heapq.heappush(arrivals, (t, next(order), replace(follow, arrival_s=t)))
        replica.finished.clear()
        return done_any

    def settle(replica: ReplicaSim, now: float) -> None:
        if not follow_up(replica):
            return
        while held:
            t, request = held.popleft()
            if not send(request, now):
                held.appendleft((t, request))
                return

    with gc_paused():  # a million requests allocate millions of objects and free no cycles
        while arrivals or steps:
            if steps and (not arrivals or steps[0][0] < arrivals[0][0]):
                _, _, i, version = heapq.heappop(steps)
                if version != fleet[i].version:
                    continue  # the step was cut short by an arrival: a newer event stands for it
                t_end = fleet[i].step_end or 0.0
                end = fleet[i].finish_step()
                loads[i] = fleet[i].load
                if end is not None:
                    heapq.heappush(steps, (end, next(order), i, fleet[i].version))
                settle(fleet[i], t_end)
                continue
            t, _, request = heapq.heappop(arrivals)
            if held or not send(request, t):
                held.append((t, request))
    return fleet_result(fleet, policy, hits)


def speed_factors(noise_cv: float, runs: int, seed: int) -> list[float]:
    """One machine-speed factor per replication, lognormal with the calibration's scatter; the
    first run is the fitted model itself."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(noise_cv**2)) if noise_cv > 0 else 0.0
    return [1.0] + [math.exp(rng.gauss(-(sigma**2) / 2, sigma)) for _ in range(runs - 1)]
