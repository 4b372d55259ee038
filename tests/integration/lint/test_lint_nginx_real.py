"""Against a real nginx: the fixtures are configs nginx accepts (or rejects), and what the linter
calls clean really streams while what it calls bad really holds the stream.

The upstream here is a tiny stdlib SSE server (four events 300 ms apart), a measuring instrument
with known timing; the end-to-end check with the real engine lives in tests/e2e.
"""

from __future__ import annotations

import http.server
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from nginx_testkit import BROKEN, FIXTURES, NGINX_DATA, lint_file

from ttft.core.findings import Severity
from ttft.testing.nginx import nginx_binary, nginx_test, prepare_prefix, rootless, run_nginx

pytestmark = pytest.mark.nginx

EVENTS, GAP_S = 4, 0.3


@pytest.fixture(scope="module")
def nginx() -> str:
    """The nginx binary; its absence fails loudly (these tests must run, not skip)."""
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed: apt-get install -y nginx-light"
    return binary


def _fixture_files(name: str) -> tuple[str, dict[str, str]]:
    root = NGINX_DATA / name
    files = {
        p.relative_to(root).as_posix(): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and p.name != "nginx.conf"
    }
    return (root / "nginx.conf").read_text(), files


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_configs_pass_nginx_t(nginx: str, name: str, tmp_path: Path) -> None:
    """Every config the tests call bad or clean is one real nginx accepts."""
    main_text, files = _fixture_files(name)
    main = prepare_prefix(tmp_path, main_text, files)
    check = nginx_test(main, tmp_path, nginx=nginx)
    assert check.ok, check.output


@pytest.mark.parametrize("name", BROKEN)
def test_broken_configs_fail_nginx_t_at_the_line_ttft_reports(
    nginx: str, name: str, tmp_path: Path
) -> None:
    """The malformed fixtures are malformed for nginx too, at the same line ttft names."""
    main_text, files = _fixture_files(name)
    main = prepare_prefix(tmp_path, main_text, files)
    check = nginx_test(main, tmp_path, nginx=nginx)
    assert not check.ok
    read_errors = ("nginx/config-error", "nginx/include-missing")
    ours = [f for f in lint_file(NGINX_DATA / name / "nginx.conf") if f.rule in read_errors]
    assert ours and ours[0].location.line is not None
    # nginx reports an unexpected end of file one line after the last one; includes exactly.
    assert any(f"nginx.conf:{ours[0].location.line + d}" in check.output for d in (0, 1))


def test_rootless_keeps_line_numbers(tmp_path: Path) -> None:
    """Rewriting paths for an unprivileged run never shifts lines, so nginx's errors line up."""
    main_text, _ = _fixture_files("bad")
    rewritten = rootless(main_text, tmp_path)
    assert len(rewritten.splitlines()) == len(main_text.splitlines())
    assert "/run/nginx.pid" not in rewritten and "/var/log/nginx" not in rewritten
    assert "user www-data" not in rewritten and "proxy_temp_path" in rewritten


# --- a tiny upstream ------------------------------------------------------------------------


class _Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    x_accel = False

    def do_GET(self) -> None:
        body = b"hello from upstream\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        if self.x_accel:
            self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        try:
            for i in range(EVENTS):
                data = f'data: {{"choices":[{{"delta":{{"content":"t{i}"}}}}]}}\n\n'.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                time.sleep(GAP_S)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def vllm_like() -> Iterator[str]:
    """An SSE upstream that, like vLLM and SGLang, sends no X-Accel-Buffering header."""
    yield from _serve(_Upstream)


@pytest.fixture()
def llama_like() -> Iterator[str]:
    """An SSE upstream that, like llama-server, sends X-Accel-Buffering: no."""

    class Handler(_Upstream):
        x_accel = True

    yield from _serve(Handler)


def _first_event_s(base_url: str, path: str = "/v1/chat/completions") -> float:
    """Seconds until the first body bytes arrive, as a browser or the OpenAI SDK would ask."""
    started = time.perf_counter()
    headers = {"Accept-Encoding": "gzip", "Content-Type": "application/json"}
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", base_url + path, content=b"{}", headers=headers) as resp,
    ):
        assert resp.status_code == 200
        for chunk in resp.iter_raw():
            if chunk:
                return time.perf_counter() - started
    raise AssertionError("no body")


def _as_template(name: str) -> tuple[str, dict[str, str]]:
    """A fixture with its listen port and upstream address turned into run_nginx placeholders."""
    main_text, files = _fixture_files(name)

    def swap(text: str) -> str:
        return text.replace("listen 80;", "listen {listen};").replace(
            "127.0.0.1:8000", "{upstream}"
        )

    return swap(main_text), {rel: swap(text) for rel, text in files.items()}


def test_run_nginx_proxies_and_always_stops(nginx: str, vllm_like: str) -> None:
    template = "server { listen {listen}; location / { proxy_pass {upstream_url}; } }"
    with run_nginx(template, vllm_like, nginx=nginx) as proxy:
        assert httpx.get(proxy + "/x", timeout=5).text == "hello from upstream\n"
        port = int(proxy.rsplit(":", 1)[1])
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_run_nginx_stops_when_the_body_raises(nginx: str, vllm_like: str) -> None:
    template = "server { listen {listen}; location / { proxy_pass {upstream_url}; } }"
    port = 0
    with pytest.raises(RuntimeError), run_nginx(template, vllm_like, nginx=nginx) as proxy:
        port = int(proxy.rsplit(":", 1)[1])
        raise RuntimeError("boom")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_run_nginx_reports_a_rejected_config(nginx: str, vllm_like: str) -> None:
    from ttft.core.errors import TtftError

    with (
        pytest.raises(TtftError, match="rejected"),
        run_nginx("server { listen {listen}; bogus_directive on; }", vllm_like, nginx=nginx),
    ):
        pass


def test_clean_config_streams_and_bad_config_holds_the_stream(nginx: str, vllm_like: str) -> None:
    """What lint calls clean delivers the first event at once; what it calls bad, at the end."""
    assert not [f for f in lint_file(NGINX_DATA / "clean" / "nginx.conf")]
    bad = lint_file(NGINX_DATA / "bad" / "nginx.conf", upstream_engine="vllm")
    assert any(f.rule == "nginx/gzip-event-stream" and f.severity is Severity.ERROR for f in bad)

    main, files = _as_template("clean")
    with run_nginx(main, vllm_like, files=files, nginx=nginx) as proxy:
        clean_s = _first_event_s(proxy)
    main, files = _as_template("bad")
    with run_nginx(main, vllm_like, files=files, nginx=nginx) as proxy:
        bad_s = _first_event_s(proxy)
    total = EVENTS * GAP_S
    assert clean_s < total / 3, clean_s
    assert bad_s > total * 0.75, bad_s


def test_ignored_x_accel_header_cannot_rescue_a_llama_like_upstream(
    nginx: str, llama_like: str
) -> None:
    """bad/ ignores X-Accel-Buffering, so even an upstream that sends it is held (as linted)."""
    main, files = _as_template("bad")
    with run_nginx(main, llama_like, files=files, nginx=nginx) as proxy:
        held_s = _first_event_s(proxy)
    assert held_s > EVENTS * GAP_S * 0.75, held_s


def test_x_accel_header_rescues_gzip_when_not_ignored(nginx: str, llama_like: str) -> None:
    """Default buffering + gzip on the stream: an upstream's X-Accel-Buffering: no still streams,
    which is why lint rates this combination by the upstream engine."""
    template = (
        "server { listen {listen}; gzip on; gzip_types text/event-stream;"
        " location / { proxy_pass {upstream_url}; } }"
    )
    with run_nginx(template, llama_like, nginx=nginx) as proxy:
        first_s = _first_event_s(proxy)
    assert first_s < EVENTS * GAP_S / 3, first_s


def test_helper_leaves_no_prefix_behind(nginx: str, vllm_like: str) -> None:
    before = set(Path(tempfile.gettempdir()).glob("ttft-nginx-*"))
    with run_nginx("server { listen {listen}; location / { return 204; } }", vllm_like):
        pass
    assert set(Path(tempfile.gettempdir()).glob("ttft-nginx-*")) == before
