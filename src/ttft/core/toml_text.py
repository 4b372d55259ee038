"""Just enough TOML writing for ttft's own files, and finding the line a key is written on.

Reading is ``tomllib``'s job; it has no writer and reports no positions for the values it returns,
so a check that rejects a value (an unknown key, a wrong type) finds its line here by scanning the
text: the table's header, then the ``name =`` line inside it. The scan reads lines, not TOML, so
a hand-written multi-line string that looks like a header can mislead it; it only picks the line
an error message names, never what a value means.

Why not tomlkit, which writes TOML and keeps a user's comments when it rewrites a file: ttft
never rewrites a file a person edited (doctor writes a new plan, ``tune ab`` only reads one), so
that strength has no use here, and it would be a new dependency that takes ~90 ms to import
against ~3 ms for this module (measured with ``python -X importtime`` on this machine), for
files of a few dozen lines that this writer produces in ~40 us (tomlkit: ~850 us).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The escapes TOML gives names to; every other control character is written as \uXXXX.
_NAMED_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_NAMED_ESCAPES["\r"] = "\\r"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_DECODE_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_DECODE_END = re.compile(r"\s*\(at end of document\)\s*$")

Value = str | bool | int | float | Sequence[str] | Mapping[str, str]


def _is_control(ch: str) -> bool:
    return ord(ch) < 0x20 or ord(ch) == 0x7F


def string(text: str) -> str:
    """A TOML basic string that reads back as exactly ``text``, on one line.

    Newlines and tabs are escaped too (TOML would allow a literal tab): one value per line keeps
    the file diffable and keeps inline tables legal, which may not span lines.
    """
    out = ['"']
    for ch in text:
        if ch in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[ch])
        elif _is_control(ch):
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)  # non-ASCII stays readable; the file is UTF-8
    out.append('"')
    return "".join(out)


def key(name: str, *, quote: bool = False) -> str:
    """A key: bare where TOML allows it (and ``quote`` is not asked for), else a quoted string."""
    return name if not quote and _BARE_KEY.fullmatch(name) else string(name)


def value(item: Value, *, quote_keys: bool = False) -> str:
    """One value: a string, boolean, number, array of strings or inline table of strings."""
    if isinstance(item, str):
        return string(item)
    if isinstance(item, bool):  # before int: bool is an int in Python, not in TOML
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, float):
        if item != item:
            return "nan"
        if item in (float("inf"), float("-inf")):
            return "inf" if item > 0 else "-inf"
        return repr(item)  # the shortest text that reads back as the same float
    if isinstance(item, Mapping):
        if not item:
            return "{}"
        pairs = ", ".join(f"{key(k, quote=quote_keys)} = {string(v)}" for k, v in item.items())
        return "{ " + pairs + " }"
    return "[" + ", ".join(string(s) for s in item) + "]"


def comment(text: str) -> str:
    """Text safe inside a ``#`` comment: TOML allows no control characters there but tab."""
    return "".join(string(ch)[1:-1] if _is_control(ch) and ch != "\t" else ch for ch in text)


def decode_error(exc: tomllib.TOMLDecodeError, text: str) -> tuple[int, str]:
    """The 1-based line a syntax error is on, and tomllib's message without the position."""
    message = str(exc)
    found = _DECODE_POSITION.search(message)
    if found is not None:
        column = found.group(2)
        return int(found.group(1)), f"{message[: found.start()]} (column {column})"
    end = _DECODE_END.search(message)
    if end is not None:
        return max(1, len(text.splitlines())), message[: end.start()] + " (at the end of the file)"
    return 1, message


@dataclass(frozen=True)
class _Header:
    line: int  # 1-based
    name: tuple[str, ...]  # the dotted name, e.g. ("step", "edit")
    array: bool  # [[name]] rather than [name]


class TomlLines:
    """Where tables and keys are written in a TOML text, for error messages.

    A table is named by a path: ``()`` for the top level, ``("service",)``, ``("step", 2)`` for
    the second ``[[step]]``, ``("step", 2, "edit", 1)`` for the first ``[[step.edit]]`` after it.
    Indexes are 1-based, as the messages count.
    """

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()
        self._headers: list[_Header] = []
        for number, line in enumerate(self._lines, start=1):
            match = _HEADER.match(line)
            if match is not None:
                name = tuple(p.strip().strip("\"'") for p in match.group(2).split("."))
                self._headers.append(_Header(number, name, match.group(1) == "[["))

    def _span(self, path: Sequence[str | int]) -> tuple[int, int, int | None, bool]:
        """The table's sub-table headers, as indexes ``lo`` up to ``hi`` into ``self._headers``,
        the line of its own header (None for the top level), and whether the whole path was
        found. A path that names no table stops at the deepest table found, so a message still
        points somewhere near."""
        lo, hi, line = 0, len(self._headers), None
        names: tuple[str, ...] = ()
        index = 0
        while index < len(path):
            names = (*names, str(path[index]))
            wanted = path[index + 1] if index + 1 < len(path) else None
            array = isinstance(wanted, int)
            index += 2 if array else 1
            nth = wanted if isinstance(wanted, int) else 1
            matches = [i for i in range(lo, hi) if self._headers[i].name == names]
            if not 1 <= nth <= len(matches):
                return lo, hi, line, False
            start = matches[nth - 1]
            if array:  # an element of an array of tables runs to the next element
                end = matches[nth] if nth < len(matches) else hi
            else:  # a table runs as long as the headers are its sub-tables
                inside = (
                    i for i in range(start + 1, hi) if self._headers[i].name[: len(names)] != names
                )
                end = next(inside, hi)
            lo, hi, line = start + 1, end, self._headers[start].line
        return lo, hi, line, True

    def has_table(self, path: Sequence[str | int]) -> bool:
        """Whether the table has a header of its own (``[name]``, or the nth ``[[name]]``); the
        top level always has. A table written inline (``name = { ... }``, ``name = [{ ... }]``)
        or only through dotted keys has none."""
        return self._span(path)[3]

    def table_line(self, path: Sequence[str | int]) -> int:
        """The line of the table's header (1 for the top level or a table not found)."""
        return self._span(path)[2] or 1

    def key_line(self, path: Sequence[str | int], name: str) -> int:
        """The line ``name = ...`` is written on in the table, else a ``[name]`` header under it,
        else the table's header."""
        lo, hi, line, _ = self._span(path)
        first = line or 0  # the top level's keys start before any header
        stop = self._headers[lo].line if lo < len(self._headers) else len(self._lines) + 1
        pattern = re.compile(r"^\s*(?:" + re.escape(name) + r'|"' + re.escape(name) + r'")\s*[=.]')
        for number in range(first + 1, stop):
            if pattern.match(self._lines[number - 1]):
                return number
        own = tuple(str(p) for p in path if isinstance(p, str))
        for i in range(lo, hi):
            if self._headers[i].name[: len(own) + 1] == (*own, name):
                return self._headers[i].line
        return line or 1
