"""Turn a :class:`PromptsAnalysis` into shared lint findings and the prefix-cache report.

Findings say what keeps the prefix cache cold and the fix; the report gives the numbers behind
them: hit rates now and after the fixes, shared-prefix structure, tokens and TTFT saved.
"""

from __future__ import annotations

from typing import Any

from ttft.core.findings import Finding, Location, Severity
from ttft.lint.prompts.analysis import DynamicGroup, PromptsAnalysis
from ttft.lint.prompts.prefix_cache import CACHE_MODEL_HELP, CacheSimulation, distribution
from ttft.lint.prompts.stability import Instability
from ttft.lint.prompts.tokens import PromptTokens
from ttft.workload.request_log import ChatRequest

# Kinds that a detector could mistake for ordinary text: a value identical across a whole log
# is then more likely a constant than per-request data.
_WEAK_KINDS = {"user-name", "counter", "hex-token", "base64-token", "varying"}
_STRONG_KINDS = {"timestamp", "epoch", "uuid", "request-id"}

_FIX_MOVE = (
    "move it out of the static prefix: append it to the end of the last user message (or let the "
    "model fetch it with a tool call), so that the system prompt is the same in every request"
)
_FIX_TOOLS = (
    "take the value out of the tool definitions (pass it as an argument or in the last user "
    "message): tools are rendered before the conversation"
)
_FIX_KWARGS = (
    "pass a value that changes rarely (a date, not a time) in chat_template_kwargs, or put the "
    "changing part in the last user message"
)
_RULE_BY_CAUSE = {
    "tool-key-order": "prompts/tool-key-order",
    "whitespace": "prompts/whitespace-drift",
    "render": "prompts/unstable-render",
}
_FIX_BY_CAUSE = {
    "tool-key-order": "serialize tool definitions in one key order (build them once, or "
    "json.dumps(..., sort_keys=True)) so equal tools render to equal tokens",
    "whitespace": "build static messages from one constant and strip them before sending",
    "render": "find what the template reads besides messages and tools (kwargs, dates) and fix it",
}


def _location(request: ChatRequest, token: int | None = None) -> Location:
    if request.line is not None:
        return Location(request.file, line=request.line)
    return Location(request.file, offset=token, offset_unit="token" if token is not None else None)


def _ms(tokens: float, rate: float | None) -> str:
    if not rate:
        return ""
    return (
        f"; ~{1000.0 * tokens / rate:.0f} ms less TTFT per request at {rate:.0f} tokens/s prefill"
    )


def _dynamic_severity(group: DynamicGroup, n_requests: int) -> tuple[Severity, str]:
    constant = n_requests >= 2 and len(group.requests) >= 2 and group.distinct == 1
    if constant and group.kind in _WEAK_KINDS | _STRONG_KINDS:
        return Severity.INFO, (
            f" It has the same value in all {len(group.requests)} requests of this log: if it "
            "never changes, it does no harm."
        )
    if group.volatility == "daily":
        return Severity.WARNING, " It changes once a day: the first request each day misses."
    if group.kind in _STRONG_KINDS or group.distinct > 1 or group.kind == "time-phrase":
        return Severity.ERROR, ""
    return Severity.WARNING, ""


def dynamic_finding(
    group: DynamicGroup, analysis: PromptsAnalysis, requests: list[ChatRequest]
) -> Finding:
    severity, note = _dynamic_severity(group, len(analysis.rendered))
    first = requests[group.requests[0]]
    values = ", ".join(repr(v) for v in group.values[:2]) + (", ..." if group.distinct > 2 else "")
    seen = (
        f" Seen in {len(group.requests)} of {len(analysis.rendered)} requests, "
        f"{group.distinct} distinct value{'s' if group.distinct != 1 else ''}."
        if len(analysis.rendered) > 1
        else ""
    )
    where = group.source.replace("(system)", "(the system prompt)")
    message = (
        f"{group.label[0].upper()}{group.label[1:]} in {where} ({values}) at token "
        f"{group.token_offset} of a {group.static_tokens}-token static prefix: every token after "
        f"it differs between requests, so about {group.destroyed_tokens:.0f} tokens per request "
        f"that the prefix cache could serve are computed again.{seen}{note}"
    )
    related = tuple(_location(requests[i]) for i in group.requests[1:4] if requests[i].line)
    return Finding(
        rule="prompts/dynamic-prefix",
        severity=severity,
        title=f"{group.label} in the cacheable prefix",
        message=message,
        location=_location(first, group.token_offset),
        action=_FIX_MOVE
        if group.movable
        else _FIX_TOOLS
        if group.source == "tools"
        else _FIX_KWARGS,
        gain=f"~{group.destroyed_tokens:.0f} cached tokens per request"
        + _ms(group.destroyed_tokens, analysis.prefill_rate),
        related=related,
    )


def clock_finding(analysis: PromptsAnalysis) -> Finding | None:
    clock = analysis.clock
    if clock is None:
        return None
    template = analysis.template
    line = template.line_of("strftime_now(")
    file = template.path or f"<{template.origin}>"
    lost = max(0, clock.static_tokens - clock.token_offset)
    how_often = "every request" if clock.changes_within_a_day else "once a day"
    return Finding(
        rule="prompts/template-clock",
        severity=Severity.ERROR if clock.changes_within_a_day else Severity.WARNING,
        title="the chat template writes the current time into the prompt",
        message=(
            f"The template calls strftime_now, so the prompt changes {how_often} at token "
            f"{clock.token_offset} of a {clock.static_tokens}-token static prefix "
            f"({clock.at_a.strip()!r} vs {clock.at_b.strip()!r} a day later): {lost} tokens "
            "after it lose their prefix-cache hit whenever it changes."
        ),
        location=Location(file, line=line),
        action="pass the date as a template variable that changes rarely (Llama 3 templates read "
        "date_string), or remove it from the template and put it in the last user message",
        gain=f"~{lost} cached tokens per request after each change",
    )


def instability_finding(
    item: Instability, analysis: PromptsAnalysis, tokens: PromptTokens
) -> Finding:
    first = analysis.rendered[item.first]
    second = analysis.rendered[item.second]
    token = tokens.position(first.text, item.char_offset)
    lost = max(0, tokens.position(first.text, first.static_chars) - token)
    return Finding(
        rule=_RULE_BY_CAUSE[item.cause],
        severity=Severity.WARNING,
        title="logically equal requests render different prompts",
        message=(
            f"{item.count} request(s) equal to {first.request.where} after normalization (tool "
            f"keys sorted, whitespace trimmed) render a different static prefix, from token "
            f"{token} on: {item.detail}. Each such request misses up to {lost} cached tokens."
        ),
        location=_location(second.request, token),
        action=_FIX_BY_CAUSE[item.cause],
        gain=f"up to {lost} cached tokens per affected request" + _ms(lost, analysis.prefill_rate),
        related=(_location(first.request),) if first.request.line else (),
    )


def findings(analysis: PromptsAnalysis, tokens: PromptTokens) -> list[Finding]:
    """All findings of an analysis, in the shared lint model."""
    requests = [r.request for r in analysis.rendered]
    out = [dynamic_finding(g, analysis, requests) for g in analysis.dynamic]
    clock = clock_finding(analysis)
    if clock is not None:
        out.append(clock)
    out.extend(instability_finding(i, analysis, tokens) for i in analysis.instabilities)
    for request, error in analysis.render_errors:
        out.append(
            Finding(
                rule="prompts/template-error",
                severity=Severity.ERROR,
                title="the chat template cannot render this request",
                message=error.split("\n  fix: ")[0],
                location=_location(request),
                action="make the request fit the template (roles, order, content) "
                "or fix the template",
            )
        )
    return out


def _side(sim: CacheSimulation) -> dict[str, Any]:
    return {
        "prompt_tokens": sim.total_tokens,
        "cached_tokens": sum(sim.cached_ideal),
        "hit_rate": round(sim.hit_rate_ideal, 4),
        "cached_tokens_one_slot": sum(sim.cached_one_slot),
        "hit_rate_one_slot": round(sim.hit_rate_one_slot, 4),
        "shared_prefix_tokens": distribution(sim.shared_ideal[1:]),
    }


def _groups(analysis: PromptsAnalysis, after: bool) -> list[dict[str, Any]]:
    groups = analysis.groups_after if after else analysis.groups_before
    rendered = analysis.rendered
    out = []
    for group in groups[:10]:
        first = rendered[group.members[0]].request
        out.append(
            {
                "requests": len(group.members),
                "shared_tokens": group.shared_tokens,
                "first": first.where,
            }
        )
    return out


def report(analysis: PromptsAnalysis) -> dict[str, Any]:
    """The prefix-cache report as plain data (the ``prefix_cache`` part of ``--format json``)."""
    n = len(analysis.rendered)
    saved = analysis.saved_tokens
    return {
        "requests": len(analysis.requests),
        "rendered": n,
        "template": analysis.template.origin,
        "cache_model": {
            "name": analysis.cache_model.name,
            "rule": CACHE_MODEL_HELP.get(analysis.cache_model.name, ""),
            "ideal": "every earlier prompt stays cached; llama-server caches one prompt per slot "
            "(plus a host-memory prompt cache), so hit_rate_one_slot is the pessimistic bound",
        },
        "before": _side(analysis.before),
        "after": _side(analysis.after),
        "groups_before": len(analysis.groups_before),
        "groups_after": len(analysis.groups_after),
        "largest_groups_before": _groups(analysis, after=False),
        "largest_groups_after": _groups(analysis, after=True),
        "saved_tokens": saved,
        "saved_tokens_per_request": round(saved / n, 1) if n else 0.0,
        "prefill_tokens_per_s": analysis.prefill_rate,
        "ttft_saved_ms_per_request": (
            round(analysis.saved_ms_per_request, 1)
            if analysis.saved_ms_per_request is not None
            else None
        ),
        "dynamic_spans": [
            {
                "request": i,
                "source": f.source,
                "text": f.span.text,
                "kind": f.span.kind,
                "movable": f.place is not None,
            }
            for i, r in enumerate(analysis.rendered)
            for f in r.spans
        ],
        "per_request": [
            {
                "where": r.request.where,
                "prompt_tokens": analysis.before.prompt_tokens[i],
                "cached_before": analysis.before.cached_ideal[i],
                "cached_after": analysis.after.cached_ideal[i],
            }
            for i, r in enumerate(analysis.rendered)
        ],
    }


def report_rows(analysis: PromptsAnalysis) -> list[tuple[str, str, str]]:
    """``(measure, now, after fixes)`` rows for a terminal table."""
    b, a = analysis.before, analysis.after
    db, da = distribution(b.shared_ideal[1:]), distribution(a.shared_ideal[1:])
    rows = [
        ("requests", f"{len(analysis.rendered)}", f"{len(analysis.rendered)}"),
        ("prompt tokens", f"{b.total_tokens:,}", f"{a.total_tokens:,}"),
        ("cached tokens (ideal cache)", f"{sum(b.cached_ideal):,}", f"{sum(a.cached_ideal):,}"),
        ("prefix-cache hit rate (ideal)", f"{b.hit_rate_ideal:.1%}", f"{a.hit_rate_ideal:.1%}"),
        (
            "hit rate, one slot (previous request only)",
            f"{b.hit_rate_one_slot:.1%}",
            f"{a.hit_rate_one_slot:.1%}",
        ),
        (
            "shared prefix p50 / p90 (tokens)",
            f"{db['p50']:.0f} / {db['p90']:.0f}",
            f"{da['p50']:.0f} / {da['p90']:.0f}",
        ),
        (
            "prefix groups (>= 16 shared tokens)",
            f"{len(analysis.groups_before)}",
            f"{len(analysis.groups_after)}",
        ),
        (
            "largest group: requests x shared tokens",
            _largest(analysis, False),
            _largest(analysis, True),
        ),
    ]
    return rows


def _largest(analysis: PromptsAnalysis, after: bool) -> str:
    groups = analysis.groups_after if after else analysis.groups_before
    return f"{len(groups[0].members)} x {groups[0].shared_tokens}" if groups else "-"


def saving_line(analysis: PromptsAnalysis) -> str:
    n = len(analysis.rendered)
    saved = analysis.saved_tokens
    per = saved / n if n else 0.0
    line = f"saved: {saved:,} prompt tokens served from cache ({per:.0f} per request)"
    ms = analysis.saved_ms_per_request
    if ms is not None and analysis.prefill_rate:
        line += (
            f"; at {analysis.prefill_rate:.0f} tokens/s prefill: ~{ms:.0f} ms less TTFT per request"
        )
    return line
