"""Checks of a gateway configuration's values that know no schema: types, listen, URLs, keys.

``config`` holds the schema (its dataclasses) and builds the configuration with these. Every
complaint names its place with a :class:`Where`: read from a file, that is ``file:LINE:`` and the
key in words (``g.toml:12: model[0].engine: ...``), as ``core/toml_check`` does for plans.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from ttft.core.errors import TtftError
from ttft.core.toml_check import TablePath, example
from ttft.core.toml_text import TomlLines


@dataclass(frozen=True)
class Where:
    """A place in a gateway configuration, as a message names it.

    ``words`` is the key in words (``model[0].upstreams[1]``, empty for the whole file). With
    ``lines`` (the configuration was read from a file), ``table`` and ``key`` find its line as
    :class:`TomlLines` counts tables (``("model", 1, "upstreams", 2)``: indexes are 1-based), and
    the message starts ``origin:LINE:``; without (a mapping built by hand or from flags) it
    starts ``origin:``.
    """

    origin: str
    lines: TomlLines | None = None
    words: str = ""
    table: TablePath = ()
    key: str | None = None

    def at(self, key: str) -> Where:
        """A value ``key`` of this table."""
        words = f"{self.words}.{key}" if self.words else key
        return dataclasses.replace(self, words=words, key=key)

    def sub(self, name: str, index: int | None = None) -> Where:
        """The table ``name`` in this one, or (``index``, 0-based) an element of its array."""
        words = f"{self.words}.{name}" if self.words else name
        if index is None:
            return dataclasses.replace(self, words=words, table=(*self.table, name), key=None)
        return dataclasses.replace(
            self, words=f"{words}[{index}]", table=(*self.table, name, index + 1), key=None
        )

    def also(self, words: str) -> Where:
        """The same line, more words: a part of a value written inline (``api_keys[2]``)."""
        return dataclasses.replace(self, words=self.words + words)

    def line(self) -> int | None:
        """The line of the key (or of the table's header); None without a file."""
        if self.lines is None:
            return None
        table, key = self.table, self.key
        # A table written inline (model = [{ ... }], upstreams = [{ url = ... }]) has no header:
        # its keys are on the line of the key that holds it, the nearest one that has a line.
        while not self.lines.has_table(table):
            if isinstance(table[-1], int):
                table, key = table[:-2], str(table[-2])
            else:
                table, key = table[:-1], str(table[-1])
        return self.lines.table_line(table) if key is None else self.lines.key_line(table, key)

    def __str__(self) -> str:
        line = self.line()
        head = self.origin if line is None else f"{self.origin}:{line}"
        return f"{head}: {self.words}" if self.words else head


def fail(where: Where | str, problem: str, fix: str | None = None) -> TtftError:
    """The error of a value at ``where`` (a :class:`Where`, or words such as ``--listen``)."""
    return TtftError(f"{where}: {problem}", fix)


def parse_listen(text: str, where: Where | str = "listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise fail(where, f"{text!r} is not host:port", 'write it like "127.0.0.1:8000"')
    return host.strip("[]") or "127.0.0.1", int(port)


def check_upstream_url(url: str, where: Where | str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(where, f"{url!r} is not an http(s) URL", 'e.g. "http://127.0.0.1:8080"')
    try:
        _ = parts.port
    except ValueError:
        raise fail(where, f"bad port in {url!r}") from None
    if parts.query or parts.fragment:
        raise fail(where, f"{url!r} has a query or fragment", "give the server's root URL")
    root = parts.path.rstrip("/")
    # ".../v1" is how OpenAI clients are configured; the gateway appends /v1 itself.
    if root.endswith("/v1"):
        root = root[:-3]
    return f"{parts.scheme}://{parts.netloc}{root}"


def section(
    located: tuple[Mapping[str, Any], Where], cls: type[Any], skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Check a table's keys and value types against dataclass ``cls``; return the values.

    ``located`` is the table and its place (as :func:`table` gives them).

    An unknown key is named at its own line (the message still names the table), with the keys
    that exist as the fix."""
    raw, where = located
    known = {f.name: f for f in fields(cls) if f.name not in skip}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        spec = known.get(key)
        if spec is None:
            at_key = dataclasses.replace(where, key=key)
            raise fail(at_key, f"unknown key {key!r}", f"known keys: {', '.join(sorted(known))}")
        values[key] = typed(value, spec.type, where.at(key))
    return values


# The annotation's first type -> the kind core.toml_check writes an example of (the fix).
_KINDS = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}


def typed(value: Any, type_name: Any, where: Where) -> Any:
    """Check one value against the field's annotation (a string: annotations are postponed);
    the fix shows the key written right."""
    kind = str(type_name).split("|")[0].strip()
    fix = example(_KINDS[kind], where.key or "key") if kind in _KINDS else None
    if kind == "bool":
        if not isinstance(value, bool):
            raise fail(where, f"expected true or false, got {value!r}", fix)
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(where, f"expected a whole number >= 0, got {value!r}", fix)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise fail(where, f"expected a positive number, got {value!r}", fix)
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise fail(where, f"expected a string, got {value!r}", fix)
        return value
    raise fail(where, "this key cannot be set here")


def table(raw: Mapping[str, Any], name: str, top: Where) -> tuple[Mapping[str, Any], Where]:
    """The table ``name`` (empty when absent) and its place."""
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise fail(top.at(name), "expected a table", f"write [{name}] and its keys below it")
    return value, top.sub(name)


def api_keys(
    raw: Mapping[str, Any], top: Where
) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """Keys: strings, or tables ``{ key = "...", max_priority_boost = N }``."""
    entries = raw.get("api_keys", [])
    if not isinstance(entries, list):
        raise fail(top.at("api_keys"), "expected a list of keys", 'write api_keys = ["sk-..."]')
    keys: list[str] = []
    boosts: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        where = top.at("api_keys").also(f"[{i}]")
        if isinstance(entry, dict):
            unknown = set(entry) - {"key", "max_priority_boost"}
            if unknown:
                raise fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
            key, boost = entry.get("key"), entry.get("max_priority_boost", 0)
            if isinstance(boost, bool) or not isinstance(boost, int) or boost < 0:
                raise fail(where.also(".max_priority_boost"), "expected a whole number >= 0")
            if isinstance(key, str) and key:
                boosts.append((key, boost))
            entry = key
        if not isinstance(entry, str) or not entry:
            raise fail(where, 'expected non-empty strings or { key = "..." } tables')
        keys.append(entry)
    env = raw.get("api_keys_env")
    if env is not None:
        if not isinstance(env, str):
            raise fail(top.at("api_keys_env"), "expected the name of an environment variable")
        value = os.environ.get(env)
        if value is None:
            raise fail(
                top.at("api_keys_env"),
                f"the environment variable {env} is not set",
                f"export {env}=key1,key2 (or remove api_keys_env for an open gateway)",
            )
        keys += [k.strip() for k in value.split(",") if k.strip()]
    return tuple(keys), tuple(boosts)
