"""The article's concurrency story in the model: raising the concurrency cap past the engine's
capacity makes p99 TTFT several times worse while throughput barely moves (max-num-seqs 64 ->
256 took p99 from 800 ms to 4 s). Clients in a closed loop at the cap, as in a load test."""

from __future__ import annotations

from ttft.core.stats import percentile
from ttft.simulate.fleet import simulate
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import synthetic

# a GPU-like step: 8 ms, 0.1 ms per prompt token, 0.2 ms per decoding sequence
GPU = CostModel(step_base_s=0.008, prefill_token_s=1e-4, decode_seq_s=2e-4, attention_s=2e-5)


def run(cap: int) -> tuple[float, float]:
    reqs = synthetic(1500, prompt_tokens=2400, output_tokens=200, seed=1)
    settings = EngineSettings(kind="vllm", slots=cap, batch_tokens=2048)
    result = simulate(reqs, GPU, settings, concurrency=cap)
    done = [o for o in result.outcomes if o.ok]
    p99 = percentile(sorted(o.ttft_s or 0.0 for o in done), 99)
    return p99, len(done) / result.duration_s


def test_a_concurrency_cap_past_capacity_multiplies_p99_and_not_throughput() -> None:
    p99_64, throughput_64 = run(64)
    p99_256, throughput_256 = run(256)
    assert p99_256 > 3 * p99_64
    assert abs(throughput_256 - throughput_64) < 0.15 * throughput_64
