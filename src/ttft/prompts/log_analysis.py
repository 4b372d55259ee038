"""One analysis of a request log: where dynamic content sits before the static parts, per field.

A prefix cache reuses what every request shares from the first token on. This module reads a log
of chat requests and finds, in each field that renders before the last user message (system and
developer messages, few-shot turns, tool definitions), the spans that change between requests:

- by alignment (:mod:`ttft.prompts.align`): the versions of a field are aligned word by word and
  the positions where they differ are the dynamic spans, whatever their format or line;
- by the known patterns (:mod:`ttft.prompts.dynamic_content`): a timestamp or an id is dynamic
  even in a log of one request, unless the log shows the field the same in every request.

``ttft lint prompts``, doctor's dynamic-prefix step, the plan's ``move-dynamic`` transform and the
gateway's hygiene all read this one analysis, so they name and move the same spans. A span in a
message can be moved (its line or sentence goes to the end of the last user message, wording
untouched); a span in a tool definition cannot, since the template renders it as the tool's
schema and moving it would change what the tool is said to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.prompts.align import varying_spans
from ttft.prompts.dynamic_content import DynamicSpan, Volatility, find_dynamic
from ttft.prompts.static_prefix import STATIC_ROLES, TextPlace, last_user_index, text_parts
from ttft.prompts.transform import move_to_end, move_unit
from ttft.workload.request_log import ChatRequest

VARYING_LABEL = "content that differs between requests"
TOOL_REASON = (
    "it is part of a tool definition, which the chat template renders as the tool's schema: "
    "moving it would change what the model is told the tool does"
)
KWARGS_REASON = (
    "it is passed to the chat template (chat_template_kwargs), which writes it where the "
    "template chooses: only a value that changes rarely keeps the prefix"
)
TURN_REASON = "it is the whole of a few-shot turn: moving it would leave the example empty"


@dataclass(frozen=True)
class FieldRef:
    """A text field of a request that renders before the last user message."""

    key: str  # "messages[0] (system)", "messages[2] (assistant)", "tools[0].function.description"
    message: int | None = None  # None: a tool definition
    part: int | None = None  # index in a list-of-parts content
    path: tuple[str | int, ...] = ()  # for a tool field: the JSON path inside ``tools``
    source: str = "message"  # "message", "tools" or "chat_template_kwargs"


@dataclass(frozen=True)
class LogSpan:
    """One dynamic span of one request: ``field``'s text ``[start:end]``."""

    request: int
    field: FieldRef
    start: int
    end: int
    text: str
    kind: str  # a detector's kind ("timestamp", "uuid", ...) or "varying"
    label: str
    volatility: Volatility
    reason: str = ""  # why it cannot be moved; "" when it can

    @property
    def movable(self) -> bool:
        return not self.reason

    @property
    def place(self) -> TextPlace | None:
        if not self.movable or self.field.message is None:
            return None
        return TextPlace(self.field.message, self.field.part, self.start, self.end)

    def describe(self) -> str:
        return f"{self.label} {self.text!r} in {self.field.key}"


def static_fields(request: ChatRequest) -> Iterator[tuple[FieldRef, str]]:
    """Every text that renders before the last user message, tools first (most templates put
    them in the system block), then the messages in order."""
    for index, tool in enumerate(request.tools or []):
        yield from _json_strings(tool, f"tools[{index}]", (index,), "tools")
    if request.template_kwargs:
        kwargs = request.template_kwargs
        yield from _json_strings(kwargs, "chat_template_kwargs", (), "chat_template_kwargs")
    messages = request.messages
    for i, message in enumerate(messages[: last_user_index(messages)]):
        role = str(message.get("role"))
        for part, text in text_parts(message):
            key = f"messages[{i}] ({role})" + ("" if part is None else f".content[{part}]")
            yield FieldRef(key, i, part), text


def _json_strings(
    value: Any, key: str, path: tuple[str | int, ...], source: str
) -> Iterator[tuple[FieldRef, str]]:
    if isinstance(value, str):
        yield FieldRef(key, None, None, path, source), value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _json_strings(item, f"{key}.{name}", (*path, str(name)), source)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(item, f"{key}[{i}]", (*path, i), source)


@dataclass(frozen=True)
class LogAnalysis:
    """The dynamic spans of every request of a log, and the log with the movable ones moved."""

    requests: tuple[ChatRequest, ...]
    spans: tuple[tuple[LogSpan, ...], ...]  # per request, in field order then position

    @property
    def all_spans(self) -> list[LogSpan]:
        return [s for per in self.spans for s in per]

    @property
    def found(self) -> bool:
        return any(self.spans)

    def movable(self) -> list[LogSpan]:
        return [s for s in self.all_spans if s.movable]

    def unmovable(self) -> list[LogSpan]:
        return [s for s in self.all_spans if not s.movable]

    def moved(self, index: int) -> ChatRequest:
        """Request ``index`` with its movable spans' lines (or sentences) moved to the end of
        its last user message; unchanged when it has none."""
        places = [p for s in self.spans[index] if (p := s.place) is not None]
        return move_to_end(self.requests[index], places) if places else self.requests[index]

    def moved_all(self) -> list[ChatRequest]:
        return [self.moved(i) for i in range(len(self.requests))]

    def names(self) -> list[tuple[str, str, str]]:
        """Distinct ``(field, label, value)`` of the spans, in order: what a report names."""
        return list(dict.fromkeys((s.field.key, s.label, s.text) for s in self.all_spans))

    def fields(self) -> list[str]:
        return list(dict.fromkeys(s.field.key for s in self.all_spans))

    def static_after(self, index: int, count: Callable[[str], float] | None = None) -> float:
        """Static text of request ``index`` after its first dynamic span: what the prefix cache
        loses on it (characters, or what ``count`` makes of them, e.g. tokens)."""
        first = self.spans[index][0] if self.spans[index] else None
        if first is None:
            return 0.0
        tail: list[str] = []
        started = False
        for ref, text in static_fields(self.requests[index]):
            if ref == first.field:
                started = True
                tail.append(text[first.start :])
            elif started:
                tail.append(text)
        joined = "\n".join(tail)
        return float(count(joined)) if count is not None else float(len(joined))


def analyse_log(
    requests: Sequence[ChatRequest],
    *,
    max_chars: int | None = None,
    trust_patterns: bool = False,
) -> LogAnalysis:
    """Find the dynamic spans of every request of ``requests`` (see the module's docstring).

    ``max_chars`` bounds the characters of each field that are read (the leading ones);
    ``trust_patterns``: a known pattern is dynamic even where the log shows it constant.
    """
    per_field: dict[str, list[tuple[int, FieldRef, str]]] = {}
    for index, request in enumerate(requests):
        for ref, text in static_fields(request):
            if max_chars is not None:
                text = text[:max_chars]
            per_field.setdefault(ref.key, []).append((index, ref, text))
    spans: list[list[LogSpan]] = [[] for _ in requests]
    for key, entries in per_field.items():
        texts = [text for _, _, text in entries]
        constant = not trust_patterns and len(entries) > 1 and len(set(texts)) == 1
        for (index, ref, text), varying in zip(entries, varying_spans(texts), strict=True):
            patterns = [] if constant or not _scanned(requests[index], ref) else find_dynamic(text)
            for start, end, detected in _combine(varying, patterns):
                spans[index].append(_span(index, ref, key, text, start, end, detected, requests))
    order = {key: n for n, key in enumerate(per_field)}
    return LogAnalysis(
        tuple(requests),
        tuple(tuple(sorted(s, key=lambda x: (order[x.field.key], x.start))) for s in spans),
    )


def _scanned(request: ChatRequest, ref: FieldRef) -> bool:
    """Known patterns are looked for in system/developer messages and tools: in other turns a
    date is conversation, unless the log shows it varying."""
    if ref.message is None:
        return True
    return request.messages[ref.message].get("role") in STATIC_ROLES


def _combine(
    varying: list[tuple[int, int]], patterns: list[DynamicSpan]
) -> list[tuple[int, int, DynamicSpan | None]]:
    """Varying ranges and pattern matches as one list: overlapping ones merge, and a merged range
    keeps the pattern's kind (a varying "2026-11-18" is a date)."""
    items: list[tuple[int, int, DynamicSpan | None]] = [(s, e, None) for s, e in varying]
    items += [(p.start, p.end, p) for p in patterns]
    items.sort(key=lambda x: (x[0], -x[1]))
    out: list[tuple[int, int, DynamicSpan | None]] = []
    for start, end, detected in items:
        if out and start < out[-1][1]:
            s, e, d = out[-1]
            out[-1] = (s, max(e, end), d or detected)
        else:
            out.append((start, end, detected))
    return out


def _span(
    index: int,
    ref: FieldRef,
    key: str,
    text: str,
    start: int,
    end: int,
    detected: DynamicSpan | None,
    requests: Sequence[ChatRequest],
) -> LogSpan:
    kind = detected.kind if detected is not None else "varying"
    label = detected.label if detected is not None else VARYING_LABEL
    volatility: Volatility = detected.volatility if detected is not None else "request"
    reason = ""
    if ref.message is None:
        reason = KWARGS_REASON if ref.source == "chat_template_kwargs" else TOOL_REASON
    elif requests[index].messages[ref.message].get("role") not in STATIC_ROLES:
        s, e = move_unit(text, start, end, sentence=True)
        if not (text[:s] + text[e:]).strip():
            reason = TURN_REASON
    return LogSpan(index, ref, start, end, text[start:end], kind, label, volatility, reason)


def rendered_at(static_text: str, request: ChatRequest, span: LogSpan) -> int | None:
    """Where ``span`` lands in the rendered static prefix of ``request`` (None: the template does
    not render it there), found with the text before it, so a value that also occurs elsewhere
    is placed right."""
    field_text = next((t for ref, t in static_fields(request) if ref == span.field), span.text)
    for context in (40, 12, 0):
        needle = field_text[max(0, span.start - context) : span.end]
        at = static_text.find(needle)
        if at >= 0:
            return at + len(needle) - len(span.text)
    return None


def keep_rendered(analysis: LogAnalysis, static_texts: Sequence[str]) -> LogAnalysis:
    """``analysis`` without the spans the chat template does not render before the last user
    message (``static_texts[i]``: request ``i``'s rendered static prefix): a tool schema the
    template leaves out cannot break the prefix."""
    kept = tuple(
        tuple(s for s in spans if rendered_at(text, analysis.requests[i], s) is not None)
        for i, (spans, text) in enumerate(zip(analysis.spans, static_texts, strict=True))
    )
    return LogAnalysis(analysis.requests, kept)


def analyse_bodies(bodies: Sequence[dict[str, Any]]) -> LogAnalysis:
    """:func:`analyse_log` for chat bodies as they are sent (``messages``, ``tools``)."""
    return analyse_log([body_request(b) for b in bodies])


def body_request(body: dict[str, Any]) -> ChatRequest:
    tools = body.get("tools")
    return ChatRequest(
        messages=list(body.get("messages") or []),
        tools=tools if isinstance(tools, list) else None,
    )


def summary(analysis: LogAnalysis, limit: int = 4) -> str:
    """The spans in one line, by field: ``'u-1', '2026-11-18 03:36' in messages[0] (system)``."""
    parts = []
    for key in analysis.fields()[:limit]:
        values = list(dict.fromkeys(s.text for s in analysis.all_spans if s.field.key == key))
        shown = ", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
        parts.append(f"{shown} in {key}")
    return "; ".join(parts)


def dumps_spans(analysis: LogAnalysis) -> str:
    """The spans as JSON (field, value, kind, movable): for reports and tests."""
    return json.dumps(
        [
            {"field": s.field.key, "text": s.text, "kind": s.kind, "movable": s.movable}
            for s in analysis.all_spans
        ]
    )
