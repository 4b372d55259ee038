"""The fixes lint suggests, applied to a request, so their effect can be measured before anyone
changes an application: move dynamic content to the end of the last user message, and write tool
definitions and static messages in one canonical form.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ttft.prompts.dynamic_content import find_dynamic
from ttft.prompts.static_prefix import STATIC_ROLES, TextPlace, last_user_index
from ttft.workload.request_log import ChatRequest

# A line longer than this is a paragraph: move only the sentence that holds the dynamic value.
_LONG_LINE = 200
_SENTENCE_END = re.compile(r"[.!?。！？]\s+")
_SENTENCE_STOP = re.compile(r"[.!?。！？](?=\s|$)")
_SENTENCE_CHARS = 2000  # a "sentence" longer than this is not one: its line is moved


def move_unit(text: str, start: int, end: int, *, sentence: bool = False) -> tuple[int, int]:
    """The range to move for a dynamic value at ``text[start:end]``: its line, or its sentence
    when the line is a paragraph or when ``sentence`` asks for it (a few-shot turn, where a whole
    line is often the whole example)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if line_end - line_start <= _LONG_LINE and not sentence:
        return line_start, line_end
    sentence_start = line_start
    # Searched in place and within _SENTENCE_CHARS (no slice, no scan to the end of a 4 MB
    # line): per value, that made a long line with many values quadratic.
    for m in _SENTENCE_END.finditer(text, max(line_start, start - _SENTENCE_CHARS), start):
        sentence_start = m.end()
    stop = _SENTENCE_STOP.search(text, end, min(line_end, end + _SENTENCE_CHARS))
    sentence_end = stop.end() if stop else line_end
    return sentence_start, sentence_end


def _get(message: dict[str, Any], part: int | None) -> str:
    if part is None:
        return str(message.get("content") or "")
    return str(message["content"][part].get("text", ""))


def _set(message: dict[str, Any], part: int | None, text: str) -> None:
    if part is None:
        message["content"] = text
    else:
        message["content"][part]["text"] = text


def _cut(text: str, start: int, end: int) -> str:
    """Remove ``text[start:end]`` and the line break or space that would be left doubled."""
    before, after = text[:start], text[end:]
    if after.startswith("\n") and (not before or before.endswith("\n")):
        after = after[1:]
    elif not after and before.endswith("\n"):
        before = before[:-1]  # the last line went: its line break goes with it
    elif before.endswith(" ") and (not after or after[0] in " \n"):
        before = before.rstrip(" ")
    return before + after


def move_to_end(request: ChatRequest, places: Iterable[TextPlace]) -> ChatRequest:
    """``request`` with each place's line (or sentence) moved to the end of the last user message.

    Moved lines keep their order and are appended after a blank line, where the cache no longer
    needs them to be the same as in the previous request.
    """
    messages = copy.deepcopy(request.messages)
    target = last_user_index(messages)
    # Cut from the back so that earlier offsets in the same text stay valid.
    ranges: dict[tuple[int, int | None], list[tuple[int, int]]] = {}
    for place in places:
        if place.message == target:
            continue
        text = _get(messages[place.message], place.part)
        turn = messages[place.message].get("role") not in STATIC_ROLES
        ranges.setdefault((place.message, place.part), []).append(
            move_unit(text, place.start, place.end, sentence=turn)
        )
    moved: list[tuple[int, int | None, int, str]] = []
    for (index, part), spans in ranges.items():
        text = _get(messages[index], part)
        merged: list[tuple[int, int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        # Cut in the head that holds every range (and the character after it, which _cut
        # reads): each cut copies the text before and after it, and the rest of a 4 MB
        # message is copied once, not once per value.
        split = merged[-1][1] + 1
        head, rest = text[:split], text[split:]
        for start, end in reversed(merged):
            moved.append((index, part, start, head[start:end].strip()))
            head = _cut(head, start, end)
        _set(messages[index], part, head + rest)
    if not moved:
        return request
    moved.sort(key=lambda m: (m[0], m[1] or 0, m[2]))
    tail = "\n".join(chunk for *_, chunk in moved if chunk)
    last = messages[target]
    content = last.get("content")
    if isinstance(content, list):
        content.append({"type": "text", "text": "\n\n" + tail})
    else:
        last["content"] = (str(content or "").rstrip() + "\n\n" + tail).lstrip("\n")
    # A static message left empty by the move would still render its header: drop it.
    kept = [
        m
        for i, m in enumerate(messages)
        if i == target or m.get("role") not in STATIC_ROLES or _has_text(m)
    ]
    return replace(request, messages=kept)


def _has_text(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    return bool(content)


def canonical_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool definitions with keys sorted at every level: one spelling for equal definitions."""
    if tools is None:
        return None
    result: list[dict[str, Any]] = json.loads(json.dumps(tools, sort_keys=True))
    return result


def normalize_text(text: str) -> str:
    """Trailing spaces stripped from every line, and from both ends."""
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def normalize(request: ChatRequest) -> ChatRequest:
    """``request`` with canonical tools and whitespace-normalized static messages.

    Only the static part is touched: the last user message is the request's own content.
    """
    messages = copy.deepcopy(request.messages)
    target = last_user_index(messages)
    for i, message in enumerate(messages):
        if i == target:
            continue
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = normalize_text(content)
        elif isinstance(content, list):
            for item in content:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = normalize_text(item["text"])
    return replace(request, messages=messages, tools=canonical_tools(request.tools))


def static_key(request: ChatRequest) -> str:
    """Equal for requests whose static parts are logically equal (after :func:`normalize`)."""
    norm = normalize(request)
    target = last_user_index(norm.messages)
    return json.dumps(
        {"messages": norm.messages[:target], "tools": norm.tools, "kw": norm.template_kwargs},
        sort_keys=True,
        ensure_ascii=False,
    )


def move_dynamic(
    messages: list[dict[str, Any]],
    *,
    max_chars: int | None = None,
    max_spans: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """``messages`` with dynamic content moved, and the kinds moved (empty: unchanged).

    Prefix hygiene: a timestamp or request id near the start of the prompt makes every request's
    prefix different, so the engine's prefix cache never hits (the article's "dynamic content
    zeroes the hit rate silently"). Each line of a system or developer message that holds dynamic
    content (``dynamic_content`` detectors) moves to the end of the last user message, with
    ``move_to_end``. The gateway's ``hygiene = true``, ``ttft tune ab``'s move-dynamic transform
    and ``ttft lint prompts``' suggestion are this one function. Only string contents of static
    roles before the last user message are scanned.

    ``max_chars`` bounds the static text scanned (the leading characters, message by message)
    and ``max_spans`` the values moved (the first ones): the gateway runs this on its event loop
    for text a client chose, and 4 MB of timestamps took minutes to scan and move.
    """
    target = last_user_index(messages)
    if messages[target].get("role") != "user":
        return messages, []
    places: list[TextPlace] = []
    kinds: list[str] = []
    budget = max_chars
    for i, message in enumerate(messages[:target]):
        content = message.get("content")
        if message.get("role") not in STATIC_ROLES or not isinstance(content, str):
            continue
        if budget is not None:
            if budget <= 0:
                break
            content, budget = content[:budget], budget - len(content)
        for span in find_dynamic(content):
            places.append(TextPlace(i, None, span.start, span.end))
            kinds.append(span.kind)
        if max_spans is not None and len(places) >= max_spans:
            del places[max_spans:], kinds[max_spans:]
            break
    if not places:
        return messages, []
    moved = move_to_end(ChatRequest(messages=messages), places)
    return moved.messages, kinds
