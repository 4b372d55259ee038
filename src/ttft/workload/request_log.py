"""Chat requests to lint: a JSONL log of OpenAI chat bodies, or one sample conversation.

Each request keeps where it came from (``file:line``) so that every finding and every error can
point at the line a user would open.
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
    """One chat body: what the template renders, and its ``file:line``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    file: str = "<messages>"
    line: int | None = None
    # chat_template_kwargs of the body (vLLM and llama-server pass them to the template).
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


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


def load_request_log(path: Path) -> list[ChatRequest]:
    """Every non-blank line of a JSONL request log, in order. Errors name ``file:line``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise TtftError(
            f"request log not found: {path}", "give a JSONL file of chat bodies"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}") from None
    requests: list[ChatRequest] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            body = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TtftError(
                f"{where}: not valid JSON (column {exc.colno}): {exc.msg}", _FIX
            ) from None
        requests.append(parse_request(body, str(path), lineno))
    if not requests:
        raise TtftError(f"{path} holds no requests", _FIX)
    return requests


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


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
