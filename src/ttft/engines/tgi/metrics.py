"""Text Generation Inference: metric names from its documented ``tgi_`` metrics."""

from __future__ import annotations

from ttft.engines.metrics import CommonMetric, MetricSource

SOURCES: dict[CommonMetric, MetricSource] = {
    CommonMetric.QUEUE_TIME: MetricSource("histogram", ("tgi_request_queue_duration",)),
    CommonMetric.PROMPT_TOKENS: MetricSource(
        "histogram", ("tgi_request_input_length",), "histogram of prompt lengths; sum = tokens"
    ),
    CommonMetric.GENERATION_TOKENS: MetricSource(
        "histogram", ("tgi_request_generated_tokens",), "sum = tokens"
    ),
    CommonMetric.RUNNING: MetricSource("gauge", ("tgi_batch_current_size",)),
    CommonMetric.WAITING: MetricSource("gauge", ("tgi_queue_size",)),
}

BLIND_SPOTS: dict[CommonMetric, str] = {
    CommonMetric.SERVER_TTFT: "TGI exports no time-to-first-token histogram",
    CommonMetric.PREFILL_TIME: "TGI times prefill per batch, not per request",
    CommonMetric.KV_USAGE: "TGI exports no KV-cache usage gauge",
    CommonMetric.PREEMPTIONS: "TGI exports no preemption counter",
    CommonMetric.PREFIX_CACHE_HIT_TOKENS: "TGI exports no prefix-cache hit counter",
}
