"""One connection carrying one request at a time, and where its timestamps come from.

Each read is stamped once, and that stamp is every rung the read completes. The best stamp is
the kernel's: on Linux a plain TCP socket is read with ``recvmsg`` and ``SO_TIMESTAMPNS``, which
gives the time the last packet of the read reached the socket, whatever the process was doing
then (descheduled by other tenants of the machine, busy with other streams). The clock is
``CLOCK_REALTIME``; it is moved onto ``perf_counter_ns()`` (``CLOCK_MONOTONIC``) by the offset
between the two read at that moment, and never allowed later than the moment of reading.
Elsewhere (TLS, other systems) the stamp is ``perf_counter_ns()`` in the read callback.

Reads are stamped and queued, then parsed in one callback after every socket of that select has
been read (``Inbox``): token streams are bursty (an engine emits a token to every running
stream at each decode step), and parsing each read where it arrives would hold the next socket's
read back by all the parsing before it.
"""

from __future__ import annotations

import asyncio
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, cast

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.client.exchange import Exchange
from ttft.client.http import ResponseParser

_clock = time.perf_counter_ns
_READ_SIZE = 256 * 1024
# SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) is 35 on the Linux architectures listed; Python 3.11 has no
# constant for it. Elsewhere kernel stamps stay off and reads are stamped when read.
_SO_TIMESTAMPNS = (
    35
    if sys.platform == "linux"
    and platform.machine()
    in {
        "x86_64",
        "amd64",
        "aarch64",
        "arm64",
        "i386",
        "i686",
        "armv7l",
        "armv8l",
        "ppc64le",
        "s390x",
        "riscv64",
    }
    else None
)
_TIMESPEC = struct.Struct("@ll")
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)
_MAX_QUEUED_NS = 10_000_000_000  # a kernel stamp older than this is not trusted (clock step)
# Read gaps kept until a client-health probe takes them: a cell's first 200k reads (a few MB
# at most for a client nobody probes).
_MAX_GAPS = 200_000


def _kernel_stamp(ancillary: list[tuple[int, int, bytes]], now: int) -> int:
    """The arrival time in ``perf_counter_ns()`` terms, or ``now`` when there is none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            offset = time.time_ns() - _clock()  # realtime - monotonic, read back to back
            t_ns: int = sec * 1_000_000_000 + nsec - offset
            if t_ns > now:
                return now  # the offset's own jitter: never later than the moment of reading
            if t_ns > now - _MAX_QUEUED_NS:
                return t_ns
    return now


class Inbox:
    """Stamped reads waiting to be parsed, in arrival order, across a pool's connections."""

    __slots__ = ("_items", "_scheduled", "gaps_ns")

    def __init__(self) -> None:
        self._items: list[tuple[Connection, bytes | None, int, str]] = []
        self._scheduled = False
        # Kernel receive stamp -> read, per kernel-stamped read: how late this process reads.
        self.gaps_ns: list[int] = []

    def take_gaps(self) -> list[int]:
        gaps, self.gaps_ns = self.gaps_ns, []
        return gaps

    def put(self, conn: Connection, data: bytes | None, t_ns: int, reason: str = "") -> None:
        """Queue a read (``data``) or the peer's close (``None``) stamped ``t_ns``."""
        self._items.append((conn, data, t_ns, reason))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        items, self._items = self._items, []
        for conn, data, t_ns, reason in items:
            if data is None:
                conn._peer_closed(t_ns, reason)
            else:
                conn._feed(data, t_ns)


class Connection(Exchange):
    """What the pool uses: ``start`` a request, ``abort``, and ``closed``. Subclasses read; the
    inbox feeds the exchange in arrival order."""

    def __init__(self, inbox: Inbox) -> None:
        super().__init__()
        self.closed = False
        self.requests = 0
        self.kernel_stamps = False  # whether reads carry the kernel's arrival time
        self.idle_since_ns = 0  # when it last went back to the pool
        self._inbox = inbox

    def start(
        self, parser: ResponseParser, payload: bytes, on_sent: Callable[[int], None]
    ) -> asyncio.Future[bool]:
        """Send a request; the future says, once the response is over, if the connection can
        carry another. It raises ``RequestFailed`` (or a bug's exception) instead."""
        if self.closed:
            raise RequestFailed(errors.DISCONNECT, "the connection was closed before sending")
        waiter = self._begin(parser)
        self.requests += 1
        on_sent(_clock())
        self._send(payload)
        return waiter

    def usable(self) -> bool:
        """Whether an idle connection can carry another request (the peer has not closed it)."""
        return not self.closed

    def _send(self, payload: bytes) -> None:
        raise NotImplementedError


class TcpConnection(Connection):
    """A plain TCP socket driven by the loop's reader/writer callbacks, stamped by the kernel."""

    def __init__(self, sock: socket.socket, inbox: Inbox, kernel_stamps: bool = True) -> None:
        super().__init__(inbox)
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self._out = bytearray()  # what the kernel did not take yet
        if kernel_stamps and _SO_TIMESTAMPNS is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self.kernel_stamps = True
            except OSError:
                pass
        self._loop.add_reader(self._fd, self._read_ready)

    @classmethod
    async def open(
        cls, family: int, address: tuple[Any, ...], inbox: Inbox, kernel_stamps: bool = True
    ) -> TcpConnection:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.get_running_loop().sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return cls(sock, inbox, kernel_stamps)

    def usable(self) -> bool:
        # Servers that close after each streamed answer without saying so (llama-server does)
        # send their FIN just after the last chunk: look for it before reusing, not after.
        if self.closed:
            return False
        try:
            self._sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True  # nothing waiting: open and idle
        except OSError:
            pass
        self.abort()  # closed by the peer, or bytes nobody asked for
        return False

    def _read_ready(self) -> None:
        try:
            if self.kernel_stamps:
                data, ancillary, _, _ = self._sock.recvmsg(_READ_SIZE, _ANC_SIZE)
                now = _clock()
                t_ns = _kernel_stamp(ancillary, now) if ancillary else now
                if ancillary and len(self._inbox.gaps_ns) < _MAX_GAPS:
                    self._inbox.gaps_ns.append(now - t_ns)
            else:
                data = self._sock.recv(_READ_SIZE)
                t_ns = _clock()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(_clock(), exc.strerror or str(exc))
            return
        if data:
            self._inbox.put(self, data, t_ns)
        else:
            self._lost(t_ns, "")

    def _lost(self, t_ns: int, reason: str) -> None:
        self.closed = True
        self._loop.remove_reader(self._fd)
        self._inbox.put(self, None, t_ns, reason)

    def _send(self, payload: bytes) -> None:
        if self._out:
            self._out += payload
            return
        try:
            sent = self._sock.send(payload)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self.abort()
            raise RequestFailed(
                errors.DISCONNECT, f"could not send the request: {exc.strerror or exc}"
            ) from None
        if sent < len(payload):
            self._out += payload[sent:]
            self._loop.add_writer(self._fd, self._write_ready)

    def _write_ready(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(_clock(), exc.strerror or str(exc))
            self._loop.remove_writer(self._fd)
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)

    def abort(self) -> None:
        self.closed = True
        self._parser = None
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            if self._out:
                self._loop.remove_writer(self._fd)
                self._out.clear()
            self._sock.close()
            self._fd = -1


class ProtocolConnection(Connection, asyncio.Protocol):
    """A connection through an asyncio transport (TLS; plain TCP where the loop has no
    ``add_reader``); reads are stamped in the read callback."""

    def __init__(self, inbox: Inbox) -> None:
        super().__init__(inbox)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports are not asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._inbox.put(self, data, _clock())

    def eof_received(self) -> bool:
        self.closed = True
        self._inbox.put(self, None, _clock())
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._inbox.put(self, None, _clock(), str(exc) if exc else "")

    def _send(self, payload: bytes) -> None:
        assert self.transport is not None
        if self.transport.is_closing():
            raise RequestFailed(errors.DISCONNECT, "the connection was closed before sending")
        self.transport.write(payload)

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def abort(self) -> None:
        self.closed = True
        self._parser = None
        if self.transport is not None:
            self.transport.abort()
