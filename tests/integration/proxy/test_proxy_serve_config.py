"""``serve_config`` runs the user's own nginx configuration in front of an engine ttft started.

The "engine" is ttft's scripted SSE server (a measuring instrument with exact delays); the
configurations are the ones users keep: a full nginx.conf with includes, and a certbot-managed
site file (a port-80 redirect server, TLS on 443, an include that is absent here).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ttft.core.errors import TtftError
from ttft.proxy.nginx import RunningProxy, nginx_binary, serve_config
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script

pytestmark = [pytest.mark.integration, pytest.mark.nginx]

N_TOKENS, GAP_MS = 5, 80
CONFIG_ADDRESS = "127.0.0.1:8081"  # where the user's configuration expects its engine

FULL = """\
user www-data;
worker_processes 1;
pid /run/nginx.pid;
events { worker_connections 64; }
http {
    access_log /var/log/nginx/access.log;
    error_log /var/log/nginx/error.log;
    upstream engine { server 127.0.0.1:8081; keepalive 4; }
    include conf.d/*.conf;
    server {
        listen 80 default_server;
        location /v1/ {
            include snippets/llm.conf;
            proxy_pass http://engine;
        }
    }
}
"""
CONF_D = {
    "conf.d/a-map.conf": 'map $http_upgrade $connection_upgrade { default ""; }\n',
    "conf.d/b-status.conf": "server { listen 8080; location / { return 204; } }\n",
    "snippets/llm.conf": 'proxy_http_version 1.1;\nproxy_set_header Connection "";\n',
}

CERTBOT_SITE = """\
server {
    if ($host = llm.example.com) {
        return 301 https://$host$request_uri;
    } # managed by Certbot
    listen 80;
    listen [::]:80;
    server_name llm.example.com;
    return 404; # managed by Certbot
}

server {
    server_name llm.example.com;
    location /v1/ {
        proxy_pass http://localhost:8081/v1/;
        proxy_http_version 1.1;
        add_header X-Test original;
    }

    listen [::]:443 ssl ipv6only=on; # managed by Certbot
    listen 443 ssl; # managed by Certbot
    ssl_certificate /etc/letsencrypt/live/llm.example.com/fullchain.pem; # managed by Certbot
    ssl_certificate_key /etc/letsencrypt/live/llm.example.com/privkey.pem; # managed by Certbot
    include /etc/letsencrypt/options-ssl-nginx.conf; # managed by Certbot
}
"""


@pytest.fixture(scope="module")
def nginx() -> str:
    """The nginx binary; its absence fails loudly (these tests must run, not skip)."""
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed: apt-get install -y nginx-light"
    return binary


@pytest.fixture
def engine() -> Iterator[ScriptedServer]:
    script = Script(first_token_delay_ms=50, token_interval_ms=GAP_MS, n_tokens=N_TOKENS)
    with ScriptedServer(script).in_thread() as server:
        yield server


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def stream(proxy: RunningProxy) -> tuple[httpx.Headers, list[float], bytes]:
    """POST a streamed chat request through the proxy: headers, arrival times, the body."""
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    arrivals: list[float] = []
    data = b""
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", f"{proxy.url}/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status_code == 200
        start = time.monotonic()
        for chunk in resp.iter_raw():
            arrivals.append(time.monotonic() - start)
            data += chunk
        return resp.headers, arrivals, data


def reached(engine: ScriptedServer, data: bytes) -> None:
    assert data.count(b'"content":" t') == N_TOKENS and b"data: [DONE]" in data
    assert len(engine.snapshot().logs) == 1


def test_a_full_nginx_conf_with_includes_proxies_to_the_engine(
    nginx: str, engine: ScriptedServer, tmp_path: Path
) -> None:
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    upstreams = {CONFIG_ADDRESS: f"127.0.0.1:{engine.port}"}
    with serve_config(tmp_path / "nginx.conf", upstreams=upstreams, nginx=nginx) as proxy:
        _, _, data = stream(proxy)
        reached(engine, data)
        # Every included file was copied (the glob's two, the relative snippet).
        assert set(proxy.config_files) == {str(tmp_path / rel) for rel in ("nginx.conf", *CONF_D)}
        copy = proxy.config_files[str(tmp_path / "nginx.conf")].read_text()
        assert len(copy.splitlines()) == len(FULL.splitlines())
        assert f"server 127.0.0.1:{engine.port};" in copy
        # conf.d/b-status.conf's server comes first but does not proxy: it is not the URL.
        assert proxy.url.rsplit(":", 1)[1] in copy.splitlines()[10]


def test_a_certbot_site_file_runs_on_plain_http(
    nginx: str, engine: ScriptedServer, tmp_path: Path
) -> None:
    site = tmp_path / "sites-enabled" / "llm"
    write(tmp_path, {"sites-enabled/llm": CERTBOT_SITE})
    upstreams = {CONFIG_ADDRESS: f"127.0.0.1:{engine.port}"}
    with serve_config(site, upstreams=upstreams, nginx=nginx) as proxy:
        headers, _, data = stream(proxy)
        reached(engine, data)
        assert headers["x-test"] == "original"
    notes = "\n".join(proxy.notes)
    assert "include /etc/letsencrypt/options-ssl-nginx.conf dropped" in notes
    assert f"{site}:23:" in notes  # the include's own line
    assert "ssl_certificate, ssl_certificate_key dropped (lines 21, 22)" in notes
    assert "listen ssl dropped" in notes


def test_patched_texts_are_what_runs(nginx: str, engine: ScriptedServer, tmp_path: Path) -> None:
    """A plan step's edit (buffering off, a header to see it by) replaces the file on disk."""
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    snippet = str(tmp_path / "snippets/llm.conf")
    patched = CONF_D["snippets/llm.conf"] + "proxy_buffering off; add_header X-Test patched;\n"
    upstreams = {CONFIG_ADDRESS: f"127.0.0.1:{engine.port}"}
    with serve_config(
        tmp_path / "nginx.conf", texts={snippet: patched}, upstreams=upstreams, nginx=nginx
    ) as proxy:
        headers, arrivals, data = stream(proxy)
    reached(engine, data)
    assert headers["x-test"] == "patched"
    assert (tmp_path / "snippets/llm.conf").read_text() == CONF_D["snippets/llm.conf"]
    # Unbuffered, the tokens leave nginx as they come: ~4 gaps of 80 ms between the reads.
    assert len(arrivals) >= 3 and arrivals[-1] - arrivals[0] > 0.2, arrivals


def test_a_patched_main_file_keyed_by_the_path_as_passed(
    nginx: str, engine: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {"site.conf": CERTBOT_SITE})
    patched = CERTBOT_SITE.replace("X-Test original", "X-Test patched")
    upstreams = {"localhost:8081": f"127.0.0.1:{engine.port}"}
    with serve_config(
        Path("site.conf"), texts={"site.conf": patched}, upstreams=upstreams, nginx=nginx
    ) as proxy:
        headers, _, data = stream(proxy)
    reached(engine, data)
    assert headers["x-test"] == "patched"


def test_a_wrong_engine_address_names_it_and_what_the_config_uses(
    nginx: str, tmp_path: Path
) -> None:
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    with (
        pytest.raises(TtftError, match=r"does not proxy to 127\.0\.0\.1:9999.*127\.0\.0\.1:8081"),
        serve_config(
            tmp_path / "nginx.conf", upstreams={"127.0.0.1:9999": "127.0.0.1:1"}, nginx=nginx
        ),
    ):
        pass


def test_a_patch_for_a_file_the_config_does_not_include_is_an_error(
    nginx: str, tmp_path: Path
) -> None:
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    stray = str(tmp_path / "snippets/other.conf")
    with (
        pytest.raises(TtftError, match=f"does not include {stray}"),
        serve_config(tmp_path / "nginx.conf", texts={stray: "gzip on;\n"}, nginx=nginx),
    ):
        pass


def test_a_patch_may_name_the_file_a_site_link_points_at(
    nginx: str, engine: ScriptedServer, tmp_path: Path
) -> None:
    write(tmp_path, {"nginx.conf": FULL.replace("conf.d/*.conf", "sites-enabled/*"), **CONF_D})
    write(tmp_path, {"sites-available/llm": CONF_D["conf.d/b-status.conf"]})
    (tmp_path / "sites-enabled").mkdir()
    (tmp_path / "sites-enabled/llm").symlink_to(tmp_path / "sites-available/llm")
    patched = "server { listen 8080; location / { return 204; } }\n# patched\n"
    texts = {str(tmp_path / "sites-available/llm"): patched}
    upstreams = {CONFIG_ADDRESS: f"127.0.0.1:{engine.port}"}
    with serve_config(
        tmp_path / "nginx.conf", texts=texts, upstreams=upstreams, nginx=nginx
    ) as proxy:
        copy = proxy.config_files[str(tmp_path / "sites-enabled/llm")]
        assert copy.read_text().endswith("# patched\n")


def test_nginx_rejects_a_patch_at_the_users_file_and_line(nginx: str, tmp_path: Path) -> None:
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    snippet = str(tmp_path / "snippets/llm.conf")
    patched = CONF_D["snippets/llm.conf"] + "proxy_bufering off;\n"
    with (
        pytest.raises(TtftError, match="nginx rejected") as caught,
        serve_config(tmp_path / "nginx.conf", texts={snippet: patched}, nginx=nginx),
    ):
        pass
    assert f'unknown directive "proxy_bufering" in {snippet}:3' in str(caught.value)


def _master_pid(pid_file: Path) -> int:
    """nginx creates its pid file, then writes it: on a busy machine a read can fall between."""
    deadline = time.monotonic() + 10
    while True:
        text = pid_file.read_text().strip()
        if text or time.monotonic() > deadline:
            return int(text)
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["normal", "exception", "ctrl-c"])
def test_no_nginx_process_remains_after_the_block(
    nginx: str, engine: ScriptedServer, tmp_path: Path, how: str
) -> None:
    write(tmp_path, {"nginx.conf": FULL, **CONF_D})
    upstreams = {CONFIG_ADDRESS: f"127.0.0.1:{engine.port}"}
    raised = {"normal": None, "exception": RuntimeError, "ctrl-c": KeyboardInterrupt}[how]
    master = 0
    try:
        with serve_config(tmp_path / "nginx.conf", upstreams=upstreams, nginx=nginx) as proxy:
            master = _master_pid(proxy.prefix / "nginx.pid")
            os.killpg(master, 0)  # master and workers run, in a process group of their own
            if raised is not None:
                raise raised()
    except (RuntimeError, KeyboardInterrupt) as exc:
        assert raised is not None and isinstance(exc, raised)
    assert master
    with pytest.raises(ProcessLookupError):
        os.killpg(master, 0)
    assert not proxy.prefix.exists()
