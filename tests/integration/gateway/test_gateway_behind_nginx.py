"""A real nginx in front of the gateway, with its defaults: the stream is still not held.

nginx buffers proxied responses by default and talks HTTP/1.0 to its upstream unless told
otherwise. The gateway answers HTTP/1.0 with a close-delimited stream and says
``X-Accel-Buffering: no``, so each event still goes out as it comes, even with gzip on for
event streams and a client that accepts gzip.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from gateway_testkit import gateway_for, scripted

from ttft.testing.nginx import nginx_binary, run_nginx

pytestmark = pytest.mark.nginx

DEFAULTS = """
server {
    listen {listen};
    gzip on;
    gzip_types text/event-stream;
    location / { proxy_pass {upstream_url}; }
}
"""


@pytest.fixture(scope="module")
def nginx() -> str:
    """The nginx binary; its absence fails loudly (these tests must run, not skip)."""
    binary = nginx_binary()
    assert binary is not None, "nginx is not installed: apt-get install -y nginx-light"
    return binary


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_events_leave_nginx_as_they_come_with_nginx_defaults(nginx: str, encoding: str) -> None:
    with (
        scripted(first_token_delay_ms=50, token_interval_ms=60, n_tokens=6) as up,
        gateway_for([up.base_url]) as gw,
        run_nginx(DEFAULTS, gw.url, nginx=nginx) as front,
    ):
        host, port = front.removeprefix("http://").split(":")
        raw = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
        reads: list[float] = []
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nAccept-Encoding: %b\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%b" % (encoding.encode(), len(raw), raw)
            )
            sock.settimeout(10)
            start = time.monotonic()
            while sock.recv(65536):
                reads.append(time.monotonic() - start)
    # ~6 x 60 ms of tokens: reads spread over the stream, not one burst at its end.
    assert len(reads) >= 4, reads
    assert reads[-1] - reads[1] > 0.2, reads
