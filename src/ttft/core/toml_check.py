"""Checking values read by ``tomllib`` against what a file format expects, naming their line.

``tomllib`` returns plain dicts without positions; a checker keeps the text beside them so that
every complaint (an unknown key, a value of the wrong type) starts ``source:LINE:``, the line
found by ``TomlLines``. Formats subclass it and name their tables in words (``where``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.toml_text import TomlLines

TablePath = tuple[str | int, ...]  # see TomlLines: (), ("service",), ("step", 2, "edit", 1)

_EXAMPLES = {
    "integer": "{name} = 4",
    "number": "{name} = 120.0",
    "boolean": "{name} = true (or false)",
    "string": '{name} = "..." (in double quotes)',
    "list of strings": '{name} = ["...", "..."]',
    "table of strings": '{name} = {{ "key" = "value" }}',
}


def _matches(item: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(item, str)
    if kind in ("integer", "number"):  # bool is an int in Python, never a number in TOML
        wanted = int if kind == "integer" else int | float
        return isinstance(item, wanted) and not isinstance(item, bool)
    if kind == "boolean":
        return isinstance(item, bool)
    if kind == "table of strings":
        # A number is accepted where a string is meant ("-np" = 4): its meaning is plain.
        return isinstance(item, dict) and all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in item.values()
        )
    if kind == "list of strings":
        return isinstance(item, list) and all(isinstance(i, str) for i in item)
    raise ValueError(f"unknown kind {kind!r}")  # a bug in the caller, not the user's file


def example(kind: str, name: str) -> str:
    """How a key of that kind is written, as a fix shows it: ``write name = 4``."""
    return "write " + _EXAMPLES[kind].format(name=name)


def shown(item: object) -> str:
    """A value as a message quotes it, cut short."""
    text = repr(item)
    return text if len(text) <= 40 else text[:37] + "..."


class TomlChecker:
    def __init__(self, text: str, source: str) -> None:
        self.lines = TomlLines(text)
        self.source = source

    def where(self, path: TablePath) -> str:
        """The table in words, as a message starts; formats name their own tables."""
        return ".".join(str(p) for p in path) or "the file"

    def fail(self, path: TablePath, name: str | None, problem: str, fix: str) -> TtftError:
        """An error at the key's line (``name``), else at the table's header."""
        line = self.lines.table_line(path) if name is None else self.lines.key_line(path, name)
        return TtftError(f"{self.source}:{line}: {problem}", fix)

    def keys(self, table: Mapping[str, Any], path: TablePath, known: Sequence[str]) -> None:
        for name in table:
            if name not in known:
                raise self.fail(
                    path,
                    name,
                    f"{self.where(path)} has unknown key {name!r} (known: {', '.join(known)})",
                    "correct the spelling or remove the key",
                )

    def typed(self, table: Mapping[str, Any], path: TablePath, name: str, kind: str) -> Any:
        """The value of ``name`` if it is of the kind wanted; None if absent."""
        if name not in table:
            return None
        item = table[name]
        if not _matches(item, kind):
            article = "an" if kind[0] in "aeiou" else "a"
            raise self.fail(
                path,
                name,
                f"{self.where(path)}: {name} must be {article} {kind}, not {shown(item)}",
                example(kind, name),
            )
        return item
