"""llama-server's /metrics (with ``--metrics``): counters and gauges, no TTFT histogram."""

from __future__ import annotations

from ttft.engines.metrics import CommonMetric, MetricSource

SOURCES: dict[CommonMetric, MetricSource] = {
    CommonMetric.PREFILL_TIME: MetricSource(
        "counter", ("llamacpp:prompt_seconds_total",), "seconds of prefill, summed over requests"
    ),
    CommonMetric.PROMPT_TOKENS: MetricSource(
        "counter", ("llamacpp:prompt_tokens_total",), "prompt tokens processed (cached excluded)"
    ),
    CommonMetric.PREFIX_CACHE_HIT_TOKENS: MetricSource(
        "counter", ("llamacpp:prompt_tokens_cached_total", "llamacpp:cached_tokens_total")
    ),
    CommonMetric.GENERATION_TOKENS: MetricSource("counter", ("llamacpp:tokens_predicted_total",)),
    CommonMetric.RUNNING: MetricSource("gauge", ("llamacpp:requests_processing",)),
    CommonMetric.WAITING: MetricSource(
        "gauge", ("llamacpp:requests_deferred",), "requests waiting for a free slot"
    ),
}

BLIND_SPOTS: dict[CommonMetric, str] = {
    CommonMetric.SERVER_TTFT: "llama-server exports no TTFT histogram "
    "(per-response `timings.prompt_ms` stands in)",
    CommonMetric.QUEUE_TIME: "llama-server exports no queue-time metric "
    "(requests_deferred counts waiting requests)",
    CommonMetric.KV_USAGE: "llama-server exports no KV-cache usage metric",
    CommonMetric.PREEMPTIONS: "llama-server does not preempt: a request waits for a slot",
}
