"""One client connection of the HTTP/1.1 server (``server``): framing, limits, timers.

What matters for TTFT: a response body is written to the socket the moment the handler has it
(no response buffer, no compression, ever), the head goes out in the same write as the first body
bytes (one syscall, and ``Server-Timing`` can carry the upstream's time to first byte), and a
client that goes away cancels its handler, so the upstream request is cancelled too.

What matters for safety, with a hostile client in mind (the list is in docs/gateway.md,
"Security"): heads parsed by llhttp and bounded, bodies framed by ``Content-Length`` only and
counted as they arrive against a budget (``budget``), the key checked from the head
(``precheck``), pipelined requests held unparsed while the client does not read, and a deadline
for every phase of a connection, checked by the server's sweeper.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, cast

from ttft.gateway.errors import GatewayError
from ttft.gateway.http.budget import BodyBudget, BodyIntake, server_busy
from ttft.gateway.http.response import Response
from ttft.gateway.http.socket_side import SocketSide
from ttft.gateway.http.wire import BadHead, HeadParser, Request, framing, plain_head
from ttft.gateway.log_limit import ThrottledLog

Handler = Callable[[Request, Response], Awaitable[None]]
# Checks a request from its head alone; raises GatewayError to refuse it before its body.
# Returns who the request counts against in the body budget (its key), or None: its address.
Precheck = Callable[[Request], str | None]


_clock = time.perf_counter_ns
# While a request is answered the client may already send its next one (pipelining): hold at
# most this much beyond a full head before we stop reading from it.
_PIPELINE_SLACK = 16 * 1024


class ConnectionHost(Protocol):
    """What a connection uses of the server that accepted it (``server.HttpServer``): the
    handler and its precheck, the limits and deadlines, the shared body budget, the connection
    count (``opened`` may refuse one), the refused connections left to linger, the quiet log."""

    handler: Handler
    precheck: Precheck | None
    max_header_bytes: int
    max_body_bytes: int
    body_timeout_s: float
    first_request_timeout_s: float
    read_timeout_s: float
    idle_timeout_s: float
    write_timeout_s: float
    stall_timeout_s: float
    body_budget: BodyBudget
    lingering: set[Connection]
    max_lingering: int
    quiet_log: ThrottledLog

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def now(self) -> float: ...

    def opened(self, conn: Connection) -> GatewayError | None: ...

    def closed(self, conn: Connection) -> None: ...


class Connection(SocketSide):
    """One client connection: parses requests, runs the handler, one request at a time."""

    def __init__(self, server: ConnectionHost) -> None:
        super().__init__(server.now)
        self.server = server
        self.http11 = True
        self.peer = ""
        self.client = ""  # the peer's address, what per-client limits count
        self._buf = bytearray()  # received bytes no request has taken yet
        self._scanned = 0  # _buf[:_scanned] was searched for the end of the head already
        self._head: HeadParser | None = None
        self._request: Request | None = None  # its head is parsed, its body is arriving
        self._keep_alive = True
        # The body being received (or held by the running request) and its part of the budget.
        self._intake: BodyIntake | None = None
        self._request_deadline: float | None = None  # the read deadline of the request
        self._request_started_ns = 0
        self._task: asyncio.Task[None] | None = None
        self._response: Response | None = None
        self._held = False  # an answer ended while write-paused: the next waits for a resume
        self._refused = False

    @property
    def busy(self) -> bool:
        return self._task is not None

    # -- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports are not asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client = str(peer[0]) if isinstance(peer, tuple) else self.peer
        refusal = self.server.opened(self)
        if refusal is not None:
            # Lingering keeps the answer from a reset by unread request bytes, but holds a
            # descriptor until the client closes: 2,000 idle connections from one address ran
            # a 1,024 file limit out. Past a few dozen, refused ones are closed at once.
            lingering = self.server.lingering
            linger = len(lingering) < self.server.max_lingering
            if linger:
                lingering.add(self)
            self._refuse_with(refusal, linger=linger)
            return
        # A fresh connection waits no longer than an idle keep-alive one: holding sockets open
        # without sending anything is the cheapest attack there is.
        server = self.server
        self._arm(min(server.first_request_timeout_s, server.idle_timeout_s), self._idle_expired)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # we answered and are closing: whatever else arrives is not read
        if self._request is not None:
            self._take_body(data)
            return
        if not self._buf and self._task is None and not self._held:
            self._request_started_ns = _clock()
            self._arm(self.server.read_timeout_s, self._read_expired)
        self._buf += data
        if self._task is not None or self._held:
            if len(self._buf) > self.server.max_header_bytes + _PIPELINE_SLACK:
                self._pause_reading()
            return
        self._parse()

    def eof_received(self) -> bool | None:
        # The client closed its side. Clients of LLM APIs do not half-close to wait for an
        # answer; they close because they left. Treat it as a disconnect (as nginx does with
        # its 499), so the running request is cancelled upstream.
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._disarm()
        self._write_deadline = None
        self._release_budget()
        self.server.closed(self)
        task = self._task
        if task is not None and not task.done():
            task.cancel()  # the client is gone: the handler stops its upstream request

    def pause_writing(self) -> None:
        self.write_paused = True
        response = self._response
        # A stream that holds an engine slot (its upstream is paused with it) may stall for
        # ``stall_timeout_s`` only: a client reading 200 B/s never reads *nothing*, and held
        # the slot for as long as it liked. It is dropped, which frees the slot.
        server = self.server
        holds_slot = response is not None and response.on_pause is not None
        wait = min(server.stall_timeout_s, server.write_timeout_s) if holds_slot else None
        self._write_deadline = server.now() + (wait or server.write_timeout_s)
        if response is not None and response.on_pause is not None:
            response.on_pause(True)

    def resume_writing(self) -> None:
        self.write_paused = False
        self._write_deadline = None
        response = self._response
        if response is not None and response.on_pause is not None:
            response.on_pause(False)
        if self._held and not self.closed:
            self._next_request()

    # -- parsing -------------------------------------------------------------------------

    def _parse(self) -> None:
        """Look for a whole head in ``_buf``; feed llhttp only bytes it has not seen."""
        buf = self._buf
        limit = self.server.max_header_bytes
        if self._head is None:
            self._head = HeadParser()
        end = buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
        stop = end + 4 if end >= 0 else len(buf)
        if stop > limit:
            self._refuse(431, f"request head larger than {limit} bytes", "header_too_large")
            return
        try:
            # Fed as it arrives, so a malformed head (bare LF line ends...) is refused at once.
            self._head.feed(bytes(buf[self._scanned : stop]))
            self._scanned = stop
            if end < 0:
                return
            method, target, version, headers = self._head.finish()
        except BadHead as exc:
            self._refuse(400, f"malformed HTTP request: {exc}", "bad_http")
            return
        del buf[:stop]
        self._scanned = 0
        self._head = None
        self._start_request(method, target, version, headers)

    def _start_request(
        self, method: str, target: str, version: str, headers: dict[str, str]
    ) -> None:
        self.http11 = version == "HTTP/1.1"
        server = self.server
        try:
            length, keep = framing(headers, self.http11, server.max_body_bytes)
        except GatewayError as exc:
            self._refuse_with(exc)
            return
        path, _, query = target.partition("?")
        request = Request(
            method, path, query, version, headers, b"", self._request_started_ns, self.peer
        )
        client: str | None = None
        if server.precheck is not None:
            try:
                client = server.precheck(request)  # the key, the route: before any body byte
            except GatewayError as exc:
                if length:
                    self._refuse_with(exc)  # its body is not read: the connection ends
                else:
                    self._dispatch(request, keep, exc)
                return
        if length == 0:
            self._dispatch(request, keep)
            return
        # The body's bytes are counted as they arrive (``_take_body``), never from the length
        # it declares, and must keep coming: at most ``body_timeout_s`` between two reads.
        self._intake = BodyIntake(server.body_budget, client or self.client, length)
        self._request_deadline = self._deadline
        self._arm_body_timer()
        self._request, self._keep_alive = request, keep
        rest = bytes(self._buf)
        self._buf.clear()
        if rest:
            self._take_body(rest)
        elif self.http11 and headers.get("expect", "").lower() == "100-continue":
            # The client waits for our word before sending: no word when the body cannot fit.
            if not server.body_budget.could_hold(self._intake.client, length):
                self._refuse_with(server_busy())
                return
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _take_body(self, data: bytes) -> None:
        intake = self._intake
        assert intake is not None
        taken = intake.take(data)
        if taken < 0:
            self._refuse_with(server_busy())
            return
        if intake.need:
            self._arm_body_timer()
            return
        if len(data) > taken:
            self._buf += data[taken:]  # the next request, pipelined
        request, self._request = self._request, None
        assert request is not None
        request.body = intake.body()
        request.charge, request.uncharge = intake.charge, intake.uncharge
        self._dispatch(request, self._keep_alive)

    def _dispatch(
        self, request: Request, keep_alive: bool, error: GatewayError | None = None
    ) -> None:
        self._disarm()
        response = Response(self, keep_alive)
        self._response = response
        # The server's loop, not asyncio.get_running_loop(): on Python 3.11 that asks the kernel
        # for the pid on every call, several times per request on the hot path.
        loop = self.server.loop or asyncio.get_running_loop()
        self._task = loop.create_task(self._run(request, response, error))
        if len(self._buf) > self.server.max_header_bytes + _PIPELINE_SLACK:
            self._pause_reading()

    async def _run(self, request: Request, response: Response, error: GatewayError | None) -> None:
        try:
            if error is None:
                await self.server.handler(request, response)
            else:  # refused from its head: answered like any other, in order, on a task
                received = request.received_ns
                response.server_timing = lambda: f"gateway;dur={(_clock() - received) / 1e6:.3f}"
                response.send_error(error)
        except asyncio.CancelledError:
            if not self.closed:
                raise
            return  # the client went away; the handler cleaned up after itself
        except Exception:
            # A client that found a bug could otherwise write a traceback per request.
            self.server.quiet_log.log(
                "unhandled",
                logging.ERROR,
                "unhandled error for %s %s",
                request.method,
                request.path[:200],
                exc_info=True,
            )
            if not response.started and not self.closed:
                response.send_error(
                    GatewayError(
                        500, "internal gateway error", type="server_error", code="internal_error"
                    )
                )
            else:
                response.abort()
        finally:
            self._task = None
            self._response = None
            self._release_budget()
        if not response.finished:
            response.abort()  # a handler that forgot to end: never leave a client hanging
            return
        if self.closed or not response.keep_alive:
            return
        if self.write_paused:
            # The client is not reading its answers: parse nothing more until it does, or
            # one connection could make us answer (and buffer) every request it pipelined.
            self._held = True
            return
        self._next_request()

    def _next_request(self) -> None:
        self._held = False
        self._resume_reading()
        if self._buf:
            self._request_started_ns = _clock()
            self._arm(self.server.read_timeout_s, self._read_expired)
            self._parse()
        else:
            self._arm(self.server.idle_timeout_s, self._idle_expired)

    def _release_budget(self) -> None:
        if self._intake is not None:
            self._intake.release()
            self._intake = None

    def _arm_body_timer(self) -> None:
        """The next body bytes are due within ``body_timeout_s``, the whole request by its
        read deadline: a body that trickles in cannot hold a connection (and its share of
        the budget) for longer than a body that stops."""
        server = self.server
        due = server.now() + server.body_timeout_s
        deadline = self._request_deadline
        if deadline is not None and deadline < due:
            self._arm(deadline - server.now(), self._read_expired)
        else:
            self._arm(server.body_timeout_s, self._body_stalled)

    def _body_stalled(self) -> None:
        if self._task is None and self._request is not None:
            self._refuse(
                408,
                f"no body bytes arrived for {self.server.body_timeout_s:g} s",
                "request_timeout",
            )

    def _refuse(self, status: int, message: str, code: str) -> None:
        self._refuse_with(GatewayError(status, message, code=code))

    def _refuse_with(self, error: GatewayError, *, linger: bool = True) -> None:
        """Answer a request we will not read (bad head, too big, refused) and close."""
        self._disarm()
        self._refused = True
        self._release_budget()
        body = error.body()
        extra = error.headers
        if self._request_started_ns:
            spent_ms = (_clock() - self._request_started_ns) / 1e6
            extra = (*extra, ("Server-Timing", f"gateway;dur={spent_ms:.3f}"))
        if self.transport is not None and not self.closed:
            head = plain_head(error.status, len(body), close=True, extra=extra)
            self.transport.write(head + body)
        self._buf.clear()
        self._request = None
        if linger:
            self._linger()
        else:
            self.close_after_write()

    def _linger(self) -> None:
        """Close after an error answer without losing it: closing a socket with unread request
        bytes sends a reset, which can destroy the answer in flight. So: send our FIN, read and
        drop what the client still sends, and close when it closes (or after a short grace)."""
        transport = self.transport
        if transport is None or self.closed:
            return
        try:
            if self._reading_paused:
                self._reading_paused = False
                transport.resume_reading()
            if transport.can_write_eof():
                transport.write_eof()
        except OSError as exc:
            # The client is gone already (it closed while its connection was being refused):
            # nothing to linger for. A client can cause this at will, so no traceback per
            # connection: one line per interval, with a count.
            self.server.quiet_log.log(
                "linger", logging.INFO, "closing %s: %s", self.peer, exc.strerror or exc
            )
            self.abort()
            return
        self._arm(2.0, self.abort)

    # -- timers --------------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        if self._write_deadline is not None and now >= self._write_deadline:
            why = "dropping %s: it read too slowly to take its answer"
            self.server.quiet_log.log("write", logging.INFO, why, self.peer)
            self.abort()
            return
        if self._deadline is not None and now >= self._deadline:
            callback = self._on_deadline
            self._deadline = self._on_deadline = None
            if callback is not None:
                callback()

    def _idle_expired(self) -> None:
        if self._task is None and not self._buf and self._request is None:
            self.close_after_write()

    def _read_expired(self) -> None:
        if self._task is None:
            self._refuse(
                408,
                f"the request did not arrive within {self.server.read_timeout_s} s",
                "request_timeout",
            )
