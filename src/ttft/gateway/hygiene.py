"""Prefix hygiene: move dynamic content out of the system prompt, to the end of the request.

A timestamp or request id near the start of the prompt makes every request's prefix different,
so the engine's prefix cache never hits (the article's "dynamic content zeroes the hit rate
silently"). With ``hygiene = true`` on a model, the gateway runs the prompt linter's detectors
(``ttft.prompts.dynamic_content``) over the system and developer messages and moves each line that
holds dynamic content to the end of the last user message, with lint's own move
(``ttft.prompts.transform``), so ``ttft lint prompts --suggest`` and the gateway agree on what the
fix is. It changes the prompt the model sees, which is why it is opt-in and counted.
"""

from __future__ import annotations

from typing import Any

from ttft.prompts.dynamic_content import find_dynamic
from ttft.prompts.static_prefix import STATIC_ROLES, TextPlace, last_user_index
from ttft.prompts.transform import move_to_end
from ttft.workload.request_log import ChatRequest


def move_dynamic(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``messages`` with dynamic content moved, and the kinds moved (empty: unchanged).

    Only string contents of static roles before the last user message are scanned.
    """
    target = last_user_index(messages)
    if messages[target].get("role") != "user":
        return messages, []
    places: list[TextPlace] = []
    kinds: list[str] = []
    for i, message in enumerate(messages[:target]):
        content = message.get("content")
        if message.get("role") not in STATIC_ROLES or not isinstance(content, str):
            continue
        for span in find_dynamic(content):
            places.append(TextPlace(i, None, span.start, span.end))
            kinds.append(span.kind)
    if not places:
        return messages, []
    moved = move_to_end(ChatRequest(messages=messages), places)
    return moved.messages, kinds
