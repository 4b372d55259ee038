"""Bounded property-based fuzz: whatever a client sends, the parser and the validation answer
with their own refusal (BadHead, GatewayError), never another exception (a 500 or a drop)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ttft.gateway.errors import GatewayError
from ttft.gateway.http.wire import BadHead, HeadParser
from ttft.gateway.validate import (
    check_common,
    check_messages,
    check_prompt,
    nesting_depth,
    parse_body,
)

_HEAD_PARTS = st.sampled_from(
    [
        b"GET ",
        b"POST ",
        b"/",
        b"/v1/chat/completions",
        b" HTTP/1.1",
        b" HTTP/1.0",
        b"\r\n",
        b"\n",
        b"\r",
        b"\x00",
        b"Host: h",
        b"Content-Length: ",
        b"12",
        b"\xb2",
        b"Transfer-Encoding: chunked",
        b": ",
        b" ",
        b"\t",
        b"X-A",
        b"\xff",
        b"Connection: close",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = st.sampled_from(
    [
        "model",
        "messages",
        "prompt",
        "stream",
        "priority",
        "max_tokens",
        "n",
        "seed",
        "top_k",
        "temperature",
        "stream_options",
        "role",
        "content",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_HEAD_PARTS | st.binary(max_size=8), max_size=30), st.integers(1, 7))
def test_the_head_parser_only_ever_refuses_with_bad_head(parts: list[bytes], piece: int) -> None:
    raw = b"".join(parts)
    parser = HeadParser()
    try:
        for i in range(0, len(raw), piece):  # fed in pieces, as a socket delivers it
            parser.feed(raw[i : i + piece])
        if parser.complete:
            _, target, version, headers = parser.finish()
            assert target.startswith("/") and version in ("HTTP/1.0", "HTTP/1.1")
            length = headers.get("content-length", "0")
            assert length.isascii() and length.isdigit()
    except BadHead:
        pass


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_FIELDS, _JSON, max_size=6), st.integers(0, 100))
def test_validation_only_ever_refuses_with_a_4xx(body: dict[str, Any], boost: int) -> None:
    raw = json.dumps(body).encode()
    try:
        parsed = parse_body(raw)
        check_common(parsed, boost)
        check_messages(parsed)
        check_prompt(parsed)
    except GatewayError as exc:
        assert 400 <= exc.status < 500


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_bytes_as_a_body_are_parsed_or_refused(raw: bytes) -> None:
    try:
        parse_body(raw)
    except GatewayError as exc:
        assert exc.status == 400


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    return 1 + max((_depth(v) for v in value), default=0)


_TRICKY_TEXT = st.text(alphabet='[]{}"\\ab\u00e9\U0001f600', max_size=12)


@settings(max_examples=400, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | _TRICKY_TEXT,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(_TRICKY_TEXT, inner, max_size=4)
        ),
        max_leaves=30,
    ),
    st.booleans(),
)
def test_nesting_depth_agrees_with_a_walk_of_the_decoded_value(value: Any, ascii: bool) -> None:
    raw = json.dumps({"v": value}, ensure_ascii=ascii).encode()
    assert nesting_depth(raw) == _depth({"v": value})
