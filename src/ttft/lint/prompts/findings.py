"""What ``ttft lint prompts`` finds, as shared lint findings: which dynamic content, clock,
template instability or overflow keeps the prefix cache cold, how severe, and the fix.

The numbers behind them (hit rates now and after the fixes, tokens and TTFT saved) are
rendered by ``ttft.report.prompts``.
"""

from __future__ import annotations

from ttft.core.findings import Finding, Location, Severity
from ttft.lint.prompts.analysis import DynamicGroup, PromptsAnalysis
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
