"""vLLM: metric names as documented for the V1 engine (``vllm:`` prefix), with V0 spellings second.

Source: vLLM's production-metrics documentation (metric list of the V1 engine) and its changelog of
renamed metrics (``gpu_cache_usage_perc`` -> ``kv_cache_usage_perc``, ``num_preemptions`` ->
``num_preemptions_total``, ``gpu_prefix_cache_hits`` -> ``prefix_cache_hits_total``).
"""

from __future__ import annotations

from ttft.engines.metrics import CommonMetric, MetricSource
from ttft.engines.prometheus import Scrape

SOURCES: dict[CommonMetric, MetricSource] = {
    CommonMetric.SERVER_TTFT: MetricSource("histogram", ("vllm:time_to_first_token_seconds",)),
    CommonMetric.QUEUE_TIME: MetricSource("histogram", ("vllm:request_queue_time_seconds",)),
    CommonMetric.PREFILL_TIME: MetricSource("histogram", ("vllm:request_prefill_time_seconds",)),
    CommonMetric.KV_USAGE: MetricSource(
        "gauge", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "fraction 0..1"
    ),
    CommonMetric.PREEMPTIONS: MetricSource(
        "counter", ("vllm:num_preemptions_total", "vllm:num_preemptions")
    ),
    CommonMetric.PREFIX_CACHE_HIT_TOKENS: MetricSource(
        "counter", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
    ),
    CommonMetric.PROMPT_TOKENS: MetricSource("counter", ("vllm:prompt_tokens_total",)),
    CommonMetric.GENERATION_TOKENS: MetricSource("counter", ("vllm:generation_tokens_total",)),
    CommonMetric.RUNNING: MetricSource("gauge", ("vllm:num_requests_running",)),
    CommonMetric.WAITING: MetricSource("gauge", ("vllm:num_requests_waiting",)),
}

BLIND_SPOTS: dict[CommonMetric, str] = {}


def kv_cache_mib(scrape: Scrape) -> float | None:
    """The KV cache vLLM allocated, from the labels of ``vllm:cache_config_info``
    (``kv_cache_memory_bytes``: set on the CPU backend from ``VLLM_CPU_KVCACHE_SPACE``, on a GPU
    only with ``--kv-cache-memory-bytes``); None where it does not say."""
    for sample in scrape.samples:
        if sample.name != "vllm:cache_config_info":
            continue
        value = dict(sample.labels).get("kv_cache_memory_bytes", "")
        try:
            size = float(value)
        except ValueError:
            return None
        return size / 2**20 if size > 0 else None
    return None
