"""A scripted OpenAI-style SSE server: a measuring instrument with exact, logged write times.

It answers ``POST /v1/chat/completions`` and ``/v1/completions`` from a ``Script`` (delays before
the head, the role-only chunk and each token; errors; early close; usage/timings; framing; gzip).
A request picks its script through the server's callable, or overrides fields with
``"ttft_script": {...}`` in its body; ``"ttft_tag"`` is copied into the log to match requests.

For every request it logs ``perf_counter_ns()`` just before each write, so a client in the same
machine can compare its own timestamps with the moment the bytes left (Linux's monotonic clock is
shared by processes). ``GET /_ttft/logs`` (``?clear=1``) returns the log as JSON.

Three ways to run it: ``async with ScriptedServer(...)`` in the caller's loop; ``with
ScriptedServer(...).in_thread()`` on a loop of its own; ``with ScriptedServerProcess(script)`` as
``python -m ttft.testing.scripted_server --port 0 --script '{...}'`` in another process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, cast

from ttft.testing.sse_script import Piece, Script, render, with_request_id

ScriptFn = Callable[[str, dict[str, Any]], Script]
_API = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}
_COALESCE_S = 50e-6  # pieces due within this of each other go out in one write


@dataclass(slots=True)
class RequestLog:
    """One request as the server saw it: when it arrived and when each piece was written."""

    index: int
    conn: int
    path: str
    tag: Any
    received_ns: int
    events: list[tuple[str, int]] = field(default_factory=list)  # (kind, perf_counter_ns)
    headers: dict[str, str] = field(default_factory=dict)  # request headers, names lower-cased

    def first(self, *kinds: str) -> int | None:
        return next((t for kind, t in self.events if kind in kinds), None)

    @property
    def first_token_ns(self) -> int | None:
        """When the first piece with text (reasoning or content) was written."""
        return self.first("token", "reasoning")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestLog:
        events = [(str(k), int(t)) for k, t in data.pop("events")]
        return cls(**data, events=events)


@dataclass(slots=True)
class Snapshot:
    logs: list[RequestLog]
    connections_opened: int  # connections that carried a scripted request
    peak_open_connections: int  # the most such connections open at once
    open_connections: int = 0  # such connections open now (a proxy's pool, or a leak)

    def peak_requests(self) -> int:
        """The most requests held at once, each from its arrival to its last written piece
        (how a proxy's in-flight limit is checked from the engine's side)."""
        edges: list[tuple[int, int]] = []
        for log in self.logs:
            end = log.events[-1][1] if log.events else log.received_ns
            edges += [(log.received_ns, 1), (end, -1)]
        peak = now = 0
        for _, step in sorted(edges):  # an end before a start at the same instant
            now += step
            peak = max(peak, now)
        return peak


class _Conn(asyncio.Protocol):
    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.id = 0  # numbered when it carries its first scripted request
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.busy = False
        self.timer: asyncio.TimerHandle | None = None
        self.pieces: list[Piece] = []
        self.next_piece = 0
        self.base = 0.0
        self.log: RequestLog | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports are not asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        self.server._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.server._closed(self)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next_request(time.perf_counter_ns())

    def _next_request(self, received_ns: int) -> None:
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        lines = self.buf[:head_end].decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if len(self.buf) < head_end + 4 + length:
            return
        body = self.buf[head_end + 4 : head_end + 4 + length]
        self.buf = self.buf[head_end + 4 + length :]
        method, _, rest = lines[0].partition(" ")
        target = rest.rpartition(" ")[0]
        self.busy = True
        self._respond(method, target, headers, body, received_ns)

    def _respond(
        self, method: str, target: str, headers: dict[str, str], raw: bytes, received_ns: int
    ) -> None:
        path, _, query = target.partition("?")
        if method == "GET" and path == "/_ttft/logs":
            snapshot = self.server.snapshot(clear="clear=1" in query)
            self._send_json(
                200,
                {
                    "logs": [asdict(x) for x in snapshot.logs],
                    "connections_opened": snapshot.connections_opened,
                    "peak_open_connections": snapshot.peak_open_connections,
                    "open_connections": snapshot.open_connections,
                },
            )
            return
        api = _API.get(path)
        if method != "POST" or api is None:
            self._send_json(404, {"error": {"message": f"no route {method} {path}"}})
            return
        try:
            body = json.loads(raw)
            script = self.server.script_for(path, body, body.get("ttft_script"))
        except (ValueError, TypeError, AttributeError) as exc:
            self._send_json(400, {"error": {"message": f"bad request: {exc}"}})
            return
        if not self.id:
            self.id = self.server._counted(self)
        index = self.server._next_index()
        self.log = RequestLog(
            index, self.id, path, body.get("ttft_tag"), received_ns, headers=headers
        )
        self.server.logs.append(self.log)
        self.pieces = self.server.pieces_for(script, api)
        if script.echo_request_id != "none":
            sent = headers.get("x-request-id", "")
            echo = sent if script.echo_request_id == "same" else f"other-{sent}"
            self.pieces = with_request_id(self.pieces, echo)
        self.next_piece = 0
        self.base = asyncio.get_running_loop().time()
        self._advance()

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.pieces = [Piece(0, "head", head + body)]
        self.next_piece = 0
        self.log = None
        self.base = asyncio.get_running_loop().time()
        self._advance()

    def _advance(self) -> None:
        """Write every piece that is due, then sleep until the next one."""
        self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        horizon = loop.time() + _COALESCE_S
        pieces, i = self.pieces, self.next_piece
        due: list[Piece] = []
        while i < len(pieces) and self.base + pieces[i].offset_ns / 1e9 <= horizon:
            due.append(pieces[i])
            i += 1
        self.next_piece = i
        if due:
            t_ns = time.perf_counter_ns()
            transport.write(due[0].data if len(due) == 1 else b"".join(p.data for p in due))
            if self.log is not None:
                self.log.events.extend((p.kind, t_ns) for p in due)
            if any(p.close for p in due):
                transport.close()
                return
        if i < len(pieces):
            self.timer = loop.call_at(self.base + pieces[i].offset_ns / 1e9, self._advance)
            return
        self.busy = False
        if self.buf:
            self._next_request(time.perf_counter_ns())


class ScriptedServer:
    """The instrument. ``script`` is one ``Script`` for all, or ``(path, body) -> Script``."""

    def __init__(
        self,
        script: Script | ScriptFn | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "scripted",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._script = script if script is not None else Script()
        self._ssl = ssl_context
        self.host = host
        self.port = port
        self.model = model
        self.logs: list[RequestLog] = []
        self.connections_opened = 0
        self.open_connections = 0
        self.peak_open_connections = 0
        self._index = 0
        self._conn_ids = 0
        self._merged: dict[Any, Script] = {}
        self._rendered: dict[tuple[Script, str], list[Piece]] = {}
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()

    @property
    def base_url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{self.host}:{self.port}"

    def script_for(
        self, path: str, body: dict[str, Any], overrides: dict[str, Any] | None = None
    ) -> Script:
        base = self._script if isinstance(self._script, Script) else self._script(path, body)
        if not overrides:
            return base
        try:
            key: Any = (base, tuple(sorted(overrides.items())))
            hash(key)
        except TypeError:  # a list among the values: not cacheable
            return base.merged(overrides)
        script = self._merged.get(key)
        if script is None:
            script = self._merged[key] = base.merged(overrides)
        return script

    def pieces_for(self, script: Script, api: str) -> list[Piece]:
        """The rendered response, cached per script: rendering costs more than serving, and a
        busy instrument must stay faster than the clients it measures. (Chunk ids therefore
        repeat across requests; the log's ``tag`` identifies requests.)"""
        key = (script, api)
        pieces = self._rendered.get(key)
        if pieces is None:
            if len(self._rendered) > 1024:
                self._rendered.clear()
                self._merged.clear()
            pieces = self._rendered[key] = render(script, api, 0, self.model)
        return pieces

    def snapshot(self, clear: bool = False) -> Snapshot:
        snap = Snapshot(
            list(self.logs),
            self.connections_opened,
            self.peak_open_connections,
            self.open_connections,
        )
        if clear:
            self.logs.clear()
            self.connections_opened = 0
            self.peak_open_connections = self.open_connections
        return snap

    def _counted(self, conn: _Conn) -> int:
        """Count a connection once it carries a scripted request (log fetches do not count)."""
        self.connections_opened += 1
        self.open_connections += 1
        self.peak_open_connections = max(self.peak_open_connections, self.open_connections)
        self._conn_ids += 1
        return self._conn_ids

    def _next_index(self) -> int:
        self._index += 1
        return self._index

    def _closed(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        if conn.id:
            self.open_connections -= 1

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # A deep backlog: hundreds of clients connect at once, and a full accept queue would
        # turn into one-second SYN retransmits in the client's timings.
        self._server = await loop.create_server(
            lambda: _Conn(self), self.host, self.port, backlog=4096, ssl=self._ssl
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()
        self._conns.clear()

    async def __aenter__(self) -> ScriptedServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @contextmanager
    def in_thread(self) -> Iterator[ScriptedServer]:
        """Run on a private event loop in a background thread (for synchronous callers)."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()

        thread = threading.Thread(target=run, name="scripted-server", daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("the scripted server did not start within 10 s")
        try:
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


class ScriptedServerProcess:
    """The server in a child process (so it does not share the measured client's event loop)."""

    def __init__(self, script: Script | None = None, *, model: str = "scripted") -> None:
        self.script = script or Script()
        self.model = model
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> ScriptedServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "ttft.testing.scripted_server",
            "--port",
            "0",
            "--model",
            self.model,
            "--script",
            json.dumps(self.script.to_dict()),
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith("listening on "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"the scripted server did not start: {line!r}")
        self.base_url = line.split()[-1]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None

    def snapshot(self, clear: bool = False) -> Snapshot:
        url = f"{self.base_url}/_ttft/logs" + ("?clear=1" if clear else "")
        with urllib.request.urlopen(url, timeout=30) as resp:
            data = json.loads(resp.read())
        return Snapshot(
            [RequestLog.from_dict(x) for x in data["logs"]],
            data["connections_opened"],
            data["peak_open_connections"],
            data.get("open_connections", 0),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ttft.testing.scripted_server",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default="scripted")
    parser.add_argument(
        "--script", default="{}", help="Script fields as JSON, or @path to a JSON file"
    )
    args = parser.parse_args(argv)
    text = args.script
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as fh:
            text = fh.read()
    script = Script().merged(json.loads(text))

    async def serve() -> None:
        server = ScriptedServer(script, host=args.host, port=args.port, model=args.model)
        await server.start()
        print(f"listening on {server.base_url}", flush=True)
        await asyncio.Event().wait()

    with suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
