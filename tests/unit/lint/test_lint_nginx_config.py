"""Loading real configuration trees: includes, inheritance, and broken input without exceptions."""

from __future__ import annotations

from pathlib import Path

import pytest
from nginx_testkit import NGINX_DATA, by_rule, fixture, lint_file, rules, write_config

from ttft.core.errors import TtftError
from ttft.core.findings import Severity
from ttft.lint.nginx.config import load


def test_includes_are_followed_with_globs_and_nested_snippets() -> None:
    """bad/: nginx.conf -> conf.d/*.conf -> snippets/proxy-headers.conf (inside a location)."""
    config = fixture("bad")
    files = {Path(f).relative_to(NGINX_DATA / "bad").as_posix() for f in config.files}
    assert files == {"nginx.conf", "mime.types", "conf.d/llm.conf", "snippets/proxy-headers.conf"}
    route = next(r for r in config.routes() if r.location.args == ("/v1/",))
    headers = route.setting("proxy_set_header")
    assert headers.directives[0].file.endswith("snippets/proxy-headers.conf")
    assert headers.directives[0].line == 1


def test_clean_fixture_has_no_findings() -> None:
    assert lint_file(NGINX_DATA / "clean" / "nginx.conf") == []


def test_bad_fixture_trips_every_classic_killer_with_file_and_line() -> None:
    found = lint_file(NGINX_DATA / "bad" / "nginx.conf", upstream_engine="vllm")
    assert {
        "nginx/proxy-buffering",
        "nginx/gzip-event-stream",
        "nginx/proxy-cache",
        "nginx/proxy-http-version",
        "nginx/proxy-read-timeout",
        "nginx/proxy-request-buffering",
        "nginx/x-accel-buffering-misplaced",
    } <= rules(found)
    gzip = by_rule(found, "nginx/gzip-event-stream")[0]
    assert gzip.severity is Severity.ERROR
    assert gzip.location.file.endswith("bad/nginx.conf") and gzip.location.line == 25
    cache = by_rule(found, "nginx/proxy-cache")[0]
    assert cache.location.file.endswith("conf.d/llm.conf") and cache.location.line == 20
    assert all(f.location.line is not None for f in found)


def test_inheritance_fixture_findings_follow_nginx_rules() -> None:
    """Server-level settings reach plain locations; overrides, if-blocks and maps are seen."""
    found = lint_file(NGINX_DATA / "inheritance" / "nginx.conf")
    affected = {(f.rule, f.message.rsplit("Applies to ", 1)[-1].split(" (")[0]) for f in found}
    assert affected == {
        ("nginx/gzip-event-stream", "location /stream/"),  # gzip only inside `if`
        ("nginx/upstream-keepalive", "location /v1/completions"),  # lost Connection ""
        ("nginx/proxy-buffering", "location /v1/embeddings"),  # nested location turns it on
        ("nginx/upstream-keepalive", "location /ws/"),  # map yields close
        ("nginx/proxy-read-timeout", "location /admin/"),  # included at server level
    }


def test_nested_location_inherits_from_its_parent_location(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "server { listen 8080;\n"
        "  location /v1/ { proxy_buffering off; proxy_pass http://127.0.0.1:1;\n"
        "    location /v1/x { proxy_pass http://127.0.0.1:1; } } }",
    )
    routes = load(path).routes()
    assert [" ".join(r.location.args) for r in routes] == ["/v1/", "/v1/x"]
    assert routes[1].setting("proxy_buffering").args == ("off",)


def test_unparsable_file_becomes_a_config_error_with_file_and_line() -> None:
    found = lint_file(NGINX_DATA / "broken" / "nginx.conf")
    errors = by_rule(found, "nginx/config-error")
    assert len(errors) == 1
    assert errors[0].location.file.endswith("broken/nginx.conf")
    assert errors[0].location.line == 11
    assert 'expecting "}"' in errors[0].message


def test_missing_include_is_a_note_at_the_include_line_and_the_rest_is_checked() -> None:
    """A file that exists only where nginx runs (certbot's includes) is not a broken config."""
    found = lint_file(NGINX_DATA / "missing-include" / "nginx.conf")
    assert by_rule(found, "nginx/config-error") == []
    notes = by_rule(found, "nginx/include-missing")
    assert len(notes) == 1 and notes[0].location is not None and notes[0].location.line == 4
    assert notes[0].severity is Severity.INFO
    assert "included file not found" in notes[0].message and "llm-routes.conf" in notes[0].message
    assert "nginx/proxy-buffering" in rules(found)  # the location that was read is checked


SITE = NGINX_DATA / "site-fragment" / "llm-proxy.conf"


def test_a_site_file_is_read_as_the_contents_of_an_http_block() -> None:
    """sites-enabled/*.conf: top-level server blocks, certbot's include absent on this machine."""
    found = lint_file(SITE)
    assert by_rule(found, "nginx/config-error") == [], [f.message for f in found]
    assert by_rule(found, "nginx/fragment")[0].severity is Severity.INFO
    assert by_rule(found, "nginx/include-missing")[0].location.line == 19  # type: ignore[union-attr]
    gzip = by_rule(found, "nginx/gzip-event-stream")
    assert gzip and gzip[0].location is not None and gzip[0].location.line == 22
    assert gzip[0].location.file == str(SITE)  # the finding points into the file the user gave
    assert "location / (llm.example.com)" in by_rule(found, "nginx/proxy-buffering")[0].message


def test_a_full_nginx_conf_is_not_taken_for_a_fragment() -> None:
    found = lint_file(NGINX_DATA / "bad" / "nginx.conf")
    assert by_rule(found, "nginx/fragment") == []


def test_missing_main_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="no such file"):
        load(tmp_path / "nope.conf")


def test_directory_instead_of_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(TtftError, match="not a file"):
        load(tmp_path)


def test_binary_garbage_does_not_raise(tmp_path: Path) -> None:
    path = tmp_path / "nginx.conf"
    path.write_bytes(b"\xff\xfe\x00\x01 http { \x80\x81 }")
    found = lint_file(path)
    assert "nginx/config-error" in rules(found) or "nginx/no-proxy-routes" in rules(found)


def test_include_cycle_terminates(tmp_path: Path) -> None:
    path = write_config(tmp_path, "include loop.conf;", {"loop.conf": "include loop.conf;\n"})
    found = lint_file(path)
    assert "nginx/no-proxy-routes" in rules(found)


def test_stream_block_proxy_pass_is_not_an_http_route(tmp_path: Path) -> None:
    path = tmp_path / "nginx.conf"
    path.write_text(
        "events {}\nstream { server { listen 9000; proxy_pass 127.0.0.1:8000; } }\nhttp { }\n"
    )
    assert load(path).routes() == []
