"""The simulator's speed-ups change nothing: the mirrored loads in routing give exactly the
routing of the previous per-replica scan, and vLLM's fast-forwarded decode runs exactly the
step-by-step results (same floats, not approximately)."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest

from ttft.gateway.routing import Router
from ttft.simulate import fleet as fleet_module
from ttft.simulate import vllm
from ttft.simulate.engine import ReplicaSim
from ttft.simulate.fleet import FleetResult, Policy, affinity_key, simulate
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import SimRequest, poisson_times, synthetic

COST = CostModel(
    step_base_s=0.01,
    prefill_token_s=0.0004,
    decode_seq_s=0.002,
    attention_s=0.0001,
    cached_token_s=0.00001,
    overhead_s=0.05,
)


def _scan_route(
    fleet: Sequence[ReplicaSim],
    loads: list[int],
    policy: Policy,
    router: Router,
    request: SimRequest,
    turn: int,
    cap: int | None,
) -> tuple[int, bool] | None:
    """The routing as it was before the loads were mirrored: one property read per replica."""
    if policy == "prefix-affinity" and len(fleet) > 1:
        choice = router.pick(fleet, affinity_key(request))
        return None if choice is None else (choice.index, choice.affinity == "hit")
    room = [i for i, r in enumerate(fleet) if r.has_room]
    if not room:
        return None
    if policy == "round-robin":
        n = len(fleet)
        return next(i for i in ((turn + k) % n for k in range(n)) if fleet[i].has_room), False
    low = min(fleet[i].load for i in room)
    ties = [i for i in room if fleet[i].load == low]
    return ties[turn % len(ties)], False


def _facts(result: FleetResult) -> tuple[object, ...]:
    per_request = [
        (
            o.request.index,
            o.replica,
            o.admitted_s,
            o.first_token_s,
            o.done_s,
            o.cached_tokens,
            o.preemptions,
            o.refused,
        )
        for o in result.outcomes
    ]
    return per_request, result.steps, result.preemptions, result.busy_s, result.affinity_hits


def _trace(count: int = 300, rate: float = 12.0) -> list[SimRequest]:
    mix = synthetic(
        count, prompt_tokens=300, output_tokens=60, shared_prefix_tokens=128, prefix_groups=4
    )
    return poisson_times(mix, rate, seed=1)


CASES = [
    (kind, policy, concurrency, cap, kv)
    for kind, kv in (("llamacpp", None), ("vllm", None), ("vllm", 45), ("vllm", 70))
    for policy in ("least-loaded", "round-robin", "prefix-affinity")
    for concurrency, cap in ((None, None), (None, 4), (6, None))
]


@pytest.mark.parametrize(("kind", "policy", "concurrency", "cap", "kv"), CASES)
def test_mirrored_loads_route_exactly_as_the_scan_did(
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    policy: Policy,
    concurrency: int | None,
    cap: int | None,
    kv: int | None,
) -> None:
    settings = EngineSettings(kind=kind, slots=6, batch_tokens=512, kv_blocks=kv)  # type: ignore[arg-type]
    reqs = _trace()

    def run() -> FleetResult:
        return simulate(
            reqs,
            COST,
            settings,
            replicas=3,
            policy=policy,
            concurrency=concurrency,
            max_in_flight=cap,
        )

    fast = run()
    monkeypatch.setattr(fleet_module, "_route", _scan_route)
    assert _facts(fast) == _facts(run())


@pytest.mark.parametrize("kv", [None, 120, 70, 45])
@pytest.mark.parametrize("policy", ["least-loaded", "prefix-affinity"])
def test_vllm_decode_runs_give_exactly_the_step_by_step_results(
    monkeypatch: pytest.MonkeyPatch, kv: int | None, policy: Policy
) -> None:
    settings = EngineSettings(kind="vllm", slots=6, batch_tokens=512, kv_blocks=kv)
    reqs = _trace()
    fast = simulate(reqs, COST, settings, replicas=3, policy=policy, speed_factor=1.1)
    monkeypatch.setattr(vllm.VllmReplica, "fast_forward", False)
    slow = simulate(reqs, COST, settings, replicas=3, policy=policy, speed_factor=1.1)
    assert _facts(fast) == _facts(slow)
    if kv == 45:
        assert fast.preemptions > 0  # the runs stop where blocks run short


def test_vllm_decode_runs_are_taken_when_nothing_else_happens() -> None:
    settings = EngineSettings(kind="vllm", slots=4)
    burst = synthetic(4, prompt_tokens=100, output_tokens=50)
    replica = vllm.VllmReplica(COST, settings)
    for request in burst:
        replica.submit(request, 0.0)
    events = 0
    while replica.step_end is not None:
        replica.finish_step()
        events += 1
    assert replica.steps == 50  # one prefill step, 49 decode steps
    assert events < 5  # wake-up, the prefill, one decode run


def test_the_collector_is_paused_only_during_a_run() -> None:
    assert gc.isenabled()
    simulate(_trace(20), COST, EngineSettings())
    assert gc.isenabled()


def test_the_bisected_shared_prefix_counts_the_leading_equal_blocks_of_chained_hashes() -> None:
    """shared_prefix bisects (chained hashes agree up to a block, then differ); it must give
    the plain loop's count on chains of every shape: equal, one a prefix, empty, unrelated."""
    import random

    from ttft.simulate.requests import SimRequest, _chain

    def plain(a: tuple[int, ...], b: tuple[int, ...]) -> int:
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    rng = random.Random(1)
    for _ in range(5000):
        common = [rng.randrange(5) for _ in range(rng.randrange(0, 12))]
        a = _chain(common + [rng.randrange(1000) for _ in range(rng.randrange(0, 8))])
        b = _chain(common + [rng.randrange(1000) for _ in range(rng.randrange(0, 8))])
        request = SimRequest(0.0, 10**6, 1, a, 1)
        assert request.shared_prefix(b) == plain(a, b), (a, b)
