"""Keep-alive connections to one upstream engine, carrying one exchange at a time each.

Bytes are parsed in the read callback itself (``ResponseParser`` from the client layer undoes the
HTTP framing) and handed to the exchange's sink at once, so a proxied token leaves for the client
in the same event-loop turn its bytes arrived in. ``pause``/``resume`` stop and restart reading
from the engine while the client cannot keep up, so a slow client never makes the gateway buffer.

A connection the engine closed while it sat idle (llama-server closes keep-alive connections after
5 s) fails before any response byte; such an exchange is retried once on a fresh connection.

Once a pass-through sink has nothing left to look for in an answer, whole chunks go to the client
as they came (``relay``).
"""

from __future__ import annotations

import asyncio
import functools
import re
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.exchange import Exchange
from ttft.client.http import ResponseHead, ResponseParser, ResponseSink
from ttft.gateway.relay import HEX_DIGITS, LAST_CHUNK, RelayTarget, whole_chunks

_clock = time.perf_counter_ns
_KEEP_ALIVE_TIMEOUT = re.compile(r"timeout\s*=\s*(\d{1,9})(?!\d)")  # longer: the default
_DEFAULT_IDLE_S = 30.0


@functools.lru_cache(maxsize=64)
def _reuse_seconds(keep_alive: str) -> float:
    """How long an idle connection is reused after an answer with this ``Keep-Alive`` header
    (an engine sends the same one every time: parsed once)."""
    match = _KEEP_ALIVE_TIMEOUT.search(keep_alive)
    if match is None:
        return _DEFAULT_IDLE_S
    # Give up on it a second before the engine would: no race with its close.
    return max(0.0, int(match.group(1)) - 1.0)


class UpstreamConnection(asyncio.Protocol, Exchange):
    """One TCP connection to the engine. Unlike the measuring client's own sockets it reads
    through asyncio's transport, whose pause/resume gives the back-pressure a proxy needs; the
    exchange bookkeeping is the client's (``ttft.client.exchange``)."""

    def __init__(self) -> None:
        Exchange.__init__(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.last_rx_ns = 0
        self.last_data_ns = 0  # when the engine last sent bytes (not reset when we send)
        self.reuse_until = 0.0  # loop time after which an idle connection is not reused
        self._paused = False
        # The client connection that whole chunks are written to as they came (``offer_relay``),
        # and the one offered, used whenever the parser stands between two chunks.
        self.relay_to: RelayTarget | None = None
        self._relay_offer: RelayTarget | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports are not asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        t_ns = _clock()
        self.last_rx_ns = self.last_data_ns = t_ns
        to = self.relay_to
        parser = self._parser
        if to is not None and not to.closed and to.transport is not None and parser is not None:
            # The usual read, one whole chunk (one event), is checked here in a few C calls;
            # ``whole_chunks`` is the same check for several.
            nl = data.find(b"\n", 0, 18)
            if nl > 1 and data[nl - 1] == 13:
                size_text = data[: nl - 1]
                if not size_text.strip(HEX_DIGITS):
                    stop = nl + 1 + int(size_text, 16)
                    if stop > nl + 1 and len(data) == stop + 2 and data.endswith(b"\r\n"):
                        parser.bytes_received += stop + 2
                        to.transport.write(data)
                        return
            whole = whole_chunks(data)
            if whole:
                if whole == len(data):  # several events: as they came
                    parser.bytes_received += whole
                    to.transport.write(data)
                    return
                if data[whole:] == LAST_CHUNK:  # the last events and the end of the answer
                    parser.bytes_received += whole
                    to.transport.write(data[:whole])
                    data = data[whole:]
        self._feed(data, t_ns)
        offer = self._relay_offer
        if offer is not None:
            parser = self._parser
            self.relay_to = offer if parser is not None and parser.between_chunks else None

    def offer_relay(self, to: RelayTarget) -> None:
        """From now on, whole chunks may go to ``to`` as they came (see the module's doc):
        the sink has sent the head, frames its stream in chunks, and needs no event of it."""
        self._relay_offer = to  # taken up after this read (``data_received``)

    def _no_relay(self) -> None:
        self.relay_to = self._relay_offer = None

    def eof_received(self) -> bool:
        self._ended("")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(str(exc) if exc else "")

    def _ended(self, reason: str) -> None:
        self.closed = True
        self._peer_closed(_clock(), reason)

    def start(self, parser: ResponseParser, payload: bytes) -> asyncio.Future[bool]:
        assert self.transport is not None
        if self.closed or self.transport.is_closing():
            raise RequestFailed(errors.DISCONNECT, "the connection was closed before sending")
        self._no_relay()
        waiter = self._begin(parser)
        self.last_rx_ns = _clock()
        self.transport.write(payload)
        return waiter

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def exchanging(self) -> bool:
        """A request was sent and its response is not over yet."""
        return self._waiter is not None

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.last_rx_ns = _clock()  # the engine's silence is timed from here again
            self.transport.resume_reading()

    def abort(self) -> None:
        self.closed = True
        self._parser = None
        if self.transport is not None:
            self.transport.abort()


@dataclass(slots=True)
class UpstreamPoolStats:
    """Connection counts of one engine's pool since it was made. Not the measuring client's
    ``client.PoolStats``: this pool has no kernel stamps or in-use peaks to count."""

    opened: int = 0
    reused: int = 0
    # Requests sent again on a new connection: the engine had closed the idle one they took.
    stale_retries: int = 0


class UpstreamPool:
    """Keep-alive connections to one engine; no cap of its own (admission control caps use).

    Its connections share the client's exchange mechanism; the pool keeps its own policy because
    a proxy's differs from a measuring client's: it honours the engine's ``Keep-Alive: timeout``
    and a bound on idle connections (a gateway lives for days), and watches each exchange for
    silence, while the client's pool stamps reads in the kernel, opens one connection per
    concurrent stream and detects servers that close after every answer.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        use_tls: bool = False,
        connect_timeout_s: float = 5.0,
        idle_timeout_s: float = 600.0,
        max_idle: int = 256,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl.create_default_context() if use_tls else None
        self.connect_timeout_s = connect_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_idle = max_idle
        self._idle: deque[UpstreamConnection] = deque()
        self._busy: set[UpstreamConnection] = set()
        self._closed = False
        self.stats = UpstreamPoolStats()
        self._event_loop: asyncio.AbstractEventLoop | None = None
        # The silence check runs every ``_sweep_s`` while exchanges run: an upstream that went
        # quiet is caught between ``idle_timeout_s`` and ``idle_timeout_s + _sweep_s``.
        self._sweep_s = max(0.005, min(1.0, idle_timeout_s / 8))
        self._sweeper: asyncio.TimerHandle | None = None

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The loop the pool serves on, looked up once: on Python 3.11 each
        asyncio.get_running_loop() is a getpid system call, and the pool asked three times per
        request."""
        loop = self._event_loop
        if loop is None:
            loop = self._event_loop = asyncio.get_running_loop()
        return loop

    async def exchange(
        self,
        payload: bytes,
        sink: ResponseSink,
        *,
        on_connection: Callable[[UpstreamConnection], None] | None = None,
    ) -> None:
        """Send ``payload``; feed the response to ``sink`` until it is over.

        Raises ``RequestFailed`` (connect, disconnect, timeout, protocol, incomplete_stream).
        Cancelling the caller closes the connection, which is how an engine learns that the
        client went away.
        """
        # An idle connection is taken without a coroutine; only a new one is awaited.
        taken = self._reuse()
        reused = taken is not None
        conn = taken if taken is not None else await self._open()
        parser = ResponseParser(sink, decode=False)
        try:
            try:
                reusable = await self._start(conn, parser, payload, on_connection)
            except RequestFailed as exc:
                if not (reused and exc.kind == errors.DISCONNECT and parser.bytes_received == 0):
                    raise
                # The engine had closed this idle connection: the request never reached it.
                self._drop(conn)
                self.stats.stale_retries += 1
                conn = await self._open()
                parser = ResponseParser(sink, decode=False)
                reusable = await self._start(conn, parser, payload, on_connection)
        except asyncio.CancelledError:
            # A client that closes the moment its answer ended (curl, one connection per
            # request) cancels us after the response was complete: the connection is in step
            # and goes back to the pool. Dropping it made every such request pay a new connect.
            if parser.done and parser.reusable and not parser.stopped:
                self._release(conn, True, parser.head)
            else:
                self._drop(conn)
            raise
        except BaseException:
            self._drop(conn)
            raise
        self._release(conn, reusable, parser.head)

    def _start(
        self,
        conn: UpstreamConnection,
        parser: ResponseParser,
        payload: bytes,
        on_connection: Callable[[UpstreamConnection], None] | None,
    ) -> asyncio.Future[bool]:
        """Send; the future the caller awaits says whether the connection may be reused."""
        waiter = conn.start(parser, payload)
        if on_connection is not None:
            on_connection(conn)
        self._watch()
        return waiter

    def _watch(self) -> None:
        """Arm the pool's one silence check while it has exchanges running. A timer armed and
        cancelled per exchange (a TimerHandle, a heap push and pop) cost more than the check:
        one sweep per interval looks at each busy connection's last read instead."""
        if self._sweeper is None and not self._closed:
            self._sweeper = self._loop().call_later(self._sweep_s, self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        limit_ns = int(self.idle_timeout_s * 1e9)
        now = _clock()
        for conn in list(self._busy):
            # A paused connection is silent because we stopped reading (the client is behind):
            # the client's write timeout deals with that; ``resume`` restarts its clock.
            if conn.exchanging and not conn.paused and now - conn.last_rx_ns >= limit_ns:
                conn._fail(
                    RequestFailed(
                        errors.TIMEOUT,
                        f"{self.host}:{self.port} sent nothing for {self.idle_timeout_s:g} s",
                    )
                )
        if self._busy:
            self._watch()

    def _reuse(self) -> UpstreamConnection | None:
        """An idle connection that may still be used, or None (then ``_open`` makes one)."""
        if self._closed:
            raise RequestFailed(errors.CANCELLED, "the gateway is shutting down")
        now = self._loop().time()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if (
                conn.closed
                or conn.transport is None
                or conn.transport.is_closing()
                or now > conn.reuse_until
            ):
                conn.abort()
                continue
            self.stats.reused += 1
            self._busy.add(conn)
            return conn
        return None

    async def _open(self) -> UpstreamConnection:
        if self._closed:
            raise RequestFailed(errors.CANCELLED, "the gateway is shutting down")
        conn = await self._connect()
        self.stats.opened += 1
        self._busy.add(conn)
        return conn

    def _release(self, conn: UpstreamConnection, reusable: bool, head: ResponseHead | None) -> None:
        self._busy.discard(conn)
        conn._no_relay()
        if not reusable or conn.closed or self._closed or len(self._idle) >= self.max_idle:
            conn.abort()
            return
        keep_alive = head.headers.get("keep-alive") if head is not None else None
        keep_s = _reuse_seconds(keep_alive) if keep_alive else _DEFAULT_IDLE_S
        conn.reuse_until = self._loop().time() + keep_s
        self._idle.append(conn)

    def _drop(self, conn: UpstreamConnection) -> None:
        self._busy.discard(conn)
        conn._no_relay()
        conn.abort()

    async def _connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                transport, conn = await loop.create_connection(
                    UpstreamConnection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                    family=socket.AF_UNSPEC,
                )
        except TimeoutError:
            raise RequestFailed(
                errors.TIMEOUT,
                f"connecting to {self.host}:{self.port} took over {self.connect_timeout_s} s",
            ) from None
        except OSError as exc:
            raise RequestFailed(
                errors.CONNECT,
                f"could not connect to {self.host}:{self.port}: {exc.strerror or exc}",
            ) from None
        if conn.transport is None:
            # uvloop returns before it calls connection_made (asyncio calls it first).
            conn.connection_made(transport)
        return conn

    def sent_within(self, window_s: float) -> bool:
        """Whether the engine sent bytes on one of its exchanges within the last ``window_s``:
        busy answering, not dead, whatever a health check that timed out says."""
        since = _clock() - int(window_s * 1e9)
        return any(conn.last_data_ns >= since for conn in self._busy)

    def close(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conn in list(self._idle) + list(self._busy):
            conn.abort()
        self._idle.clear()
        self._busy.clear()


class CollectSink:
    """A sink that keeps a small response whole (health checks, /props, /tokenize)."""

    def __init__(self, limit: int = 4 * 1024 * 1024) -> None:
        self.head: ResponseHead | None = None
        self.body = bytearray()
        self.limit = limit

    def on_head(self, head: ResponseHead, t_ns: int) -> None:
        self.head = head

    def on_first_byte(self, t_ns: int) -> None:
        pass

    def on_body(self, data: bytes, t_ns: int) -> bool:
        if len(self.body) + len(data) > self.limit:
            raise RequestFailed(errors.PROTOCOL, f"response larger than {self.limit} bytes")
        self.body += data
        return False

    def on_end(self, t_ns: int) -> None:
        pass

    @property
    def status(self) -> int:
        return self.head.status if self.head is not None else 0


def request_bytes(
    method: str,
    host_header: str,
    path: str,
    body: bytes | None,
    headers: list[tuple[str, str]] | tuple[tuple[str, str], ...],
) -> bytes:
    # One string built in one pass (this runs for every proxied request).
    head = f"{method} {path} HTTP/1.1\r\nHost: {host_header}\r\n" + "".join(
        [f"{k}: {v}\r\n" for k, v in headers]
    )
    if body is None:
        return (head + "\r\n").encode("latin-1")
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
