"""The gateway benchmark's load: the scripted answer's shape and the three client modes.

``keepalive_loop`` (one pooled ``StreamingClient``, as SDKs), ``oneshot_loop`` (a new connection
per request, as curl) and ``burst`` (N new requests at the same instant) return, per request,
``(tag, scheduled, sent, first token)`` in absolute ``perf_counter_ns`` (None stamps for a
failure); ``benchmarks/gateway_overhead.py`` joins them with the upstream's own log.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.oneshot_client import OneShot, send_oneshot


@dataclass(frozen=True)
class Shape:
    """The scripted answer: the first token after ``first_ms``, then ``tokens`` - 1 more."""

    first_ms: float
    tokens: int
    interval_ms: float

    def script(self) -> dict[str, Any]:
        return {
            "first_token_delay_ms": self.first_ms,
            "n_tokens": self.tokens,
            "token_interval_ms": self.interval_ms,
        }

    @property
    def duration_s(self) -> float:
        return (self.first_ms + (self.tokens - 1) * self.interval_ms) / 1000


def shape_for(streams: int, token_ms: float | None, tokens: int) -> Shape:
    """With ``token_ms``: that per-event rate at every level. Without: 16 tokens after 20 ms,
    each stream lasting max(40 ms, streams / 300 s), so background token traffic stays near
    300 requests/s at every level."""
    if token_ms is not None:
        return Shape(20.0, tokens, token_ms)
    duration_ms = max(40.0, streams / 300 * 1000)
    return Shape(20.0, 16, (duration_ms - 20.0) / 15)


_tag = 0


def next_body(shape: Shape) -> dict[str, Any]:
    global _tag
    _tag += 1
    return {
        "model": "bench",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": shape.tokens,
        "stream": True,
        "ttft_tag": _tag,
        "ttft_script": shape.script(),
    }


Stamps = tuple[int, int, int | None, int | None]


async def keepalive_loop(url: str, streams: int, per_stream: int, shape: Shape) -> list[Stamps]:
    """``streams`` workers on one keep-alive client, each sending ``per_stream`` + 1 requests
    back to back.

    Workers start spread over one stream's duration, as streams of a live service are, and each
    worker's first request (which opens its connections everywhere) is not kept: what is
    measured is the steady state, not the thundering herd of the first instant.
    """
    kept: list[Stamps] = []
    anchor = RunAnchor.now()
    base = anchor.monotonic_ns
    async with StreamingClient(url, timeout_s=120) as client:

        async def worker(i: int) -> None:
            await asyncio.sleep(shape.duration_s * i / streams)
            for j in range(per_stream + 1):
                body = next_body(shape)
                record = RequestRecord(index=body["ttft_tag"])
                await client.send(body, record, anchor)
                if not j:
                    continue
                ok = record.ok and record.sent_ns is not None and record.scheduled_ns is not None
                kept.append(
                    (
                        body["ttft_tag"],
                        base + (record.scheduled_ns or 0),
                        base + record.sent_ns if ok and record.sent_ns is not None else None,
                        base + record.first_content_ns
                        if ok and record.first_content_ns is not None
                        else None,
                    )
                )

        await asyncio.gather(*(worker(i) for i in range(streams)))
    return kept


def _oneshot_stamps(result: OneShot) -> Stamps:
    if not result.ok:
        return (result.tag, result.started_ns, None, None)
    return (result.tag, result.started_ns, result.started_ns, result.first_token_ns)


async def oneshot_loop(url: str, streams: int, per_stream: int, shape: Shape) -> list[Stamps]:
    """Like ``keepalive_loop``, but every request opens (and closes) its own connection, so the
    proxy's accept and head parsing are inside each TTFT; all requests are kept."""
    endpoint = url + "/v1/chat/completions"
    kept: list[Stamps] = []

    async def worker(i: int) -> None:
        await asyncio.sleep(shape.duration_s * i / streams)
        for _ in range(per_stream):
            body = next_body(shape)
            kept.append(_oneshot_stamps(await send_oneshot(endpoint, body, tag=body["ttft_tag"])))

    await asyncio.gather(*(worker(i) for i in range(streams)))
    return kept


async def burst(url: str, count: int, shape: Shape, times: int = 1) -> list[Stamps]:
    """``count`` new requests at the same instant, each on a new connection; ``times`` such
    bursts, each after the previous one's streams ended and a short rest (one burst's p99 is
    one run of a few hundred samples: several make the median steadier)."""
    endpoint = url + "/v1/chat/completions"
    stamps: list[Stamps] = []
    for i in range(times):
        if i:
            await asyncio.sleep(0.2)
        bodies = [next_body(shape) for _ in range(count)]
        results = await asyncio.gather(
            *(send_oneshot(endpoint, b, tag=b["ttft_tag"]) for b in bodies)
        )
        stamps.extend(_oneshot_stamps(r) for r in results)
    return stamps
