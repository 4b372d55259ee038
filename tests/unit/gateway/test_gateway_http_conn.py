"""A connection's refusal path when the client is gone already (issue 28)."""

from __future__ import annotations

import errno
import logging
from typing import Any

import pytest

from ttft.gateway.http.conn import Connection
from ttft.gateway.http.server import HttpServer


class _GoneTransport:
    """A transport whose peer reset the connection: shutting down its write side fails."""

    def __init__(self) -> None:
        self.aborted = False
        self.written = b""

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def write(self, data: bytes) -> None:
        self.written += data

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.aborted

    def close(self) -> None:
        self.aborted = True

    def abort(self) -> None:
        self.aborted = True


async def _never(request: Any, response: Any) -> None:
    raise AssertionError("not reached")


def test_a_refusal_to_a_client_that_is_gone_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each one logged a full OSError traceback from _linger (1,000 connections: 870 KB)."""
    server = HttpServer(_never)
    with caplog.at_level(logging.DEBUG, "ttft.gateway"):
        for _ in range(50):
            conn = Connection(server)
            transport = _GoneTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            conn.data_received(b"GET / HTTP/1.1\nHost: h\n\n")  # a bare LF: refused, 400
            assert transport.written.startswith(b"HTTP/1.1 400 ")
            assert transport.aborted
    assert not any(r.exc_info for r in caplog.records)
    assert len(caplog.records) <= 1  # throttled: one line per interval


class _Transport(_GoneTransport):
    def write_eof(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass


def test_a_stream_holding_an_engine_slot_is_dropped_when_its_client_stalls() -> None:
    """A client reading 200 B/s is never silent, so the write timeout (60 s) never fired and
    its stream held an engine slot as long as it liked (issue 28). A stream whose upstream is
    paused with it may stall ``stall_timeout_s``; a gateway answer (no slot) keeps 60 s."""
    from ttft.gateway.http.response import Response

    server = HttpServer(_never, stall_timeout_s=10, write_timeout_s=60, first_request_timeout_s=100)
    outcomes = []
    for holds_slot in (True, False):
        conn = Connection(server)
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        response = Response(conn, True)
        if holds_slot:
            response.on_pause = lambda paused: None
        conn._response = response
        conn.pause_writing()
        conn.sweep(server.now() + 11)
        outcomes.append(transport.aborted)
        conn.sweep(server.now() + 61)
        assert transport.aborted
    assert outcomes == [True, False]
