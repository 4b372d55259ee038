"""Requests as users keep them: a JSONL log of OpenAI bodies, or one sample conversation.

The one reader of request logs (``ttft lint prompts``, ``ttft bench --prompt-file``, ``ttft doctor
--requests-log``) and the one ``ChatRequest``: what a chat template renders, what the client
streams, and where it came from (``file:line``, so every finding and error points at the line a
user would open).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError

_FIX = 'each line must be one OpenAI chat body: {"messages": [{"role": ..., "content": ...}], ...}'


@dataclass(frozen=True)
class ChatRequest:
    """One ``/v1/chat/completions`` body. ``extra`` holds every other field of the body, sent as
    given (merged last)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    file: str = "<messages>"
    line: int | None = None
    # chat_template_kwargs of the body (vLLM and llama-server pass them to the template).
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    include_usage: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def body(self) -> dict[str, Any]:
        """The streamed request body."""
        body: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            body["tools"] = self.tools
        if self.template_kwargs:
            body["chat_template_kwargs"] = self.template_kwargs
        return streamed_body(
            body, self.model, self.max_tokens, self.temperature, self.include_usage, self.extra
        )


@dataclass(frozen=True)
class CompletionRequest:
    """A streamed ``/v1/completions`` body (a raw prompt: no chat template on the server)."""

    prompt: str | list[int]
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    include_usage: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return streamed_body(
            {"prompt": self.prompt},
            self.model,
            self.max_tokens,
            self.temperature,
            self.include_usage,
            self.extra,
        )


def streamed_body(
    body: dict[str, Any],
    model: str | None,
    max_tokens: int | None,
    temperature: float | None,
    include_usage: bool,
    extra: dict[str, Any],
) -> dict[str, Any]:
    if model is not None:
        body["model"] = model
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    body["stream"] = True
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def parse_request(body: Any, file: str, line: int | None = None) -> ChatRequest:
    """Validate one decoded chat body; a problem names ``file:line`` and the offending field."""
    where = file if line is None else f"{file}:{line}"
    if not isinstance(body, dict):
        raise TtftError(f"{where}: expected a JSON object, got {type(body).__name__}", _FIX)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise TtftError(f"{where}: no 'messages' list (or it is empty)", _FIX)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise TtftError(f"{where}: messages[{i}] is not an object with a string 'role'", _FIX)
        content = msg.get("content")
        if content is not None and not isinstance(content, str | list):
            raise TtftError(
                f"{where}: messages[{i}].content is {type(content).__name__}: "
                "expected a string, a list of content parts, or null",
                _FIX,
            )
    tools = body.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)
    ):
        raise TtftError(f"{where}: 'tools' must be a list of objects", _FIX)
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise TtftError(f"{where}: 'chat_template_kwargs' must be an object", _FIX)
    return ChatRequest(
        messages=messages, tools=tools or None, file=file, line=line, template_kwargs=kwargs
    )


def read_bodies(path: Path, what: str = "request log") -> list[tuple[int, dict[str, Any]]]:
    """Every non-blank line of a JSONL file as ``(line number, JSON object)``, in order.

    A line that is not a JSON object is an error naming ``file:line`` and the fix.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise TtftError(f"{what} not found: {path}", "give a JSONL file of chat bodies") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}", "give a UTF-8 JSONL file") from None
    bodies: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            body = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TtftError(
                f"{path}:{lineno}: not valid JSON (column {exc.colno}): {exc.msg}", _FIX
            ) from None
        if not isinstance(body, dict):
            raise TtftError(
                f"{path}:{lineno}: expected a JSON object, got {type(body).__name__}", _FIX
            )
        bodies.append((lineno, body))
    if not bodies:
        raise TtftError(f"{path} holds no requests", _FIX)
    return bodies


def load_request_log(path: Path) -> list[ChatRequest]:
    """Every chat body of a JSONL request log, in order. Errors name ``file:line``."""
    return [parse_request(body, str(path), lineno) for lineno, body in read_bodies(path)]


def load_sample(path: Path) -> ChatRequest:
    """One conversation from a JSON file: a chat body, or just its list of messages."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TtftError(f"messages file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TtftError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}", _FIX) from None
    if isinstance(body, list):
        body = {"messages": body}
    return parse_request(body, str(path))
