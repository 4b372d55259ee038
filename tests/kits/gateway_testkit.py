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

    from ttft.gateway.http.server import HttpServer

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


@contextmanager
def raw_upstream(answer: Callable[[bytes], bytes]) -> Iterator[str]:
    """An upstream that answers each POST with ``answer(request)``: any bytes, however wrong
    (GETs, the gateway's health checks, get a 404: alive). Yields its base URL."""
    import contextlib
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        conn.settimeout(5)
        buf = b""
        with conn, contextlib.suppress(OSError):  # the gateway may reset: that is its right
            while not stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                request, buf = head + b"\r\n\r\n" + buf[:length], buf[length:]
                if request.startswith(b"GET "):
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                else:
                    conn.sendall(answer(request))

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()
