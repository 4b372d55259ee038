"""A chunk reader that also keeps the answer's text, for workloads that send it back.

Only multi-turn runs need the words of an answer (the next turn's history carries it); every
other run keeps counting characters only, so this lives beside ``ChunkReader`` instead of in it:
the normal path pays nothing for it. Each event's JSON is parsed a second time here, which a
conversation (a few tokens per second per session) affords easily.
"""

from __future__ import annotations

import json
from typing import Any

from ttft.client.openai import ChunkReader
from ttft.client.sse import SseEvent
from ttft.core.records import RequestRecord


def _delta_text(chunk: Any) -> str:
    parts: list[str] = []
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


class TextReader(ChunkReader):
    """``ChunkReader`` plus the answer's content text appended to ``texts`` (reasoning is not
    part of the answer a chat client sends back)."""

    __slots__ = ("texts",)

    def __init__(self, record: RequestRecord, texts: list[str]) -> None:
        super().__init__(record)
        self.texts = texts

    def event(self, event: SseEvent, t_ns: int) -> None:
        finished = self.done
        super().event(event, t_ns)
        if finished or self.error is not None or event.data == "[DONE]":
            return
        try:
            chunk = json.loads(event.data)
        except ValueError:
            return
        text = _delta_text(chunk)
        if text:
            self.texts.append(text)
