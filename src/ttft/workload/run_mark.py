"""A run's mark at the start of every prompt it sends, so no run finds another's in the cache.

A service that is not restarted between two measurements keeps the first one's prompts in its
prefix cache, and the second would time as cache hits what the first computed: a before/after
pair would credit the cache to whatever changed in between. Prompts that ttft writes itself
differ per run through their seed; prompts it reads (a prompt file, a request log, the user's own
requests in doctor and tune) start with a mark of the run's instead. Within one run every prompt
carries the same mark, so the prefixes they share still share it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ttft.workload.requests import WorkItem


def run_mark(seed: str) -> str:
    """The mark for prompts of the run with ``seed``: the same seed, the same mark. It starts
    with characters that differ between seeds (a digest), so two runs' prompts part at their
    first token, where ``ttft-`` seeds would share it."""
    return "[" + hashlib.blake2b(seed.encode(), digest_size=5).hexdigest() + "] "


def mark_start(messages: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    """``messages`` with ``marker`` in front of the first message's text (a copy)."""
    if not messages:
        return messages
    first = dict(messages[0])
    content = first.get("content")
    if isinstance(content, str):
        first["content"] = marker + content
    elif isinstance(content, list):
        first["content"] = [{"type": "text", "text": marker}, *content]
    else:  # no text to mark (a tool call): a system line of its own goes first
        return [{"role": "system", "content": marker}, *messages]
    return [first, *messages[1:]]


def marked_body(body: dict[str, Any], marker: str) -> dict[str, Any]:
    """A chat or completions request body with ``marker`` at the start of its prompt (a copy;
    a body with neither is returned as it is)."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        return {**body, "messages": mark_start(messages, marker)}
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return {**body, "prompt": marker + prompt}
    return body


def marked_items(items: Iterable[WorkItem], marker: str) -> list[WorkItem]:
    """``items`` with ``marker`` at the start of each prompt (``marked_body``)."""
    return [replace(item, body=marked_body(item.body, marker)) for item in items]
