"""SGLang: metric names from its production-metrics documentation (``sglang:`` prefix).

Metrics exist only when the server runs with ``--enable-metrics``. SGLang calls preemption
"retraction" (requests sent back to the queue when KV memory runs out).
"""

from __future__ import annotations

from ttft.engines.metrics import CommonMetric, MetricSource

SOURCES: dict[CommonMetric, MetricSource] = {
    CommonMetric.SERVER_TTFT: MetricSource("histogram", ("sglang:time_to_first_token_seconds",)),
    CommonMetric.QUEUE_TIME: MetricSource("histogram", ("sglang:queue_time_seconds",)),
    CommonMetric.KV_USAGE: MetricSource("gauge", ("sglang:token_usage",), "fraction 0..1"),
    CommonMetric.PREEMPTIONS: MetricSource(
        "counter", ("sglang:num_retracted_reqs_total", "sglang:num_retracted_reqs")
    ),
    CommonMetric.PREFIX_CACHE_HIT_TOKENS: MetricSource("counter", ("sglang:cached_tokens_total",)),
    CommonMetric.PROMPT_TOKENS: MetricSource("counter", ("sglang:prompt_tokens_total",)),
    CommonMetric.GENERATION_TOKENS: MetricSource("counter", ("sglang:generation_tokens_total",)),
    CommonMetric.RUNNING: MetricSource("gauge", ("sglang:num_running_reqs",)),
    CommonMetric.WAITING: MetricSource("gauge", ("sglang:num_queue_reqs",)),
}

BLIND_SPOTS: dict[CommonMetric, str] = {
    CommonMetric.PREFILL_TIME: "SGLang exports no per-request prefill-time metric",
}
