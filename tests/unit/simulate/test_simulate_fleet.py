"""Routing policies over simulated replicas, and the what-if summaries."""

from __future__ import annotations

from ttft.core.slo import parse_slos
from ttft.simulate.fleet import simulate
from ttft.simulate.model import Calibration, CostModel, EngineSettings, FitReport
from ttft.simulate.requests import SimRequest, poisson_times, synthetic
from ttft.simulate.whatif import Config, fewest_replicas, predict

COST = CostModel(
    step_base_s=0.01,
    prefill_token_s=1 / 440,
    decode_seq_s=0.02,
    attention_s=0.0002,
    overhead_s=0.02,
    noise_cv=0.1,
)
CAL = Calibration(COST, EngineSettings(slots=4), FitReport(10, 0.99, 0.05, 0.1))


def test_round_robin_spreads_evenly() -> None:
    reqs = poisson_times(synthetic(90, prompt_tokens=100, output_tokens=4), 2.0, seed=1)
    result = simulate(reqs, COST, EngineSettings(slots=4), replicas=3, policy="round-robin")
    counts = [sum(o.replica == i for o in result.outcomes) for i in range(3)]
    assert counts == [30, 30, 30]


def test_prefix_affinity_reuses_more_cache_than_least_loaded() -> None:
    reqs = synthetic(
        200, prompt_tokens=1100, output_tokens=8, shared_prefix_tokens=1024, prefix_groups=6, seed=2
    )
    reqs = poisson_times(reqs, 1.5, seed=2)
    settings = EngineSettings(slots=2, host_cache_tokens=0)  # each slot's own KV only
    cached = {}
    for policy in ("least-loaded", "prefix-affinity"):
        result = simulate(reqs, COST, settings, replicas=3, policy=policy)  # type: ignore[arg-type]
        cached[policy] = sum(o.cached_tokens for o in result.outcomes)
    assert cached["prefix-affinity"] > 1.2 * cached["least-loaded"]


def test_least_loaded_beats_round_robin_on_mixed_lengths() -> None:
    reqs = [SimRequest(0.4 * i, 1500 if i % 3 == 0 else 60, 16, (), 512, i) for i in range(90)]
    worst = {}
    for policy in ("round-robin", "least-loaded"):
        result = simulate(reqs, COST, EngineSettings(slots=1), replicas=3, policy=policy)  # type: ignore[arg-type]
        worst[policy] = max(o.ttft_s or 0.0 for o in result.outcomes)
    assert worst["least-loaded"] < worst["round-robin"]


def test_a_prediction_has_intervals_that_hold_its_value() -> None:
    def workload(seed: int) -> list[SimRequest]:
        return poisson_times(synthetic(150, prompt_tokens=300, output_tokens=16), 0.8, seed)

    p = predict(CAL, workload, Config(), runs=5, slos=parse_slos("ttft:p99<60s"))
    for est in p.ttft_s.values():
        assert est.interval.low <= est.value <= est.interval.high
    assert p.ttft_s[50.0].value <= p.ttft_s[95.0].value <= p.ttft_s[99.0].value
    assert p.slo_met is True and p.goodput_rps is not None


def test_fewest_replicas_grows_with_the_rate() -> None:
    slos = parse_slos("ttft:p95<2s")

    def at(rate: float) -> int | None:
        def workload(seed: int) -> list[SimRequest]:
            return poisson_times(synthetic(200, prompt_tokens=400, output_tokens=16), rate, seed)

        best, tried = fewest_replicas(CAL, workload, Config(), slos, max_replicas=16, runs=3)
        assert all(p.slo_met for p in tried if p.config.replicas == best)
        return best

    low, high = at(0.5), at(3.0)
    assert low is not None and high is not None and high > low


def test_a_gateway_queue_in_front_beats_queueing_at_a_replica_picked_on_arrival() -> None:
    """Round-robin on arrival lets a long prompt's replica pile up; the gateway's queue (a cap
    of one request per slot) sends each request to the first replica with room."""
    reqs = [SimRequest(0.5 * i, 1500 if i % 4 == 0 else 80, 8, (), 512, i) for i in range(120)]
    settings = EngineSettings(slots=1)
    direct = simulate(reqs, COST, settings, replicas=2, policy="round-robin")
    gated = simulate(reqs, COST, settings, replicas=2, policy="round-robin", max_in_flight=1)
    p95 = lambda r: sorted(o.ttft_s or 0.0 for o in r.outcomes)[int(0.95 * len(reqs))]  # noqa: E731
    assert p95(gated) < p95(direct)
    assert all(o.ok for o in gated.outcomes)
    assert max(o.queue_s or 0.0 for o in gated.outcomes) > 0  # some waited at the gateway
