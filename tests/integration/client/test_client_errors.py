"""Failed requests are recorded with a stable kind and every rung they reached, never dropped."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from ttft.client import StreamingClient, errors
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.scripted_server import Snapshot

OneRequest = Callable[..., tuple[RequestRecord, Snapshot]]  # the one_request fixture


def test_http_500_records_status_kind_and_the_servers_message(one_request: OneRequest) -> None:
    record, _ = one_request({"status": 500, "error_message": "model crashed"})
    assert record.error is not None
    assert (record.error.kind, record.error.status, record.error.message) == (
        errors.HTTP_5XX,
        500,
        "model crashed",
    )
    assert record.status == 500 and record.headers_ns is not None and record.done_ns is not None
    assert record.first_content_ns is None and not record.ok


def test_http_429_is_a_4xx_with_its_status_and_message(one_request: OneRequest) -> None:
    record, _ = one_request({"status": 429, "error_message": "slow down"})
    assert record.error is not None
    assert (record.error.kind, record.error.status, record.error.message) == (
        errors.HTTP_4XX,
        429,
        "slow down",
    )


def test_error_event_mid_stream_is_a_stream_error_keeping_the_tokens_before_it(
    one_request: OneRequest,
) -> None:
    record, _ = one_request({"error_after": 3, "first_token_delay_ms": 1})
    assert record.error is not None and record.error.kind == errors.STREAM_ERROR
    assert record.first_content_ns is not None and len(record.chunk_ns) == 3


def test_json_error_data_mid_stream_is_a_stream_error(one_request: OneRequest) -> None:
    record, _ = one_request({"error_after": 1, "error_style": "data", "first_token_delay_ms": 1})
    assert record.error is not None and record.error.kind == errors.STREAM_ERROR
    assert record.error.message == "scripted error"


def test_stream_that_ends_cleanly_without_done_is_incomplete(one_request: OneRequest) -> None:
    record, _ = one_request({"done": False, "first_token_delay_ms": 1})
    assert record.error is not None and record.error.kind == errors.INCOMPLETE_STREAM
    assert record.error.status == 200
    assert len(record.chunk_ns) == 16 and record.done_ns is not None


def test_stream_without_done_is_accepted_when_the_client_does_not_require_it(
    one_request: OneRequest,
) -> None:
    record, _ = one_request({"done": False, "first_token_delay_ms": 1}, require_done=False)
    assert record.error is None and record.ok


def test_server_closing_mid_stream_is_incomplete_and_keeps_reached_rungs(
    one_request: OneRequest,
) -> None:
    record, _ = one_request({"close_after": 2, "first_token_delay_ms": 1})
    assert record.error is not None and record.error.kind == errors.INCOMPLETE_STREAM
    assert record.status == 200 and len(record.chunk_ns) == 2
    assert record.first_content_ns is not None


def test_server_closing_before_any_response_byte_is_a_disconnect(one_request: OneRequest) -> None:
    record, _ = one_request({"drop": True})
    assert record.error is not None and record.error.kind == errors.DISCONNECT
    assert record.sent_ns is not None and record.headers_ns is None


def test_connection_refused_is_a_connect_error_with_no_rung_past_scheduled() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def scenario() -> RequestRecord:
        async with StreamingClient(f"http://127.0.0.1:{port}") as client:
            return await client.send({"prompt": "x"}, RequestRecord(0), RunAnchor.now())

    record = asyncio.run(scenario())
    assert record.error is not None and record.error.kind == errors.CONNECT
    assert str(port) in record.error.message
    assert record.scheduled_ns is not None and record.sent_ns is None


def test_a_response_slower_than_the_time_limit_is_a_timeout(one_request: OneRequest) -> None:
    record, _ = one_request({"first_token_delay_ms": 2000}, timeout_s=0.2)
    assert record.error is not None and record.error.kind == errors.TIMEOUT
    assert record.headers_ns is not None and record.first_content_ns is None


def test_a_200_json_answer_to_a_stream_request_is_a_protocol_error(
    one_request: OneRequest,
) -> None:
    record, _ = one_request({"ignore_stream": True, "first_token_delay_ms": 1})
    assert record.error is not None and record.error.kind == errors.PROTOCOL
    assert "ignored stream=true" in record.error.message
    assert record.status == 200 and record.first_content_ns is None


def test_cancelling_a_request_records_cancelled_and_re_raises(one_request: OneRequest) -> None:
    from ttft.testing.scripted_server import ScriptedServer
    from ttft.testing.sse_script import Script

    record = RequestRecord(0)

    async def scenario() -> None:
        async with (
            ScriptedServer(Script(first_token_delay_ms=5000)) as server,
            StreamingClient(server.base_url) as client,
        ):
            task = asyncio.create_task(client.send({"prompt": "x"}, record, RunAnchor.now()))
            await asyncio.sleep(0.1)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return
            raise AssertionError("the cancellation was swallowed")

    asyncio.run(scenario())
    assert record.error is not None and record.error.kind == errors.CANCELLED
