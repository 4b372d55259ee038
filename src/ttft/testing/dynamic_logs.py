"""Request logs built unlike each other, each with its dynamic content somewhere else.

For the tests of the log analysis, lint, doctor and the move: every builder returns chat bodies
(``messages``, maybe ``tools``) of several users, with a long static part that a prefix cache
could share, and names the values that change (``expected``): what a correct analysis finds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ttft.workload.text_source import sentence_text

_START = dt.datetime(2026, 11, 18, 3, 36, tzinfo=dt.UTC)
_USERS = ("u-12345", "u-20417", "u-38806")
_NAMES = ("Alice", "Bartholomew", "Chen", "Dagny", "Emeka", "Farida", "Gustavo", "Hiroko")


@dataclass(frozen=True)
class DynamicLog:
    name: str
    bodies: list[dict[str, Any]]
    expected: list[set[str]]  # per request, the dynamic values it carries (empty: clean)
    field: str  # where they sit, as the analysis names the field ("" for a clean log)


def _rules(words: int, seed: str) -> str:
    return sentence_text(f"dynamic-logs/{seed}", words)


def _question(i: int) -> dict[str, Any]:
    return {"role": "user", "content": "Question: " + sentence_text(f"dynamic-logs/q/{i}", 12)}


def first_line(count: int = 6, words: int = 200) -> DynamicLog:
    """An ISO timestamp on the system prompt's first line (the seed story's case)."""
    rules = _rules(words, "first")
    stamps = [
        (_START + dt.timedelta(seconds=53 * i)).strftime("%Y-%m-%dT%H:%M:%S") for i in range(count)
    ]
    bodies = [
        {"messages": [{"role": "system", "content": f"Now: {s}\n{rules}"}, _question(i)]}
        for i, s in enumerate(stamps)
    ]
    return DynamicLog("first-line", bodies, [{s} for s in stamps], "messages[0] (system)")


def second_line(count: int = 6, words: int = 200) -> DynamicLog:
    """The support bot's: one static line, then ``Customer u-12345 | session opened <date>``."""
    rules = _rules(words, "second")
    bodies, expected = [], []
    for i in range(count):
        user = _USERS[i % len(_USERS)]
        when = (_START + dt.timedelta(minutes=7 * i)).strftime("%Y-%m-%d %H:%M")
        system = (
            "You are the support assistant of Northwind Outfitters.\n"
            f"Customer {user} | session opened {when}\n{rules}"
        )
        bodies.append({"messages": [{"role": "system", "content": system}, _question(i)]})
        expected.append({user, when})
    return DynamicLog("second-line", bodies, expected, "messages[0] (system)")


def mid_sentence(count: int = 6, words: int = 200) -> DynamicLog:
    """A date in words, inside a sentence in the middle of a one-line paragraph."""
    before, after = _rules(40, "mid/a"), _rules(words, "mid/b")
    bodies, expected = [], []
    for i in range(count):
        day = (_START + dt.timedelta(days=i)).strftime("%A")
        system = f"{before} Remember that the shop is open on {day} until late. {after}"
        bodies.append({"messages": [{"role": "system", "content": system}, _question(i)]})
        expected.append({day})
    return DynamicLog("mid-sentence", bodies, expected, "messages[0] (system)")


def tool_description(count: int = 6, words: int = 200) -> DynamicLog:
    """A per-request quota inside a tool's description: rendered in the schema, not movable."""
    rules = _rules(words, "tool")
    bodies, expected = [], []
    for i in range(count):
        left = str(500 - 37 * i)
        tool = {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": f"Look up an order by number ({left} lookups left today).",
                "parameters": {
                    "type": "object",
                    "properties": {"number": {"type": "string"}},
                    "required": ["number"],
                },
            },
        }
        body = {
            "messages": [{"role": "system", "content": rules}, _question(i)],
            "tools": [tool],
        }
        bodies.append(body)
        expected.append({left})
    return DynamicLog("tool-description", bodies, expected, "tools[0].function.description")


def few_shot(count: int = 6, words: int = 200) -> DynamicLog:
    """The user's name in an assistant few-shot turn, before the long static example text."""
    rules = _rules(words, "few-shot")
    bodies, expected = [], []
    for i in range(count):
        name = _NAMES[i % len(_NAMES)]
        messages = [
            {"role": "system", "content": "You answer questions about orders."},
            {"role": "user", "content": "Where is my parcel?"},
            {"role": "assistant", "content": f"Hello {name}! Let me check that for you. {rules}"},
            _question(i),
        ]
        bodies.append({"messages": messages})
        expected.append({name})
    return DynamicLog("few-shot", bodies, expected, "messages[2] (assistant)")


def clean(count: int = 6, words: int = 200) -> DynamicLog:
    """The same system prompt for everyone: nothing to find."""
    rules = _rules(words, "clean")
    bodies = [
        {"messages": [{"role": "system", "content": rules}, _question(i)]} for i in range(count)
    ]
    return DynamicLog("clean", bodies, [set() for _ in range(count)], "")


BUILDERS: dict[str, Callable[..., DynamicLog]] = {
    "first-line": first_line,
    "second-line": second_line,
    "mid-sentence": mid_sentence,
    "tool-description": tool_description,
    "few-shot": few_shot,
    "clean": clean,
}
