"""The metrics ``ttft bench`` reports, each a small declarative object over one RequestRecord.

A ``Metric`` yields at most one value per request (``ttft``, ``e2e``, ...); a ``ListMetric`` yields
any number (``itl``: every gap between consecutive chunks), and its statistics pool all values of
all requests. Durations are in ns (unit ``"ns"``), counts in tokens (unit ``"tokens"``); a metric
returns ``None`` (or an empty list) when the request never reached the rungs it needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from ttft.core.records import RequestRecord
from ttft.core.units import DURATION_UNIT, NS_PER_MS, TOKENS_UNIT

Number = int | float


@dataclass(frozen=True, slots=True)
class Metric:
    """One value per request, or ``None`` when the request lacks what the metric needs."""

    name: str
    unit: str
    description: str
    fn: Callable[[RequestRecord], Number | None]

    def values(self, record: RequestRecord) -> list[Number]:
        value = self.fn(record)
        return [] if value is None else [value]


@dataclass(frozen=True, slots=True)
class ListMetric:
    """Any number of values per request; statistics pool them over all requests."""

    name: str
    unit: str
    description: str
    fn: Callable[[RequestRecord], list[Number]]

    def values(self, record: RequestRecord) -> list[Number]:
        return self.fn(record)


AnyMetric = Metric | ListMetric


def _interval(start: int | None, end: int | None) -> int | None:
    if start is None or end is None:
        return None
    return end - start


def output_tokens(record: RequestRecord) -> int | None:
    """Completion tokens as the server counted them, or else the number of text chunks."""
    if record.completion_tokens is not None:
        return record.completion_tokens
    return len(record.chunk_ns) if record.chunk_ns else None


def _tpot(record: RequestRecord) -> float | None:
    # The last text chunk marks the last token's arrival; done_ns also holds the stream's tail
    # (usage chunk, [DONE], close), so it is used only when the chunks cannot tell (one chunk
    # carrying every token).
    first = record.first_content_ns
    tokens = output_tokens(record)
    if first is None or tokens is None or tokens < 2:
        return None
    end: int | None = None
    if record.chunk_ns and record.chunk_ns[-1] > first:
        end = record.chunk_ns[-1]
    elif record.done_ns is not None and record.done_ns > first:
        end = record.done_ns
    if end is None:
        return None
    return (end - first) / (tokens - 1)


def _second_token(record: RequestRecord) -> int | None:
    chunks = record.chunk_ns
    return _interval(record.sent_ns, chunks[1]) if len(chunks) > 1 else None


def _itl(record: RequestRecord) -> list[Number]:
    chunks = record.chunk_ns
    return [later - earlier for earlier, later in pairwise(chunks)]


def _server(key: str, scale: float = 1.0) -> Callable[[RequestRecord], Number | None]:
    def read(record: RequestRecord) -> Number | None:
        timings = record.server_timings
        if not timings or key not in timings:
            return None
        value = timings[key]
        return value * scale if scale != 1.0 else value

    return read


METRICS: tuple[AnyMetric, ...] = (
    Metric(
        "ttft",
        DURATION_UNIT,
        "time to first token: sent -> first non-empty content or reasoning text",
        lambda r: _interval(r.sent_ns, r.first_content_ns),
    ),
    Metric(
        "ttft_output",
        DURATION_UNIT,
        "time to first output token: sent -> first non-empty content (reasoning excluded)",
        lambda r: _interval(r.sent_ns, r.first_output_ns),
    ),
    Metric(
        "time_to_headers",
        DURATION_UNIT,
        "sent -> response headers",
        lambda r: _interval(r.sent_ns, r.headers_ns),
    ),
    Metric(
        "time_to_first_byte",
        DURATION_UNIT,
        "sent -> first body byte",
        lambda r: _interval(r.sent_ns, r.first_byte_ns),
    ),
    Metric(
        "time_to_first_event",
        DURATION_UNIT,
        "sent -> first SSE event (may be a role-only chunk, not a token)",
        lambda r: _interval(r.sent_ns, r.first_event_ns),
    ),
    Metric(
        "time_to_role_chunk",
        DURATION_UNIT,
        "sent -> first chunk announcing the assistant's role (delta.role), with or without text",
        lambda r: _interval(r.sent_ns, r.first_role_ns),
    ),
    Metric(
        "time_to_first_reasoning",
        DURATION_UNIT,
        "sent -> first non-empty reasoning text (reasoning_content / reasoning)",
        lambda r: _interval(r.sent_ns, r.first_reasoning_ns),
    ),
    Metric(
        "time_to_first_tool_call",
        DURATION_UNIT,
        "sent -> first chunk with a non-empty delta.tool_calls (arguments may still be empty)",
        lambda r: _interval(r.sent_ns, r.first_tool_call_ns),
    ),
    Metric(
        "time_to_second_token",
        DURATION_UNIT,
        "sent -> the second chunk that carried text (content, reasoning or tool arguments)",
        _second_token,
    ),
    Metric(
        "client_wait",
        DURATION_UNIT,
        "scheduled -> sent: time the request waited inside the client",
        lambda r: _interval(r.scheduled_ns, r.sent_ns),
    ),
    Metric(
        "ttft_from_scheduled",
        DURATION_UNIT,
        "scheduled -> first content token: TTFT including client-side waiting",
        lambda r: _interval(r.scheduled_ns, r.first_content_ns),
    ),
    Metric(
        "e2e",
        DURATION_UNIT,
        "sent -> done: the whole request",
        lambda r: _interval(r.sent_ns, r.done_ns),
    ),
    Metric(
        "tpot",
        DURATION_UNIT,
        "time per output token after the first: (last chunk - first content) / (tokens - 1)",
        _tpot,
    ),
    ListMetric(
        "itl",
        DURATION_UNIT,
        "inter-token latency: every gap between consecutive text chunks, pooled",
        _itl,
    ),
    Metric(
        "server_prompt_ms",
        DURATION_UNIT,
        "server-reported prompt processing time (timings.prompt_ms), kept in ns",
        _server("prompt_ms", NS_PER_MS),
    ),
    Metric(
        "server_cache_n",
        TOKENS_UNIT,
        "server-reported prompt tokens reused from the cache (timings.cache_n)",
        _server("cache_n"),
    ),
    Metric(
        "server_prompt_n",
        TOKENS_UNIT,
        "server-reported prompt tokens processed, cached ones excluded (timings.prompt_n)",
        _server("prompt_n"),
    ),
    Metric("prompt_tokens", TOKENS_UNIT, "prompt tokens (usage)", lambda r: r.prompt_tokens),
    Metric(
        "cached_tokens",
        TOKENS_UNIT,
        "prompt tokens served from the prefix cache (usage)",
        lambda r: r.cached_tokens,
    ),
    Metric(
        "completion_tokens",
        TOKENS_UNIT,
        "output tokens (usage, or else the number of text chunks)",
        output_tokens,
    ),
)

HEADLINE = "ttft"

_BY_NAME = {metric.name: metric for metric in METRICS}


def metric_names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def get_metric(name: str) -> AnyMetric | None:
    """The metric called ``name``, or ``None`` if there is none."""
    return _BY_NAME.get(name)
