"""What ``ttft lint nginx`` calls clean streams through a real nginx in front of the real engine;
what it calls an error holds the stream until the answer is complete.

The upstream is the embedded llama-server, which answers streams with ``X-Accel-Buffering: no``;
the bad fixture ignores that header and gzips text/event-stream, the classic fault.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from ttft.core.findings import Severity
from ttft.engines.llamacpp.embedded import RunningEngine
from ttft.lint.nginx.config import load
from ttft.lint.nginx.rules import NginxLintOptions, lint_config
from ttft.testing.nginx import render, run_nginx

pytestmark = [pytest.mark.e2e, pytest.mark.nginx]

NGINX_DATA = Path(__file__).resolve().parents[1] / "data" / "nginx"


def _template(name: str) -> tuple[str, dict[str, str]]:
    """A fixture with its port and upstream address as run_nginx placeholders."""
    root = NGINX_DATA / name

    def swap(text: str) -> str:
        return text.replace("listen 80;", "listen {listen};").replace(
            "127.0.0.1:8000", "{upstream}"
        )

    files = {
        p.relative_to(root).as_posix(): swap(p.read_text())
        for p in root.rglob("*")
        if p.is_file() and p.name != "nginx.conf"
    }
    return swap((root / "nginx.conf").read_text()), files


def _stream(base_url: str) -> tuple[float, float, str]:
    """(first body bytes, end of stream) in seconds from sending, and the content received.

    Sent the way browsers and the OpenAI SDK send it: with ``Accept-Encoding: gzip``.
    """
    body = {
        "messages": [{"role": "user", "content": "Write the numbers from one to forty in words."}],
        "max_tokens": 48,
        "temperature": 0,
        "stream": True,
    }
    started = time.perf_counter()
    first: float | None = None
    with (
        httpx.Client(timeout=120, headers={"Accept-Encoding": "gzip"}) as client,
        client.stream("POST", base_url + "/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status_code == 200
        raw = b""
        for chunk in resp.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - started
            raw += chunk
        end = time.perf_counter() - started
        encoding = resp.headers.get("content-encoding", "")
    text = raw.decode() if not encoding else _gunzip(raw)
    content = "".join(
        (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("content") or ""
        for line in text.splitlines()
        if line.startswith("data: {")
    )
    assert first is not None
    return first, end, content


def _gunzip(raw: bytes) -> str:
    import gzip

    return gzip.decompress(raw).decode()


def test_clean_config_streams_the_engines_tokens(embedded_server: RunningEngine) -> None:
    assert lint_config(load(NGINX_DATA / "clean" / "nginx.conf")) == []
    main, files = _template("clean")
    with run_nginx(main, embedded_server.base_url, files=files) as proxy:
        _stream(proxy)  # warm the prompt cache, so both runs below do the same work
        first, end, content = _stream(proxy)
    assert content
    assert first < end / 2, (first, end)


def test_bad_config_holds_the_engines_stream_until_the_end(embedded_server: RunningEngine) -> None:
    found = lint_config(
        load(NGINX_DATA / "bad" / "nginx.conf"), NginxLintOptions(upstream_engine="llamacpp")
    )
    assert any(f.rule == "nginx/gzip-event-stream" and f.severity is Severity.ERROR for f in found)
    main, files = _template("bad")
    # The bad config also caches POSTs; a fresh nginx starts with an empty cache: a miss.
    with run_nginx(main, embedded_server.base_url, files=files) as proxy:
        first, end, content = _stream(proxy)
    assert content
    assert first > end * 0.8, (first, end)


def test_engine_header_rescues_gzip_when_not_ignored(
    embedded_server: RunningEngine, tmp_path: Path
) -> None:
    """Default buffering + gzip on the stream with llama-server's header honoured: lint rates it
    info (compressed per event), and the stream indeed flows."""
    template = (
        "server { listen {listen}; gzip on; gzip_types text/event-stream;\n"
        "  location / { proxy_pass {upstream_url}; proxy_read_timeout 600s; } }"
    )
    conf = tmp_path / "nginx.conf"
    values = {"listen": "127.0.0.1:8081", "upstream_url": embedded_server.base_url}
    conf.write_text("events {}\nhttp {\n" + render(template, values) + "\n}\n")
    found = lint_config(load(conf), NginxLintOptions(upstream_engine="llamacpp"))
    gzip = [f for f in found if f.rule == "nginx/gzip-event-stream"]
    assert [f.severity for f in gzip] == [Severity.INFO]
    with run_nginx(template, embedded_server.base_url) as proxy:
        first, end, _ = _stream(proxy)
    assert first < end / 2, (first, end)
