"""A request to send: the OpenAI body plus what the workload knows about it (bucket, lengths)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ApiStyle = Literal["chat", "completions"]


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One request of a workload. ``body`` is the JSON body minus ``model``/``stream`` settings,
    which the load layer fills in per target."""

    body: dict[str, Any]
    api: ApiStyle = "chat"
    bucket: str = ""  # e.g. "512" or "prefix=1200+64" or "file"
    prompt_tokens: int | None = None  # what the workload built (None: unknown, e.g. from a file)
    meta: dict[str, Any] = field(default_factory=dict)


def chat_body(messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    return {"messages": messages, "max_tokens": max_tokens}


def completion_body(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {"prompt": prompt, "max_tokens": max_tokens}
