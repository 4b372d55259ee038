"""Template instability: logically equal requests whose static prefixes render differently.

Two requests with the same system prompt and tools (equal after sorting tool keys and trimming
trailing whitespace) should render to the same prefix. When they do not, the prefix cache misses
for a reason nobody sees in the application's code: a JSON library that does not keep key order,
a trailing space added by one code path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ttft.prompts.static_prefix import RenderedRequest, last_user_index
from ttft.prompts.transform import normalize_text, static_key


@dataclass(frozen=True)
class Instability:
    """Requests ``first`` and ``second`` are equal after normalization but render differently."""

    cause: str  # "tool-key-order", "whitespace" or "render"
    first: int  # request indexes
    second: int
    char_offset: int  # where their static prefixes part, in the first request's prompt
    detail: str
    count: int  # requests in the group that render unlike the group's first


def _key_orders(value: Any) -> Any:
    """The key order of every object in ``value``: what ``json.dumps`` without sorting writes."""
    if isinstance(value, dict):
        return [[k, _key_orders(v)] for k, v in value.items()]
    if isinstance(value, list):
        return [_key_orders(v) for v in value]
    return None


def _tool_name(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return str(tool.get("name", "?"))


def _cause(a: RenderedRequest, b: RenderedRequest) -> tuple[str, str]:
    tools_a, tools_b = a.request.tools or [], b.request.tools or []
    if len(tools_a) == len(tools_b):
        for ta, tb in zip(tools_a, tools_b, strict=True):
            if _key_orders(ta) != _key_orders(tb):
                return "tool-key-order", (
                    f"tool {_tool_name(ta)!r} is written with its keys in another order "
                    f"({_first_keys(ta)} vs {_first_keys(tb)})"
                )
    end_a = last_user_index(a.request.messages)
    for i, (ma, mb) in enumerate(zip(a.request.messages[:end_a], b.request.messages, strict=False)):
        ca, cb = ma.get("content"), mb.get("content")
        if (
            ca != cb
            and isinstance(ca, str)
            and isinstance(cb, str)
            and normalize_text(ca) == normalize_text(cb)
        ):
            return "whitespace", (
                f"messages[{i}] ({ma.get('role')}) differs only in whitespace: "
                f"{_edge(ca)} vs {_edge(cb)}"
            )
    return "render", "the rendered prompts differ although the requests are equal"


def _first_keys(tool: dict[str, Any]) -> str:
    function = tool.get("function")
    inner = function if isinstance(function, dict) else tool
    return "[" + ", ".join(list(inner)[:4]) + "]"


def _edge(text: str) -> str:
    """The ends of a text, where stray whitespace usually is."""
    head, tail = text[:12], text[-12:]
    return json.dumps(head + ("…" + tail if len(text) > 24 else text[12:]), ensure_ascii=False)


def find_instability(rendered: Sequence[RenderedRequest]) -> list[Instability]:
    """One :class:`Instability` per group of logically equal requests that render differently."""
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(rendered):
        groups.setdefault(static_key(item.request), []).append(index)
    found: list[Instability] = []
    for members in groups.values():
        first = members[0]
        reference = rendered[first].static_text
        differing = [i for i in members[1:] if rendered[i].static_text != reference]
        if not differing:
            continue
        second = differing[0]
        other = rendered[second].static_text
        offset = next(
            (i for i, (x, y) in enumerate(zip(reference, other, strict=False)) if x != y),
            min(len(reference), len(other)),
        )
        cause, detail = _cause(rendered[first], rendered[second])
        found.append(Instability(cause, first, second, offset, detail, len(differing)))
    return found
