"""Replicas behind a router, run as one discrete-event simulation.

Events are arrivals (in time order) and replica step ends (a heap). Before an arrival is routed,
every step that ended by then is applied, so the router sees each replica's load as the gateway
would. Routing policies: ``round-robin``, ``least-loaded`` and ``prefix-affinity`` (the
gateway's own ``Router``: a consistent-hash ring on the prompt's leading blocks, with its load
bound, least-loaded for requests without a key).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ttft.core.errors import TtftError
from ttft.gateway.routing import Router
from ttft.simulate.engine import ReplicaSim, SimOutcome
from ttft.simulate.llamacpp import LlamaCppReplica
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest
from ttft.simulate.vllm import VllmReplica

Policy = Literal["round-robin", "least-loaded", "prefix-affinity"]
POLICIES: tuple[Policy, ...] = ("round-robin", "least-loaded", "prefix-affinity")
KEY_TOKENS = 512  # the gateway hashes the leading 8 blocks of 64 tokens (gateway/config.py)


@dataclass
class FleetResult:
    outcomes: list[SimOutcome]
    replicas: int
    policy: Policy
    duration_s: float
    steps: int
    preemptions: int
    busy_s: list[float] = field(default_factory=list)
    affinity_hits: int = 0


def make_replica(cost: CostModel, settings: EngineSettings, index: int) -> ReplicaSim:
    if settings.kind == "vllm":
        return VllmReplica(cost, settings, index)
    return LlamaCppReplica(cost, settings, index)


def affinity_key(request: SimRequest) -> int | None:
    """The request's leading-prefix hash (the chained hash stands for the whole prefix)."""
    if not request.blocks:
        return None
    n = max(1, min(len(request.blocks), KEY_TOKENS // max(1, request.block_tokens)))
    return request.blocks[n - 1]


def _route(
    fleet: Sequence[ReplicaSim], policy: Policy, router: Router, request: SimRequest, turn: int
) -> tuple[int, bool]:
    """The replica for ``request`` and whether it was an affinity hit."""
    if len(fleet) == 1:
        return 0, False
    if policy == "round-robin":
        return turn % len(fleet), False
    if policy == "least-loaded":
        low = min(r.load for r in fleet)
        ties = [i for i, r in enumerate(fleet) if r.load == low]
        return ties[turn % len(ties)], False
    choice = router.pick(fleet, affinity_key(request))
    assert choice is not None  # every simulated replica is healthy and has room
    return choice.index, choice.affinity == "hit"


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
) -> FleetResult:
    """Run ``requests`` through ``replicas`` engines behind ``policy``.

    Open loop (default): each request arrives at its ``arrival_s``. Closed loop
    (``concurrency``): that many clients, each sending its next request (in the given order) the
    moment its previous one is done, as ``ttft bench --concurrency`` does.
    """
    if replicas < 1:
        raise TtftError(f"--replicas must be at least 1, not {replicas}")
    if policy not in POLICIES:
        raise TtftError(
            f"unknown routing policy {policy!r}", f"choose one of {', '.join(POLICIES)}"
        )
    if concurrency is not None and concurrency < 1:
        raise TtftError(f"--concurrency must be at least 1, not {concurrency}")
    fleet = [make_replica(cost, settings, i) for i in range(replicas)]
    for replica in fleet:
        replica.speed = speed_factor
    router = Router([f"replica-{i}" for i in range(replicas)], load_factor=load_factor)
    steps: list[tuple[float, int, int, int]] = []  # (end, order, replica, its version)
    arrivals: list[tuple[float, int, SimRequest]] = []
    order = itertools.count()
    pending = iter(requests if concurrency is not None else ())
    if concurrency is None:
        for r in requests:
            heapq.heappush(arrivals, (r.arrival_s, r.index, r))
    else:
        for r in itertools.islice(pending, concurrency):
            heapq.heappush(arrivals, (0.0, next(order), replace(r, arrival_s=0.0)))
    turn = hits = 0

    def settle(replica: ReplicaSim) -> None:
        for done in replica.finished:
            follow = next(pending, None)
            if follow is not None:
                t = done.done_s if done.done_s is not None else 0.0
                heapq.heappush(arrivals, (t, next(order), replace(follow, arrival_s=t)))
        replica.finished.clear()

    while arrivals or steps:
        if steps and (not arrivals or steps[0][0] < arrivals[0][0]):
            _, _, i, version = heapq.heappop(steps)
            if version != fleet[i].version:
                continue  # the step was cut short by an arrival: a newer event stands for it
            end = fleet[i].finish_step()
            if end is not None:
                heapq.heappush(steps, (end, next(order), i, fleet[i].version))
            settle(fleet[i])
            continue
        t, _, request = heapq.heappop(arrivals)
        chosen, hit = _route(fleet, policy, router, request, turn)
        turn += 1
        hits += hit
        end = fleet[chosen].submit(request, t)
        if end is not None:
            heapq.heappush(steps, (end, next(order), chosen, fleet[chosen].version))
        settle(fleet[chosen])
    outcomes = sorted(
        (o for r in fleet for o in r.outcomes), key=lambda o: (o.request.arrival_s, o.request.index)
    )
    last = max((o.done_s or o.request.arrival_s for o in outcomes), default=0.0)
    first = min((o.request.arrival_s for o in outcomes), default=0.0)
    return FleetResult(
        outcomes,
        replicas,
        policy,
        last - first,
        sum(r.steps for r in fleet),
        sum(r.preemptions for r in fleet),
        [r.busy_s for r in fleet],
        hits,
    )


def speed_factors(noise_cv: float, runs: int, seed: int) -> list[float]:
    """One machine-speed factor per replication, lognormal with the calibration's scatter; the
    first run is the fitted model itself."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(noise_cv**2)) if noise_cv > 0 else 0.0
    return [1.0] + [math.exp(rng.gauss(-(sigma**2) / 2, sigma)) for _ in range(runs - 1)]
