"""Checks on OpenAI request bodies: a wrong type is a 400 that names the field, never a 500.

Only what the gateway itself reads is checked strictly (model, stream, messages, prompt, priority)
plus the common numeric fields, whose wrong types engines answer inconsistently; everything else
is the engine's to judge. But the body as a whole must be JSON the gateway can re-encode and an
engine can read: no NaN or Infinity (not JSON, though Python reads them), no lone surrogates (they
cannot be encoded as UTF-8), no nesting deeper than ``MAX_DEPTH``, and integers in the range the
engines store them in (a token id of 2**70 is not an out-of-vocabulary token, it is an attack).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ttft.gateway.errors import GatewayError, bad_request

_INT_FIELDS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_k")
_NUMBER_FIELDS = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty")
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
PRIORITY_MAX = 1_000_000
MAX_DEPTH = 64  # an OpenAI body nests ~6 deep (tools' JSON schemas a few more)
_INT32 = 2**31
_SEED_RANGE = (-(2**63), 2**64)  # vLLM keeps an int64, llama.cpp a uint32
# A \uD800-\uDFFF escape: the only way a lone surrogate gets into a decoded string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of range")
    return value


def parse_body(raw: bytes) -> dict[str, Any]:
    if not raw:
        raise bad_request("the request has no body: send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the request body is not UTF-8 text") from None
    try:
        body = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, not {_kind(body)}")
    # Counting brackets is cheap; the walk runs only for bodies that could be too deep.
    if text.count("[") + text.count("{") > MAX_DEPTH and _too_deep(body, MAX_DEPTH):
        raise bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request("the request body holds a lone UTF-16 surrogate") from None
    return body


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def check_common(
    body: dict[str, Any],
    max_priority_boost: int = 0,
    max_tokens: int = 1 << 20,
    max_n: int = 16,
) -> tuple[bool, int]:
    """``stream`` and ``priority``; numeric fields typed and bounded. Returns (stream, priority).

    ``priority`` below 0 (ahead of the default) only down to ``-max_priority_boost``: jumping
    the queue is a right a key is given, not one a client takes.
    """
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_request(f"'stream' must be true or false, not {_kind(stream)}", "stream")
    for name in _INT_FIELDS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad_request(f"'{name}' must be an integer, not {_kind(value)}", name)
        if not isinstance(value, int):
            continue
        if name in ("max_tokens", "max_completion_tokens", "n") and value < 0:
            raise bad_request(f"'{name}' must not be negative", name)
        low, high = _SEED_RANGE if name == "seed" else (-_INT32, _INT32)
        cap = {"max_tokens": max_tokens, "max_completion_tokens": max_tokens, "n": max_n}.get(name)
        if cap is not None and value > cap:
            raise bad_request(f"'{name}' is {value}; this gateway allows at most {cap}", name)
        if not low <= value < high:
            raise bad_request(f"'{name}' is out of range", name)
    for name in _NUMBER_FIELDS:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_request(f"'{name}' must be a number, not {_kind(value)}", name)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object", "stream_options")
    priority = body.get("priority", 0)
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise bad_request(f"'priority' must be an integer, not {_kind(priority)}", "priority")
    low, high = -max_priority_boost, PRIORITY_MAX
    if not low <= priority <= high:
        raise bad_request(f"'priority' must be between {low} and {high}", "priority")
    return stream, priority


def check_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if messages is None:
        raise bad_request("'messages' is required", "messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad_request(f"'{where}' must be an object, not {_kind(message)}", where)
        role = message.get("role")
        if not isinstance(role, str):
            raise bad_request(f"'{where}.role' must be a string", f"{where}.role")
        if role not in _ROLES:
            raise bad_request(
                f"'{where}.role' is {role[:40]!r}; expected one of {', '.join(_ROLES)}",
                f"{where}.role",
            )
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise bad_request(
                f"'{where}.content' must be a string, an array of parts or null, "
                f"not {_kind(content)}",
                f"{where}.content",
            )
    return messages


def check_prompt(body: dict[str, Any]) -> str | list[Any]:
    prompt = body.get("prompt")
    if prompt is None:
        raise bad_request("'prompt' is required", "prompt")
    if isinstance(prompt, str):
        return prompt
    if (
        isinstance(prompt, list)
        and prompt
        and (
            all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < _INT32 for x in prompt)
            or all(isinstance(x, str) for x in prompt)
        )
    ):
        return prompt
    raise GatewayError(
        400,
        "'prompt' must be a string, an array of strings or an array of token ids "
        f"(integers from 0 to {_INT32 - 1})",
        param="prompt",
        code="invalid_request",
    )
