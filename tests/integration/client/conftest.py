"""Helpers for client tests: one scripted server and one client on a fresh event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.scripted_server import ScriptedServer, Snapshot
from ttft.testing.sse_script import Script

OneRequest = Callable[..., tuple[RequestRecord, Snapshot]]


@pytest.fixture
def one_request() -> OneRequest:
    """``one_request(script_fields, body=..., **client_options)``: one chat request against a
    server scripted with ``Script(**script_fields)``; returns the record and the server's log."""

    def run(
        script: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        **client_options: Any,
    ) -> tuple[RequestRecord, Snapshot]:
        async def scenario() -> tuple[RequestRecord, Snapshot]:
            server = ScriptedServer(Script().merged(script or {}))
            async with server, StreamingClient(server.base_url, **client_options) as client:
                record = await client.send(
                    body or {"messages": [{"role": "user", "content": "hi"}]},
                    RequestRecord(index=0),
                    RunAnchor.now(),
                )
                return record, server.snapshot()

        return asyncio.run(scenario())

    return run
