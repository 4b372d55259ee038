"""Rules about the response stream: proxy buffering, gzip on text/event-stream, and where the
X-Accel-Buffering header does (and does not) work."""

from __future__ import annotations

from ttft.core.findings import Severity
from ttft.lint.nginx.config import NginxConfig, Route
from ttft.lint.nginx.fixes import buffering_off_edits, drop_edits, gzip_off_edits
from ttft.lint.nginx.rulekit import (
    Hit,
    NginxLintOptions,
    buffering_state,
    first_arg,
    how_set,
    ignores_x_accel,
    where,
)


def rule_proxy_buffering(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    state = buffering_state(route, opts.upstream_engine)
    if state == "off":
        return []
    setting = route.setting("proxy_buffering")
    ignored = ignores_x_accel(route)
    how = how_set(setting, "is on by default")
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
        Hit(
            "nginx/proxy-buffering",
            severity,
            "Proxy buffering on for a streaming route",
            why,
            where(route, setting),
            "proxy_buffering off;  (in this location, or the server block serving LLM routes)"
            + ("; and remove X-Accel-Buffering from proxy_ignore_headers" if ignored else ""),
            "tokens reach the client as they are generated (article: -120 ms p50)",
            related,
            edits=buffering_off_edits(route),
        )
    ]


def rule_gzip_event_stream(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    types = route.setting("gzip_types")
    covered = [t for t in types.all_args if t.lower() in ("text/event-stream", "*")]
    if not covered:
        return []  # the default gzip_types is text/html only
    gzip_on = [s for s in route.settings("gzip") if first_arg(s) == "on"]
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
    at = types.last.location if types.last else where(route, on)
    gzip_dir = on.last
    related = (gzip_dir.location,) if gzip_dir is not None and gzip_dir.location != at else ()
    return [
        Hit(
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
            # Only where gzip holds the stream: an info is a trade-off for the user to weigh.
            edits=gzip_off_edits(route) if severity > Severity.INFO else (),
        )
    ]


def rule_x_accel_misplaced(config: NginxConfig, route: Route, opts: NginxLintOptions) -> list[Hit]:
    out: list[Hit] = []
    state = buffering_state(route, opts.upstream_engine)
    for directive_name, effect in (
        ("add_header", "adds it to the response nginx sends to the client"),
        ("proxy_set_header", "adds it to the request nginx sends to the engine"),
    ):
        for setting in route.settings(directive_name):
            for d in setting.directives:
                if not d.args or d.args[0].lower() != "x-accel-buffering":
                    continue
                edits = drop_edits(route, d)
                if state != "off":
                    edits += buffering_off_edits(route)
                out.append(
                    Hit(
                        "nginx/x-accel-buffering-misplaced",
                        Severity.WARNING if state in ("on", "maybe") else Severity.INFO,
                        "X-Accel-Buffering set on the wrong side",
                        f"`{d.text()}` {effect}. nginx only honours X-Accel-Buffering when it "
                        "comes in the engine's response, so this does not turn buffering off "
                        "here (and it never turns gzip off).",
                        d.location,
                        "proxy_buffering off;  in this location (and remove this header line)",
                        "buffering really off for the stream",
                        edits=edits,
                    )
                )
    return out
