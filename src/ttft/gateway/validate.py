"""Checks on OpenAI request bodies: a wrong type is a 400 that names the field, never a 500.

Only what the gateway itself reads is checked strictly (model, stream, messages, prompt, priority)
plus the common numeric fields, whose wrong types engines answer inconsistently; everything else
is the engine's to judge. But the body as a whole must be JSON the gateway can re-encode and an
engine can read: no NaN or Infinity (not JSON, though Python reads them), no lone surrogates (they
cannot be encoded as UTF-8), no nesting deeper than ``MAX_DEPTH``, and integers in the range the
engines store them in (a token id of 2**70 is not an out-of-vocabulary token, it is an attack).
No key twice in one object either: the body is usually forwarded as it came, and parsers disagree
on which of two ``"max_tokens"`` counts (Python's the last, RapidJSON's and simdjson's the first),
so the gateway could check one value and the engine use the other.

All of it runs on the event loop, so its cost is kept proportional to what parsing costs anyway:
a 4 MB body of a million empty arrays must not hold every stream for a second.
"""

from __future__ import annotations

import gc
import json
import math
import re
import threading
from itertools import accumulate, count
from operator import sub
from typing import Any

from ttft.gateway.errors import GatewayError, bad_request

_INT_FIELDS = ("max_tokens", "max_completion_tokens", "n", "best_of", "seed", "top_k")
# Counts (never negative), and those of them capped by ``max_tokens`` (the rest by ``max_n``).
_COUNTS = frozenset({"max_tokens", "max_completion_tokens", "n", "best_of"})
_TOKEN_COUNTS = frozenset({"max_tokens", "max_completion_tokens"})
_NUMBER_FIELDS = ("temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty")
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
PRIORITY_MAX = 1_000_000
MAX_DEPTH = 64  # an OpenAI body nests ~6 deep (tools' JSON schemas a few more)
_INT32 = 2**31
_SEED_RANGE = (-(2**63), 2**64)  # vLLM keeps an int64, llama.cpp a uint32
# A \uD800-\uDFFF escape: the only way a lone surrogate gets into a decoded string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


class _BadValue(ValueError):
    """A value the gateway's own checks refuse: its message is ours and safe to show."""


def _no_constant(name: str) -> Any:
    raise _BadValue(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadValue(f"{text[:20]} is out of range")
    return value


class _Decoders(threading.local):
    """One decoder per thread (the loop's, the parser thread's), made once: ``json.loads``
    with hooks builds a new decoder and scanner on every call."""

    def __init__(self) -> None:
        self.decoder = json.JSONDecoder(
            parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique
        )


_DECODERS = _Decoders()


def _invalid_json(exc: ValueError) -> str:
    """Why a body is not JSON, in our words: the interpreter's own (a 5,000-digit integer names
    sys.set_int_max_str_digits) never reach a client."""
    if isinstance(exc, json.JSONDecodeError):
        return f"the request body is not valid JSON: {exc.msg} at character {exc.pos}"
    if isinstance(exc, _BadValue):
        return f"the request body is not valid JSON: {exc}"
    if "digits" in str(exc):
        return "the request body holds a number with too many digits"
    return "the request body is not valid JSON"


def parse_body(raw: bytes) -> dict[str, Any]:
    if not raw:
        raise bad_request("the request has no body: send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the request body is not UTF-8 text") from None
    # A decoded body holds no reference cycles, but a million small containers made the
    # collector run over and over while they were built: three times the decoding's own cost.
    collecting = gc.isenabled()
    gc.disable()
    try:
        body = _DECODERS.decoder.decode(text)
    except RecursionError:
        raise bad_request(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except _DuplicateKey as exc:
        raise bad_request(
            f"the request body has the key {exc.key[:100]!r} twice in one object"
        ) from None
    except ValueError as exc:
        raise bad_request(_invalid_json(exc)) from None
    finally:
        if collecting:
            gc.enable()
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, not {_kind(body)}")
    # Counting brackets is cheap; the depth is measured only for bodies that could be too deep.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and nesting_depth(raw) > MAX_DEPTH:
        raise bad_request(f"the request body nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request("the request body holds a lone UTF-16 surrogate") from None
    return body


def nesting_depth(raw: bytes) -> int:
    """How deep the valid JSON text ``raw`` nests (``{}`` is 1), in a few passes of C code.

    Walking the decoded objects in Python took a second for a 4 MB body of empty arrays. Here:
    strings are cut out (UTF-8 never has a quote or a backslash inside a multi-byte character, so
    once the escaped backslashes and quotes are gone every quote opens or closes a string), every
    byte but the brackets is dropped, the leaves ("[]") are removed in one pass (an array of a
    million of them then costs nothing more), and the depth of what is left is the largest count
    of "[" before a "]" minus the "]" before it.
    """
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(_TO_SQUARE, _NOT_BRACKETS)
    if not brackets:
        return 0
    inner = brackets.replace(b"[]", b"")
    if not inner:
        return 1
    opened = accumulate(map(len, inner.split(b"]")))  # "[" before each "]" (and the end)
    deepest: int = max(map(sub, opened, count()))
    return 1 + deepest


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
        if value is None:  # the usual case: most of these fields are not sent
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_request(f"'{name}' must be an integer, not {_kind(value)}", name)
        if name in _COUNTS and value < 0:
            raise bad_request(f"'{name}' must not be negative", name)
        low, high = _SEED_RANGE if name == "seed" else (-_INT32, _INT32)
        # best_of is n by another name (vLLM's completions generate that many sequences).
        cap = max_tokens if name in _TOKEN_COUNTS else max_n if name in _COUNTS else None
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


def check_messages(body: dict[str, Any], max_messages: int = 4096) -> list[dict[str, Any]]:
    """The messages, checked; at most ``max_messages``: each is Python work on the event loop
    (checks, hygiene, three template renders for a new frame), 0.7 s for 100k tiny ones."""
    messages = body.get("messages")
    if messages is None:
        raise bad_request("'messages' is required", "messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array of messages", "messages")
    if len(messages) > max_messages:
        raise bad_request(
            f"'messages' holds {len(messages)} messages; this gateway allows at most "
            f"{max_messages}",
            "messages",
        )
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
    if isinstance(prompt, list) and prompt:
        # One C pass for the types (bool is a type of its own here), then the bounds: a million
        # token ids cost ~40 ms, not ~180 ms through a Python generator.
        kinds = set(map(type, prompt))
        if kinds == {str} or (kinds == {int} and min(prompt) >= 0 and max(prompt) < _INT32):
            return prompt
    raise GatewayError(
        400,
        "'prompt' must be a string, an array of strings or an array of token ids "
        f"(integers from 0 to {_INT32 - 1})",
        param="prompt",
        code="invalid_request",
    )
