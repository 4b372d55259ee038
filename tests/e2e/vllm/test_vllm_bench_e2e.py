"""`ttft bench` on a real vLLM: exact prompt lengths through its /tokenize and chat template,
every rung of the ladder, and server metrics mapped from the real /metrics."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

import pytest

from ttft.core.target import Target
from ttft.engines.control import ControlClient, ServerTokenizer
from ttft.engines.metrics import CommonMetric
from ttft.engines.prometheus import parse_exposition
from ttft.engines.vllm.adapter import ADAPTER
from ttft.engines.vllm.local import RunningVllm
from ttft.load.session import SessionResult, run_session
from ttft.workload.arrival import ClosedLoop
from ttft.workload.spec import WorkloadSpec

MAX_TOKENS = 4

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def bench_run(
    vllm_server: RunningVllm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SessionResult]:
    target = Target(vllm_server.base_url, vllm_server.model_name, vllm_server.metrics_url, "vllm")
    spec = WorkloadSpec(
        buckets=(64, 300),
        requests=3,
        max_tokens=MAX_TOKENS,
        warmup=1,
        arrivals=[ClosedLoop(1), ClosedLoop(3)],
    )
    out = tmp_path_factory.mktemp("vllm-bench") / "records.jsonl"
    yield run_session(target, spec, ServerTokenizer(target), out)


def test_prompt_lengths_hit_the_bucket_through_vllm_tokenize(bench_run: SessionResult) -> None:
    measured = [r for r in bench_run.records if r.phase == "warm"]
    assert len(measured) == 12 and all(r.ok for r in measured)
    for record in measured:
        bucket = int(record.cell.split()[0])
        assert record.prompt_tokens is not None
        assert record.prompt_tokens == bucket, (record.cell, record.prompt_tokens)


def test_every_rung_of_the_ladder_is_stamped_in_order(bench_run: SessionResult) -> None:
    for r in (r for r in bench_run.records if r.phase == "warm"):
        rungs = [
            r.sent_ns,
            r.headers_ns,
            r.first_byte_ns,
            r.first_event_ns,
            r.first_content_ns,
            r.done_ns,
        ]
        assert None not in rungs, r
        assert rungs == sorted(rungs)  # type: ignore[type-var]
        assert len(r.chunk_ns) >= 1


def test_server_metrics_come_from_the_real_exposition(
    bench_run: SessionResult, vllm_server: RunningVllm
) -> None:
    """Every common metric the adapter maps is present in vLLM's own /metrics, and the window
    deltas match what was sent."""
    import urllib.request

    with urllib.request.urlopen(vllm_server.metrics_url, timeout=10) as resp:
        names = parse_exposition(resp.read().decode()).names()
    for metric, source in ADAPTER.sources.items():
        probe = {f"{n}_sum" if source.kind == "histogram" else n for n in source.names}
        assert probe & names, f"{metric}: none of {source.names} in vLLM's /metrics"
    for cell in bench_run.bench.cells:
        if cell.plan.phase != "warm":
            continue
        assert cell.server is not None
        metrics = cell.server["metrics"]
        assert cell.server["unavailable"] == {} or not cell.server["unavailable"]
        n = len(cell.records)
        assert metrics[CommonMetric.GENERATION_TOKENS.value]["value"] == MAX_TOKENS * n
        assert metrics[CommonMetric.PROMPT_TOKENS.value]["value"] == sum(
            r.prompt_tokens or 0 for r in cell.records
        )
        assert metrics[CommonMetric.SERVER_TTFT.value]["count"] == n
        assert metrics[CommonMetric.QUEUE_TIME.value]["count"] == n
        assert CommonMetric.KV_USAGE.value in metrics and CommonMetric.PREEMPTIONS.value in metrics


def test_client_ttft_sits_above_vllm_own_ttft_for_the_same_requests(
    bench_run: SessionResult,
) -> None:
    """vLLM times from the request's arrival in its engine to the first token; the client adds
    the HTTP request, the chat template and tokenization in the API server, detokenization and
    the SSE write: never less, and close at concurrency 1."""
    for cell in bench_run.bench.cells:
        if cell.plan.phase != "warm" or cell.server is None:
            continue
        server = cell.server["metrics"][CommonMetric.SERVER_TTFT.value]
        server_ms = 1000 * server["value"] / server["count"]
        client_ms = statistics.mean(
            (r.first_content_ns - r.sent_ns) / 1e6
            for r in cell.records
            if r.first_content_ns and r.sent_ns
        )
        assert client_ms >= 0.95 * server_ms, (cell.plan.cell, client_ms, server_ms)
        assert client_ms - server_ms < max(server_ms, 200.0), (cell.plan.cell, client_ms, server_ms)


def test_chat_template_tokens_are_counted_without_inference(vllm_server: RunningVllm) -> None:
    target = Target(vllm_server.base_url, vllm_server.model_name, vllm_server.metrics_url, "vllm")
    client = ControlClient(target)
    bare = len(client.tokenize("one two three", add_special=False))
    chat = client.chat_tokens([{"role": "user", "content": "one two three"}])
    assert chat is not None and chat > bare  # the template's own tokens
    assert client.detokenize(client.tokenize("hello there", add_special=False)) == "hello there"
    assert client.context_limit() == vllm_server.config.max_model_len
