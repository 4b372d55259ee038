"""Completions answers rewritten as chat answers, for requests the gateway pre-rendered.

The client asked ``/v1/chat/completions``; the engine answered ``/v1/completions`` for the prompt
the gateway rendered. Each completions event becomes the chat event the engine's own chat
endpoint would have sent, in the shape llama-server uses: a role-only chunk
(``{"role": "assistant", "content": null}``) just before the first text, ``delta.content`` for
each piece of text, ``delta: {}`` with the ``finish_reason``, and ``usage``/``timings`` where
they came (a ``choices: []`` chunk when ``stream_options.include_usage`` asked for one).
"""

from __future__ import annotations

import json
from typing import Any

_DONE = b"data: [DONE]\n\n"


def _dump(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


class ChatStreamTranslator:
    """Feed it completions SSE payloads (the text after ``data:``); get chat SSE bytes back."""

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self.role_sent = False
        self.saw_text = False

    def event(self, data: str) -> bytes:
        if data == "[DONE]":
            return _DONE
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            return b"data: " + data.encode() + b"\n\n"  # not ours to judge: pass it on
        if not isinstance(chunk, dict) or "error" in chunk or not _choices_ok(chunk):
            return b"data: " + data.encode() + b"\n\n"
        base = {
            k: v for k, v in chunk.items() if k not in ("choices", "usage", "timings", "object")
        }
        base["object"] = "chat.completion.chunk"
        out = bytearray()
        usage = chunk.get("usage")
        timings = chunk.get("timings")
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            text = choice.get("text") or ""
            finish = choice.get("finish_reason")
            if (text or finish) and not self.role_sent:
                self.role_sent = True
                out += _dump(
                    {
                        "choices": [
                            {
                                "finish_reason": None,
                                "index": index,
                                "delta": {"role": "assistant", "content": None},
                            }
                        ],
                        **base,
                    }
                )
            if text:
                out += _dump(
                    {
                        "choices": [
                            {"finish_reason": None, "index": index, "delta": {"content": text}}
                        ],
                        **base,
                    }
                )
            if finish:
                final: dict[str, Any] = {
                    "choices": [{"finish_reason": finish, "index": index, "delta": {}}],
                    **base,
                }
                if timings is not None and not (self.include_usage and usage is not None):
                    final["timings"] = timings
                out += _dump(final)
        if usage is not None and self.include_usage:
            extra: dict[str, Any] = {"choices": [], **base, "usage": usage}
            if timings is not None:
                extra["timings"] = timings
            out += _dump(extra)
        return bytes(out)


def _choices_ok(chunk: dict[str, Any]) -> bool:
    """A completions chunk's shape: ``choices`` a list of objects (or null). Anything else is
    not an answer we translate, and must not raise in the upstream's read callback (a 500)."""
    choices = chunk.get("choices", False)
    return choices is None or (
        isinstance(choices, list) and all(isinstance(c, dict) for c in choices)
    )


def chat_response(body: bytes) -> bytes:
    """A non-streamed completions answer as a ``chat.completion`` object; any other body (an
    error, or what no engine sends) unchanged."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(data, dict) or "choices" not in data or not _choices_ok(data):
        return body
    choices = [
        {
            "finish_reason": c.get("finish_reason"),
            "index": c.get("index", 0),
            "message": {"role": "assistant", "content": c.get("text", "")},
        }
        for c in data.get("choices") or []
    ]
    out = {k: v for k, v in data.items() if k != "choices"}
    out["choices"] = choices
    out["object"] = "chat.completion"
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
