"""Rules about the hop to the engine: HTTP cache, HTTP version and connection reuse, read
timeout and request buffering."""

from __future__ import annotations

from ttft.core.findings import Location, Severity
from ttft.lint.nginx.config import NginxConfig, Route
from ttft.lint.nginx.fixes import set_in_location
from ttft.lint.nginx.rulekit import (
    Hit,
    NginxLintOptions,
    directive_text,
    first_arg,
    fmt_s,
    how_set,
    nginx_seconds,
    parse_nginx_time,
    where,
)


def rule_proxy_cache(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    out: list[Hit] = []
    for setting in route.settings("proxy_cache"):
        if setting.is_default or first_arg(setting) == "off":
            continue
        methods = {a.upper() for a in route.setting("proxy_cache_methods").all_args}
        post = "POST" in methods
        severity = Severity.ERROR if post else Severity.WARNING
        why = (
            f"`{directive_text(setting)}` caches responses of an LLM route. "
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
            Hit(
                "nginx/proxy-cache",
                severity,
                "HTTP cache on an LLM route",
                why,
                where(route, setting),
                "proxy_cache off;  (in the LLM locations)",
                "no cache-file writes on the streaming path"
                + ("; no wrong answers served from cache" if post else ""),
            )
        )
    return out


def rule_proxy_http_version(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    setting = route.setting("proxy_http_version")
    version = setting.args[0] if setting.args else "1.0"
    if version not in ("1.0",):
        return []
    how = how_set(setting, "defaults to 1.0")
    return [
        Hit(
            "nginx/proxy-http-version",
            Severity.WARNING,
            "HTTP/1.0 to the upstream",
            f"proxy_http_version {how}. With HTTP/1.0 nginx cannot keep connections to the "
            "engine alive, so every request pays a new TCP (and, for https upstreams, TLS) "
            "handshake before the prompt is even sent, and a chunked request body is always "
            "buffered whatever proxy_request_buffering says.",
            where(route, setting),
            'proxy_http_version 1.1; proxy_set_header Connection ""; and `keepalive 16;` in '
            "the upstream block",
            "one connection set-up less per request (a round trip or more across hosts)",
        )
    ]


def rule_upstream_keepalive(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
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
        Hit(
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


def rule_proxy_read_timeout(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    setting = route.setting("proxy_read_timeout")
    raw = setting.args[0] if setting.args else "60s"
    seconds = parse_nginx_time(raw)
    if seconds is None or seconds >= opts.min_read_timeout_s:
        return []
    how = how_set(setting, "defaults to 60 s")
    wanted = nginx_seconds(opts.min_read_timeout_s)
    return [
        Hit(
            "nginx/proxy-read-timeout",
            Severity.WARNING,
            "Read timeout shorter than long generations",
            f"proxy_read_timeout {how}"
            + ("" if setting.is_default else f" ({fmt_s(seconds)})")
            + ": the longest silence nginx accepts "
            "between two reads from the engine. Before the first token that silence is queue "
            "time plus prefill (seconds for long prompts under load), and a non-streaming "
            "request is silent for the whole generation (4096 tokens at 50 tokens/s = 82 s). "
            "Past it the client gets 504 and the engine keeps generating for nobody.",
            where(route, setting),
            f"proxy_read_timeout {wanted};  (or longer than your longest non-streaming generation)",
            "no 504s on long prompts or long answers",
            edits=set_in_location(route, "proxy_read_timeout", wanted),
        )
    ]


def rule_proxy_request_buffering(
    config: NginxConfig, route: Route, opts: NginxLintOptions
) -> list[Hit]:
    setting = route.setting("proxy_request_buffering")
    if first_arg(setting) == "off":
        return []
    how = how_set(setting, "is on by default")
    return [
        Hit(
            "nginx/proxy-request-buffering",
            Severity.INFO,
            "Request bodies are read fully before forwarding",
            f"proxy_request_buffering {how}: nginx reads the whole request body (beyond "
            "client_body_buffer_size to a temp file) before it connects to the engine, so a "
            "large prompt's upload time and a disk write come before the engine sees a byte. "
            "Small for short prompts on fast links; noticeable for long-context prompts from "
            "slow clients.",
            where(route, setting),
            "proxy_request_buffering off;  (needs proxy_http_version 1.1 for chunked bodies)",
            "upload overlaps forwarding for large prompts",
            edits=set_in_location(route, "proxy_request_buffering", "off"),
        )
    ]
