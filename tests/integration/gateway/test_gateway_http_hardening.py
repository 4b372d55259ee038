"""The HTTP server as a hostile client meets it: strict heads, bounded memory, no stalls."""

from __future__ import annotations

import socket
import time

import pytest
from gateway_testkit import http_server, read_response

from ttft.gateway.http import server as http_server_module
from ttft.gateway.http.server import Request, Response


async def echo(request: Request, response: Response) -> None:
    body = f"{request.method} {request.path} {len(request.body)}".encode()
    response.send(200, [("Content-Type", "text/plain")], body)


def exchange(port: int, raw: bytes, *, timeout_s: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(raw)
        return read_response(sock, timeout_s)


@pytest.mark.parametrize(
    "value",
    [b"a\nInjected: 1", b"a\rInjected: 1", b"a\x00b", b"a\x7fb", b"a\x01b"],
    ids=["bare-lf", "bare-cr", "nul", "del", "ctl"],
)
def test_control_bytes_inside_header_values_are_a_400(value: bytes) -> None:
    raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-Probe: " + value + b"\r\nConnection: close\r\n\r\n"
    with http_server(echo) as (_, port, _):
        out = exchange(port, raw)
    assert out.startswith(b"HTTP/1.1 400 "), out[:80]
    assert b'"code": "bad_http"' in out


@pytest.mark.parametrize(
    "digits",
    [b"\xb2", b"1\xb9", "١٠".encode(), b"+5", b"0x10", b"5 5"],
    ids=["superscript-two", "superscript-one", "arabic-indic", "plus", "hex", "space"],
)
def test_content_length_is_ascii_digits_only_and_always_answered(digits: bytes) -> None:
    # Latin-1 0xB2 is '²', which str.isdigit() accepts and int() refuses.
    head = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: " + digits + b"\r\n\r\n"
    with http_server(echo) as (_, port, _):
        out = exchange(port, head + b"abcdefghij")
    # An answer, not a dropped connection (non-ASCII digits used to raise in int()).
    assert out.startswith(b"HTTP/1.1 400 "), out[:80]


def test_bare_lf_line_endings_are_refused_at_once() -> None:
    with http_server(echo) as (_, port, _):
        started = time.monotonic()
        out = exchange(port, b"GET / HTTP/1.1\nHost: h\n\n")
    assert out.startswith(b"HTTP/1.1 400 ")
    assert time.monotonic() - started < 2  # not a wait for a CRLF CRLF that never comes


@pytest.mark.parametrize(
    "second",
    [
        b"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nxyz",
    ],
    ids=["get", "post"],
)
@pytest.mark.parametrize("split", [None, 1, 7], ids=["one-write", "trickled", "split"])
def test_requests_pipelined_behind_a_get_are_answered_promptly(
    second: bytes, split: int | None
) -> None:
    raw = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n" + second
    with (
        http_server(echo, read_timeout_s=30) as (_, port, _),
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.monotonic()
        if split is None:
            sock.sendall(raw)
        else:
            for i in range(0, len(raw), split):
                sock.sendall(raw[i : i + split])
                time.sleep(0.0005)
        out = read_response(sock, 5)
    assert out.count(b"HTTP/1.1 200 OK") == 2, out
    assert b"GET /a 0" in out and b" /b " in out
    assert time.monotonic() - started < 3


def test_a_trickled_body_does_not_reparse_the_head_on_every_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per-read work must not grow with the head: 1 KiB and 30 KiB heads cost alike per read."""
    spent: list[int] = []
    original = http_server_module._Connection.data_received

    def timed(self: object, data: bytes) -> None:
        started = time.thread_time_ns()
        original(self, data)  # type: ignore[arg-type]
        spent.append(time.thread_time_ns() - started)

    monkeypatch.setattr(http_server_module._Connection, "data_received", timed)

    def per_read_us(head_bytes: int) -> float:
        spent.clear()
        filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"v" * 40) for i in range(head_bytes // 56))
        body_len = 1500
        head = b"POST / HTTP/1.1\r\nHost: h\r\n" + filler + b"Content-Length: %d\r\n\r\n" % body_len
        with (
            http_server(echo, max_header_bytes=64 * 1024) as (_, port, _),
            socket.create_connection(("127.0.0.1", port)) as sock,
        ):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(head)
            time.sleep(0.05)
            reads_before = len(spent)
            for _ in range(body_len):
                sock.send(b"x")
                time.sleep(0.0002)
            sock.settimeout(5)
            assert b"200 OK" in sock.recv(1000)
        body_reads = spent[reads_before:]
        return sum(body_reads) / len(body_reads) / 1000

    small, large = per_read_us(1024), per_read_us(30 * 1024)
    assert large < max(5 * small, 60.0), (small, large)


def test_pipelined_requests_are_not_parsed_while_the_client_reads_nothing() -> None:
    handled: list[str] = []
    big = b"x" * (1 << 20)

    async def large(request: Request, response: Response) -> None:
        handled.append(request.path)
        response.send(200, [("Content-Type", "text/plain")], big)

    with (
        http_server(large) as (_, port, _),
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n" * 300)
        time.sleep(1.0)
        # Each answer is 1 MiB: answering all 300 would buffer 300 MiB for a client that reads
        # nothing. Only as many as the socket buffers hold are parsed.
        assert len(handled) < 10, len(handled)


def test_the_first_request_must_arrive_quickly() -> None:
    with (
        http_server(echo, first_request_timeout_s=0.3, idle_timeout_s=30) as (_, port, server),
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        started = time.monotonic()
        assert read_response(sock, 5) == b""
        assert time.monotonic() - started < 2
        time.sleep(0.05)
        assert not server.connections


def test_one_client_cannot_take_every_connection() -> None:
    with http_server(echo, max_connections_per_client=2) as (_, port, server):
        first = socket.create_connection(("127.0.0.1", port))
        second = socket.create_connection(("127.0.0.1", port))
        try:
            # Silent connections count too: the cap holds against a client that connects and
            # says nothing.
            time.sleep(0.05)
            out = exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 429 "), out[:80]
            assert b"too_many_connections" in out
        finally:
            first.close()
            second.close()
        time.sleep(0.1)
        again = exchange(port, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert again.startswith(b"HTTP/1.1 200 ")
        assert server.refused_connections == 1


def test_bodies_in_flight_share_one_memory_budget() -> None:
    """The bytes that arrived count, from every client together; no share per client here."""
    limits = {"max_body_bytes": 1000, "max_bodies_in_flight_bytes": 1500}
    with http_server(echo, max_bodies_in_flight_bytes_per_client=0, **limits) as (_, port, _):
        slow = socket.create_connection(("127.0.0.1", port))
        try:
            slow.sendall(b"POST /slow HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n")
            slow.sendall(b"a" * 900)
            time.sleep(0.1)
            head = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n"
            out = exchange(port, head + b"b" * 1000)
            assert out.startswith(b"HTTP/1.1 503 "), out[:80]
            assert b"Retry-After" in out
            small = exchange(
                port,
                b"POST /s HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            )
            assert small.startswith(b"HTTP/1.1 200 ")  # 900 + 3 fits the budget
            slow.sendall(b"c" * 100)
            slow.settimeout(5)
            assert b"200 OK" in slow.recv(1000)
        finally:
            slow.close()


def test_a_head_can_be_refused_before_its_body_is_read() -> None:
    def precheck(request: Request) -> str | None:
        from ttft.gateway.errors import unauthorized

        if "authorization" not in request.headers:
            raise unauthorized("missing API key")
        return None

    with http_server(echo, precheck=precheck, max_body_bytes=1 << 30) as (_, port, _):
        started = time.monotonic()
        out = exchange(port, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100000000\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 401 ") and b"invalid_api_key" in out
    assert time.monotonic() - started < 3


def test_a_connection_is_accepted_from_its_handshake_not_its_first_bytes() -> None:
    """No deferred accept: in a burst the accept work is then done while the clients are
    still writing their requests, not in series with reading them (a silent connection is
    closed by the first-request timeout and counts against the per-client cap)."""
    with (
        http_server(echo, first_request_timeout_s=5) as (_, port, server),
        socket.create_connection(("127.0.0.1", port)),
    ):
        deadline = time.monotonic() + 2
        while not server.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(server.connections) == 1


def test_no_100_continue_for_an_http10_client_and_trailing_spaces_are_not_a_value() -> None:
    # RFC 9110 10.1.1: no 100 to an HTTP/1.0 client (it cannot read one before its answer).
    # "Content-Length: 3  " is well-formed (trailing OWS): it was a 400.
    raw = b"POST /u HTTP/1.0\r\nHost: h\r\nContent-Length: 3  \r\nExpect: 100-continue\r\n\r\n"
    with http_server(echo) as (_, port, _), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(raw)
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(100)  # nothing before the body
        sock.sendall(b"abc")
        out = read_response(sock, 5)
    assert out.startswith(b"HTTP/1.1 200 ") and out.endswith(b"POST /u 3"), out


def test_repeated_headers_are_joined_in_linear_time() -> None:
    from ttft.gateway.http.wire import HeadParser

    # Joined as they came, each repeat copied the value so far: 300,000 repeats (a 2.7 MB head,
    # allowed where max_header_bytes is raised) took 5 s of the event loop; now ~0.2 s.
    head = b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X-R: ab\r\n" * 300_000 + b"X-R: c\r\n\r\n"
    parser = HeadParser()
    started = time.perf_counter()
    parser.feed(head)
    headers = parser.finish()[3]
    assert time.perf_counter() - started < 2.0
    assert headers["x-r"] == ", ".join(["ab"] * 300_000 + ["c"])
