"""Each nginx rule: a config that trips it and the nearest config that does not.

Configs are built from ``CLEAN`` (a streaming-safe location) with one fault added, so a failing
test names exactly one directive.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nginx_testkit import (
    CLEAN,
    by_rule,
    line_of,
    lint_file,
    lint_route,
    route_config,
    rules,
    write_config,
)

from ttft.core.findings import Severity
from ttft.lint.nginx.rules import parse_nginx_time


def test_clean_location_has_no_findings(tmp_path: Path) -> None:
    """The baseline every other test perturbs is itself clean."""
    assert lint_route(tmp_path, CLEAN) == []


# --- proxy buffering ------------------------------------------------------------------------


def test_default_buffering_is_flagged_at_the_location_line(tmp_path: Path) -> None:
    """proxy_buffering is on by default: the finding points at the location to put `off` in."""
    body = CLEAN.replace("proxy_buffering off;", "")
    found = by_rule(lint_route(tmp_path, body), "nginx/proxy-buffering")
    assert len(found) == 1
    assert found[0].severity is Severity.WARNING
    assert found[0].location.line == line_of(tmp_path, "location /v1/ {")
    assert "on by default" in found[0].message
    assert found[0].action.startswith("proxy_buffering off;")


def test_buffering_off_is_not_flagged(tmp_path: Path) -> None:
    assert "nginx/proxy-buffering" not in rules(lint_route(tmp_path, CLEAN))


def test_buffering_is_info_when_the_upstream_sends_x_accel_buffering(tmp_path: Path) -> None:
    """llama-server's `X-Accel-Buffering: no` turns buffering off per response."""
    body = CLEAN.replace("proxy_buffering off;", "")
    found = by_rule(lint_route(tmp_path, body, engine="llamacpp"), "nginx/proxy-buffering")
    assert [f.severity for f in found] == [Severity.INFO]
    assert "vLLM and SGLang send no such header" in found[0].message


def test_ignoring_x_accel_buffering_defeats_the_upstream_header(tmp_path: Path) -> None:
    """With proxy_ignore_headers X-Accel-Buffering even llama-server's streams are buffered."""
    body = CLEAN.replace("proxy_buffering off;", "proxy_ignore_headers X-Accel-Buffering;")
    found = by_rule(lint_route(tmp_path, body, engine="llamacpp"), "nginx/proxy-buffering")
    assert [f.severity for f in found] == [Severity.WARNING]
    assert "proxy_ignore_headers X-Accel-Buffering" in found[0].message
    assert found[0].related and found[0].related[0].line is not None


def test_buffering_off_at_server_level_is_inherited(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "")
    found = lint_route(tmp_path, body, server="proxy_buffering off;")
    assert "nginx/proxy-buffering" not in rules(found)


def test_buffering_on_in_the_location_overrides_off_at_http_level(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "proxy_buffering on;")
    found = by_rule(
        lint_route(tmp_path, body, http="proxy_buffering off;"), "nginx/proxy-buffering"
    )
    assert len(found) == 1 and "`proxy_buffering on`" in found[0].message


# --- gzip on the event stream ---------------------------------------------------------------


def test_gzip_on_event_stream_with_buffering_is_an_error(tmp_path: Path) -> None:
    """gzip + buffered stream: the whole answer arrives at the end."""
    body = CLEAN.replace("proxy_buffering off;", "")
    http = "gzip on; gzip_types text/event-stream;"
    found = by_rule(lint_route(tmp_path, body, http=http), "nginx/gzip-event-stream")
    assert [f.severity for f in found] == [Severity.ERROR]
    assert found[0].location.line == line_of(tmp_path, "gzip_types")


def test_gzip_types_star_counts_as_event_stream(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "")
    found = lint_route(tmp_path, body, http="gzip on; gzip_types *;")
    assert "nginx/gzip-event-stream" in rules(found)


def test_gzip_default_types_do_not_cover_event_stream(tmp_path: Path) -> None:
    """gzip_types defaults to text/html only."""
    body = CLEAN.replace("proxy_buffering off;", "")
    assert "nginx/gzip-event-stream" not in rules(lint_route(tmp_path, body, http="gzip on;"))


def test_gzip_types_without_gzip_on_is_harmless(tmp_path: Path) -> None:
    found = lint_route(tmp_path, CLEAN, http="gzip_types text/event-stream;")
    assert "nginx/gzip-event-stream" not in rules(found)


def test_gzip_off_in_the_location_overrides_http_level(tmp_path: Path) -> None:
    found = lint_route(tmp_path, CLEAN + "gzip off;", http="gzip on; gzip_types text/event-stream;")
    assert "nginx/gzip-event-stream" not in rules(found)


def test_gzip_on_unbuffered_stream_is_only_info(tmp_path: Path) -> None:
    """Unbuffered responses are flushed per read, so gzip compresses per event, not per answer."""
    found = lint_route(tmp_path, CLEAN, http="gzip on; gzip_types text/event-stream;")
    assert [f.severity for f in by_rule(found, "nginx/gzip-event-stream")] == [Severity.INFO]


def test_gzip_inside_if_is_treated_as_possibly_on(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "") + "if ($arg_z) { gzip on; }"
    found = by_rule(
        lint_route(tmp_path, body, http="gzip_types text/event-stream;"), "nginx/gzip-event-stream"
    )
    assert len(found) == 1 and "inside `if $arg_z`" in found[0].message


def test_gzip_off_inside_if_does_not_clear_an_unconditional_on(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "") + "if ($arg_z) { gzip off; }"
    found = lint_route(tmp_path, body, http="gzip on; gzip_types text/event-stream;")
    assert "nginx/gzip-event-stream" in rules(found)


# --- proxy_cache ----------------------------------------------------------------------------

CACHE_ZONE = "proxy_cache_path /tmp/ttft-cache keys_zone=llm_cache:1m;"


def test_proxy_cache_is_a_warning(tmp_path: Path) -> None:
    found = lint_route(tmp_path, CLEAN + "proxy_cache llm_cache;", http=CACHE_ZONE)
    assert [f.severity for f in by_rule(found, "nginx/proxy-cache")] == [Severity.WARNING]


def test_proxy_cache_of_posts_is_an_error(tmp_path: Path) -> None:
    """The default key ignores the body: different prompts would share one cached answer."""
    body = CLEAN + "proxy_cache llm_cache; proxy_cache_methods GET HEAD POST;"
    found = by_rule(lint_route(tmp_path, body, http=CACHE_ZONE), "nginx/proxy-cache")
    assert [f.severity for f in found] == [Severity.ERROR]
    assert "ignores the request body" in found[0].message


def test_proxy_cache_off_is_not_flagged(tmp_path: Path) -> None:
    found = lint_route(
        tmp_path, CLEAN + "proxy_cache off;", server="proxy_cache llm_cache;", http=CACHE_ZONE
    )
    assert "nginx/proxy-cache" not in rules(found)


# --- HTTP version and keep-alive ------------------------------------------------------------


def test_default_http_version_1_0_is_flagged(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_http_version 1.1;", "")
    found = by_rule(lint_route(tmp_path, body), "nginx/proxy-http-version")
    assert len(found) == 1 and "defaults to 1.0" in found[0].message
    assert "nginx/upstream-keepalive" not in rules(lint_route(tmp_path, body))


def test_http_version_1_1_is_not_flagged(tmp_path: Path) -> None:
    assert "nginx/proxy-http-version" not in rules(lint_route(tmp_path, CLEAN))


def test_missing_connection_header_blocks_keepalive(tmp_path: Path) -> None:
    """Without `proxy_set_header Connection ""` nginx sends `Connection: close`."""
    body = CLEAN.replace('proxy_set_header Connection "";', "")
    found = by_rule(lint_route(tmp_path, body), "nginx/upstream-keepalive")
    assert len(found) == 1 and "Connection: close" in found[0].message


def test_a_header_set_in_the_location_drops_the_inherited_connection_header(
    tmp_path: Path,
) -> None:
    """proxy_set_header at one level replaces every header inherited from the levels above."""
    body = CLEAN.replace('proxy_set_header Connection "";', "proxy_set_header Host $host;")
    found = lint_route(tmp_path, body, server='proxy_set_header Connection "";')
    assert "nginx/upstream-keepalive" in rules(found)


def test_connection_header_inherited_from_server_is_enough(tmp_path: Path) -> None:
    body = CLEAN.replace('proxy_set_header Connection "";', "")
    found = lint_route(tmp_path, body, server='proxy_set_header Connection "";')
    assert "nginx/upstream-keepalive" not in rules(found)


def test_upstream_without_keepalive_is_flagged(tmp_path: Path) -> None:
    path = route_config(tmp_path, CLEAN)
    path.write_text(path.read_text().replace(" keepalive 8;", ""))
    found = by_rule(lint_file(path), "nginx/upstream-keepalive")
    assert len(found) == 1 and "no `keepalive`" in found[0].message


def test_direct_address_keeps_no_idle_connections(tmp_path: Path) -> None:
    found = by_rule(
        lint_route(tmp_path, CLEAN, target="http://127.0.0.1:8000"), "nginx/upstream-keepalive"
    )
    assert len(found) == 1 and "directly" in found[0].message
    assert found[0].severity is Severity.INFO


def test_https_upstream_without_reuse_is_a_warning(tmp_path: Path) -> None:
    found = by_rule(
        lint_route(tmp_path, CLEAN, target="https://127.0.0.1:8443"), "nginx/upstream-keepalive"
    )
    assert [f.severity for f in found] == [Severity.WARNING]


def test_websocket_map_that_yields_close_is_flagged(tmp_path: Path) -> None:
    mapping = "map $http_upgrade $connection_upgrade { default upgrade; '' close; }"
    body = CLEAN.replace('""', "$connection_upgrade")
    found = by_rule(lint_route(tmp_path, body, http=mapping), "nginx/upstream-keepalive")
    assert len(found) == 1 and "map that yields `close`" in found[0].message


def test_websocket_map_with_empty_default_is_fine(tmp_path: Path) -> None:
    mapping = "map $http_upgrade $connection_upgrade { default upgrade; '' ''; }"
    body = CLEAN.replace('""', "$connection_upgrade")
    assert "nginx/upstream-keepalive" not in rules(lint_route(tmp_path, body, http=mapping))


# --- timeouts and request buffering ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("60", 60),
        ("90s", 90),
        ("5m", 300),
        ("1m30s", 90),
        ("500ms", 0.5),
        ("1h", 3600),
        ("x", None),
    ],
)
def test_nginx_time_syntax(text: str, seconds: float | None) -> None:
    assert parse_nginx_time(text) == seconds


def test_default_read_timeout_is_too_short(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_read_timeout 600s;", "")
    found = by_rule(lint_route(tmp_path, body), "nginx/proxy-read-timeout")
    assert len(found) == 1 and "defaults to 60 s" in found[0].message


def test_explicit_short_read_timeout_points_at_its_line(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_read_timeout 600s;", "proxy_read_timeout 2m;")
    found = by_rule(lint_route(tmp_path, body), "nginx/proxy-read-timeout")
    assert len(found) == 1
    assert found[0].location.line == line_of(tmp_path, "proxy_read_timeout 2m")


def test_long_read_timeout_is_fine_and_threshold_is_configurable(tmp_path: Path) -> None:
    path = route_config(tmp_path, CLEAN)
    assert "nginx/proxy-read-timeout" not in rules(lint_file(path))
    assert "nginx/proxy-read-timeout" in rules(lint_file(path, min_read_timeout_s=3600))


def test_request_buffering_default_is_info(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_request_buffering off;", "")
    found = by_rule(lint_route(tmp_path, body), "nginx/proxy-request-buffering")
    assert [f.severity for f in found] == [Severity.INFO]


def test_request_buffering_off_is_not_flagged(tmp_path: Path) -> None:
    assert "nginx/proxy-request-buffering" not in rules(lint_route(tmp_path, CLEAN))


# --- X-Accel-Buffering set on the wrong side ------------------------------------------------


def test_add_header_x_accel_buffering_does_not_disable_buffering(tmp_path: Path) -> None:
    body = CLEAN.replace("proxy_buffering off;", "add_header X-Accel-Buffering no;")
    found = lint_route(tmp_path, body)
    misplaced = by_rule(found, "nginx/x-accel-buffering-misplaced")
    assert [f.severity for f in misplaced] == [Severity.WARNING]
    assert "nginx/proxy-buffering" in rules(found)  # buffering is still on


def test_proxy_set_header_x_accel_buffering_goes_to_the_engine(tmp_path: Path) -> None:
    body = CLEAN + "proxy_set_header X-Accel-Buffering no;"
    found = by_rule(lint_route(tmp_path, body), "nginx/x-accel-buffering-misplaced")
    assert len(found) == 1 and found[0].severity is Severity.INFO  # buffering is off anyway
    assert "request nginx sends to the engine" in found[0].message


def test_no_x_accel_header_lines_no_finding(tmp_path: Path) -> None:
    assert "nginx/x-accel-buffering-misplaced" not in rules(lint_route(tmp_path, CLEAN))


# --- routes that are not HTTP proxying --------------------------------------------------------


def test_uwsgi_and_grpc_routes_are_reported_as_not_applicable(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "server { listen 8080;\n"
        " location /a { uwsgi_pass 127.0.0.1:3031; }\n"
        " location /b { grpc_pass grpc://127.0.0.1:50051; } }",
    )
    found = lint_file(path)
    assert sorted(f.rule for f in found) == [
        "nginx/no-proxy-routes",
        "nginx/not-applicable",
        "nginx/not-applicable",
    ]
    assert all(f.severity is Severity.INFO for f in found)


def test_proxy_pass_inside_if_makes_the_location_a_route(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "server { listen 8080; location /v1/ {"
        " if ($http_x_llm) { proxy_pass http://127.0.0.1:8000; } } }",
    )
    assert "nginx/proxy-buffering" in rules(lint_file(path))


def test_same_cause_in_many_locations_is_reported_once(tmp_path: Path) -> None:
    """An http-level gzip_types line is one finding naming every affected location."""
    path = write_config(
        tmp_path,
        "gzip on; gzip_types text/event-stream;\n"
        "server { listen 8080; location /a { proxy_pass http://127.0.0.1:1; }"
        " location /b { proxy_pass http://127.0.0.1:2; } }",
    )
    found = by_rule(lint_file(path), "nginx/gzip-event-stream")
    assert len(found) == 1
    assert "location /a" in found[0].message and "location /b" in found[0].message


def test_location_filter_checks_only_matching_paths(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "server { listen 8080; location /v1/ { proxy_pass http://127.0.0.1:1; }"
        " location /health { proxy_pass http://127.0.0.1:1; } }",
    )
    found = lint_file(path, only_locations=("/v1/",))
    assert found and all("/health" not in f.message for f in found)
