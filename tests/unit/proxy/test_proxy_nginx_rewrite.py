"""The pure rewriting behind ``serve_config``: each edit keeps the user's line numbers."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from ttft.proxy.nginx_rewrite import (
    Include,
    ServerBlock,
    is_site_file,
    normalize_address,
    parse,
    rewrite_file,
)

CERTBOT_SITE = """\
upstream llm {
    server localhost:8081 max_fails=3;
    keepalive 8;
}
server {
    if ($host = example.com) {
        return 301 https://$host$request_uri;
    } # managed by Certbot
    listen 80 default_server;
    listen [::]:80 default_server;
    server_name example.com;
    return 404; # managed by Certbot
}
server {
    server_name example.com;
    listen 443 ssl http2 backlog=4096; # managed by Certbot
    listen [::]:443 ssl ipv6only=on; # managed by Certbot
    ssl_certificate /etc/letsencrypt/live/example.com/fullchain.pem; # managed by Certbot
    ssl_certificate_key /etc/letsencrypt/live/example.com/privkey.pem; # managed by Certbot
    include /etc/letsencrypt/options-ssl-nginx.conf; # managed by Certbot
    location /v1/ {
        proxy_pass http://llm;
    }
}
"""


def ports(start: int = 40001) -> Callable[[], int]:
    counter = itertools.count(start)
    return lambda: next(counter)


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_each_server_gets_one_loopback_port_and_lines_stay_put() -> None:
    out = rewrite_file(CERTBOT_SITE, source="site", context=("http",), ports=ports())
    new = lines(out.text)
    assert len(out.text.splitlines()) == len(CERTBOT_SITE.splitlines())
    assert new[8] == "listen 127.0.0.1:40001;"  # default_server dropped, silently
    assert new[9] == ""  # the second listen of the same server is gone
    # ssl and http2 dropped, backlog kept: it still shapes how connections queue.
    assert new[15] == "listen 127.0.0.1:40002 backlog=4096; # managed by Certbot"
    assert new[16] == "# managed by Certbot"
    servers = [item for item in out.order if isinstance(item, ServerBlock)]
    assert [(s.port, s.line, s.proxies, s.http) for s in servers] == [
        (40001, 5, False, True),
        (40002, 14, True, True),
    ]
    assert any("site:16: listen http2, ssl dropped" in note for note in out.notes)


def test_tls_key_material_is_dropped_with_a_note_naming_the_lines() -> None:
    out = rewrite_file(CERTBOT_SITE, source="site", context=("http",), ports=ports())
    assert "ssl_certificate" not in out.text
    assert "site: ssl_certificate, ssl_certificate_key dropped (lines 18, 19)" in out.notes[-1]


def test_a_server_without_listen_gets_one_on_its_own_line() -> None:
    text = "server {\n    location / { proxy_pass http://127.0.0.1:9000; }\n}\n"
    out = rewrite_file(text, source="s", context=("http",), ports=ports(5000))
    assert out.text.splitlines()[0] == "server { listen 127.0.0.1:5000;"


def test_upstream_server_lines_and_proxy_pass_point_at_the_engine() -> None:
    text = (
        "upstream a { server localhost:8081 weight=2; server 10.0.0.9:8081 backup; }\n"
        "server { location /v1/ { proxy_pass http://127.0.0.1:8081/v1/; }\n"
        "         location /b/ { proxy_pass https://localhost:8081; }\n"
        "         location /c/ { proxy_pass http://a; } }\n"
    )
    out = rewrite_file(
        text,
        source="s",
        context=("http",),
        ports=ports(),
        upstreams={"127.0.0.1:8081": "127.0.0.1:40123"},
    )
    new = out.text.splitlines()
    assert "server 127.0.0.1:40123 weight=2;" in new[0]
    assert "server 10.0.0.9:8081 backup;" in new[0]  # another host: not ttft's engine
    assert "proxy_pass http://127.0.0.1:40123/v1/;" in new[1]
    assert "proxy_pass http://127.0.0.1:40123;" in new[2]  # the engine speaks plain HTTP
    assert "proxy_pass http://a;" in new[3]  # an upstream name: its servers were rewritten
    assert out.matched == {"127.0.0.1:8081"}
    assert set(out.proxied) == {"127.0.0.1:8081", "10.0.0.9:8081"}


def test_an_address_the_config_does_not_use_is_not_matched() -> None:
    out = rewrite_file(
        CERTBOT_SITE,
        source="s",
        context=("http",),
        ports=ports(),
        upstreams={"127.0.0.1:9999": "127.0.0.1:40123"},
    )
    assert out.matched == set()
    assert out.proxied == ["127.0.0.1:8081"]
    assert "server localhost:8081" in out.text


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("localhost:8081", "127.0.0.1:8081"),
        ("http://LOCALHOST:8081/", "127.0.0.1:8081"),
        ("127.0.0.1", "127.0.0.1:80"),
        ("[::1]:8081", "[::1]:8081"),
        ("[::1]", "[::1]:80"),
    ],
)
def test_normalize_address(given: str, normal: str) -> None:
    assert normalize_address(given) == normal


def test_includes_become_their_targets_on_the_same_line() -> None:
    text = (
        "http {\n"
        "    include /etc/nginx/conf.d/*.conf;\n"
        "    include /etc/letsencrypt/options-ssl-nginx.conf;\n"
        "    server { location / { include snippets/proxy.conf; } }\n"
        "}\n"
    )
    targets = {
        "/etc/nginx/conf.d/*.conf": ["/p/a.conf", "/p/b.conf"],
        "/etc/letsencrypt/options-ssl-nginx.conf": [],
        "snippets/proxy.conf": ["/p/proxy.conf"],
    }
    seen: list[tuple[str, tuple[str, ...]]] = []

    def target(pattern: str, context: tuple[str, ...]) -> list[str]:
        seen.append((pattern, context))
        return targets[pattern]

    out = rewrite_file(text, source="m", context=(), ports=ports(), include_target=target)
    new = out.text.splitlines()
    assert len(new) == 5
    assert new[1].strip() == 'include "/p/a.conf"; include "/p/b.conf";'
    assert new[2].strip() == ""
    assert 'include "/p/proxy.conf";' in new[3]
    assert seen[2] == ("snippets/proxy.conf", ("http", "server", "location"))
    includes = [item for item in out.order if isinstance(item, Include)]
    assert [(i.pattern, i.line) for i in includes] == list(zip(targets, (2, 3, 4), strict=True))


def test_a_listen_in_a_file_included_into_a_server_is_dropped() -> None:
    out = rewrite_file(
        "listen 443 ssl;\nserver_name x;\n", source="f", context=("http", "server"), ports=ports()
    )
    assert out.text == "\nserver_name x;\n"
    assert out.notes == ["f:1: included listen dropped"]


def test_relative_load_module_paths_point_at_nginx_prefix() -> None:
    text = "load_module modules/ngx_http_echo_module.so;\nload_module /abs/m.so;\n"
    out = rewrite_file(text, source="m", context=(), ports=ports(), nginx_prefix="/usr/share/nginx")
    assert out.text.splitlines() == [
        'load_module "/usr/share/nginx/modules/ngx_http_echo_module.so";',
        "load_module /abs/m.so;",
    ]


def test_parse_reads_quotes_comments_and_variables_in_braces() -> None:
    text = (
        'map $a $b { default "x;y{"; } # server { listen 1; }\nlocation ~ ^/${v}/ { return 204; }\n'
    )
    tree = parse(text)
    assert [d.name.value for d in tree] == ["map", "location"]
    assert tree[0].block is not None and tree[0].block[0].args[0].value == "x;y{"
    assert [a.value for a in tree[1].args] == ["~", "^/${v}/"]


def test_site_files_are_told_from_full_configs() -> None:
    assert is_site_file(CERTBOT_SITE)
    assert is_site_file("# conf.d/llm.conf\nmap $http_upgrade $c { default close; }\n")
    assert not is_site_file("events {}\nhttp { server { listen 80; } }\n")
    assert not is_site_file("worker_processes 1;\nevents {}\n")
