"""Shared pieces of the nginx rules: options, the pre-merge ``Hit``, and setting helpers.

See ``nginx_rules`` for what nginx does to a token stream and how the rules are run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ttft.core.errors import TtftError
from ttft.core.findings import Location, Severity
from ttft.core.text_edits import TextEdit
from ttft.engines.registry import adapter_for
from ttft.lint.nginx.config import NginxConfig, Route, Setting


@dataclass(frozen=True)
class NginxLintOptions:
    upstream_engine: str | None = None  # an engine kind of the registry, None when unknown
    min_read_timeout_s: float = 300.0
    only_locations: tuple[str, ...] = ()  # check only locations whose path contains one of these


def nginx_lint_options(
    upstream_engine: str, min_read_timeout: str, locations: tuple[str, ...]
) -> NginxLintOptions:
    """``ttft lint nginx``'s values: ``unknown`` names no engine; the timeout is nginx time."""
    seconds = parse_nginx_time(min_read_timeout)
    if seconds is None:
        raise TtftError(
            f"--min-read-timeout {min_read_timeout!r} is not an nginx time",
            "use e.g. 300s, 10m or 1h",
        )
    return NginxLintOptions(
        upstream_engine=None if upstream_engine == "unknown" else upstream_engine,
        min_read_timeout_s=seconds,
        only_locations=locations,
    )


@dataclass
class Hit:
    """A finding before routes sharing the same cause are merged into one."""

    rule: str
    severity: Severity
    title: str
    message: str
    at: Location
    fix: str
    gain: str = ""
    related: tuple[Location, ...] = ()
    routes: list[str] = field(default_factory=list)
    edits: tuple[TextEdit, ...] = ()  # the automatic fix, written against the parsed files


Rule = Callable[[NginxConfig, Route, NginxLintOptions], Iterable[Hit]]


def where(route: Route, setting: Setting) -> Location:
    """The directive that decides a setting, or the location block when it is the default."""
    last = setting.last
    return last.location if last is not None else route.location.location


def directive_text(setting: Setting) -> str:
    last = setting.last
    return last.text() if last is not None else setting.name


def how_set(setting: Setting, default: str) -> str:
    """``is on by default`` or ``is set by `proxy_buffering on` ``, for messages."""
    return default if setting.is_default else f"is set by `{directive_text(setting)}`"


def first_arg(setting: Setting) -> str:
    return setting.args[0].lower() if setting.args else ""


def ignores_x_accel(route: Route) -> Setting | None:
    setting = route.setting("proxy_ignore_headers")
    if any(a.lower() == "x-accel-buffering" for a in setting.all_args):
        return setting
    return None


def buffering_state(route: Route, engine: str | None) -> str:
    """``off`` (always), ``header-off`` (the upstream's header turns it off), ``maybe`` or ``on``.

    ``proxy_buffering`` is not allowed inside ``if``, so only the unconditional value counts.
    """
    if first_arg(route.setting("proxy_buffering")) == "off":
        return "off"
    if ignores_x_accel(route) is not None:
        return "on"
    sends = adapter_for(engine).sends_x_accel_buffering_no if engine else None
    if sends is True:
        return "header-off"
    return "on" if sends is False else "maybe"


_TIME_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "M": 2592000}


def parse_nginx_time(text: str) -> float | None:
    """nginx time syntax in seconds (``60``, ``90s``, ``1m30s``, ``500ms``); None if invalid."""
    if re.fullmatch(r"\d+", text):
        return float(text)
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|M|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * (31536000 if u == "y" else _TIME_UNITS[u]) for n, u in parts)


def nginx_seconds(seconds: float) -> str:
    """``300s``, or ``1500ms`` for a fraction of a second (nginx's time syntax has no decimals)."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def fmt_s(seconds: float) -> str:
    return f"{seconds:g} s"
