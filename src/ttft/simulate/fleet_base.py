"""What every simulated fleet shares, with or without the gateway's lanes: the routing
policies, a run's result, a replica of the calibrated engine, a request's affinity key, and the
garbage collector paused for a run.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ttft.simulate.engine import ReplicaSim, SimOutcome
from ttft.simulate.llamacpp import LlamaCppReplica
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest
from ttft.simulate.sglang import SglangReplica
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
    if settings.kind == "sglang":
        return SglangReplica(cost, settings, index)
    return LlamaCppReplica(cost, settings, index)


def affinity_key(request: SimRequest) -> int | None:
    """The request's leading-prefix hash (the chained hash stands for the whole prefix), or the
    key a real gateway computed for it."""
    if request.route_key is not None:
        return request.route_key
    if not request.blocks:
        return None
    n = max(1, min(len(request.blocks), KEY_TOKENS // max(1, request.block_tokens)))
    return request.blocks[n - 1]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the run: the simulation makes no reference cycles,
    and with millions of live objects each of its passes costs more than the run's steps."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


Arrival = tuple[float, int, SimRequest]  # (time, order, request): a heap entry


def first_arrivals(
    requests: Sequence[SimRequest], concurrency: int | None, order: Iterator[int]
) -> tuple[list[Arrival], Iterator[SimRequest]]:
    """The arrival heap a run starts with, and the requests still to send. Open loop: every
    request at its own time (nothing pending). Closed loop: the first ``concurrency`` requests
    at time 0, the rest pending (each sent when a client's previous request is done)."""
    pending = iter(requests if concurrency is not None else ())
    if concurrency is None:
        arrivals = [(r.arrival_s, r.index, r) for r in requests]
        heapq.heapify(arrivals)
        return arrivals, pending
    arrivals = []
    for r in itertools.islice(pending, concurrency):
        heapq.heappush(arrivals, (0.0, next(order), replace(r, arrival_s=0.0)))
    return arrivals, pending


def fleet_result(
    fleet: Sequence[ReplicaSim],
    policy: Policy,
    hits: int,
    shed: Sequence[SimOutcome] = (),
) -> FleetResult:
    """The run's outcomes in arrival order (the requests the gateway refused among them) and
    the fleet's totals."""
    outcomes = sorted(
        [*(o for r in fleet for o in r.outcomes), *shed],
        key=lambda o: (o.request.arrival_s, o.request.index),
    )
    last = max((o.done_s or o.request.arrival_s for o in outcomes), default=0.0)
    first = min((o.request.arrival_s for o in outcomes), default=0.0)
    return FleetResult(
        outcomes,
        len(fleet),
        policy,
        last - first,
        sum(r.steps for r in fleet),
        sum(r.preemptions for r in fleet),
        [r.busy_s for r in fleet],
        hits,
    )
