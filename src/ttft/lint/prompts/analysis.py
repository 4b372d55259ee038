"""``ttft lint prompts``: what in a chat template and its requests keeps the prefix cache cold.

The pipeline, for one sample conversation or a log of real requests:

1. render every request with the chat template (Hugging Face semantics) and split the prompt into
   its would-be static prefix and the last user message;
2. find dynamic content in the static prefix (timestamps, ids, names, counters, values that vary
   between logged requests, the template's own clock) and logically equal requests that render
   differently;
3. tokenize with the engine's tokenizer and replay the log through a prefix-cache model;
4. apply the suggested fixes (dynamic content moved to the end of the last user message, tools and
   whitespace made canonical), render, tokenize and replay again: the difference is the gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from ttft.lint.prompts.prefix_cache import (
    CACHE_MODELS,
    CacheModel,
    CacheSimulation,
    PrefixGroup,
    prefix_groups,
    simulate,
)
from ttft.lint.prompts.stability import Instability, find_instability
from ttft.lint.prompts.tokens import PromptTokens
from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer, TemplateRuntimeError
from ttft.prompts.dynamic_content import DynamicSpan
from ttft.prompts.log_analysis import analyse_log, rendered_at
from ttft.prompts.static_prefix import FoundSpan, RenderedRequest, analyse
from ttft.prompts.transform import move_to_end, normalize
from ttft.workload.request_log import ChatRequest

# Two instants a day, an hour, a minute and a second apart: a template that reads the clock
# renders differently at them, whatever the resolution of its format.
CLOCK_A = datetime(2026, 3, 15, 14, 22, 31)
CLOCK_B = CLOCK_A + timedelta(days=1, hours=1, minutes=1, seconds=1)
_SAMPLED = 8  # requests per finding whose token offsets are measured (each costs tokenizations)


@dataclass(frozen=True)
class DynamicGroup:
    """Dynamic content of one kind from one source, over the requests that carry it."""

    kind: str
    label: str
    source: str
    volatility: str
    requests: list[int]  # request indexes, in log order
    values: list[str]  # distinct values seen (the first few)
    distinct: int
    token_offset: int  # where the shared prefix stops, in the first request carrying it
    static_tokens: int  # length of that request's would-be static prefix
    destroyed_tokens: float  # mean over sampled requests of static_tokens - token_offset
    movable: bool  # lies in a system/developer message, so the move applies


@dataclass(frozen=True)
class TemplateClock:
    """The template itself writes the current time (``strftime_now``) into the static prefix."""

    token_offset: int
    static_tokens: int
    at_a: str  # the rendered text around the change at two instants
    at_b: str
    changes_within_a_day: bool


@dataclass
class PromptsAnalysis:
    """Everything ``ttft lint prompts`` found; turned into findings and tables elsewhere."""

    requests: list[ChatRequest]
    template: ChatTemplate
    cache_model: CacheModel
    rendered: list[RenderedRequest]  # the requests that rendered, in order
    render_errors: list[tuple[ChatRequest, str]]
    before: CacheSimulation
    after: CacheSimulation
    groups_before: list[PrefixGroup]
    groups_after: list[PrefixGroup]
    dynamic: list[DynamicGroup] = field(default_factory=list)
    instabilities: list[Instability] = field(default_factory=list)
    clock: TemplateClock | None = None
    prefill_rate: float | None = None
    fixed: list[ChatRequest] = field(default_factory=list)

    @property
    def saved_tokens(self) -> int:
        return sum(self.after.cached_ideal) - sum(self.before.cached_ideal)

    @property
    def saved_ms_per_request(self) -> float | None:
        if not self.prefill_rate or not self.rendered:
            return None
        return 1000.0 * self.saved_tokens / len(self.rendered) / self.prefill_rate


def _restore_points(
    renderer: TemplateRenderer, item: RenderedRequest, tokens: PromptTokens
) -> list[int]:
    """Token positions where llama-server keeps context checkpoints: the first and the last user
    message's start (others only every 8192 tokens, which lint does not model).
    """
    points: list[int] = []
    messages = item.request.messages
    users = [k for k, m in enumerate(messages) if m.get("role") == "user" and k > 0]
    for k in sorted({users[0], users[-1]} if users else set()):
        head = renderer.render(
            messages[:k],
            item.request.tools,
            add_generation_prompt=False,
            extra=item.request.template_kwargs,
        )
        shared = 0
        for x, y in zip(head, item.text, strict=False):
            if x != y:
                break
            shared += 1
        points.append(tokens.position(item.text, shared))
    return points


def _add_log_spans(rendered: list[RenderedRequest]) -> list[RenderedRequest]:
    """Add the spans the log analysis finds (values that vary between the logged requests,
    wherever they sit) that no detector already reported, at their place in the rendered text."""
    log = analyse_log([item.request for item in rendered])
    out: list[RenderedRequest] = []
    for item, spans in zip(rendered, log.spans, strict=True):
        extra: list[FoundSpan] = []
        for span in spans:
            at = rendered_at(item.static_text, item.request, span)
            if at is None:
                continue
            end = at + len(span.text)
            if any(f.span.start < end and at < f.span.end for f in item.spans):
                continue
            dynamic = DynamicSpan(at, end, span.kind, span.text, span.volatility)
            source = span.field.key if span.field.message is not None else span.field.source
            extra.append(FoundSpan(dynamic, source, span.place))
        if extra:
            merged = sorted((*item.spans, *extra), key=lambda f: f.span.start)
            item = replace(item, spans=tuple(merged))
        out.append(item)
    return out


def _same(request: ChatRequest) -> ChatRequest:
    return request


def _char_lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _dynamic_groups(rendered: list[RenderedRequest], tokens: PromptTokens) -> list[DynamicGroup]:
    by_key: dict[tuple[str, str], list[tuple[int, FoundSpan]]] = {}
    for index, item in enumerate(rendered):
        for found in item.spans:
            by_key.setdefault((found.source, found.span.kind), []).append((index, found))
    groups: list[DynamicGroup] = []
    for (source, kind), hits in by_key.items():
        first_of_request: dict[int, FoundSpan] = {}
        for index, found in hits:
            first_of_request.setdefault(index, found)
        destroyed: list[int] = []
        offsets: list[tuple[int, int]] = []
        for index, found in list(first_of_request.items())[:_SAMPLED]:
            item = rendered[index]
            offset = tokens.position(item.text, found.span.start)
            static = tokens.position(item.text, item.static_chars)
            offsets.append((offset, static))
            destroyed.append(max(0, static - offset))
        values = list(dict.fromkeys(found.span.text for _, found in hits))
        worst = min(
            (f for _, f in hits),
            key=lambda f: ("request", "session", "user", "daily").index(f.span.volatility),
        )
        groups.append(
            DynamicGroup(
                kind=kind,
                label=worst.span.label,
                source=source,
                volatility=worst.span.volatility,
                requests=sorted(first_of_request),
                values=values[:5],
                distinct=len(values),
                token_offset=offsets[0][0],
                static_tokens=offsets[0][1],
                destroyed_tokens=sum(destroyed) / len(destroyed),
                movable=any(f.place is not None for _, f in hits),
            )
        )
    groups.sort(key=lambda g: (g.requests[0], g.token_offset))
    return groups


def _template_clock(
    template: ChatTemplate, first: RenderedRequest, tokens: PromptTokens
) -> TemplateClock | None:
    if "strftime_now" not in template.source:
        return None
    other = analyse(TemplateRenderer(template, clock=lambda: CLOCK_B), first.request)
    if other.text == first.text:
        return None
    at = _char_lcp(first.text, other.text)
    same_day = TemplateRenderer(template, clock=lambda: CLOCK_A + timedelta(minutes=1, seconds=1))
    return TemplateClock(
        token_offset=tokens.position(first.text, at),
        static_tokens=tokens.position(first.text, first.static_chars),
        at_a=first.text[max(0, at - 30) : at + 30],
        at_b=other.text[max(0, at - 30) : at + 30],
        changes_within_a_day=analyse(same_day, first.request).text != first.text,
    )


def _simulate(
    renderer: TemplateRenderer,
    rendered: Sequence[RenderedRequest],
    tokens: PromptTokens,
    model: CacheModel,
) -> tuple[CacheSimulation, list[PrefixGroup]]:
    sequences = tokens.many([r.text for r in rendered])
    points = (
        [_restore_points(renderer, r, tokens) for r in rendered] if model.checkpoints_only else None
    )
    return simulate(sequences, model, points), prefix_groups(sequences)


def lint_prompts(
    requests: Sequence[ChatRequest],
    template: ChatTemplate,
    tokens: PromptTokens,
    *,
    cache_model: CacheModel = CACHE_MODELS["token"],
    prefill_rate: float | None = None,
) -> PromptsAnalysis:
    """Analyse ``requests`` rendered with ``template`` and tokenized by ``tokens``.

    A request the template refuses is kept as an error (with its file:line) and left out of the
    replay; if none renders, the first error is raised.
    """
    renderer = TemplateRenderer(template, clock=lambda: CLOCK_A)
    rendered: list[RenderedRequest] = []
    errors: list[tuple[ChatRequest, str]] = []
    for request in requests:
        try:
            rendered.append(analyse(renderer, request))
        except TemplateRuntimeError as exc:
            if not rendered and len(errors) + 1 == len(requests):
                raise
            errors.append((request, str(exc)))
    rendered = _add_log_spans(rendered)
    before, groups_before = _simulate(renderer, rendered, tokens, cache_model)
    instabilities = find_instability(rendered)
    # Canonical tools and whitespace are a suggested fix only where the log shows drift; applied
    # everywhere they would shift token counts for nothing.
    canonical = normalize if instabilities else _same
    fixed = [
        canonical(move_to_end(r.request, [f.place for f in r.spans if f.place is not None]))
        for r in rendered
    ]
    rendered_fixed: list[RenderedRequest] = []
    for index, request in enumerate(fixed):
        try:
            rendered_fixed.append(analyse(renderer, request))
        except TemplateRuntimeError:
            # The template rejects the edited conversation (say, it requires a system message):
            # this request keeps its original form, and so its original cache behaviour.
            fixed[index] = rendered[index].request
            rendered_fixed.append(rendered[index])
    after, groups_after = _simulate(renderer, rendered_fixed, tokens, cache_model)
    return PromptsAnalysis(
        requests=list(requests),
        template=template,
        cache_model=cache_model,
        rendered=rendered,
        render_errors=errors,
        before=before,
        after=after,
        groups_before=groups_before,
        groups_after=groups_after,
        dynamic=_dynamic_groups(rendered, tokens),
        instabilities=instabilities,
        clock=_template_clock(template, rendered[0], tokens) if rendered else None,
        prefill_rate=prefill_rate,
        fixed=fixed,
    )
