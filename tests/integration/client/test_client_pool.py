"""Connections: keep-alive reuse, no hidden cap, every body framing, gzip, URLs and headers."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from ttft.client import ChatRequest, CompletionRequest, StreamingClient
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.scripted_server import ScriptedServer, Snapshot
from ttft.testing.sse_script import Script

OneRequest = Callable[..., tuple[RequestRecord, Snapshot]]  # the one_request fixture

FAST = Script(first_token_delay_ms=1, token_interval_ms=0, n_tokens=4)


def run_many(
    script: Script, n: int, concurrency: int, **client_options: Any
) -> tuple[list[RequestRecord], Snapshot, StreamingClient]:
    async def scenario() -> tuple[list[RequestRecord], Snapshot, StreamingClient]:
        anchor = RunAnchor.now()
        async with (
            ScriptedServer(script) as server,
            StreamingClient(server.base_url, **client_options) as client,
        ):
            records = [RequestRecord(i) for i in range(n)]
            gate = asyncio.Semaphore(concurrency)

            async def one(record: RequestRecord) -> None:
                async with gate:
                    await client.send({"prompt": "x"}, record, anchor)

            await asyncio.gather(*(one(r) for r in records))
            return records, server.snapshot(), client

    return asyncio.run(scenario())


def test_sequential_requests_reuse_one_keep_alive_connection() -> None:
    records, snap, client = run_many(FAST, n=20, concurrency=1)
    assert all(r.ok for r in records)
    assert snap.connections_opened == 1
    assert (client.stats.opened, client.stats.reused) == (1, 19)


def test_300_concurrent_requests_open_300_connections_with_no_hidden_cap() -> None:
    # Each stream stays open 300 ms, so all 300 overlap.
    script = Script(first_token_delay_ms=300, token_interval_ms=0, n_tokens=2)
    records, snap, client = run_many(script, n=300, concurrency=300)
    assert all(r.ok for r in records), [r.error for r in records if r.error][:3]
    assert snap.peak_open_connections == 300
    assert client.stats.opened == 300 and client.stats.peak_in_use == 300


def test_max_connections_caps_the_connections_when_the_caller_asks() -> None:
    script = Script(first_token_delay_ms=20, token_interval_ms=0, n_tokens=2)
    records, snap, _ = run_many(script, n=40, concurrency=40, max_connections=8)
    assert all(r.ok for r in records)
    assert snap.peak_open_connections == 8


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_every_body_framing_streams_all_tokens(framing: str) -> None:
    script = Script(first_token_delay_ms=1, token_interval_ms=3, n_tokens=5).merged(
        {"framing": framing}
    )
    records, snap, _ = run_many(script, n=2, concurrency=1)
    assert [(r.error, len(r.chunk_ns)) for r in records] == [(None, 5), (None, 5)]
    # Token pieces 3 ms apart arrive in separate reads (a busy machine may merge a few).
    assert all(r.chunk_ns == sorted(r.chunk_ns) and len(set(r.chunk_ns)) > 1 for r in records)
    assert snap.connections_opened == (2 if framing == "close" else 1)


def test_connection_close_response_is_not_reused() -> None:
    records, snap, _ = run_many(Script(first_token_delay_ms=1, keep_alive=False), 3, 1)
    assert all(r.ok for r in records) and snap.connections_opened == 3


def test_gzip_stream_is_decoded_incrementally_when_the_client_accepts_gzip(
    one_request: OneRequest,
) -> None:
    record, snap = one_request(
        {"gzip": True, "first_token_delay_ms": 1, "token_interval_ms": 10, "n_tokens": 6},
        headers={"Accept-Encoding": "gzip"},
    )
    assert record.ok and record.completion_tokens == 6 and len(record.chunk_ns) == 6
    assert record.content_encoding == "gzip"  # doctor reads this: gzip on a stream is a red flag
    # One read per sync-flushed event, not all at the end (a busy machine may merge a couple).
    assert len(set(record.chunk_ns)) >= 4
    assert snap.logs[0].headers["accept-encoding"] == "gzip"


def test_sse_lines_ending_in_crlf_are_read(one_request: OneRequest) -> None:
    record, _ = one_request({"crlf": True, "first_token_delay_ms": 1, "n_tokens": 3})
    assert record.ok and len(record.chunk_ns) == 3


def test_default_headers_ask_for_identity_and_carry_the_bearer_key(
    one_request: OneRequest,
) -> None:
    _, snap = one_request({"first_token_delay_ms": 1}, api_key="sk-test", model="m1")
    headers = snap.logs[0].headers
    assert headers["accept-encoding"] == "identity"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_the_v1_root_reaches_the_same_paths(suffix: str) -> None:
    async def scenario() -> list[str]:
        anchor = RunAnchor.now()
        async with (
            ScriptedServer(FAST) as server,
            StreamingClient(server.base_url + suffix) as client,
        ):
            chat = await client.send(ChatRequest([]), RequestRecord(0), anchor)
            comp = await client.send(CompletionRequest("x"), RequestRecord(1), anchor)
            assert chat.ok and comp.ok
            return [log.path for log in server.logs]

    assert asyncio.run(scenario()) == ["/v1/chat/completions", "/v1/completions"]


@pytest.mark.parametrize("url", ["ftp://h/", "127.0.0.1:8080", "http://h:port/"])
def test_bad_base_urls_are_user_errors_naming_the_fix(url: str) -> None:
    with pytest.raises(TtftError) as caught:
        StreamingClient(url)
    assert caught.value.fix


def test_a_reused_connection_closed_by_the_server_is_retried_once_on_a_new_one() -> None:
    """The race every keep-alive client meets: the server drops an idle connection just as the
    next request goes out. The request must succeed on a fresh connection, not fail."""
    events = [b'data: {"choices":[{"text":"a"}]}\n\n', b"data: [DONE]\n\n"]
    ok = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
        + b"0\r\n\r\n"
    )
    connections = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        for served in range(2):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            if served == 1:  # the second request on this connection: drop it unanswered
                break
            writer.write(ok)
        writer.close()

    async def scenario() -> list[RequestRecord]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        anchor = RunAnchor.now()
        async with server, StreamingClient(f"http://127.0.0.1:{port}") as client:
            records = [RequestRecord(i) for i in range(3)]
            for record in records:
                await client.send({"prompt": ""}, record, anchor)
            return records

    records = asyncio.run(scenario())
    assert [r.error for r in records] == [None, None, None]
    assert all(r.ok for r in records)
    # Requests 2 and 3 each met a dropped connection and went out again on a new one.
    assert len(connections) == 3


@pytest.fixture(scope="module")
def tls_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate for 127.0.0.1."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    # openssl ships with Debian; without it this test must fail loudly, not pass as skipped.
    assert shutil.which("openssl") is not None, "install openssl to make a test certificate"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def test_https_streams_when_verification_is_off_and_fails_as_connect_when_on(
    tls_context: ssl.SSLContext,
) -> None:
    async def scenario(verify: bool) -> RequestRecord:
        async with (
            ScriptedServer(FAST, ssl_context=tls_context) as server,
            StreamingClient(server.base_url, verify_tls=verify) as client,
        ):
            assert server.base_url.startswith("https://")
            return await client.send({"prompt": "x"}, RequestRecord(0), RunAnchor.now())

    record = asyncio.run(scenario(verify=False))
    assert record.ok and len(record.chunk_ns) == 4
    record = asyncio.run(scenario(verify=True))
    assert record.error is not None and record.error.kind == "connect"
    assert "CERTIFICATE_VERIFY_FAILED" in record.error.message


def test_a_server_that_silently_closes_after_each_answer_stops_connection_reuse() -> None:
    """llama-server advertises Keep-Alive yet closes each streamed answer's connection: after
    three such closes the pool opens a connection per request instead of failing sends."""
    records, snap, client = run_many(Script(first_token_delay_ms=1, silent_close=True), 8, 1)
    assert all(r.ok for r in records)
    assert not client.stats.keep_alive
    assert client.stats.retried <= 3 and snap.connections_opened == 8


def test_keep_alive_stays_on_when_a_connection_closes_long_after_its_answer() -> None:
    async def scenario() -> StreamingClient:
        async with ScriptedServer(FAST) as server, StreamingClient(server.base_url) as client:
            for i in range(4):
                await client.send({"prompt": "x"}, RequestRecord(i), RunAnchor.now())
                idle = client._pool._idle[0]
                idle.idle_since_ns -= 10 * 10**9  # as if it had idled 10 s ...
                idle.abort()  # ... and the server's keep-alive timer had closed it
            return client

    client = asyncio.run(scenario())
    assert client.stats.keep_alive and client.stats.stale == 3
