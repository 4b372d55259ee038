"""Steps 4 and 5: the prefix cache (the same request twice, a changing first line), and a
minimal control prompt against the real ones. The user's own prompts are checked for dynamic
content by ``step_dynamic``."""

from __future__ import annotations

import uuid

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.records import RequestRecord
from ttft.doctor.changes import prefix_cache_on
from ttft.doctor.context import DoctorContext, median, server_ms, ttft_ms, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.workload.requests import WorkItem

TWICE_TOKENS = 600


def _cached(record: RequestRecord) -> float | None:
    if record.cached_tokens is not None:
        return float(record.cached_tokens)
    return server_ms(record, "cache_n")


def _prefill_rate(ctx: DoctorContext, records: list[RequestRecord]) -> float | None:
    """Tokens per ms of uncached prefill, from the server's own timings: of the transport
    step's plain probes when there are any, since the records under test may carry the very
    excess the control step looks for (a grammar, a sampler) inside their ``prompt_ms``."""

    def rates(of: list[RequestRecord]) -> list[float]:
        out = []
        for r in of:
            n, ms = server_ms(r, "prompt_n"), server_ms(r, "prompt_ms")
            if n and ms and n >= 32:
                out.append(n / ms)
        return out

    return median(rates(ctx.handoff.transport_records) or rates(records))


def _why_untimed(records: list[RequestRecord]) -> str:
    """What the untimed requests ended with, for the note of a step that could not measure."""
    reasons = sorted(
        {
            r.error.message if r.error is not None else f"HTTP {r.status}, no text in the answer"
            for r in records
            if ttft_ms(r) is None
        }
    )
    return "; ".join(reasons) or "no answer"


def prefix_cache(ctx: DoctorContext) -> StepResult:
    step = StepResult("prefix_cache", "Prefix cache: the same request twice")
    # Texts new to the engine in every run: a second doctor run against the same server must
    # not find its own earlier prompts cached.
    nonce = uuid.uuid4().hex[:12]
    text = ctx.text(TWICE_TOKENS, f"doctor/twice/{nonce}")
    same = ctx.chat(text)
    first = ctx.sample([same]).records[0]
    second = ctx.sample([same]).records[0]
    third = ctx.sample([same]).records[0]
    # Then a never-seen prompt of the same length: the repeats are judged against a fresh
    # request measured beside them, not against the first request alone, which may carry a
    # warm-up (a cold engine path, a first batch) that makes any later request look cached on
    # a slow or busy machine. Last, so that on a one-slot engine it evicts nothing measured.
    fresh = ctx.sample([ctx.chat(ctx.text(TWICE_TOKENS, f"doctor/fresh/{nonce}"))]).records[0]
    t1, t2, t3, t_fresh = ttft_ms(first), ttft_ms(second), ttft_ms(third), ttft_ms(fresh)
    hit = _cached(second)
    if t1 is None or t2 is None:
        step.status = StepStatus.FAILED
        step.notes.append("the repeated request failed")
        return step
    step.evidence += [
        Evidence("same request, 1st TTFT", t1, "ms", "client"),
        Evidence("same request, 2nd TTFT", t2, "ms", "client"),
    ]
    if t3 is not None:
        step.evidence.append(Evidence("same request, 3rd TTFT", t3, "ms", "client"))
    if t_fresh is not None:
        step.evidence.append(
            Evidence("a fresh prompt of that length, TTFT", t_fresh, "ms", "client")
        )
    if hit is not None:
        step.evidence.append(Evidence("2nd request's cached prompt tokens", hit, "tokens", "usage"))
    # A changing first line, the article's classic: the rest of the prompt is identical.
    moved = [ctx.chat(f"Request time: 2026-03-15 14:22:{s:02d}\n{text}") for s in (1, 2)]
    varied = ctx.sample(moved).records
    varied_hit = _cached(varied[1]) if len(varied) == 2 else None
    if varied_hit is not None:
        step.evidence.append(
            Evidence("cached tokens with a changing first line", varied_hit, "tokens", "usage")
        )
    cache_works = repeat_is_cached(hit, t1, [t2, t3], t_fresh)
    if not cache_works:
        _cache_off(ctx, step, t1, t2, hit)
    if not ctx.real_items:
        step.notes.append(
            "no --requests-log given: your own prompts were not checked for dynamic content "
            "before their static parts (the dynamic_prefix step does that with a log)"
        )
    step.summary = "prefix cache works" if cache_works else "prefix cache gives no reuse"
    return step


def repeat_is_cached(
    hit: float | None, t1: float, repeats: list[float | None], t_fresh: float | None
) -> bool:
    """Whether the repeated request reused its prefix. The engine's own count of cached prompt
    tokens decides when it gives one (half the prompt or more: engines cache whole blocks, so a
    hit is never the last partial block). Without one, the repeats' median must be well under
    the uncached time, taken as the lower of the first request and a fresh prompt of the same
    length (the fresh one has no warm-up of its own)."""
    if hit is not None:
        return hit >= 0.5 * TWICE_TOKENS
    times = [t for t in repeats if t is not None]
    uncached = min(t1, t_fresh) if t_fresh is not None else t1
    again = median(times)
    return again is not None and again < 0.6 * uncached


def _cache_off(
    ctx: DoctorContext, step: StepResult, t1: float, t2: float, hit: float | None
) -> None:
    action = ctx.advice.prefix_cache_off
    step.add_finding(
        rule="cache/prefix-cache-off",
        title=f"an identical request is not faster the second time ({t1:.0f} -> {t2:.0f} ms)",
        message="prefix caching is off or evicted before reuse",
        action=action,
        tier=CostTier.CACHE,
        confidence=Confidence.HIGH if hit is not None and hit < 32 else Confidence.MEDIUM,
        expected_gain_ms=max(0.0, t1 - 0.1 * t1),
        gain="most of the prefill time of repeated prefixes",
        change=prefix_cache_on(ctx),
    )


def control(ctx: DoctorContext) -> StepResult:
    """A minimal fixed prompt against the real ones: fast minimal and slow real means the prompt
    structure or the template is at fault, not the engine."""
    step = StepResult("control", "Control prompt: minimal against your real prompts")
    if not ctx.real_items:
        step.status = StepStatus.SKIPPED
        step.notes.append("no --requests-log / --prompt-file given: nothing to compare with")
        return step
    minimal = ctx.sample([ctx.chat("Hi.") for _ in range(3)]).records
    real_items = [WorkItem({**i.body, "max_tokens": 1}, i.api, "real") for i in ctx.real_items[-3:]]
    real = ctx.sample(real_items).records
    t_min, t_real = median(ttfts_ms(minimal)), median(ttfts_ms(real))
    if t_min is None or t_real is None:
        step.status = StepStatus.FAILED
        untimed = real if t_real is None else minimal
        which = "your prompts" if t_real is None else "the minimal prompt"
        step.notes.append(f"no first token timed for {which}: {_why_untimed(untimed)}")
        return step
    tokens = median([float(r.prompt_tokens) for r in real if r.prompt_tokens is not None])
    cached = median([v for v in (_cached(r) for r in real) if v is not None]) or 0.0
    rate = _prefill_rate(ctx, minimal + real)
    step.evidence += [
        Evidence("minimal prompt TTFT (p50)", t_min, "ms", "client"),
        Evidence("your prompts TTFT (p50)", t_real, "ms", "client"),
    ]
    if tokens is not None:
        step.evidence.append(Evidence("your prompts' length (p50)", tokens, "tokens", "usage"))
    if tokens is None or rate is None:
        step.notes.append("no token counts or prefill timings: cannot tell expected from excess")
        return step
    expected = t_min + max(0.0, tokens - cached) / rate
    step.evidence.append(Evidence("expected TTFT for that length", expected, "ms", "prefill rate"))
    step.summary = f"your prompts take {t_real:.0f} ms where their length explains {expected:.0f}"
    if t_real > 1.5 * expected + 50:
        step.add_finding(
            rule="template/slow-real-prompts",
            title=f"your prompts take {t_real:.0f} ms to first token, their length "
            f"explains {expected:.0f} ms",
            message="something in the prompts' structure or template costs time beyond "
            "prefill (rendering, tokenization, tool schemas, a response_format grammar that "
            "checks every vocabulary token for the first one, a proxy rewriting bodies)",
            action="render and tokenize the template once per static part (`ttft gateway` "
            "pre-rendering); check `ttft lint prompts` on the request log",
            tier=CostTier.TRANSPORT,
            confidence=Confidence.MEDIUM,
            expected_gain_ms=t_real - expected,
        )
    return step
