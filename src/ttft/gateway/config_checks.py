"""Checks of a gateway configuration's values that know no schema: types, listen, URLs, keys.

``config`` holds the schema (its dataclasses) and builds the configuration with these.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any
from urllib.parse import urlsplit

from ttft.core.errors import TtftError


def fail(where: str, problem: str, fix: str | None = None) -> TtftError:
    return TtftError(f"{where}: {problem}", fix)


def parse_listen(text: str, where: str = "listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise fail(where, f"{text!r} is not host:port", 'write it like "127.0.0.1:8000"')
    return host.strip("[]") or "127.0.0.1", int(port)


def check_upstream_url(url: str, where: str) -> str:
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
    raw: Mapping[str, Any], cls: type[Any], where: str, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Check ``raw``'s keys and value types against dataclass ``cls``; return the values."""
    known = {f.name: f for f in fields(cls) if f.name not in skip}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        spec = known.get(key)
        if spec is None:
            raise fail(where, f"unknown key {key!r}", f"known keys: {', '.join(sorted(known))}")
        values[key] = typed(value, spec.type, f"{where}.{key}")
    return values


def typed(value: Any, type_name: Any, where: str) -> Any:
    """Check one value against the field's annotation (a string: annotations are postponed)."""
    kind = str(type_name).split("|")[0].strip()
    if kind == "bool":
        if not isinstance(value, bool):
            raise fail(where, f"expected true or false, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(where, f"expected a whole number >= 0, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise fail(where, f"expected a positive number, got {value!r}")
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise fail(where, f"expected a string, got {value!r}")
        return value
    raise fail(where, "this key cannot be set here")


def table(raw: Mapping[str, Any], name: str, origin: str) -> Mapping[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise fail(f"{origin}: {name}", "expected a table")
    return value


def api_keys(
    raw: Mapping[str, Any], origin: str
) -> tuple[tuple[str, ...], tuple[tuple[str, int], ...]]:
    """Keys: strings, or tables ``{ key = "...", max_priority_boost = N }``."""
    entries = raw.get("api_keys", [])
    if not isinstance(entries, list):
        raise fail(f"{origin}: api_keys", "expected a list of keys")
    keys: list[str] = []
    boosts: list[tuple[str, int]] = []
    for i, entry in enumerate(entries):
        where = f"{origin}: api_keys[{i}]"
        if isinstance(entry, dict):
            unknown = set(entry) - {"key", "max_priority_boost"}
            if unknown:
                raise fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
            key, boost = entry.get("key"), entry.get("max_priority_boost", 0)
            if isinstance(boost, bool) or not isinstance(boost, int) or boost < 0:
                raise fail(where + ".max_priority_boost", "expected a whole number >= 0")
            if isinstance(key, str) and key:
                boosts.append((key, boost))
            entry = key
        if not isinstance(entry, str) or not entry:
            raise fail(where, 'expected non-empty strings or { key = "..." } tables')
        keys.append(entry)
    env = raw.get("api_keys_env")
    if env is not None:
        if not isinstance(env, str):
            raise fail(f"{origin}: api_keys_env", "expected the name of an environment variable")
        value = os.environ.get(env)
        if value is None:
            raise fail(
                f"{origin}: api_keys_env",
                f"the environment variable {env} is not set",
                f"export {env}=key1,key2 (or remove api_keys_env for an open gateway)",
            )
        keys += [k.strip() for k in value.split(",") if k.strip()]
    return tuple(keys), tuple(boosts)
