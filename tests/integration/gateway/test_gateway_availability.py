"""Budgets one client cannot fill: bodies counted as they arrive, shared per client, timed
between reads (issue 28). Every test here failed on the server before that round."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from gateway_testkit import http_server, read_response

from ttft.gateway.http.server import Request, Response

_BIG = 4 * 1024 * 1024


async def echo(request: Request, response: Response) -> None:
    body = f"{request.method} {request.path} {len(request.body)}".encode()
    response.send(200, [("Content-Type", "text/plain")], body)


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def post(port: int, body: bytes, source: str = "127.0.0.1") -> bytes:
    head = (
        f"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with connect(port, source) as sock:
        sock.sendall(head.encode() + body)
        return read_response(sock)


def test_declared_lengths_reserve_nothing_so_sixteen_sockets_stop_no_post() -> None:
    """Each declares 4 MiB and sends one byte (or waits for 100 Continue): together they held
    the whole 64 MiB budget from their Content-Length, and every other POST got 503."""
    with http_server(echo, max_body_bytes=_BIG) as (_, port, server):
        holders = [connect(port) for _ in range(16)]
        try:
            for i, sock in enumerate(holders):
                expect = "Expect: 100-continue\r\n" if i % 2 else ""
                head = f"POST /h HTTP/1.1\r\nHost: h\r\nContent-Length: {_BIG}\r\n{expect}\r\n"
                sock.sendall(head.encode() + (b"" if i % 2 else b"{"))
            time.sleep(0.2)
            out = post(port, b'{"a": 1}', source="127.0.0.2")
            assert out.startswith(b"HTTP/1.1 200 "), out[:120]
            assert server.bodies_in_flight <= 16  # the bytes that arrived, not 64 MiB
        finally:
            for sock in holders:
                sock.close()


def test_a_body_that_stops_arriving_is_a_408_after_the_body_timeout() -> None:
    with http_server(echo, body_timeout_s=0.4, read_timeout_s=60) as (_, port, _):
        started = time.monotonic()
        with connect(port) as sock:
            sock.sendall(b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n0123456789")
            out = read_response(sock, timeout_s=10)
        waited = time.monotonic() - started
    assert out.startswith(b"HTTP/1.1 408 "), out[:120]
    assert waited < 30  # the body timeout, far below the request's read timeout of 60 s


def test_an_expect_100_continue_that_sends_nothing_is_timed_out() -> None:
    head = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    with (
        http_server(echo, body_timeout_s=0.4, read_timeout_s=60) as (_, port, _),
        connect(port) as sock,
    ):
        sock.sendall(head)
        out = read_response(sock, timeout_s=10)
    assert out.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 408 "), out[:120]


def test_a_trickling_body_is_still_read_while_it_keeps_coming() -> None:
    head = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
    with (
        http_server(echo, body_timeout_s=0.5, read_timeout_s=60) as (_, port, _),
        connect(port) as sock,
    ):
        sock.sendall(head)
        for byte in b"abcd":
            time.sleep(0.2)
            sock.sendall(bytes([byte]))
        out = read_response(sock)
    assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"POST /p 4"), out[:120]


def test_one_client_holds_only_its_share_of_the_body_budget() -> None:
    """A client (here an address) may hold a quarter of the budget; the others still post."""
    limits = {"max_body_bytes": 1000, "max_bodies_in_flight_bytes": 4000}
    with http_server(echo, **limits) as (_, port, _):
        first = connect(port)
        try:
            first.sendall(
                b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n" + b"x" * 900
            )
            time.sleep(0.2)
            # The same address again: 900 held + 200 more is over its share of 1000.
            refused = post(port, b"y" * 1000)
            assert refused.startswith(b"HTTP/1.1 503 "), refused[:120]
            assert b"Retry-After" in refused
            # Another address gets the rest of the budget.
            other = post(port, b"z" * 1000, source="127.0.0.2")
            assert other.startswith(b"HTTP/1.1 200 "), other[:120]
            first.sendall(b"x" * 100)
            first.settimeout(5)
            assert b"200 OK" in first.recv(1000)
        finally:
            first.close()


def _open_fds() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


def test_connections_refused_over_the_cap_give_their_descriptors_back_at_once() -> None:
    """Each lingered for 2 s waiting for a client that never closes: 2,000 idle connections
    from one address ran a 1,024 file limit out before the per-client cap helped anyone.
    Now at most ``max_lingering`` (32) wait; the rest are answered and closed at once."""
    with http_server(echo, max_connections_per_client=4) as (_, port, server):
        kept = [connect(port) for _ in range(4)]
        refused: list[socket.socket] = []
        try:
            time.sleep(0.2)
            before = _open_fds()
            refused = [connect(port) for _ in range(100)]
            answers = [read_response(sock, timeout_s=5) for sock in refused]
            assert all(a.startswith(b"HTTP/1.1 429 ") for a in answers), answers[0][:80]
            # The 40 client sockets are still open here; the server's side of them is not.
            assert _open_fds() - len(refused) <= before + server.max_lingering + 4
            assert server.refused_connections == 100
        finally:
            for sock in kept + refused:
                sock.close()


def test_a_handler_error_logs_one_traceback_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    """A client that found a bug wrote a full traceback per request; now one per 10 s, with
    the count of the rest, and every request still gets its 500."""

    async def broken(request: Request, response: Response) -> None:
        raise RuntimeError("bug")

    with caplog.at_level(logging.ERROR, "ttft.gateway"), http_server(broken) as (_, port, _):
        answers = [post(port, b"{}") for _ in range(20)]
    assert all(a.startswith(b"HTTP/1.1 500 ") for a in answers)
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1, [r.getMessage() for r in caplog.records]


def test_a_body_that_cannot_fit_gets_no_100_continue_but_a_503() -> None:
    limits = {"max_body_bytes": 1000, "max_bodies_in_flight_bytes": 4000}
    with http_server(echo, **limits) as (_, port, _):
        first = connect(port)
        try:
            first.sendall(
                b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n" + b"x" * 900
            )
            time.sleep(0.2)
            with connect(port) as sock:
                sock.sendall(
                    b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 500\r\n"
                    b"Expect: 100-continue\r\n\r\n"
                )
                out = read_response(sock)
        finally:
            first.close()
    assert out.startswith(b"HTTP/1.1 503 "), out[:120]  # not "100 Continue", then a 503
