"""Checks of every nginx location that proxies to an LLM upstream, as ``Finding``s with file:line.

What nginx does to a token stream (nginx 1.22, measured with ``ttft.testing.nginx`` and an SSE
upstream sending one event every 300 ms; see tests/unit/lint/test_nginx_stream.py):

- ``proxy_buffering on`` (the default) alone still forwards each read from the upstream;
- but with buffering on, output filters that wait for a flush hold the stream: ``gzip`` on
  ``text/event-stream`` for a client sending ``Accept-Encoding: gzip`` (browsers, httpx, aiohttp)
  delivered all events at once at the end (1.2 s instead of 20 ms for the first);
- an upstream's ``X-Accel-Buffering: no`` response header turns buffering off per response
  (llama-server sends it; vLLM and SGLang do not) unless ``proxy_ignore_headers
  X-Accel-Buffering`` is set; it does not turn gzip off, but unbuffered responses are flushed
  per read, so gzip then compresses each event on its own instead of holding them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ttft.lint.findings import Finding, Location, Severity, sort_findings
from ttft.lint.nginx_config import ConfigProblem, NginxConfig, Route, Setting

# Which engines answer streams with ``X-Accel-Buffering: no`` (None: not known to us).
# llama-server: sets it on streamed responses (checked on the embedded build, see DESIGN.md);
# vLLM and SGLang: their OpenAI servers set no such header.
SENDS_X_ACCEL_NO: dict[str, bool | None] = {
    "llamacpp": True,
    "vllm": False,
    "sglang": False,
    "tgi": None,
}
ENGINES = tuple(SENDS_X_ACCEL_NO)


@dataclass(frozen=True)
class NginxLintOptions:
    upstream_engine: str | None = None  # a key of SENDS_X_ACCEL_NO, None when unknown
    min_read_timeout_s: float = 300.0
    only_locations: tuple[str, ...] = ()  # check only locations whose path contains one of these


@dataclass
class _Hit:
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


Rule = Callable[[NginxConfig, Route, NginxLintOptions], Iterable[_Hit]]


def lint_config(config: NginxConfig, options: NginxLintOptions | None = None) -> list[Finding]:
    """All findings for a loaded configuration, sorted by file and line."""
    opts = options or NginxLintOptions()
    findings = [_problem_finding(p) for p in config.problems]
    routes = [r for r in config.routes() if _selected(r, opts.only_locations)]
    hits: dict[tuple[str, str, int | None], _Hit] = {}
    for route in routes:
        if route.kind != "http":
            _merge(hits, _not_applicable(route))
            continue
        for rule in RULES:
            for hit in rule(config, route, opts):
                hit.routes.append(route.name())
                _merge(hits, hit)
    findings.extend(_finish(h) for h in hits.values())
    if not any(r.kind == "http" for r in routes):
        findings.append(
            Finding(
                "nginx/no-proxy-routes",
                Severity.INFO,
                "No location proxies with proxy_pass",
                "No location in this configuration (includes followed) passes requests on with "
                "proxy_pass, so there is nothing on the streaming path to check."
                + (
                    " Some files could not be read; see the config errors."
                    if config.problems
                    else ""
                ),
                Location(config.main_file),
                "Point ttft lint nginx at the nginx.conf that holds the LLM routes.",
            )
        )
    return sort_findings(findings)


def _selected(route: Route, only: tuple[str, ...]) -> bool:
    path = " ".join(route.location.args)
    return not only or any(text in path for text in only)


def _merge(hits: dict[tuple[str, str, int | None], _Hit], hit: _Hit) -> None:
    key = (hit.rule, hit.at.file, hit.at.line)
    seen = hits.get(key)
    if seen is None:
        hits[key] = hit
        return
    seen.routes.extend(r for r in hit.routes if r not in seen.routes)
    if hit.severity > seen.severity:
        seen.severity, seen.message = hit.severity, hit.message


def _finish(hit: _Hit) -> Finding:
    message = hit.message
    if hit.routes:
        shown = ", ".join(hit.routes[:4])
        more = f" and {len(hit.routes) - 4} more" if len(hit.routes) > 4 else ""
        message += f" Applies to {shown}{more}."
    return Finding(
        hit.rule, hit.severity, hit.title, message, hit.at, hit.fix, hit.gain, hit.related
    )


def _problem_finding(problem: ConfigProblem) -> Finding:
    return Finding(
        "nginx/config-error",
        Severity.ERROR,
        "Configuration could not be read",
        f"{problem.message}. Other findings may be incomplete: settings in unread parts are "
        "treated as absent (nginx defaults).",
        Location(problem.file, problem.line),
        "Fix the file so that `nginx -t` accepts it, or point ttft at the right nginx.conf.",
    )


def _not_applicable(route: Route) -> _Hit:
    name = route.pass_directive.name
    return _Hit(
        "nginx/not-applicable",
        Severity.INFO,
        f"{name} route not checked",
        f"This location passes requests with {name}, not proxy_pass; the streaming checks here "
        f"are for HTTP proxying. {route.kind} has its own buffering directives "
        f"(e.g. {route.kind}_buffering) which these rules do not evaluate.",
        route.pass_directive.location,
        "Nothing to change for ttft; check the module's buffering settings by hand.",
        routes=[route.name()],
    )


# --- helpers --------------------------------------------------------------------------------


def _where(route: Route, setting: Setting) -> Location:
    """The directive that decides a setting, or the location block when it is the default."""
    last = setting.last
    return last.location if last is not None else route.location.location


def _text(setting: Setting) -> str:
    last = setting.last
    return last.text() if last is not None else setting.name


def _how(setting: Setting, default: str) -> str:
    """``is on by default`` or ``is set by `proxy_buffering on` ``, for messages."""
    return default if setting.is_default else f"is set by `{_text(setting)}`"


def _first_arg(setting: Setting) -> str:
    return setting.args[0].lower() if setting.args else ""


def _ignores_x_accel(route: Route) -> Setting | None:
    setting = route.setting("proxy_ignore_headers")
    if any(a.lower() == "x-accel-buffering" for a in setting.all_args):
        return setting
    return None


def buffering_state(route: Route, engine: str | None) -> str:
    """``off`` (always), ``header-off`` (the upstream's header turns it off), ``maybe`` or ``on``.

    ``proxy_buffering`` is not allowed inside ``if``, so only the unconditional value counts.
    """
    if _first_arg(route.setting("proxy_buffering")) == "off":
        return "off"
    if _ignores_x_accel(route) is not None:
        return "on"
    sends = SENDS_X_ACCEL_NO.get(engine) if engine else None
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


def _fmt_s(seconds: float) -> str:
    return f"{seconds:g} s"


# --- rules ----------------------------------------------------------------------------------


def rule_proxy_buffering(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[_Hit]:
    state = buffering_state(route, opts.upstream_engine)
    if state == "off":
        return []
    setting = route.setting("proxy_buffering")
    ignored = _ignores_x_accel(route)
    how = _how(setting, "is on by default")
    if state == "header-off":
        severity = Severity.INFO
        why = (
            f"proxy_buffering {how}. Your upstream ({opts.upstream_engine}) answers streams with "
            "`X-Accel-Buffering: no`, which turns buffering off per response, so streams pass; "
            "any other upstream behind this route (vLLM and SGLang send no such header) would "
            "be buffered."
        )
    else:
        severity = Severity.WARNING
        if ignored is not None:
            cause = (
                " and `proxy_ignore_headers X-Accel-Buffering` discards the upstream's "
                "`X-Accel-Buffering: no`, so even llama-server's streams are buffered"
            )
        elif state == "on":
            cause = f" and {opts.upstream_engine} sends no `X-Accel-Buffering: no` header"
        else:
            cause = (
                "; only upstreams that send `X-Accel-Buffering: no` (llama-server does, vLLM and "
                "SGLang do not) escape it"
            )
        why = (
            f"proxy_buffering {how}{cause}. A buffered stream is no longer flushed per event: "
            "filters that wait for a flush (gzip, sub_filter, ssi) then hold tokens until "
            "nginx's buffers fill or the answer ends, and slow clients make nginx spool the "
            "stream to disk. The article's round 1 took 120 ms off p50 TTFT by turning it off."
        )
    related = (ignored.last.location,) if ignored is not None and ignored.last else ()
    return [
        _Hit(
            "nginx/proxy-buffering",
            severity,
            "Proxy buffering on for a streaming route",
            why,
            _where(route, setting),
            "proxy_buffering off;  (in this location, or the server block serving LLM routes)"
            + ("; and remove X-Accel-Buffering from proxy_ignore_headers" if ignored else ""),
            "tokens reach the client as they are generated (article: -120 ms p50)",
            related,
        )
    ]


def rule_gzip_event_stream(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[_Hit]:
    types = route.setting("gzip_types")
    covered = [t for t in types.all_args if t.lower() in ("text/event-stream", "*")]
    if not covered:
        return []  # the default gzip_types is text/html only
    gzip_on = [s for s in route.settings("gzip") if _first_arg(s) == "on"]
    if not gzip_on:
        return []
    state = buffering_state(route, opts.upstream_engine)
    on = gzip_on[0]
    conditional = f" (inside `if {' '.join(on.condition.args)}`)" if on.condition else ""
    type_text = "`*` (every type)" if covered[0] == "*" else "text/event-stream"
    if state in ("off", "header-off"):
        severity = Severity.INFO
        why = (
            f"gzip is on{conditional} and gzip_types covers {type_text}. Streams here are "
            "unbuffered, so each event is compressed and flushed on its own: tokens still flow, "
            "but every event pays compression, and `X-Accel-Buffering: no` does not turn gzip "
            "off. Compressing a few bytes per event gains nothing."
        )
    else:
        severity = Severity.ERROR
        why = (
            f"gzip is on{conditional} and gzip_types covers {type_text}, while this route's "
            "streams are buffered. For any client that sends `Accept-Encoding: gzip` (browsers, "
            "httpx, aiohttp and the OpenAI SDKs do by default) gzip waits for a flush that a "
            "buffered stream never sends: the whole answer arrives at once at the end, so TTFT "
            "becomes the full generation time. Measured through nginx 1.22: first event after "
            "1.2 s instead of 20 ms for a 1.2 s answer; on llama-server with the header ignored, "
            "~850 ms instead of ~45 ms for 48 tokens."
        )
    at = types.last.location if types.last else _where(route, on)
    gzip_dir = on.last
    related = (gzip_dir.location,) if gzip_dir is not None and gzip_dir.location != at else ()
    return [
        _Hit(
            "nginx/gzip-event-stream",
            severity,
            "gzip compresses the token stream",
            why,
            at,
            "remove text/event-stream (and `*`) from gzip_types, or put `gzip off;` in the "
            "streaming location",
            "first token arrives when generated instead of at the end of the answer"
            if severity is Severity.ERROR
            else "less CPU per event",
            related,
        )
    ]


def rule_proxy_cache(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[_Hit]:
    out: list[_Hit] = []
    for setting in route.settings("proxy_cache"):
        if setting.is_default or _first_arg(setting) == "off":
            continue
        methods = {a.upper() for a in route.setting("proxy_cache_methods").all_args}
        post = "POST" in methods
        severity = Severity.ERROR if post else Severity.WARNING
        why = (
            f"`{_text(setting)}` caches responses of an LLM route. "
            + (
                "proxy_cache_methods includes POST, and the default cache key "
                "($scheme$proxy_host$request_uri) ignores the request body: different prompts "
                "to the same URL get one cached answer. "
                if post
                else "Completions are POSTs, which nginx does not cache by default "
                "(proxy_cache_methods GET HEAD), so the cache only adds lookups and a cache file "
                "written while tokens stream. "
            )
            + "Prompt reuse belongs in the engine's prefix cache, not in an HTTP cache."
        )
        out.append(
            _Hit(
                "nginx/proxy-cache",
                severity,
                "HTTP cache on an LLM route",
                why,
                _where(route, setting),
                "proxy_cache off;  (in the LLM locations)",
                "no cache-file writes on the streaming path"
                + ("; no wrong answers served from cache" if post else ""),
            )
        )
    return out


def rule_proxy_http_version(
    config: NginxConfig, route: Route, opts: NginxLintOptions
) -> list[_Hit]:
    setting = route.setting("proxy_http_version")
    version = setting.args[0] if setting.args else "1.0"
    if version not in ("1.0",):
        return []
    how = _how(setting, "defaults to 1.0")
    return [
        _Hit(
            "nginx/proxy-http-version",
            Severity.WARNING,
            "HTTP/1.0 to the upstream",
            f"proxy_http_version {how}. With HTTP/1.0 nginx cannot keep connections to the "
            "engine alive, so every request pays a new TCP (and, for https upstreams, TLS) "
            "handshake before the prompt is even sent, and a chunked request body is always "
            "buffered whatever proxy_request_buffering says.",
            _where(route, setting),
            'proxy_http_version 1.1; proxy_set_header Connection ""; and `keepalive 16;` in '
            "the upstream block",
            "one connection set-up less per request (a round trip or more across hosts)",
        )
    ]


def rule_upstream_keepalive(
    config: NginxConfig, route: Route, opts: NginxLintOptions
) -> list[_Hit]:
    version = route.setting("proxy_http_version")
    if not version.args or version.args[0] == "1.0":
        return []  # nginx/proxy-http-version covers this route
    missing: list[str] = []
    related: list[Location] = []
    headers = route.setting("proxy_set_header")
    connection = [d for d in headers.directives if d.args and d.args[0].lower() == "connection"]
    if not connection:
        missing.append(
            "no `proxy_set_header Connection` at the level that sets headers, so nginx sends "
            "its default `Connection: close`"
        )
    else:
        value = connection[-1].args[1] if len(connection[-1].args) > 1 else ""
        if value.lower() == "close":
            missing.append("`proxy_set_header Connection close`")
            related.append(connection[-1].location)
        elif value.startswith("$"):
            for block in config.maps_defining(value):
                closes = [d for d in block.block or () if d.args and d.args[0].lower() == "close"]
                if closes:
                    missing.append(
                        f"`Connection {value}` comes from a map that yields `close` (for requests "
                        "without Upgrade, i.e. every completion)"
                    )
                    related.append(closes[0].location)
    name = route.upstream_name
    group = config.upstream(name) if name else None
    if name and group is None:
        missing.append(
            f"proxy_pass goes to `{name}` directly; idle connections are only kept for an "
            "`upstream` block with `keepalive`"
        )
    elif group is not None and not group.children("keepalive"):
        missing.append(f"upstream `{name}` has no `keepalive` directive")
        related.append(group.location)
    if not missing:
        return []
    tls = (
        route.pass_directive.args[0].startswith("https://") if route.pass_directive.args else False
    )
    return [
        _Hit(
            "nginx/upstream-keepalive",
            Severity.WARNING if tls else Severity.INFO,
            "Connections to the engine are not reused",
            "HTTP/1.1 is on but connections to the engine are still closed after each request: "
            + "; ".join(missing)
            + ". Each request then opens a new connection"
            + (" with a full TLS handshake" if tls else "")
            + " before the prompt can be sent.",
            route.pass_directive.location,
            'proxy_set_header Connection "";  and in the upstream block: keepalive 16;',
            "one connection set-up less per request" + (" (TLS: 1-2 round trips)" if tls else ""),
            tuple(related),
        )
    ]


def rule_proxy_read_timeout(
    config: NginxConfig, route: Route, opts: NginxLintOptions
) -> list[_Hit]:
    setting = route.setting("proxy_read_timeout")
    raw = setting.args[0] if setting.args else "60s"
    seconds = parse_nginx_time(raw)
    if seconds is None or seconds >= opts.min_read_timeout_s:
        return []
    how = _how(setting, "defaults to 60 s")
    return [
        _Hit(
            "nginx/proxy-read-timeout",
            Severity.WARNING,
            "Read timeout shorter than long generations",
            f"proxy_read_timeout {how}"
            + ("" if setting.is_default else f" ({_fmt_s(seconds)})")
            + ": the longest silence nginx accepts "
            "between two reads from the engine. Before the first token that silence is queue "
            "time plus prefill (seconds for long prompts under load), and a non-streaming "
            "request is silent for the whole generation (4096 tokens at 50 tokens/s = 82 s). "
            "Past it the client gets 504 and the engine keeps generating for nobody.",
            _where(route, setting),
            f"proxy_read_timeout {int(opts.min_read_timeout_s)}s;  (or longer than your longest "
            "non-streaming generation)",
            "no 504s on long prompts or long answers",
        )
    ]


def rule_proxy_request_buffering(
    config: NginxConfig, route: Route, opts: NginxLintOptions
) -> list[_Hit]:
    setting = route.setting("proxy_request_buffering")
    if _first_arg(setting) == "off":
        return []
    how = _how(setting, "is on by default")
    return [
        _Hit(
            "nginx/proxy-request-buffering",
            Severity.INFO,
            "Request bodies are read fully before forwarding",
            f"proxy_request_buffering {how}: nginx reads the whole request body (beyond "
            "client_body_buffer_size to a temp file) before it connects to the engine, so a "
            "large prompt's upload time and a disk write come before the engine sees a byte. "
            "Small for short prompts on fast links; noticeable for long-context prompts from "
            "slow clients.",
            _where(route, setting),
            "proxy_request_buffering off;  (needs proxy_http_version 1.1 for chunked bodies)",
            "upload overlaps forwarding for large prompts",
        )
    ]


def rule_x_accel_misplaced(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[_Hit]:
    out: list[_Hit] = []
    state = buffering_state(route, opts.upstream_engine)
    for directive_name, effect in (
        ("add_header", "adds it to the response nginx sends to the client"),
        ("proxy_set_header", "adds it to the request nginx sends to the engine"),
    ):
        for setting in route.settings(directive_name):
            for d in setting.directives:
                if not d.args or d.args[0].lower() != "x-accel-buffering":
                    continue
                out.append(
                    _Hit(
                        "nginx/x-accel-buffering-misplaced",
                        Severity.WARNING if state in ("on", "maybe") else Severity.INFO,
                        "X-Accel-Buffering set on the wrong side",
                        f"`{d.text()}` {effect}. nginx only honours X-Accel-Buffering when it "
                        "comes in the engine's response, so this does not turn buffering off "
                        "here (and it never turns gzip off).",
                        d.location,
                        "proxy_buffering off;  in this location (and remove this header line)",
                        "buffering really off for the stream",
                    )
                )
    return out


RULES: tuple[Rule, ...] = (
    rule_proxy_buffering,
    rule_gzip_event_stream,
    rule_proxy_cache,
    rule_proxy_http_version,
    rule_upstream_keepalive,
    rule_proxy_read_timeout,
    rule_proxy_request_buffering,
    rule_x_accel_misplaced,
)

RULE_IDS = (
    "nginx/config-error",
    "nginx/no-proxy-routes",
    "nginx/not-applicable",
    "nginx/proxy-buffering",
    "nginx/gzip-event-stream",
    "nginx/proxy-cache",
    "nginx/proxy-http-version",
    "nginx/upstream-keepalive",
    "nginx/proxy-read-timeout",
    "nginx/proxy-request-buffering",
    "nginx/x-accel-buffering-misplaced",
)
