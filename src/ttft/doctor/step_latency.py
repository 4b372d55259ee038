"""Cold start (the first request after a start) and head-of-line blocking (short requests
behind a long prefill)."""

from __future__ import annotations

import asyncio

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.doctor.context import DoctorContext, median, ttft_ms, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.probe.sampler import sample_async
from ttft.workload.requests import WorkItem

COLD_PROMPT_TOKENS = 200
SHORT_TOKENS = 32
# A log is a mixed load when its longest prompt is at least twice its shortest and longer by
# ~500 tokens (2000 characters): enough prefill for a short request to notice waiting behind it.
# Shared system prompts count on both sides, so a plain ratio alone would miss real mixes.
LONG_RATIO = 2
LONG_EXTRA_CHARS = 2000


def cold_start(ctx: DoctorContext) -> StepResult:
    step = StepResult("cold_start", "Cold start: the first request after the engine started")
    if not ctx.managed or ctx.cold_record is None:
        step.status = StepStatus.SKIPPED
        step.notes.append("doctor did not start the engine, so no request was the first one")
        return step
    cold = ttft_ms(ctx.cold_record)
    warm_items = [ctx.chat(ctx.text(COLD_PROMPT_TOKENS, f"doctor/warm/{i}")) for i in range(3)]
    warm = median(ttfts_ms(ctx.sample(warm_items).records))
    if cold is None or warm is None:
        step.status = StepStatus.FAILED
        return step
    step.evidence += [
        Evidence("first request after start", cold, "ms", "client"),
        Evidence("same size, warm (p50)", warm, "ms", "client"),
    ]
    step.summary = f"first request {cold:.0f} ms against {warm:.0f} ms warm"
    if cold > 2 * warm + 200:
        step.add_finding(
            rule="latency/cold-start",
            title=f"the first request after a start takes {cold:.0f} ms, warm ones {warm:.0f} ms",
            message="weights paged in on first use (mmap) and one-time kernel set-up",
            action=ctx.advice.cold_start,
            tier=CostTier.SCHEDULING,
            confidence=Confidence.MEDIUM,
            expected_gain_ms=cold - warm,
        )
    return step


def _lengths(ctx: DoctorContext) -> tuple[WorkItem, int] | None:
    """The longest real prompt, when the log mixes long and short ones."""
    sized = [
        (len(str(item.body.get("messages") or item.body.get("prompt") or "")), item)
        for item in ctx.real_items
    ]
    if len(sized) < 2:
        return None
    sized.sort(key=lambda pair: pair[0])
    shortest, (longest, item) = sized[0][0], sized[-1]
    if shortest == 0 or longest < LONG_RATIO * shortest or longest - shortest < LONG_EXTRA_CHARS:
        return None
    return item, longest


async def _short_behind_long(ctx: DoctorContext, long_item: WorkItem, short: WorkItem) -> float:
    anchor_extra = ctx.extra_body()

    async def long_one() -> None:
        await sample_async(ctx.target, ctx.marked([long_item]), extra_body=anchor_extra)

    task = asyncio.create_task(long_one())
    await asyncio.sleep(0.15)  # let the long prefill start first
    result = await sample_async(ctx.target, ctx.marked([short]), extra_body=anchor_extra)
    await task
    value = ttft_ms(result.records[0]) if result.records else None
    return value if value is not None else float("nan")


def head_of_line(ctx: DoctorContext) -> StepResult:
    step = StepResult("head_of_line", "Head-of-line blocking: short requests behind long ones")
    mixed = _lengths(ctx)
    if mixed is None and not ctx.force_hol:
        step.status = StepStatus.SKIPPED
        step.notes.append("no mixed long/short prompts in --requests-log (or --hol not given)")
        return step
    long_base = mixed[0] if mixed is not None else ctx.chat(ctx.text(1024, "doctor/hol/long"))
    shorts = [ctx.chat(ctx.text(SHORT_TOKENS, f"doctor/hol/short/{i}")) for i in range(5)]
    alone = median(ttfts_ms(ctx.sample(shorts[:3]).records))
    behind = []
    for i in range(2):
        if ctx.seconds_left() < 15:
            step.notes.append("budget ran out during the head-of-line measurement")
            break
        # A distinct first line keeps the long prompt out of the prefix cache each time.
        body = dict(long_base.body)
        messages = [dict(m) for m in body.get("messages", [])]
        if messages:
            messages[0]["content"] = f"Case {i}.\n" + str(messages[0].get("content") or "")
            body["messages"] = messages
        long_item = WorkItem({**body, "max_tokens": 1}, long_base.api, "long")
        value = asyncio.run(_short_behind_long(ctx, long_item, shorts[3 + i]))
        if value == value:  # not NaN
            behind.append(value)
    worst = median(behind)
    if alone is None or worst is None:
        step.status = StepStatus.FAILED
        return step
    step.evidence += [
        Evidence("short request TTFT alone (p50)", alone, "ms", "client"),
        Evidence("short request TTFT behind a long prompt (p50)", worst, "ms", "client"),
    ]
    step.summary = f"a short request takes {worst:.0f} ms behind a long prompt, {alone:.0f} alone"
    if worst > 3 * alone + 100:
        fix = ctx.advice.head_of_line
        step.add_finding(
            rule="scheduling/head-of-line",
            title=f"short requests wait behind long prefills: {alone:.0f} ms alone, "
            f"{worst:.0f} ms while a long prompt is being prefilled",
            message="a long prefill occupies the engine and short requests cannot start until "
            "it finishes (p50 fine, p99 bad)",
            action=f"{fix}; or separate long and short requests into lanes (`ttft gateway` "
            "short/long lanes)",
            tier=CostTier.SCHEDULING,
            confidence=Confidence.HIGH,
            expected_gain_ms=worst - alone,
        )
    return step
