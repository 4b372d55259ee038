"""The article's step 2: the server timeline split into queue, prefill, first decode and
serialization/transport, each part with the source it was read from.

Three sources, and what each can see:

- engine histograms (vLLM, SGLang): queue time, prefill time (vLLM only) and the engine's own
  TTFT, as window means over the same requests the client timed;
- llama-server's per-response ``timings``: ``prompt_ms`` (prefill, which also samples the first
  token) and ``predicted_per_token_ms`` (one later decode step);
- the client's ladder: sent, response headers, first SSE event, first content token.

Where a part cannot be separated the report says which parts it is folded into, instead of
printing one lump under one name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.records import RequestRecord
from ttft.doctor.context import median, server_ms, ttfts_ms


@dataclass(frozen=True)
class Part:
    name: str  # "queue", "prefill", "first decode", "serialization + transport", ...
    ms: float | None  # None: not visible from any source
    source: str  # where the number came from, or why there is none


def _rung(records: Sequence[RequestRecord], attr: str) -> float | None:
    values = [
        (getattr(r, attr) - r.sent_ns) / 1e6
        for r in records
        if r.sent_ns is not None and getattr(r, attr) is not None
    ]
    return median(values)


def _hist_ms(metrics: Mapping[str, Any], name: str) -> float | None:
    entry = metrics.get(name) or {}
    mean = entry.get("mean")
    return 1000.0 * float(mean) if mean is not None else None


def split(
    records: Sequence[RequestRecord], server: Mapping[str, Any] | None, kind: str | None
) -> tuple[float | None, list[Part], list[str]]:
    """Client TTFT (p50), its parts, and notes on what could not be seen."""
    client = median(ttfts_ms(records))
    metrics: Mapping[str, Any] = (server or {}).get("metrics", {})
    source_of = {k: str(v.get("source", k)) for k, v in metrics.items() if isinstance(v, dict)}
    prompt_ms = median([v for v in (server_ms(r, "prompt_ms") for r in records) if v is not None])
    step_ms = median(
        [v for v in (server_ms(r, "predicted_per_token_ms") for r in records) if v is not None]
    )
    queue = _hist_ms(metrics, "queue_time_s")
    prefill_hist = _hist_ms(metrics, "prefill_time_s")
    engine_ttft = _hist_ms(metrics, "server_ttft_s")
    parts: list[Part] = []
    notes: list[str] = []
    if queue is not None:
        parts.append(Part("queue", queue, f"engine histogram {source_of['queue_time_s']}"))
    else:
        parts.append(Part("queue", None, "not exported by this engine"))
    if prompt_ms is not None:
        parts.append(Part("prefill", prompt_ms, "server timings (timings.prompt_ms)"))
    elif prefill_hist is not None:
        parts.append(
            Part("prefill", prefill_hist, f"engine histogram {source_of['prefill_time_s']}")
        )
    elif engine_ttft is not None and queue is not None:
        parts.append(
            Part(
                "prefill",
                max(engine_ttft - queue, 0.0),
                "engine TTFT minus queue time (histogram means)",
            )
        )
    else:
        parts.append(Part("prefill", None, "no per-request prefill time from this engine"))
    # The first token is sampled from the logits of the prompt's own forward pass, so its
    # "first decode" is inside the prefill number; a later decode step is shown for scale.
    first_decode = Part(
        "first decode",
        None,
        "inside prefill: the first token is sampled from the prefill pass"
        + (f"; a later decode step takes {step_ms:.1f} ms" if step_ms is not None else ""),
    )
    parts.append(first_decode)
    prefill = parts[1].ms
    if client is not None and engine_ttft is not None:
        parts.append(
            Part(
                "serialization + transport",
                max(client - engine_ttft, 0.0),
                f"client TTFT minus engine TTFT ({source_of['server_ttft_s']})",
            )
        )
    elif client is not None and prefill is not None:
        rest = max(client - prefill - (queue or 0.0), 0.0)
        if queue is None:
            parts.append(
                Part("queue + serialization + transport", rest, "client TTFT minus prefill")
            )
            notes.append(
                "queue cannot be separated from serialization + transport: "
                f"{kind or 'this engine'} reports no queue time per request (at concurrency 1 "
                "with a free slot it should be near 0)"
            )
        else:
            parts.append(
                Part("serialization + transport", rest, "client TTFT minus queue and prefill")
            )
    else:
        parts.append(Part("serialization + transport", None, "no server-side time to subtract"))
        notes.append(
            "serialization + transport cannot be seen: the server reports neither per-request "
            "timings nor a TTFT histogram"
        )
    headers = _rung(records, "headers_ns")
    first_event = _rung(records, "first_event_ns")
    if headers is not None:
        parts.append(Part("response headers after send", headers, "client ladder"))
    if first_event is not None and client is not None:
        parts.append(
            Part(
                "first content after first SSE event",
                max(client - first_event, 0.0),
                "client ladder",
            )
        )
    return client, parts, notes
