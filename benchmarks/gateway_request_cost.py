"""The gateway's own Python per request, in-process and without sockets.

A streamed completion goes through the gateway's real ``Connection`` (head, body, limits), its
``Gateway.handle`` (parse, plan, route, admit) and its proxy (upstream exchange, sinks, relay),
with fake transports on both sides: a scripted engine answers each request with a head and
``--tokens`` chunked events. What is timed is the thread's CPU time per request, so the kernel
and the machine's other load count as little as they can; ``--base-src DIR`` runs the same in a
child process on another ``ttft`` source tree, interleaved, for a before/after.

    python benchmarks/gateway_request_cost.py --runs 6 --base-src /path/to/main/src
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

_BODY = json.dumps(
    {
        "model": "m",
        "prompt": "Say hello to the world, please, in a few words.",
        "max_tokens": 16,
        "stream": True,
    }
).encode()
_REQUEST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: bench\r\n"
    b"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
    % (len(_BODY), _BODY)
)
_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Keep-Alive: timeout=5\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


_TOKEN = _chunk(
    b'data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":" hello",'
    b'"finish_reason":null}]}\n\n'
)
_END = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class _Transport:
    """What both fake sides share: a transport that is never closing nor paused. (Defined here,
    not imported from ttft: ``--base-src`` runs this file against older source trees.)"""

    def __init__(self) -> None:
        self.closing = False

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

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else None


class _Engine(_Transport):
    """Answers each request with ``reads``, one loop callback each (as reads arrive)."""

    def __init__(self, conn: Any, reads: list[bytes]) -> None:
        super().__init__()
        self.conn, self.reads = conn, reads

    def write(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        for piece in self.reads:
            loop.call_soon(self.conn.data_received, piece)


class _Client(_Transport):
    """Resolves ``done`` when the chunked answer's last chunk was written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.done: asyncio.Future[None] | None = None

    def write(self, data: bytes) -> None:
        if data.endswith(b"0\r\n\r\n") and self.done is not None:
            self.done.set_result(None)


async def _measure(requests: int, tokens: int, fresh: bool = False) -> float:
    """Thread CPU µs per request through one gateway (32 client connections in turn; with
    ``fresh``, a new connection per request, opened and closed as a one-shot client's)."""
    from ttft.gateway.app import Gateway
    from ttft.gateway.config import from_mapping
    from ttft.gateway.http.conn import Connection
    from ttft.gateway.upstream import UpstreamConnection

    reads = [_HEAD + _TOKEN] + [_TOKEN] * (tokens - 1) + [_END]
    config = from_mapping(
        {
            "listen": "127.0.0.1:0",
            "model": [{"name": "m", "upstreams": ["http://127.0.0.1:9"], "prerender": False}],
            "admission": {"max_in_flight": 4096, "queue_size": 4096},
        }
    )
    gateway = Gateway(config)
    loop = asyncio.get_running_loop()
    gateway.server._loop = loop  # what start() sets; nothing listens here

    async def connect() -> UpstreamConnection:
        conn = UpstreamConnection()
        conn.connection_made(_Engine(conn, reads))  # type: ignore[arg-type]
        return conn

    for runtime in gateway.models.values():
        for replica in runtime.replicas:
            replica.pool._connect = connect  # type: ignore[method-assign]
    clients = []
    for _ in range(32):
        client, transport = Connection(gateway.server), _Client()
        client.connection_made(transport)  # type: ignore[arg-type]
        clients.append((client, transport))

    async def one(i: int) -> None:
        if fresh:
            client, transport = Connection(gateway.server), _Client()
            client.connection_made(transport)  # type: ignore[arg-type]
        else:
            client, transport = clients[i % len(clients)]
        transport.done = loop.create_future()
        client.data_received(_REQUEST)
        await transport.done
        if fresh:
            await asyncio.sleep(0)  # the handler's task ends, then the client leaves
            client.connection_lost(None)

    for i in range(200):  # warm: connections, caches, specialized bytecode
        await one(i)
    gc.collect()
    gc.freeze()
    start = time.thread_time_ns()
    for i in range(requests):
        await one(i)
    spent = time.thread_time_ns() - start
    gateway._parser.shutdown(wait=False)
    return spent / requests / 1000


def _run_once(requests: int, tokens: int, fresh: bool) -> float:
    try:
        import uvloop  # type: ignore[import-not-found,unused-ignore]

        return float(uvloop.run(_measure(requests, tokens, fresh)))
    except ImportError:
        return asyncio.run(_measure(requests, tokens, fresh))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--tokens", type=int, default=16, help="events per answer")
    parser.add_argument("--runs", type=int, default=5, help="runs per source tree")
    parser.add_argument("--base-src", default=None, help="another ttft source tree to compare")
    parser.add_argument(
        "--fresh-connections",
        action="store_true",
        help="a new client connection per request (as a one-shot client), not 32 kept alive",
    )
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(_run_once(args.requests, args.tokens, args.fresh_connections))
        return
    own = os.environ.get("PYTHONPATH", "")
    trees = {"this": own}
    if args.base_src:
        trees["base"] = os.pathsep.join([args.base_src, own])
    results: dict[str, list[float]] = {name: [] for name in trees}
    once = [sys.executable, __file__, "--once", "--requests", str(args.requests)]
    once += ["--tokens", str(args.tokens)]
    if args.fresh_connections:
        once.append("--fresh-connections")
    for _ in range(args.runs):
        for name, path in trees.items():
            out = subprocess.run(
                once,
                env={**os.environ, "PYTHONPATH": path},
                capture_output=True,
                text=True,
                check=True,
            )
            results[name].append(float(out.stdout.strip()))
    for name, values in results.items():
        print(
            f"{name}: {min(values):.1f} us per request (min of {len(values)}), median "
            f"{statistics.median(values):.1f} us; {args.tokens} events per answer"
        )


if __name__ == "__main__":
    main()
