"""Step 1: client versus server. Does the stream reach the client as the server produced it?

A proxy that buffers (or gzips) an SSE stream holds every event until the end: the client's
first token then arrives after the whole answer was generated, and all chunks arrive together.
Both show in one streamed request whose length is known: the gap between client TTFT and the
server's own prefill time, and the spread of chunk arrivals against the server's decode time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.records import RequestRecord
from ttft.doctor.context import DoctorContext, median, server_ms, ttft_ms, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.probe.sampler import Sample

STREAM_TOKENS = 32
PROMPT_TOKENS = 200
GAP_MS = 300.0  # the article's line: a client/server gap above this is transport
BUNCHED_ITL_MS = 0.5  # chunks closer than this arrived in one read, not as generated


@dataclass
class StreamShape:
    ttft_ms: float | None
    server_prefill_ms: float | None
    gap_ms: float | None  # client TTFT minus server prefill: transport plus first decode
    spread_ms: float | None  # first to last text chunk at the client
    server_decode_ms: float | None  # what the server spent generating the rest
    median_itl_ms: float | None
    chunks: int
    gzip: bool

    @property
    def bunched(self) -> bool:
        if self.chunks < 8 or self.median_itl_ms is None:
            return False
        if self.server_decode_ms is not None and self.spread_ms is not None:
            return self.server_decode_ms > 50 and self.spread_ms < 0.2 * self.server_decode_ms
        return self.median_itl_ms < BUNCHED_ITL_MS


def shape(record: RequestRecord) -> StreamShape:
    chunks = record.chunk_ns
    itls = sorted((b - a) / 1e6 for a, b in itertools.pairwise(chunks))
    prefill = server_ms(record, "prompt_ms")
    ttft = ttft_ms(record)
    return StreamShape(
        ttft_ms=ttft,
        server_prefill_ms=prefill,
        gap_ms=(ttft - prefill) if ttft is not None and prefill is not None else None,
        spread_ms=(chunks[-1] - chunks[0]) / 1e6 if len(chunks) > 1 else None,
        server_decode_ms=server_ms(record, "predicted_ms"),
        median_itl_ms=itls[len(itls) // 2] if itls else None,
        chunks=len(chunks),
        gzip=(record.content_encoding or "").lower() == "gzip",
    )


def _median_of(shapes: list[StreamShape], attr: str) -> float | None:
    return median([v for v in (getattr(s, attr) for s in shapes) if v is not None])


def _measure(ctx: DoctorContext, encoding: str, seed: str) -> tuple[Sample, list[StreamShape]]:
    items = [
        ctx.chat(ctx.text(PROMPT_TOKENS, f"doctor/transport/{seed}/{i}"), max_tokens=STREAM_TOKENS)
        for i in range(3)
    ]
    result = ctx.sample(items, headers={"Accept-Encoding": encoding})
    return result, [shape(r) for r in result.ok]


def run(ctx: DoctorContext) -> StepResult:
    step = StepResult("transport", "Client vs server: does the stream arrive as it is produced?")
    plain, plain_shapes = _measure(ctx, "identity", "identity")
    # Browsers, httpx and aiohttp ask for gzip by default; a proxy that compresses event streams
    # only shows itself to such clients.
    gz, gz_shapes = _measure(ctx, "gzip", "gzip")
    ctx.handoff.transport_records = plain.records
    ctx.handoff.transport_server = plain.server
    failed = [r for r in plain.records + gz.records if r.error is not None]
    if failed:
        kinds = sorted({r.error.kind for r in failed if r.error})
        first = failed[0].error.message[:160] if failed[0].error else ""
        step.notes.append(f"{len(failed)} of 6 probe requests failed ({', '.join(kinds)}: {first})")
    if not plain_shapes and not gz_shapes:
        step.status = StepStatus.FAILED
        step.summary = "no probe request succeeded; nothing to compare"
        return step
    for label, shapes in (("identity", plain_shapes), ("gzip", gz_shapes)):
        for attr, name in (
            ("ttft_ms", "client TTFT"),
            ("server_prefill_ms", "server prefill"),
            ("gap_ms", "client minus server"),
            ("median_itl_ms", "median gap between chunks"),
        ):
            value = _median_of(shapes, attr)
            if value is not None:
                step.evidence.append(Evidence(f"{name} ({label})", value, "ms", "client+server"))
    plain_bunched = sum(s.bunched for s in plain_shapes) >= 2
    gz_bunched = sum(s.bunched for s in gz_shapes) >= 2
    gzip_seen = any(s.gzip for s in gz_shapes)
    direct_gap = _direct_gap(ctx, step)
    histogram_gap = _histogram_gap(plain, plain_shapes, step)
    gap_plain = _median_of(plain_shapes, "gap_ms")
    gap_gz = _median_of(gz_shapes, "gap_ms")
    worst_gap = max(
        (g for g in (gap_plain, gap_gz, direct_gap, histogram_gap) if g is not None), default=None
    )
    if worst_gap is not None:
        ctx.handoff.transport_gap_ms = float(worst_gap)
    if plain_bunched or gz_bunched:
        _buffering_finding(step, plain_bunched, gz_bunched, gzip_seen, worst_gap)
    elif worst_gap is not None and worst_gap > GAP_MS:
        step.add_finding(
            rule="transport/slow-first-byte",
            title=f"the first token reaches the client {worst_gap:.0f} ms after the server "
            "finished prefill",
            message="time spent between server and client (proxy, network, TLS or a queue in "
            "front of the engine)",
            action="measure the same request directly against the engine (--direct-url) and "
            "remove the hop that adds the delay",
            tier=CostTier.TRANSPORT,
            confidence=Confidence.MEDIUM,
            expected_gain_ms=worst_gap,
            gain=f"up to {worst_gap:.0f} ms of TTFT",
        )
    if any(f.rule in ("transport/gzip-stream", "transport/buffered-stream") for f in step.findings):
        step.summary = "the stream arrives bunched: held back in transit"
    elif step.findings:
        step.summary = "transport adds delay before the first token"
    else:
        step.summary = "the stream arrives as it is produced"
    return step


def _histogram_gap(sample: Sample, shapes: list[StreamShape], step: StepResult) -> float | None:
    """Client TTFT minus the engine's own TTFT histogram mean over the same window, for engines
    that report no per-response timings (vLLM, SGLang)."""
    if any(s.server_prefill_ms is not None for s in shapes):
        return None
    server_ttft = ((sample.server or {}).get("metrics", {}).get("server_ttft_s") or {}).get("mean")
    client = _median_of(shapes, "ttft_ms")
    if server_ttft is None or client is None:
        return None
    server_ms_value = 1000.0 * float(server_ttft)
    step.evidence.append(
        Evidence("server's own TTFT (metrics mean)", server_ms_value, "ms", "metrics")
    )
    return client - server_ms_value


def _direct_gap(ctx: DoctorContext, step: StepResult) -> float | None:
    """With --direct-url: the same probe straight at the engine; the TTFT difference."""
    if ctx.direct is None:
        return None
    from ttft.probe.sampler import sample

    items = [
        ctx.chat(ctx.text(PROMPT_TOKENS, f"doctor/direct/{i}"), max_tokens=STREAM_TOKENS)
        for i in range(3)
    ]
    headers = {"Accept-Encoding": "gzip"}
    via = ttfts_ms(ctx.sample(items, headers=headers).records)
    items2 = [
        ctx.chat(ctx.text(PROMPT_TOKENS, f"doctor/direct2/{i}"), max_tokens=STREAM_TOKENS)
        for i in range(3)
    ]
    direct = ttfts_ms(
        sample(ctx.direct, ctx.marked(items2), headers=headers, extra_body=ctx.extra_body()).records
    )
    if not via or not direct:
        step.notes.append("the direct comparison failed; see the request errors")
        return None
    via_ms, direct_ms = median(via) or 0.0, median(direct) or 0.0
    step.evidence.append(Evidence("client TTFT through the proxy", via_ms, "ms", "client"))
    step.evidence.append(Evidence("client TTFT direct to the engine", direct_ms, "ms", "client"))
    return via_ms - direct_ms


def _buffering_finding(
    step: StepResult, plain: bool, gz: bool, gzip_seen: bool, gap: float | None
) -> None:
    extra = [Evidence("response Content-Encoding", "gzip" if gzip_seen else "none", "", "client")]
    if gz and not plain:
        cause = (
            "a proxy compresses the event stream with gzip, which holds events until its "
            "buffer fills or the stream ends"
        )
        action = (
            "nginx: `gzip off;` in the location that proxies the stream (or remove "
            "text/event-stream from gzip_types); other proxies: disable compression for "
            "Content-Type text/event-stream"
        )
        rule = "transport/gzip-stream"
    else:
        cause = (
            "a proxy buffers the response stream (nginx proxy_buffering is on by default; "
            "`proxy_ignore_headers X-Accel-Buffering` also defeats the engine's opt-out)"
        )
        action = (
            "nginx: `proxy_buffering off;` in the location (and drop "
            "`proxy_ignore_headers X-Accel-Buffering`), or send `X-Accel-Buffering: no` from "
            "the upstream"
        )
        rule = "transport/buffered-stream"
    step.add_finding(
        rule=rule,
        title="all chunks of a streamed answer reach the client at once, at the end"
        + (f"; first token {gap:.0f} ms after the server's prefill" if gap is not None else ""),
        message=cause,
        action=action,
        tier=CostTier.TRANSPORT,
        confidence=Confidence.HIGH,
        evidence=tuple(step.evidence + extra),
        expected_gain_ms=gap,
        gain=(
            f"about {gap:.0f} ms of TTFT for a {STREAM_TOKENS}-token answer, more for longer ones"
        )
        if gap is not None
        else "the whole answer's generation time",
    )
