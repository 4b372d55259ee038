"""Verbatim relay of an engine's chunked stream (``gateway.upstream``): whole chunks go to the
client as they came, everything else through the parser, and the answer ends where it ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.http import ResponseParser
from ttft.gateway.http.response import Response
from ttft.gateway.relay import whole_chunks
from ttft.gateway.sinks import ForwardSink
from ttft.gateway.upstream import UpstreamConnection, UpstreamPool

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


TOKEN = chunk(b'data: {"choices":[{"text":"hi"}]}\n\n')
DONE = chunk(b"data: [DONE]\n\n")
LAST = b"0\r\n\r\n"


def unframed(body: bytes) -> bytes:
    """The data of a chunked body that ends with its last chunk (checked strictly)."""
    out, pos = b"", 0
    while True:
        nl = body.index(b"\r\n", pos)
        size = int(body[pos:nl], 16)
        if size == 0:
            assert body[nl:] == b"\r\n\r\n"
            return out
        out += body[nl + 2 : nl + 2 + size]
        assert body[nl + 2 + size : nl + 4 + size] == b"\r\n"
        pos = nl + 4 + size


class _Transport:
    """Records each write: what went out, and in how many calls."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Client:
    """The client side of a response (``http.response.Channel``)."""

    def __init__(self, http11: bool = True) -> None:
        self.transport: Any = _Transport()
        self.closed = False
        self.write_paused = False
        self.http11 = http11

    def abort(self) -> None:
        self.closed = True

    def close_after_write(self) -> None:
        pass

    @property
    def body(self) -> bytes:
        data = b"".join(self.transport.writes)
        return data.split(b"\r\n\r\n", 1)[1]


def _exchange(pieces: list[bytes], http11: bool = True) -> tuple[_Client, UpstreamConnection, Any]:
    """Feed ``pieces`` (the upstream's reads) through a connection to a forwarding sink; returns
    the client, the connection and the exchange's outcome (reusable, or the exception)."""

    async def run() -> tuple[_Client, UpstreamConnection, Any]:
        client = _Client(http11)
        response = Response(client, keep_alive=True)
        sink = ForwardSink(response, lambda s, ct, t: [("Content-Type", ct)], lambda t: None)
        conn = UpstreamConnection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        sink.upstream = conn
        waiter = conn.start(ResponseParser(sink, decode=False), b"GET / HTTP/1.1\r\n\r\n")
        for piece in pieces:
            conn.data_received(piece)
        try:
            outcome: Any = await asyncio.wait_for(waiter, 1)
        except RequestFailed as exc:
            outcome = exc
        return client, conn, outcome

    return asyncio.run(run())


def test_whole_chunks_counts_only_whole_plain_chunks() -> None:
    assert whole_chunks(TOKEN) == len(TOKEN)
    assert whole_chunks(TOKEN + TOKEN) == 2 * len(TOKEN)
    assert whole_chunks(TOKEN + LAST) == len(TOKEN)
    assert whole_chunks(TOKEN + TOKEN[:-1]) == len(TOKEN)  # the second lacks its LF
    assert whole_chunks(LAST) == 0
    assert whole_chunks(b"5;ext=1\r\nhello\r\n") == 0  # an extension: the parser's
    assert whole_chunks(b"5\nhello\r\n") == 0  # a bare LF
    assert whole_chunks(b"5\r\nhelloX\r\n") == 0  # data longer than its size
    assert whole_chunks(b"-5\r\nhello\r\n") == 0
    assert whole_chunks(b"0x5\r\nhello\r\n") == 0
    assert whole_chunks(b"5" + b" " * 1000) == 0
    assert whole_chunks(b"1" * 17 + b"\r\n") == 0  # a size line past 16 digits
    assert whole_chunks(b"") == 0


def test_after_the_first_token_whole_chunks_go_out_as_they_came() -> None:
    events = [TOKEN, TOKEN + TOKEN, TOKEN, DONE + LAST]
    client, conn, reusable = _exchange([HEAD + TOKEN, *events])
    assert reusable is True
    writes = client.transport.writes
    # The first event is unframed and framed again (the head goes with it, the token is
    # looked for); the next reads are written as they came; the last chunk is the response's.
    assert writes[1:-1] == [TOKEN, TOKEN + TOKEN, TOKEN, DONE]
    assert writes[-1] == LAST
    assert client.body == TOKEN * 5 + DONE + LAST
    assert conn.relay_to is not None or conn._parser is None


def test_the_relay_ends_exactly_at_the_last_chunk() -> None:
    """Bytes after the last chunk are not the client's, and the connection is out of step."""
    client, _, reusable = _exchange([HEAD + TOKEN, TOKEN + LAST + b"HTTP/1.1 200 OK\r\n"])
    assert reusable is False
    assert client.body == TOKEN + TOKEN + LAST


def test_partial_chunks_and_extensions_go_through_the_parser() -> None:
    ext = b"5;name=value\r\nhello\r\n"
    split = TOKEN[:7], TOKEN[7:]
    client, _, reusable = _exchange([HEAD + TOKEN, split[0], split[1], ext, TOKEN, LAST])
    assert reusable is True
    # The extension is not passed on: its data is framed again, plainly.
    assert b"name=value" not in client.body
    assert unframed(client.body) == unframed(TOKEN * 2 + chunk(b"hello") + TOKEN + LAST)
    assert client.body.endswith(b"hello\r\n" + TOKEN + LAST)  # relayed again after them


@pytest.mark.parametrize(
    "bad",
    [b"-6\r\nxx\r\n", b"zz\r\n", b"5" + b" " * 5000, b"5\r\nhelloX\r\n"],
    ids=["negative", "not-hex", "endless-size-line", "no-crlf-after-data"],
)
def test_a_bad_chunk_after_the_relay_began_is_a_protocol_failure(bad: bytes) -> None:
    client, conn, outcome = _exchange([HEAD + TOKEN, TOKEN, bad])
    assert isinstance(outcome, RequestFailed) and outcome.kind == errors.PROTOCOL
    assert conn.closed  # dropped, never reused
    assert bad not in b"".join(client.transport.writes)


def test_an_http10_client_gets_the_data_unframed() -> None:
    client, _, reusable = _exchange([HEAD + TOKEN, TOKEN, DONE + LAST], http11=False)
    assert reusable is True
    data = TOKEN[TOKEN.index(b"\n") + 1 : -2]
    assert client.body == data + data + DONE[DONE.index(b"\n") + 1 : -2]


def test_a_client_gone_stops_the_relay() -> None:
    async def run() -> tuple[_Client, Any]:
        client = _Client()
        response = Response(client, keep_alive=True)
        sink = ForwardSink(response, lambda s, ct, t: [("Content-Type", ct)], lambda t: None)
        conn = UpstreamConnection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        sink.upstream = conn
        waiter = conn.start(ResponseParser(sink, decode=False), b"GET / HTTP/1.1\r\n\r\n")
        conn.data_received(HEAD + TOKEN)
        conn.data_received(TOKEN)
        client.closed = True
        conn.data_received(TOKEN)
        return client, await asyncio.wait_for(waiter, 1)

    client, reusable = asyncio.run(run())
    assert reusable is False  # the sink stopped reading: the connection is dropped
    assert client.transport.writes.count(TOKEN) == 1


class _Engine(_Transport):
    """An engine's side of a connection: each request is answered in separate reads."""

    def __init__(self, conn: UpstreamConnection, reads: list[bytes]) -> None:
        super().__init__()
        self.conn, self.reads = conn, reads

    def write(self, data: bytes) -> None:
        super().write(data)
        loop = asyncio.get_running_loop()
        for i, piece in enumerate(self.reads):
            loop.call_later(0.001 * (i + 1), self.conn.data_received, piece)


def test_the_pool_gets_a_relayed_connection_back() -> None:
    """Three answers relayed on one kept-alive connection: it goes back after each."""
    reads = [HEAD + TOKEN, TOKEN, TOKEN + TOKEN, DONE, LAST]

    async def run() -> tuple[list[bytes], int, int]:
        pool = UpstreamPool("127.0.0.1", 9)

        async def connect() -> UpstreamConnection:
            conn = UpstreamConnection()
            conn.connection_made(_Engine(conn, reads))  # type: ignore[arg-type]
            return conn

        pool._connect = connect  # type: ignore[method-assign]
        bodies = []
        for _ in range(3):
            client = _Client()
            response = Response(client, keep_alive=True)
            sink = ForwardSink(response, lambda s, ct, t: [("Content-Type", ct)], lambda t: None)

            def attach(conn: UpstreamConnection, sink: ForwardSink = sink) -> None:
                sink.upstream = conn

            await pool.exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", sink, on_connection=attach)
            bodies.append(client.body)
            # Relayed: the reads after the first went out as they came.
            assert client.transport.writes[1:3] == [TOKEN, TOKEN + TOKEN]
            assert [c.relay_to for c in pool._idle] == [None]
        opened, reused = pool.stats.opened, pool.stats.reused
        pool.close()
        return bodies, opened, reused

    bodies, opened, reused = asyncio.run(run())
    assert bodies == [TOKEN * 4 + DONE + LAST] * 3
    assert (opened, reused) == (1, 2)


def test_an_engines_keep_alive_timeout_is_read_once_and_bounded() -> None:
    from ttft.gateway.upstream import _reuse_seconds

    assert _reuse_seconds("timeout=5, max=100") == 4.0  # a second before the engine closes
    assert _reuse_seconds("max=100") == 30.0
    # Thousands of digits: the default, not a ValueError from int() in the release path.
    assert _reuse_seconds("timeout=" + "9" * 5000) == 30.0
