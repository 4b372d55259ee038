"""The HTTP/1.1 server: framing, limits, timeouts, pipelining and cancellation on disconnect."""

from __future__ import annotations

import asyncio
import socket
import time

from gateway_testkit import http_server, read_response

from ttft.gateway.http.server import Request, Response


async def echo(request: Request, response: Response) -> None:
    body = f"{request.method} {request.path}?{request.query} {len(request.body)}".encode()
    response.send(200, [("Content-Type", "text/plain")], body)


async def stream(request: Request, response: Response) -> None:
    response.start(200, [("Content-Type", "text/event-stream")])
    for i in range(3):
        response.write(f"data: {i}\n\n".encode())
        await asyncio.sleep(0.01)
    response.end()


def exchange(port: int, raw: bytes, *, timeout_s: float = 5.0) -> bytes:
    """Send ``raw``; read until the server closes (requests end with Connection: close)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(raw)
        return read_response(sock, timeout_s)


def test_keep_alive_carries_pipelined_requests_in_order() -> None:
    with http_server(echo) as (_, port, _):
        raw = (
            b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"
            b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
            b"GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
        out = exchange(port, raw)
    assert out.count(b"HTTP/1.1 200 OK") == 3
    assert out.index(b"GET /a?x=1 0") < out.index(b"POST /b? 5") < out.index(b"GET /c? 0")
    assert out.endswith(b"GET /c? 0")


def test_streams_are_chunked_for_http11_and_close_delimited_for_http10() -> None:
    with http_server(stream) as (_, port, _):
        out11 = exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        out10 = exchange(port, b"GET / HTTP/1.0\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in out11 and out11.endswith(b"0\r\n\r\n")
    assert b"9\r\ndata: 0\n\n\r\n" in out11
    assert b"Transfer-Encoding" not in out10 and b"Connection: close" in out10
    assert out10.endswith(b"data: 0\n\ndata: 1\n\ndata: 2\n\n")


def test_an_http10_client_that_asks_for_keep_alive_is_told_it_stays_open() -> None:
    """HTTP/1.0 closes by default: without ``Connection: keep-alive`` in the answer, a client
    that asked for it (``ab -k``) reads on until the server closes, an idle timeout later."""
    with http_server(echo) as (_, port, _), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(5)
        sock.sendall(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ") and b"Connection: keep-alive" in first
        sock.sendall(b"GET /b HTTP/1.0\r\n\r\n")  # no keep-alive asked: closed after it
        second = read_response(sock, 5)
    assert b"GET /b" in second and b"Connection: close" in second


def test_oversize_heads_and_bodies_are_refused_before_reading_them() -> None:
    with http_server(echo, max_header_bytes=1024, max_body_bytes=100) as (_, port, _):
        big_head = exchange(port, b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n")
        big_body = exchange(port, b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n")
        still = exchange(port, b"GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert big_head.startswith(b"HTTP/1.1 431 ") and b"header_too_large" in big_head
    assert big_body.startswith(b"HTTP/1.1 413 ") and b'"code": "body_too_large"' in big_body
    assert still.startswith(b"HTTP/1.1 200 ")


def test_malformed_requests_get_400_and_chunked_uploads_411() -> None:
    cases = {
        b"NONSENSE\r\n\r\n": b"400",
        b"GET / HTTP/2.0\r\n\r\n": b"400",
        b"GET http://evil/ HTTP/1.1\r\n\r\n": b"400",
        b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n": b"400",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab": b"400",
        b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n": b"400",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n": b"411",
    }
    with http_server(echo) as (_, port, server):
        for raw, status in cases.items():
            out = exchange(port, raw)
            assert out.startswith(b"HTTP/1.1 " + status), (raw, out[:80])
            assert b'"error"' in out
        time.sleep(0.05)
        assert not server.connections  # every refused connection was closed


def test_expect_100_continue_is_answered_before_the_body() -> None:
    with http_server(echo) as (_, port, _), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /u HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"abc")
        assert b"POST /u? 3" in sock.recv(1000)


def test_a_request_that_never_completes_times_out_and_idle_connections_close() -> None:
    with http_server(echo, read_timeout_s=0.2, idle_timeout_s=0.2) as (_, port, server):
        partial = exchange(port, b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
        with socket.create_connection(("127.0.0.1", port)) as idle:
            started = time.monotonic()
            assert read_response(idle) == b""  # closed by the server, nothing sent
            assert time.monotonic() - started < 2
        time.sleep(0.05)
        assert not server.connections
    assert partial.startswith(b"HTTP/1.1 408 ")


def test_a_client_that_disconnects_cancels_its_handler() -> None:
    seen: list[str] = []

    async def slow(request: Request, response: Response) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    with http_server(slow) as (_, port, server):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
            time.sleep(0.1)
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == ["cancelled"]
        assert not server.connections


def test_connections_over_the_limit_get_503_and_are_closed() -> None:
    with (
        http_server(echo, max_connections=1) as (_, port, server),
        socket.create_connection(("127.0.0.1", port)),
    ):
        time.sleep(0.05)
        out = exchange(port, b"GET / HTTP/1.1\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 503 ") and b"too_many_connections" in out
        assert server.refused_connections == 1


def test_a_handler_error_is_a_500_json_body_and_the_server_keeps_serving() -> None:
    async def broken(request: Request, response: Response) -> None:
        if request.path == "/boom":
            raise RuntimeError("bug")
        await echo(request, response)

    with http_server(broken) as (_, port, _):
        out = exchange(port, b"GET /boom HTTP/1.1\r\nConnection: close\r\n\r\n")
        ok = exchange(port, b"GET /fine HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 500 ") and b"internal_error" in out
    assert ok.startswith(b"HTTP/1.1 200 ")
