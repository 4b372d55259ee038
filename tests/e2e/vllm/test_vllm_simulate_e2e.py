"""`ttft simulate` on a real vLLM serving ``ttft-small-llama`` (dummy weights, about 1 ms of
compute per prompt token here, so a prompt's prefill outweighs vLLM's front end as on a real
model).

``ttft simulate calibrate --url --engine vllm`` must read vLLM's own settings (its KV blocks
and their size from ``vllm:cache_config_info``), see the prefix-cache hits that vLLM does not
report per request (started, as users start it, without ``--enable-prompt-tokens-details``: the
hit is read from its ``prefix_cache_hits`` counter) and fit a positive cost per prompt token.
A prediction for a point the calibration did not use must then land near the measured TTFT;
the machine is shared, so the bound is loose (a factor of two, the better of two attempts):
``benchmarks/simulate_accuracy_vllm.py`` measures the real error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_testkit import start, ttft_cli

from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.vllm.local import RunningVllm, VllmConfig
from ttft.engines.vllm.make_model import SMALL_MODEL_NAME
from ttft.simulate.calibrate import UNKNOWN_HITS
from ttft.simulate.model import Calibration
from ttft.simulate.validate import compare, measure
from ttft.simulate.whatif import Config, predict
from ttft.simulate.workloads import WorkloadSource

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def small_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningVllm]:
    config = VllmConfig(local_model=SMALL_MODEL_NAME, max_num_seqs=4, max_num_batched_tokens=2048)
    engine = start(config, tmp_path_factory.mktemp("vllm-small"))
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def calibration(small_vllm: RunningVllm, tmp_path_factory: pytest.TempPathFactory) -> Calibration:
    out = tmp_path_factory.mktemp("vllm-cal") / "cal.json"
    done = ttft_cli(
        "simulate", "calibrate", "--url", small_vllm.base_url, "--engine", "vllm",
        "--slots", "4", "--batch-tokens", "2048", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return Calibration.load(Path(out))


def test_the_calibration_reads_vllms_cache_and_counts_its_prefix_hits(
    calibration: Calibration,
) -> None:
    engine = calibration.engine
    assert engine.kind == "vllm" and engine.slots == 4
    assert engine.kv_blocks and engine.block_tokens >= 16  # from vllm:cache_config_info
    assert engine.prefix_cache
    # each cached pair's second request reused most of its prompt, read from the counter
    assert calibration.source["prefix_reuse"] > 0.6
    assert UNKNOWN_HITS not in calibration.fit.notes
    cost = calibration.cost
    # (a step of 1 to 4 decoding sequences costs about the same here: the step's base carries
    # it and the per-sequence cost may fit at 0)
    assert cost.prefill_token_s > 0 and cost.step_s(0, 1, 0.0) > 0
    # a prompt of 512 tokens costs more than a decode step of one sequence: compute dominates
    assert cost.step_s(512, 0, 0.0) > 5 * cost.step_s(0, 1, 0.0)


def test_a_prediction_for_an_unmeasured_point_lands_near_the_measured_ttft(
    small_vllm: RunningVllm, calibration: Calibration
) -> None:
    target = Target(small_vllm.base_url, small_vllm.model_name, small_vllm.metrics_url, "vllm")
    tokenizer = ServerTokenizer(target)
    source = WorkloadSource(
        rate=1.0, count=12, prompt_tokens=300, output_tokens=4, shared_prefix_tokens=256
    )
    prediction = predict(calibration, lambda seed: source.requests(seed), Config(), runs=3)
    ratios = []
    for attempt in range(2):
        requests = source.requests(attempt)
        items, arrival = source.real(requests, tokenizer, seed=f"e2e-{attempt}")
        result = compare("vllm point", prediction, measure(target, items, arrival))
        assert result.measured_failed == 0
        p50 = next(c for c in result.comparisons if c.quantile == 50.0)
        ratios.append(p50.predicted_s / p50.measured_s)
        if 0.5 < ratios[-1] < 2.0:
            return
    raise AssertionError(f"predicted / measured p50 outside 1/2..2 in both attempts: {ratios}")
