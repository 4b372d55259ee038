"""Helpers for gateway tests: scripted upstreams and a gateway, each on a loop of its own thread.

Imported by name (``from gateway_testkit import ...``): a module called ``conftest`` is not
unique across test folders, so importing helpers from it picks whichever was loaded last.

The tests talk to them with plain synchronous clients (httpx, raw sockets), as users would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ttft.gateway.config import from_mapping
from ttft.gateway.serve import GatewayThread
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script

GatewayFactory = Callable[..., Any]


@contextmanager
def scripted(script: Script | None = None, **fields: Any) -> Iterator[ScriptedServer]:
    """A scripted SSE upstream (with a /health it does not have: 404 counts as alive)."""
    with ScriptedServer((script or Script()).merged(fields)).in_thread() as server:
        yield server


@contextmanager
def gateway_for(
    upstreams: list[Any], *, model: dict[str, Any] | None = None, **top: Any
) -> Iterator[GatewayThread]:
    """A gateway on a free port in front of ``upstreams`` (model "m", pre-rendering off)."""
    table = {"name": "m", "upstreams": upstreams, "prerender": False, **(model or {})}
    raw: dict[str, Any] = {"listen": "127.0.0.1:0", "model": [table], **top}
    with GatewayThread(from_mapping(raw)) as gw:
        yield gw


@contextmanager
def http_server(handler: Any, **limits: Any) -> Iterator[tuple[str, int, Any]]:
    """An ``HttpServer`` running ``handler`` on a private loop; yields (host, port, server)."""
    import asyncio
    import threading

    from ttft.gateway.http_server import HttpServer

    loop = asyncio.new_event_loop()
    server = HttpServer(handler, **limits)
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start("127.0.0.1", 0))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield "127.0.0.1", server.port, server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def read_response(sock: Any, timeout_s: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (or the timeout)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        pass
    return data
