"""Steps 4 and 5: the prefix cache (the same request twice; the user's real prompts), and a
minimal control prompt against the real ones."""

from __future__ import annotations

from typing import Any

from ttft.core.findings import Confidence, CostTier, Evidence
from ttft.core.records import RequestRecord
from ttft.doctor.changes import move_dynamic_last, prefix_cache_on
from ttft.doctor.context import DoctorContext, median, server_ms, ttft_ms, ttfts_ms
from ttft.doctor.findings import StepResult, StepStatus
from ttft.prompts.dynamic_content import DynamicSpan, find_dynamic
from ttft.workload.requests import WorkItem

TWICE_TOKENS = 600
REPLAY_MAX = 6


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

    return median(rates(list(ctx.shared.get("transport_records", []))) or rates(records))


def prefix_cache(ctx: DoctorContext) -> StepResult:
    step = StepResult("prefix_cache", "Prefix cache: the same request twice, and your prompts")
    text = ctx.text(TWICE_TOKENS, "doctor/twice")
    same = ctx.chat(text)
    first, second = (ctx.sample([same]).records[0], ctx.sample([same]).records[0])
    t1, t2, hit = ttft_ms(first), ttft_ms(second), _cached(second)
    if t1 is None or t2 is None:
        step.status = StepStatus.FAILED
        step.notes.append("the repeated request failed")
        return step
    step.evidence += [
        Evidence("same request, 1st TTFT", t1, "ms", "client"),
        Evidence("same request, 2nd TTFT", t2, "ms", "client"),
    ]
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
    cache_works = t2 < 0.6 * t1 or (hit is not None and hit >= 0.8 * TWICE_TOKENS)
    if not cache_works:
        _cache_off(ctx, step, t1, t2, hit)
    if ctx.real_items:
        _replay(ctx, step, cache_works)
    else:
        step.notes.append(
            "no --requests-log given: your own prompts were not checked for "
            "dynamic content at their start"
        )
    step.summary = "prefix cache works" if cache_works else "prefix cache gives no reuse"
    if any(f.rule == "cache/dynamic-prefix" for f in step.findings):
        step.summary += "; your prompts defeat it with dynamic content at the start"
    return step


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


def _static_part(item: WorkItem) -> tuple[str, list[DynamicSpan]]:
    """The would-be static prefix of a chat request (everything before the last user message)
    as text, and the dynamic spans found in it."""
    messages: list[Any] = item.body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    parts = [str(m.get("content") or "") for m in messages[:last_user]]
    text = "\n".join(parts)
    return text, find_dynamic(text)


def _without(text: str, spans: list[DynamicSpan]) -> str:
    out, pos = [], 0
    for span in spans:
        out.append(text[pos : span.start])
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def _replay(ctx: DoctorContext, step: StepResult, cache_works: bool) -> None:
    items = [i for i in ctx.real_items if i.api == "chat"][:REPLAY_MAX]
    if len(items) < 2:
        step.notes.append("fewer than 2 chat requests in the log: nothing to replay")
        return
    records = ctx.sample(items).records
    statics = [_static_part(i) for i in items]
    measured, potential = [], []
    for idx in range(1, len(items)):
        rec = records[idx] if idx < len(records) else None
        hit = _cached(rec) if rec is not None and rec.ok else None
        fixed_now = _without(*statics[idx])
        fixed_before = _without(*statics[idx - 1])
        if hit is None or not fixed_now or fixed_now != fixed_before:
            continue
        measured.append(hit)
        potential.append(_tokens(ctx, fixed_now))
    spans = [s for _, found in statics for s in found]
    if not measured:
        step.notes.append("the replayed requests share no static prefix to reuse")
        return
    got, could = median(measured) or 0.0, median(potential) or 0.0
    step.evidence += [
        Evidence("your prompts: cached tokens per request (p50)", got, "tokens", "usage"),
        Evidence(
            "your prompts: shareable prefix after moving dynamic content",
            could,
            "tokens",
            "tokenizer",
        ),
    ]
    if could < 64 or got >= 0.5 * could or not spans:
        return
    first = min(spans, key=lambda s: s.start)
    rate = _prefill_rate(ctx, records)
    gain = (could - got) / rate if rate else None
    step.evidence.append(
        Evidence(
            "first dynamic content in the prefix",
            f"{first.label} {first.text!r} at character {first.start}",
            "",
            "lint",
        )
    )
    step.add_finding(
        rule="cache/dynamic-prefix",
        title=f"requests that share a {could:.0f}-token prompt prefix reuse only "
        f"{got:.0f} tokens from the cache",
        message=f"{first.label} ({first.text!r}) near the start of the prompt changes on every "
        "request, so no request's prefix matches an earlier one",
        action="move the dynamic content to the end of the last user message (or inject it "
        "by a tool call); keep the system prompt byte-identical across requests "
        "(`ttft lint prompts` shows every such span)",
        tier=CostTier.TRANSPORT,  # a prompt/template change: the cheapest tier
        confidence=Confidence.HIGH if cache_works else Confidence.MEDIUM,
        expected_gain_ms=gain,
        change=move_dynamic_last(),
        gain=(
            f"about {gain:.0f} ms of prefill per request"
            if gain
            else f"{could - got:.0f} prompt tokens of prefill per request"
        ),
    )


def _tokens(ctx: DoctorContext, text: str) -> float:
    if ctx.tokenizer is not None:
        return float(len(ctx.tokenizer.encode(text)))
    return len(text) / 4.0  # a common rule of thumb for English text


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
