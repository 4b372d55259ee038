"""Steps 2 and 3: the server's own timeline, and where load makes p99 break from p50."""

from __future__ import annotations

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.records import RequestRecord
from ttft.doctor.changes import more_slots
from ttft.doctor.context import DoctorContext, describe_levels, median, server_ms, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.doctor.pressure import (
    KV_BAND,
    LevelView,
    gpu_evidence,
    gpu_finding,
    kv_evidence,
    kv_room,
    preemption_finding,
)
from ttft.doctor.slo_check import check_slos
from ttft.doctor.timeline import split
from ttft.engines.gpu import summarize_window
from ttft.engines.registry import adapter_for
from ttft.probe.sampler import Sample

CAPACITY_PROMPT_TOKENS = 256


def timeline(ctx: DoctorContext) -> StepResult:
    """Queue / prefill / first decode / serialization + transport, each with its source."""
    step = StepResult("timeline", "Server timeline: queue, prefill, first decode, serialization")
    records = [r for r in ctx.handoff.transport_records if r.ok]
    if not records:
        step.status = StepStatus.SKIPPED
        step.notes.append("no successful request from the transport step to take apart")
        return step
    client, parts, notes = split(records, ctx.handoff.transport_server, ctx.engine_kind)
    cached = median([float(r.cached_tokens) for r in records if r.cached_tokens is not None])
    if client is not None:
        step.evidence.append(Evidence("client TTFT", client, "ms", "client"))
    for part in parts:
        if part.ms is not None:
            step.evidence.append(Evidence(part.name, part.ms, "ms", part.source))
        else:
            step.notes.append(f"{part.name}: not seen ({part.source})")
    if cached is not None:
        step.evidence.append(Evidence("prompt tokens reused from cache", cached, "tokens", ""))
    step.notes += notes
    prefill = next((p.ms for p in parts if p.name == "prefill"), None)
    if client and prefill is not None:
        step.summary = f"prefill is {100 * prefill / client:.0f}% of client TTFT at concurrency 1"
    else:
        step.summary = "the server reports no per-request prefill time"
    if ctx.engine_kind:
        for metric, why in adapter_for(ctx.engine_kind).unavailable().items():
            step.notes.append(f"cannot see {metric.value}: {why}")
    else:
        step.notes.append("engine kind unknown (no recognised /metrics): server view is limited")
    return step


def _level_view(ctx: DoctorContext, level: int, result: Sample) -> LevelView | None:
    values = sorted(ttfts_ms(result.records))
    if not values:
        return None
    view = LevelView(
        level, values[len(values) // 2], values[min(len(values) - 1, int(0.99 * len(values)))]
    )
    prefills = [server_ms(r, "prompt_ms") for r in result.ok]
    waits = [t - p for t, p in zip(ttfts_ms(result.ok), prefills, strict=False) if p is not None]
    metrics = (result.server or {}).get("metrics", {})
    if waits:
        view.wait_ms = median(waits) or 0.0
    elif metrics.get("queue_time_s", {}).get("mean") is not None:
        # Engines without per-response timings (vLLM, SGLang, TGI) report queue time as a
        # histogram; its window mean stands in for the median.
        view.wait_ms = 1000.0 * float(metrics["queue_time_s"]["mean"])
    view.waiting_peak = result.peaks.get("requests_waiting", 0.0)
    if "preemptions" in metrics:
        view.preemptions = float(metrics["preemptions"].get("value", 0.0))
    view.kv_peak = result.peaks.get("kv_cache_usage")
    if view.kv_peak is None and "kv_cache_usage" in metrics:
        view.kv_peak = float(metrics["kv_cache_usage"]["value"])  # only the idle after-value
    view.gpu = summarize_window(result.gpu)
    return view


def capacity(ctx: DoctorContext) -> StepResult:
    """TTFT p50/p99 at each concurrency level; queueing against compute saturation; GPU
    utilization and KV pressure beside them."""
    step = StepResult("capacity", "Capacity: where p99 TTFT breaks away from p50")
    views: list[LevelView] = []
    by_level: dict[int, list[RequestRecord]] = {}
    gpu_errors: list[str] = []
    answer = ctx.answer_tokens()
    step.evidence.append(
        Evidence(
            "answer tokens per probe request",
            float(answer),
            "tokens",
            "median max_tokens of the request log" if ctx.real_items else "no request log",
        )
    )
    for level in ctx.levels:
        if ctx.seconds_left() < 20:
            step.notes.append(f"budget ran out before concurrency {level}")
            break
        n = max(6, 2 * level)
        items = [
            ctx.chat(
                ctx.text(CAPACITY_PROMPT_TOKENS, f"doctor/capacity/{level}/{i}"),
                max_tokens=answer,
            )
            for i in range(n)
        ]
        options: dict[str, object] = {"concurrency": level, "watch_gauges": True}
        if ctx.gpu is not None:
            options["gpu"] = ctx.gpu
        result = ctx.sample(items, **options)
        by_level[level] = result.records
        gpu_errors += [e for e in result.gpu_errors if e not in gpu_errors]
        view = _level_view(ctx, level, result)
        if view is None:
            step.notes.append(f"every request failed at concurrency {level}")
            continue
        views.append(view)
    if not views:
        step.status = StepStatus.FAILED
        return step
    p50s = {v.level: v.p50_ms for v in views}
    p99s = {v.level: v.p99_ms for v in views}
    queue = {v.level: v.wait_ms for v in views if v.wait_ms is not None}
    waiting = {v.level: v.waiting_peak for v in views}
    step.evidence.append(Evidence("TTFT p50 by concurrency", describe_levels(p50s), "", "client"))
    step.evidence.append(Evidence("TTFT p99 by concurrency", describe_levels(p99s), "", "client"))
    if queue:
        step.evidence.append(
            Evidence("waiting before prefill (p50)", describe_levels(queue), "", "client-server")
        )
    if any(waiting.values()):
        step.evidence.append(
            Evidence(
                "peak waiting requests",
                ", ".join(f"c={c}: {v:.0f}" for c, v in sorted(waiting.items())),
                "",
                "metrics",
            )
        )
    slots = ctx.slots()
    if slots is not None:
        step.evidence.append(Evidence("server slots", float(slots), "", "/props"))
    gpu_evidence(step, views, ctx.gpu_missing)
    step.notes += [f"GPU telemetry: {e}" for e in gpu_errors]
    kv_evidence(step, views)
    knee = next((c for c in sorted(p50s) if p99s[c] > 2 * p50s[c] + 50), None)
    step.summary = (
        f"p99 breaks away from p50 at concurrency {knee}"
        if knee
        else "p99 stays with p50 at every level measured"
    )
    _queueing_finding(ctx, step, p50s, queue, waiting, slots, {v.level: v for v in views})
    preemption_finding(ctx, step, views)
    if ctx.slos:
        failing = check_slos(step, ctx.slos, by_level)
        for v in views:
            v.slo_failed = v.level in failing
    gpu_finding(ctx, step, views)
    return step


def _queueing_finding(
    ctx: DoctorContext,
    step: StepResult,
    p50s: dict[int, float],
    queue: dict[int, float],
    waiting: dict[int, float],
    slots: int | None,
    views: dict[int, LevelView] | None = None,
) -> None:
    """Requests that wait for a free slot: queue time dominates TTFT while prefill stays short."""
    for level in sorted(p50s, reverse=True):
        wait = queue.get(level)
        if wait is None or level == 1:
            continue
        share = wait / p50s[level] if p50s[level] else 0.0
        waited = waiting.get(level, 0.0) > 0
        # Seen waiting with fewer slots than requests: a third of TTFT is enough (one slot at
        # c=4 queues ~60% of TTFT on average, but long, uneven prefills were seen at 49%).
        short = waited and slots is not None and slots < level
        if share < (1 / 3 if short else 0.5) or wait < 100:
            continue
        if not (waited or (slots is not None and slots < level)):
            continue
        view = views.get(level) if views else None
        if view is not None and (view.preemptions or (view.kv_peak or 0.0) > KV_BAND[1]):
            continue  # they wait for KV blocks, not for the cap: the preemption finding says so
        engine_fix = ctx.advice.more_slots.format(level=level)
        slot_text = f" with {slots} slot(s)" if slots is not None else ""
        room = kv_room(views[level]) if views and level in views else None
        if room is not None:
            step.evidence.append(room)
        step.add_finding(
            rule="capacity/queueing",
            title=f"at concurrency {level} requests wait {wait:.0f} ms for a free slot "
            f"({100 * share:.0f}% of TTFT p50 {p50s[level]:.0f} ms)",
            message=f"more concurrent requests than the engine runs at once{slot_text}; the "
            "rest queue behind them (TTFT rises as a staircase)"
            + ("; the KV cache has room for more running requests" if room is not None else ""),
            action=engine_fix,
            tier=CostTier.SCHEDULING,
            confidence=Confidence.HIGH if waited else Confidence.MEDIUM,
            expected_gain_ms=wait,
            gain=f"up to {wait:.0f} ms of TTFT p50 at concurrency {level}, paid "
            "for with slower batched prefill",
            change=more_slots(ctx, level),
        )
        return
