"""One request rendered, split into its would-be static prefix and its per-request tail.

The static prefix is what a prefix cache could share between requests: everything the template
renders before the content of the last user message (system prompt, tool definitions, earlier
turns). Dynamic content found there is attributed to where it came from, because the fix differs:
a system message can be edited, a template that reads the clock cannot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from ttft.prompts.chat_template import TemplateRenderer
from ttft.prompts.dynamic_content import DynamicSpan, find_dynamic
from ttft.workload.request_log import ChatRequest

# A private-use character pair that no tokenizer or template rewrites: marks where the last
# user message's content lands in the rendered prompt.
SENTINEL = "\ue000ttft-last-user-content\ue000"

# Roles whose content is the same for every request of an application, so dynamic content there
# breaks the cache. Earlier user/assistant turns are history: fixed within one conversation.
STATIC_ROLES = ("system", "developer")


@dataclass(frozen=True)
class TextPlace:
    """Where a piece of text sits in a request: message (and content part) and character range."""

    message: int
    part: int | None  # index in a list-of-parts content, None for string content
    start: int
    end: int


@dataclass(frozen=True)
class FoundSpan:
    """A dynamic span of the rendered prompt and its source in the request."""

    span: DynamicSpan  # offsets in the rendered prompt
    source: str  # "messages[0] (system)", "tools", "chat_template_kwargs"
    place: TextPlace | None  # set when the span can be moved (it lies in a static message)


@dataclass(frozen=True)
class RenderedRequest:
    request: ChatRequest
    text: str
    static_chars: int
    spans: tuple[FoundSpan, ...]

    @property
    def static_text(self) -> str:
        return self.text[: self.static_chars]


def last_user_index(messages: list[dict[str, Any]]) -> int:
    """Index of the last user message (the last message if none is a user's)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return len(messages) - 1


def render(renderer: TemplateRenderer, request: ChatRequest) -> str:
    return renderer.render(
        request.messages, request.tools, where=request.where, extra=request.template_kwargs
    )


def _with_sentinel(request: ChatRequest) -> ChatRequest:
    messages = [dict(m) for m in request.messages]
    messages[last_user_index(messages)]["content"] = SENTINEL
    return replace(request, messages=messages)


def static_prefix_chars(renderer: TemplateRenderer, request: ChatRequest, text: str) -> int:
    """Length of the prompt's prefix that precedes the last user message's content."""
    marked = render(renderer, _with_sentinel(request))
    n = min(len(text), len(marked))
    i = 0
    while i < n and text[i] == marked[i]:
        i += 1
    return i


def text_parts(message: dict[str, Any]) -> list[tuple[int | None, str]]:
    """A message's text as ``(part index, text)`` pairs: one pair for string content."""
    content = message.get("content")
    if isinstance(content, str):
        return [(None, content)]
    if isinstance(content, list):
        return [
            (i, str(p.get("text", "")))
            for i, p in enumerate(content)
            if isinstance(p, dict) and p.get("type") == "text"
        ]
    return []


def locate_all(
    request: ChatRequest, needle: str, before: int
) -> list[tuple[str, TextPlace | None] | None]:
    """Every place ``needle`` comes from, in rendering order: messages before ``before``, tools.

    An entry of None is an occurrence in earlier conversation turns (history, not an error); a
    source with no place cannot be moved by editing a static message (tools, template kwargs).
    Empty: the template wrote the text itself.
    """
    found: list[tuple[str, TextPlace | None] | None] = []
    for i, message in enumerate(request.messages[:before]):
        role = str(message.get("role"))
        for part, text in text_parts(message):
            at = text.find(needle)
            while at >= 0:
                place = TextPlace(i, part, at, at + len(needle))
                found.append((f"messages[{i}] ({role})", place) if role in STATIC_ROLES else None)
                at = text.find(needle, at + len(needle))
    if request.tools and needle in json.dumps(request.tools, ensure_ascii=False):
        found.append(("tools", None))
    if request.template_kwargs and needle in json.dumps(
        request.template_kwargs, ensure_ascii=False
    ):
        found.append(("chat_template_kwargs", None))
    return found


def locate(request: ChatRequest, needle: str, before: int) -> tuple[str, TextPlace | None] | None:
    """The first place ``needle`` comes from (see :func:`locate_all`); "template" if none."""
    found = locate_all(request, needle, before)
    return found[0] if found else ("template", None)


def analyse(renderer: TemplateRenderer, request: ChatRequest) -> RenderedRequest:
    """Render ``request``, find its static prefix and the dynamic content inside it."""
    text = render(renderer, request)
    static_chars = static_prefix_chars(renderer, request, text)
    before = last_user_index(request.messages)
    found: list[FoundSpan] = []
    # The n-th span with a given text is the n-th occurrence of that text in the request.
    seen: dict[str, int] = {}
    for span in find_dynamic(text[:static_chars]):
        places = locate_all(request, span.text, before)
        nth = seen.get(span.text, 0)
        seen[span.text] = nth + 1
        # Text the template writes itself is the same for every request, unless it reads the
        # clock: that is reported on its own (template-clock), not as message content.
        if not places:
            continue
        where = places[min(nth, len(places) - 1)]
        if where is not None:
            found.append(FoundSpan(span, where[0], where[1]))
    return RenderedRequest(request, text, static_chars, tuple(found))
