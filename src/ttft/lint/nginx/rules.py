"""Checks of every nginx location that proxies to an LLM upstream, as ``Finding``s with file:line.

What nginx does to a token stream (nginx 1.22, measured with ``ttft.testing.nginx`` and an SSE
upstream sending one event every 300 ms; see tests/unit/lint/test_lint_nginx_real.py):

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

from ttft.core.findings import Finding, Location, Severity, sort_findings
from ttft.lint.nginx.config import ConfigProblem, NginxConfig, Route
from ttft.lint.nginx.fixes import change_for
from ttft.lint.nginx.rulekit import (
    Hit,
    NginxLintOptions,
    Rule,
    buffering_state,
    parse_nginx_time,
)
from ttft.lint.nginx.rules_stream import (
    rule_gzip_event_stream,
    rule_proxy_buffering,
    rule_x_accel_misplaced,
)
from ttft.lint.nginx.rules_upstream import (
    rule_proxy_cache,
    rule_proxy_http_version,
    rule_proxy_read_timeout,
    rule_proxy_request_buffering,
    rule_upstream_keepalive,
)

__all__ = [
    "RULES",
    "RULE_IDS",
    "NginxLintOptions",
    "buffering_state",
    "lint_config",
    "parse_nginx_time",
]


def lint_config(config: NginxConfig, options: NginxLintOptions | None = None) -> list[Finding]:
    """All findings for a loaded configuration, sorted by file and line."""
    opts = options or NginxLintOptions()
    findings = [_problem_finding(p) for p in config.problems]
    if config.fragment:
        findings.append(_fragment_note(config))
    routes = [r for r in config.routes() if _selected(r, opts.only_locations)]
    hits: dict[tuple[str, str, int | None], Hit] = {}
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


def _merge(hits: dict[tuple[str, str, int | None], Hit], hit: Hit) -> None:
    key = (hit.rule, hit.at.file, hit.at.line)
    seen = hits.get(key)
    if seen is None:
        hits[key] = hit
        return
    seen.routes.extend(r for r in hit.routes if r not in seen.routes)
    # One cause, several locations: the fix is every location's edits (shared ones once).
    seen.edits = tuple(dict.fromkeys((*seen.edits, *hit.edits)))
    if hit.severity > seen.severity:
        seen.severity, seen.message = hit.severity, hit.message


def _finish(hit: Hit) -> Finding:
    message = hit.message
    if hit.routes:
        shown = ", ".join(hit.routes[:4])
        more = f" and {len(hit.routes) - 4} more" if len(hit.routes) > 4 else ""
        message += f" Applies to {shown}{more}."
    return Finding(
        hit.rule,
        hit.severity,
        hit.title,
        message,
        hit.at,
        hit.fix,
        hit.gain,
        hit.related,
        change=change_for(hit.rule, hit.edits),
    )


def _fragment_note(config: NginxConfig) -> Finding:
    return Finding(
        "nginx/fragment",
        Severity.INFO,
        "Read as part of an http block",
        "This file has server blocks at its top level, as site files in sites-enabled/ or "
        "conf.d/ do: it was read as the contents of the http block that includes it. Settings "
        "of that http block (in nginx.conf) are not seen here and count as nginx's defaults.",
        Location(config.main_file),
        "Nothing to change; lint nginx.conf itself to check the http block's settings too.",
    )


def _problem_finding(problem: ConfigProblem) -> Finding:
    if problem.missing_include:
        return Finding(
            "nginx/include-missing",
            Severity.INFO,
            "Included file not on this machine",
            f"{problem.message}. Its settings are treated as absent (nginx defaults); the rest of "
            "the configuration is checked.",
            Location(problem.file, problem.line),
            "Nothing to change if the file exists where nginx runs (certbot's "
            "options-ssl-nginx.conf is typical); to check it too, lint a copy that has it.",
        )
    return Finding(
        "nginx/config-error",
        Severity.ERROR,
        "Configuration could not be read",
        f"{problem.message}. Other findings may be incomplete: settings in unread parts are "
        "treated as absent (nginx defaults).",
        Location(problem.file, problem.line),
        "Fix the file so that `nginx -t` accepts it, or point ttft at the right nginx.conf.",
    )


def _not_applicable(route: Route) -> Hit:
    name = route.pass_directive.name
    return Hit(
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
