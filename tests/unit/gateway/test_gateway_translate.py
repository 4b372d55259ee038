"""Completions answers become the chat answers llama-server's chat endpoint would have sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ttft.gateway.translate import ChatStreamTranslator, chat_response


def events(raw: bytes) -> list[Any]:
    out = []
    for block in raw.decode().split("\n\n"):
        if block:
            assert block.startswith("data: ")
            payload = block[6:]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def completion(text: str, finish: str | None = None, **extra: Any) -> str:
    return json.dumps(
        {
            "id": "c1",
            "object": "text_completion",
            "created": 1,
            "model": "m",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
    )


def test_the_first_text_comes_after_a_role_only_chunk_in_the_same_write() -> None:
    tr = ChatStreamTranslator(include_usage=False)
    first = events(tr.event(completion("Hello")))
    assert [e["choices"][0]["delta"] for e in first] == [
        {"role": "assistant", "content": None},
        {"content": "Hello"},
    ]
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == "c1" for e in first)
    assert [e["choices"][0]["delta"] for e in events(tr.event(completion(" world")))] == [
        {"content": " world"}
    ]


def test_the_finish_chunk_carries_timings_without_include_usage() -> None:
    tr = ChatStreamTranslator(include_usage=False)
    tr.event(completion("a"))
    out = events(
        tr.event(completion("", "length", timings={"cache_n": 5}, usage={"prompt_tokens": 3}))
    )
    assert len(out) == 1
    assert out[0]["choices"][0] == {"finish_reason": "length", "index": 0, "delta": {}}
    assert out[0]["timings"] == {"cache_n": 5} and "usage" not in out[0]


def test_include_usage_adds_a_chunk_without_choices() -> None:
    tr = ChatStreamTranslator(include_usage=True)
    tr.event(completion("a"))
    out = events(
        tr.event(completion("", "stop", timings={"cache_n": 5}, usage={"prompt_tokens": 3}))
    )
    assert out[0]["choices"][0]["finish_reason"] == "stop" and "timings" not in out[0]
    assert out[1]["choices"] == [] and out[1]["usage"] == {"prompt_tokens": 3}
    assert out[1]["timings"] == {"cache_n": 5}
    assert tr.event("[DONE]") == b"data: [DONE]\n\n"


def test_an_answer_with_no_text_still_gets_its_role_chunk() -> None:
    tr = ChatStreamTranslator(include_usage=False)
    out = events(tr.event(completion("", "length")))
    assert [e["choices"][0]["delta"] for e in out] == [{"role": "assistant", "content": None}, {}]


def test_errors_and_unknown_payloads_pass_through_unchanged() -> None:
    tr = ChatStreamTranslator(include_usage=False)
    error = json.dumps({"error": {"message": "boom"}})
    assert tr.event(error) == b"data: " + error.encode() + b"\n\n"
    assert tr.event("not json") == b"data: not json\n\n"


def test_a_non_streamed_completion_becomes_a_chat_completion() -> None:
    body = completion("Hi there", "stop", usage={"prompt_tokens": 3}).encode()
    out = json.loads(chat_response(body))
    assert out["object"] == "chat.completion"
    assert out["choices"] == [
        {
            "finish_reason": "stop",
            "index": 0,
            "message": {"role": "assistant", "content": "Hi there"},
        }
    ]
    assert out["usage"] == {"prompt_tokens": 3}


@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": [1]}',
        b'{"choices": "ab"}',
        b'{"choices": {"text": "x"}}',
        b"[" * 5000 + b"]" * 5000,
    ],
    ids=["number-choice", "string-choices", "object-choices", "deep"],
)
def test_answers_no_engine_sends_pass_through_instead_of_raising(body: bytes) -> None:
    # Raised in the upstream's read callback, these were a 500 with a traceback in the log.
    assert chat_response(body) == body
    translator = ChatStreamTranslator(include_usage=False)
    assert translator.event(body.decode()) == b"data: " + body + b"\n\n"
