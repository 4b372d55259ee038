"""OpenAI-style request bodies, and the reading of stream chunks into a request's ladder.

Which text counts (the rules tools disagree on, written down once):

- chat: ``delta.content`` is output; ``delta.reasoning_content`` / ``delta.reasoning`` is
  reasoning; ``delta.tool_calls[].function.arguments`` is output too (a tool call is the answer).
- completions: ``choices[].text`` is output.
- An empty string or ``null`` is no token: a role-only first chunk (``{"role": "assistant",
  "content": null}``) reaches the "first event" and "role" rungs and nothing more.
- Beside the token rungs: the first chunk announcing a role, the first reasoning text, and the
  first non-empty ``tool_calls`` list (even with empty arguments) each get a rung of their own.
- ``usage`` and llama-server's ``timings`` are read from whichever chunk carries them (the one with
  ``finish_reason``, or the extra ``choices: []`` chunk that ``include_usage`` adds); the last wins.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ttft.client import errors
from ttft.client.sse import SseEvent
from ttft.core.errors import TtftError
from ttft.core.records import ErrorInfo, RequestRecord
from ttft.workload.request_log import ChatRequest, CompletionRequest

CHAT = "chat"
COMPLETIONS = "completions"
PATHS = {CHAT: "/chat/completions", COMPLETIONS: "/completions"}  # under the API root ("/v1")


Request = ChatRequest | CompletionRequest | Mapping[str, Any]


def prepare(request: Request, default_model: str | None = None) -> tuple[str, dict[str, Any]]:
    """The API (``chat`` or ``completions``) and the JSON body of a request.

    A raw mapping is sent as given, with ``stream: true`` added when absent and the default model
    when it names none; its API is ``chat`` if it has ``messages``, ``completions`` if ``prompt``.
    """
    if isinstance(request, ChatRequest):
        api, body = CHAT, request.body()
    elif isinstance(request, CompletionRequest):
        api, body = COMPLETIONS, request.body()
    else:
        body = dict(request)
        if "messages" in body:
            api = CHAT
        elif "prompt" in body:
            api = COMPLETIONS
        else:
            raise TtftError(
                "a raw request body has neither 'messages' nor 'prompt'",
                "give 'messages' for /v1/chat/completions or 'prompt' for /v1/completions",
            )
        body.setdefault("stream", True)
    if default_model is not None and "model" not in body:
        body["model"] = default_model
    return api, body


def error_message(payload: Any) -> str:
    """The human message inside an error payload of any of the usual shapes."""
    if isinstance(payload, Mapping):
        for key in ("error", "message", "detail"):
            inner = payload.get(key)
            if inner:
                return inner if isinstance(inner, str) else error_message(inner)
        return json.dumps(payload)[:500]
    if isinstance(payload, list) and payload:
        return error_message(payload[0])
    return str(payload)[:500]


class ChunkReader:
    """Turns the SSE events of one response into rungs of its ``RequestRecord``.

    Times are given already relative to the run anchor. After ``event`` returns, ``error`` is set
    if the stream reported or caused a failure (then stop reading), ``done`` once ``[DONE]`` came.
    """

    __slots__ = ("done", "error", "record")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.done = False
        self.error: ErrorInfo | None = None

    def event(self, event: SseEvent, t_ns: int) -> None:
        record = self.record
        if record.first_event_ns is None:
            record.first_event_ns = t_ns
        if self.done:
            return  # nothing after [DONE] belongs to the answer
        data = event.data
        if event.event == "error":
            self._fail(errors.STREAM_ERROR, _message_of(data), t_ns)
            return
        if data == "[DONE]":
            self.done = True
            record.done_ns = t_ns
            return
        chunk = _parse(data)
        if chunk is None:
            if data.strip():
                self._fail(
                    errors.PROTOCOL, f"stream data is not a JSON object: {data[:200]!r}", t_ns
                )
            return
        if chunk.get("error"):
            self._fail(errors.STREAM_ERROR, error_message(chunk), t_ns)
            return
        if record.response_id is None:
            response_id = chunk.get("id")
            if type(response_id) is str:
                record.response_id = response_id
        choices = chunk.get("choices")
        if choices:
            self._choices(choices, t_ns)
        usage = chunk.get("usage")
        if usage is not None and isinstance(usage, dict):
            self._usage(usage)
        timings = chunk.get("timings")
        if timings is not None and isinstance(timings, dict):
            record.server_timings = {
                k: float(v)
                for k, v in timings.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }

    def _choices(self, choices: Any, t_ns: int) -> None:
        # Hot path (once per token): exact type checks and the usual shapes first.
        content = 0
        reasoning = 0
        role = False
        tool_call = False
        for choice in choices if type(choices) is list else ():
            if type(choice) is not dict:
                continue
            delta = choice.get("delta")
            if delta is None:
                text = choice.get("text")  # completions
                if type(text) is str:
                    content += len(text)
                continue
            if type(delta) is not dict:
                continue
            text = delta.get("content")
            if type(text) is str:
                content += len(text)
            if len(delta) > 1 or text is None:  # more than {"content": ...}: look further
                role = role or delta.get("role") is not None
                reasoning += _text_len(delta.get("reasoning_content"))
                reasoning += _text_len(delta.get("reasoning"))
                calls = delta.get("tool_calls")
                if type(calls) is list and calls:
                    tool_call = True
                    for call in calls:
                        fn = call.get("function") if type(call) is dict else None
                        if type(fn) is dict:
                            content += _text_len(fn.get("arguments"))
        record = self.record
        if role and record.first_role_ns is None:
            record.first_role_ns = t_ns
        if tool_call and record.first_tool_call_ns is None:
            # The first tool-call delta often names the function with empty arguments: it is
            # the first sign of the call, not yet a token of it.
            record.first_tool_call_ns = t_ns
        if not content and not reasoning:
            return
        record.chunk_ns.append(t_ns)
        record.output_text_chars += content + reasoning
        if record.first_content_ns is None:
            record.first_content_ns = t_ns
        if content and record.first_output_ns is None:
            record.first_output_ns = t_ns
        if reasoning and record.first_reasoning_ns is None:
            record.first_reasoning_ns = t_ns

    def _usage(self, usage: dict[str, Any]) -> None:
        record = self.record
        prompt = usage.get("prompt_tokens")
        if isinstance(prompt, int):
            record.prompt_tokens = prompt
        completion = usage.get("completion_tokens")
        if isinstance(completion, int):
            record.completion_tokens = completion
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            record.cached_tokens = details["cached_tokens"]

    def _fail(self, kind: str, message: str, t_ns: int) -> None:
        self.error = ErrorInfo(kind=kind, message=message, status=self.record.status)
        self.record.done_ns = t_ns


_raw_decode = json.JSONDecoder().raw_decode


def _parse(data: str) -> dict[str, Any] | None:
    """The JSON object in ``data``, or None if it is not one (or is empty)."""
    try:
        value, end = _raw_decode(data)  # no whitespace skipping: the fast path
    except ValueError:
        try:
            value, end = json.loads(data), len(data)
        except ValueError:
            return None
    if end != len(data) and data[end:].strip():
        return None
    return value if type(value) is dict else None


def _text_len(value: Any) -> int:
    return len(value) if isinstance(value, str) else 0


def _message_of(data: str) -> str:
    try:
        return error_message(json.loads(data))
    except ValueError:
        return data[:500] or "the server sent an error event"
