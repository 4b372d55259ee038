"""What the capacity step's load levels say about the hardware: GPU utilization and KV pressure.

Two rows of the article's troubleshooting table live here:

- "TTFT high, GPU utilization low -> queueing or transport": the baseline had 62% utilization at
  1830 ms p50. A GPU that is idle a third of the time while requests take seconds is not what
  makes them slow; the time goes to waiting (a queue in front of the engine) or to the path back.
- "p99 explodes with concurrency -> preemption, KV shortage": keep KV-cache usage at 80-90% and
  preemptions at 0. Above the band running requests get evicted and recomputed; below it with
  requests queueing, the KV room is there and the concurrency cap is what holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttft.core.changes import Change
from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.doctor.changes import spelled
from ttft.doctor.context import DoctorContext
from ttft.doctor.findings import StepResult
from ttft.engines.gpu import GpuWindow

GPU_LOW_PCT = 70.0  # under this while TTFT is high, compute is not the bottleneck (article: 62%)
KV_BAND = (0.80, 0.90)  # the article's target band for KV-cache usage under load
# TTFT counts as "high" at a level when it has grown to this over the lowest level's p50 (plus a
# fixed margin so tiny TTFTs do not trip it), or when waiting is most of it.
GROWTH, GROWTH_MARGIN_MS, WAIT_SHARE = 2.0, 100.0, 0.5
STALE_SAMPLES = 4  # this many readings with one value: the source likely refreshes slower


@dataclass
class LevelView:
    """One load level of the capacity step, as measured."""

    level: int
    p50_ms: float
    p99_ms: float
    wait_ms: float | None = None  # wait before prefill (client TTFT minus server prefill)
    waiting_peak: float = 0.0  # the engine's waiting-requests gauge, peak
    kv_peak: float | None = None  # KV-cache usage, fraction, peak (None: not exported)
    preemptions: float | None = None  # the engine's counter over the level (None: not exported)
    gpu: GpuWindow | None = None
    slo_failed: bool = False


def _per_level(levels: Sequence[LevelView], text: str) -> str:
    return ", ".join(f"c={v.level}: {text.format(v=v)}" for v in levels)


def _band(kv: float) -> str:
    if kv > KV_BAND[1]:
        return "above the band"
    return "in the band" if kv >= KV_BAND[0] else "below the band"


def gpu_evidence(step: StepResult, levels: Sequence[LevelView], missing: str) -> None:
    seen = [v for v in levels if v.gpu is not None and v.gpu.util_mean_pct is not None]
    if not seen:
        if missing:
            step.notes.append(missing)
        return
    step.evidence.append(
        Evidence(
            "TTFT p50 / GPU utilization (mean) by concurrency",
            ", ".join(
                f"c={v.level}: {v.p50_ms:.0f} ms / {v.gpu.util_mean_pct:.0f}%"
                for v in seen
                if v.gpu is not None and v.gpu.util_mean_pct is not None
            ),
            "",
            "client / GPU telemetry",
        )
    )
    mem = [v for v in seen if v.gpu is not None and v.gpu.mem_used_pct is not None]
    if mem:
        step.evidence.append(
            Evidence(
                "GPU memory used (peak) by concurrency",
                ", ".join(
                    f"c={v.level}: {v.gpu.mem_used_pct:.0f}%" for v in mem if v.gpu is not None
                ),
                "",
                "GPU telemetry",
            )
        )
    clocks = [v for v in seen if v.gpu is not None and v.gpu.sm_clock_mean_mhz is not None]
    if clocks:
        step.evidence.append(
            Evidence(
                "SM clock (mean) by concurrency",
                ", ".join(
                    f"c={v.level}: {v.gpu.sm_clock_mean_mhz:.0f} MHz"
                    for v in clocks
                    if v.gpu is not None
                ),
                "",
                "GPU telemetry",
            )
        )


def _high(view: LevelView, base: LevelView) -> bool:
    grown = view.level > base.level and view.p50_ms >= GROWTH * base.p50_ms + GROWTH_MARGIN_MS
    waited = (
        view.wait_ms is not None and view.p50_ms > 0 and view.wait_ms >= WAIT_SHARE * view.p50_ms
    )
    return grown or waited or view.slo_failed


def gpu_finding(ctx: DoctorContext, step: StepResult, levels: Sequence[LevelView]) -> None:
    """The highest level where TTFT is high while the GPU is mostly idle."""
    if not levels:
        return
    base = min(levels, key=lambda v: v.level)
    gap = ctx.handoff.transport_gap_ms
    for view in sorted(levels, key=lambda v: v.level, reverse=True):
        window = view.gpu
        if window is None or window.util_mean_pct is None or window.util_mean_pct >= GPU_LOW_PCT:
            continue
        if not _high(view, base):
            continue
        queued = view.waiting_peak > 0 or (
            view.wait_ms is not None and view.wait_ms >= WAIT_SHARE * view.p50_ms
        )
        transport = isinstance(gap, float) and gap > GROWTH_MARGIN_MS
        where = (
            "queueing and transport"
            if queued and transport
            else "queueing"
            if queued
            else "transport"
            if transport
            else "queueing or transport"
        )
        stale = window.samples >= STALE_SAMPLES and window.distinct <= 1
        evidence = [
            Evidence(f"TTFT p50 at c={view.level}", view.p50_ms, "ms", "client"),
            Evidence(f"TTFT p50 at c={base.level}", base.p50_ms, "ms", "client"),
            Evidence(f"GPU utilization at c={view.level} (mean)", window.util_mean_pct, "%", "GPU"),
            Evidence(f"GPU readings at c={view.level}", float(window.samples), "", "GPU"),
        ]
        if view.wait_ms is not None:
            evidence.append(Evidence("wait before prefill (p50)", view.wait_ms, "ms", "client"))
        if view.waiting_peak:
            evidence.append(Evidence("peak waiting requests", view.waiting_peak, "", "metrics"))
        if isinstance(gap, float):
            evidence.append(Evidence("client minus server (transport step)", gap, "ms", "client"))
        step.add_finding(
            rule="gpu/low-utilization",
            title=f"TTFT p50 {view.p50_ms:.0f} ms at concurrency {view.level} while the GPU is "
            f"busy only {window.util_mean_pct:.0f}% of the time",
            message=f"compute is not what makes TTFT high: the time goes to {where} (the "
            "article's baseline: 62% utilization at 1830 ms p50)"
            + (
                "; the GPU source reported one value throughout, so it may refresh slower than "
                "the level lasted (dcgm-exporter collects every 30 s unless -c is lowered)"
                if stale
                else ""
            ),
            action="check queue depth (waiting requests; raise the engine's concurrency cap: "
            f"{ctx.advice.more_slots.format(level=view.level)}) and the proxy (proxy_buffering "
            "off, no gzip on text/event-stream; compare with --direct-url)",
            tier=CostTier.TRANSPORT,
            confidence=Confidence.LOW if stale else Confidence.MEDIUM,
            evidence=tuple(evidence),
            expected_gain_ms=view.wait_ms,
        )
        return


def kv_evidence(step: StepResult, levels: Sequence[LevelView]) -> None:
    kv = [v for v in levels if v.kv_peak is not None]
    if kv:
        step.evidence.append(
            Evidence(
                "peak KV-cache usage by concurrency (band 80-90%)",
                ", ".join(
                    f"c={v.level}: {100 * v.kv_peak:.0f}% ({_band(v.kv_peak)})"
                    for v in kv
                    if v.kv_peak is not None
                ),
                "",
                "metrics",
            )
        )
    counted = [v for v in levels if v.preemptions is not None]
    if counted:
        step.evidence.append(
            Evidence("preemptions by concurrency", _per_level(counted, "{v.preemptions:.0f}"))
        )
    for v in kv:
        if v.kv_peak is not None and v.kv_peak > KV_BAND[1] and not v.preemptions:
            step.notes.append(
                f"KV-cache usage reached {100 * v.kv_peak:.0f}% at concurrency {v.level}, above "
                "the 80-90% band, without preemptions yet: a burst above this load will preempt"
            )


def preemption_finding(ctx: DoctorContext, step: StepResult, levels: Sequence[LevelView]) -> None:
    """Preemptions at a level: cap concurrency below it, or give the KV cache more room."""
    hit = [v for v in levels if v.preemptions]
    if not hit:
        return
    first = min(hit, key=lambda v: v.level)
    safe = [
        v.level
        for v in levels
        if v.level < first.level and not v.preemptions and (v.kv_peak or 0.0) <= KV_BAND[1]
    ]
    cap = max(safe) if safe else None
    total = sum(v.preemptions or 0.0 for v in hit)
    kv = f" with KV-cache usage at {100 * first.kv_peak:.0f}%" if first.kv_peak is not None else ""
    change, knobs = _kv_change(ctx, cap)
    step.add_finding(
        rule="capacity/preemption",
        title=f"{total:.0f} preemption(s) from concurrency {first.level}{kv} (keep KV usage at "
        "80-90% and preemptions at 0)",
        message="the KV cache runs out, so running requests are evicted and recomputed: their "
        "prefill is paid twice and p99 explodes with concurrency",
        action=knobs,
        tier=CostTier.CACHE,
        confidence=Confidence.HIGH,
        change=change,
    )


def _kv_change(ctx: DoctorContext, cap: int | None) -> tuple[Change | None, str]:
    adapter = ctx.adapter
    roles = adapter.roles if adapter is not None else None
    cap_flag = (
        spelled(adapter, roles.concurrency_cap)
        if adapter and roles and roles.concurrency_cap
        else None
    )
    mem_flag = (
        spelled(adapter, roles.memory_fraction)
        if adapter and roles and roles.memory_fraction
        else None
    )
    if cap_flag is None and mem_flag is None:
        return None, (
            "lower the engine's concurrent-request cap below the level that preempted, or give "
            "the KV cache more memory (FP8 KV with a quality check)"
        )
    parts = []
    if cap_flag is not None:
        parts.append(
            f"cap running requests: `{cap_flag} {cap}` (the highest level measured without "
            "preemption)"
            if cap is not None
            else f"lower `{cap_flag}`"
        )
    if mem_flag is not None:
        parts.append(f"give the KV cache more room: `{mem_flag} 0.90` (the article ran 0.88)")
    parts.append("or FP8 KV with a quality check")
    action = "; ".join(parts)
    assert adapter is not None
    if cap is not None and cap_flag is not None:
        flags = {cap_flag: str(cap)}
        label = f"at most {cap} running requests in the engine"
    elif mem_flag is not None:
        flags, label = {mem_flag: "0.90"}, "more accelerator memory for the KV cache"
    else:
        return None, action
    return Change(
        label, flags, tier=CostTier.CACHE, rule="capacity/preemption", engine=adapter.kind
    ), action


def kv_room(view: LevelView) -> Evidence | None:
    """KV usage below the band at a level that queued: the room for more running requests."""
    if view.kv_peak is None or view.kv_peak >= KV_BAND[0]:
        return None
    return Evidence(
        f"peak KV-cache usage at c={view.level} (below the 80-90% band: room to run more)",
        100 * view.kv_peak,
        "%",
        "metrics",
    )
