"""The text-keeping reader (multi-turn runs only): the answer's content text, and exactly the
rungs the plain reader fills."""

from __future__ import annotations

import json

from ttft.client.answer_text import TextReader
from ttft.client.openai import ChunkReader
from ttft.client.sse import SseEvent
from ttft.core.records import RequestRecord


def _events() -> list[SseEvent]:
    chunks = [
        {"choices": [{"delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"delta": {"reasoning_content": "think"}}]},
        {"choices": [{"delta": {"content": "The Loire"}}]},
        {"choices": [{"delta": {"content": ", then the Seine."}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5}},
    ]
    return [SseEvent(json.dumps(c)) for c in chunks] + [SseEvent("[DONE]"), SseEvent("{}")]


def test_the_answer_text_is_kept_without_reasoning_and_the_ladder_is_unchanged() -> None:
    texts: list[str] = []
    plain, keeping = RequestRecord(0), RequestRecord(0)
    plain_reader, text_reader = ChunkReader(plain), TextReader(keeping, texts)
    for t, event in enumerate(_events(), start=1):
        plain_reader.event(event, t * 1000)
        text_reader.event(event, t * 1000)
    assert "".join(texts) == "The Loire, then the Seine."
    assert keeping.to_dict() == plain.to_dict()
    assert text_reader.done


def test_completions_text_is_kept_too() -> None:
    texts: list[str] = []
    reader = TextReader(RequestRecord(0), texts)
    reader.event(SseEvent(json.dumps({"choices": [{"text": "Paris"}]})), 1)
    assert texts == ["Paris"]
