"""`ttft simulate` on the real embedded llama-server (the session's shared engine, 4 slots).

A short calibration (three prompt lengths, small decode and cache phases) must give a model
whose costs are positive and ordered like the engine's (a prompt token costs less than a decode
step, a cached prefix far less than computing it), and a prediction for a point it did not
measure (Poisson arrivals at another rate and length) must land near the measured TTFT. The
machine is shared and its speed moves by tens of percent, so the bound is loose (a factor of
three, the better of two attempts); benchmarks/simulate_accuracy.py measures the real error.
"""

from __future__ import annotations

import pytest

from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.llamacpp.embedded import RunningEngine
from ttft.simulate.calibrate import CalibrationPlan, run_calibration
from ttft.simulate.model import EngineSettings
from ttft.simulate.targets import settings_of
from ttft.simulate.validate import compare, measure
from ttft.simulate.whatif import Config, predict
from ttft.simulate.workloads import WorkloadSource

pytestmark = pytest.mark.e2e

PLAN = CalibrationPlan(
    lengths=(64, 256, 512),
    repeats=1,
    decode_tokens=12,
    cached_prefixes=(256,),
    cached_suffix=32,
    burst_prompt=128,
)


def test_a_short_calibration_predicts_an_unmeasured_point(embedded_server: RunningEngine) -> None:
    target = Target(
        embedded_server.base_url,
        embedded_server.model_name,
        embedded_server.metrics_url,
        "llamacpp",
    )
    settings = settings_of(target, "llamacpp")
    assert settings.slots == 4 and settings.ctx_per_slot == 2048
    tokenizer = ServerTokenizer(target)
    # Calibration and measurement are seconds apart; a neighbour that starts between them (on a
    # shared 2-core machine, another test run) moves the engine's speed by several times. Such
    # noise gives no attempt an edge, so the better of two attempts still tests the model.
    ratios: list[float] = []
    for _ in range(2):
        ratio = _predicted_over_measured_p50(target, tokenizer, settings)
        ratios.append(ratio)
        if 1 / 3 < ratio < 3.0:
            return
    raise AssertionError(f"predicted / measured p50 outside 1/3..3 in both attempts: {ratios}")


def _predicted_over_measured_p50(
    target: Target, tokenizer: ServerTokenizer, settings: EngineSettings
) -> float:
    cal, phases = run_calibration(target, tokenizer, settings, plan=PLAN)
    cost = cal.cost
    assert cost.prefill_token_s > 0 and cost.decode_seq_s > 0
    assert cal.fit.samples >= 5 and all(len(v) >= 1 for v in phases.values())
    # the shared engine runs without --swa-full: Gemma 3 then reuses no mid-prompt prefix, and
    # the calibration must notice rather than promise a cache the engine does not have
    reuse = cal.source.get("prefix_reuse")
    assert reuse is not None
    assert cal.engine.prefix_cache == (reuse >= 0.3)

    source = WorkloadSource(rate=0.7, count=10, prompt_tokens=200, output_tokens=8)
    requests = source.requests(0)
    prediction = predict(cal, lambda seed: source.requests(seed), Config(), runs=3)
    items, arrival = source.real(requests, tokenizer)
    records = measure(target, items, arrival)
    result = compare("rate 0.7", prediction, records)
    assert result.measured_failed == 0
    p50 = next(c for c in result.comparisons if c.quantile == 50.0)
    print(result.to_dict())
    return p50.predicted_s / p50.measured_s


def test_a_two_replica_point_is_validated_through_a_real_gateway() -> None:
    """``--validate`` on a 2-replica prefix-affinity point starts two embedded engines behind a
    real ``ttft gateway``, sends the point's arrivals through it, and compares with the
    simulation given the gateway's own ring names and prompt keys. Without --threads the two
    engines share the cores, which the result says in a note."""
    from ttft.simulate.targets import engine
    from ttft.simulate.validate_point import predict_and_validate

    # calibrated as `ttft simulate calibrate` does it: its own embedded engine, with --swa-full
    # (the session's shared engine runs without it and reuses no prefix, so a calibration of it
    # fits a hit's cost from prompts that were not hits)
    with engine(None, slots=2) as live:
        cal, _ = run_calibration(
            live.target, ServerTokenizer(live.target), live.settings, plan=PLAN
        )
    assert cal.engine.prefix_cache
    # two groups whose shared prefix covers the gateway's whole key (8 blocks of 256 chars)
    source = WorkloadSource(
        rate=0.5,
        count=12,
        prompt_tokens=700,
        output_tokens=4,
        shared_prefix_tokens=640,
        prefix_groups=2,
    )
    config = Config(replicas=2, policy="prefix-affinity", max_in_flight=2, slots=2)
    said: list[str] = []
    out = predict_and_validate(cal, source, config, None, 2, said.append)
    print("\n".join(said))
    assert out["measured_ok"] == 12 and out["measured_failed"] == 0
    assert "share this machine's cores" in out.get("note", "")
    # Two engines on shared cores, and a prefix hit or miss moves one request's TTFT by ten
    # times: the bound is loose (benchmarks/simulate_accuracy.py measures the error itself).
    p95 = next(c for c in out["comparisons"] if c["quantile"] == 95.0)
    ratio = p95["same_arrivals_s"] / p95["measured_s"]
    assert 1 / 10 < ratio < 10.0, said
