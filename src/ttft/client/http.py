"""HTTP/1.1 request heads and a sans-I/O response parser that timestamps nothing itself.

The connection (``pool.py``) reads the clock once per read and hands bytes plus that reading to
``ResponseParser.feed``; the parser undoes the framing (``Content-Length``, ``chunked``, or until
close) and the content coding (gzip/deflate, decoded incrementally so each piece keeps the time
its bytes arrived) and passes the result to a ``ResponseSink``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ttft.client import errors
from ttft.client.errors import RequestFailed

MAX_HEAD_BYTES = 64 * 1024
# A chunk-size line with its extensions; longer is an attack on our memory, not a real server.
MAX_CHUNK_LINE_BYTES = 4096
_HEAD_END = re.compile(rb"\r?\n\r?\n")
# The size of a chunk: hex digits only. int(x, 16) also takes "-6", "+5", "0x5" and "1_0": a
# negative size moved the parser backwards over its own input, forever.
_CHUNK_SIZE_TEXT = re.compile(rb"[0-9A-Fa-f]{1,16}")
_HEX_DIGITS = b"0123456789abcdefABCDEF"
# Control bytes in a head (tab and the LF that ends a line aside): a bare CR in a value is a line
# break to some parsers, so a value that carried one would split the head it is copied into.
_HEAD_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NO_BODY_STATUSES = frozenset({204, 304})


def request_head(method: str, target: str, host_header: str, headers: Mapping[str, str]) -> bytes:
    """Request line and headers up to (without) ``Content-Length`` and the blank line.

    ``headers`` are sent as given; ``Host`` and ``Content-Length`` are always our own. A client
    builds this once per path and reuses it for every request.
    """
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host_header}"]
    lines.extend(
        f"{name}: {value}"
        for name, value in headers.items()
        if name.lower() not in ("host", "content-length")
    )
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def with_body(head: bytes, body: bytes) -> bytes:
    """A request from ``request_head``'s bytes and a body."""
    return b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)


def build_request(
    method: str, target: str, host_header: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    """Serialize one request: ``headers`` as given, ``Host`` and ``Content-Length`` our own."""
    return with_body(request_head(method, target, host_header, headers), body)


@dataclass(slots=True)
class ResponseHead:
    """Status line and headers. Header names are lower-cased; repeated headers are comma-joined."""

    version: str
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def tokens(self, name: str) -> set[str]:
        value = self.headers.get(name)
        if not value:  # asked of every response for headers most do not have
            return set()
        return {t.strip().lower() for t in value.split(",") if t.strip()}


class ResponseSink(Protocol):
    """What the parser reports to. ``t_ns`` is the clock reading taken when the bytes arrived.

    Optional: a sink with ``on_first_byte(t_ns)`` is told when the first byte after the head
    arrived, before any unframing or decoding (gzip can hold text back; the wire does not).
    """

    def on_head(self, head: ResponseHead, t_ns: int) -> None: ...

    def on_body(self, data: bytes, t_ns: int) -> bool:
        """Take decoded body bytes; return True to stop reading (the connection is then closed)."""
        ...

    def on_end(self, t_ns: int) -> None: ...


# Parser states.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_EOF, _DONE = range(8)


# Heads parsed lately, by their bytes: a server sends the same head for every answer of a kind
# (a streamed completion...), and parsing it took more than the rest of the head's handling.
# Bounded in count and size; a server whose heads all differ (a Date header) costs a lookup.
_PARSED_HEADS: dict[bytes, ResponseHead] = {}
_PARSED_HEADS_MAX = 64
_PARSED_HEAD_MAX_BYTES = 2048


def parse_head(raw: bytes) -> ResponseHead:
    """Parse a status line and header block (without the blank line that ends it).

    The same bytes give the same object (``_PARSED_HEADS``): a head is read, never changed.
    """
    cacheable = type(raw) is bytes and len(raw) <= _PARSED_HEAD_MAX_BYTES
    if cacheable:
        known = _PARSED_HEADS.get(raw)
        if known is not None:
            return known
    head = _parse_head_text(raw)
    if cacheable:
        if len(_PARSED_HEADS) >= _PARSED_HEADS_MAX:
            _PARSED_HEADS.clear()
        _PARSED_HEADS[raw] = head
    return head


def _parse_head_text(raw: bytes) -> ResponseHead:
    text = raw.decode("latin-1").replace("\r\n", "\n")
    bad = _HEAD_CONTROL.search(text)
    if bad is not None:
        raise RequestFailed(errors.PROTOCOL, f"control byte {bad.group()!r} in the response head")
    lines = text.split("\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise RequestFailed(errors.PROTOCOL, f"not an HTTP status line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise RequestFailed(errors.PROTOCOL, f"malformed header line: {line[:100]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return ResponseHead(
        version=parts[0][5:],
        status=int(parts[1]),
        reason=parts[2] if len(parts) > 2 else "",
        headers=headers,
    )


class ResponseParser:
    """Parses one response from successive reads and drives a ``ResponseSink``.

    ``feed`` returns True once the response is over: complete, or stopped by the sink. After that
    ``reusable`` says whether the connection may carry another request.
    """

    __slots__ = (
        "_buf",
        "_decode",
        "_decoder",
        "_keep_alive",
        "_on_first_byte",
        "_remaining",
        "_sink",
        "_state",
        "_trailer_bytes",
        "body_started",
        "bytes_received",
        "head",
        "reusable",
        "stopped",
    )

    def __init__(self, sink: ResponseSink, *, decode: bool = True) -> None:
        """``decode=False``: a content-coded body is a protocol error (for a proxy that asked
        for ``identity``: a small gzip body can decode to gigabytes in one read)."""
        self._sink = sink
        self._decode = decode
        self._on_first_byte: Callable[[int], None] | None = getattr(sink, "on_first_byte", None)
        self._state = _HEAD
        self._buf = b""
        self._remaining = 0
        self._decoder: zlib._Decompress | None = None
        self._keep_alive = False
        self._trailer_bytes = 0
        self.head: ResponseHead | None = None
        self.bytes_received = 0
        self.body_started = False
        self.reusable = False
        self.stopped = False

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def between_chunks(self) -> bool:
        """A chunked body, read up to the end of a chunk: the next byte starts a size line
        (what lets a proxy pass whole chunks on as they came, ``gateway.upstream``)."""
        return self._state == _CHUNK_SIZE and not self._buf and self._decoder is None

    def feed(self, data: bytes, t_ns: int) -> bool:
        """Consume one read. Raises ``RequestFailed`` (kind ``protocol``) on malformed input."""
        self.bytes_received += len(data)
        if self._state == _DONE:
            self.reusable = False  # bytes after the response: the connection is out of step
            return True
        buf = self._buf + data if self._buf else data
        self._buf = b""
        if self._state == _HEAD:
            buf = self._parse_head(buf, t_ns)
            if self._state == _HEAD or self._state == _DONE:
                return self._state == _DONE
        if not self.body_started and buf:
            self.body_started = True
            if self._on_first_byte is not None:
                self._on_first_byte(t_ns)
        if self._state == _UNTIL_EOF:
            return self._emit(buf, t_ns) if buf else False
        if self._state == _LENGTH:
            piece = buf[: self._remaining]
            self._remaining -= len(piece)
            if len(buf) > len(piece):
                self._keep_alive = False
            if piece and self._emit(piece, t_ns):
                return True
            if self._remaining == 0:
                return self._finish(t_ns)
            return False
        return self._feed_chunked(buf, t_ns)

    def eof(self, t_ns: int, reason: str = "") -> None:
        """The peer closed the connection. Completes a close-delimited body, else raises."""
        if self._state == _UNTIL_EOF:
            self._finish(t_ns)
            return
        if self._state == _DONE:
            return
        why = f" ({reason})" if reason else ""
        if self._state == _HEAD:
            raise RequestFailed(
                errors.DISCONNECT, f"connection closed before the response status line{why}"
            )
        status = self.head.status if self.head is not None else None
        raise RequestFailed(
            errors.INCOMPLETE_STREAM, f"connection closed in the middle of the body{why}", status
        )

    # -- internals -----------------------------------------------------------------------

    def _parse_head(self, buf: bytes, t_ns: int) -> bytes:
        while True:
            match = _HEAD_END.search(buf)
            if match is None:
                if len(buf) > MAX_HEAD_BYTES:
                    raise RequestFailed(errors.PROTOCOL, "response head larger than 64 KiB")
                self._buf = buf
                return b""
            head = parse_head(buf[: match.start()])
            buf = buf[match.end() :]
            if 100 <= head.status < 200:
                continue  # interim response (100 Continue, 103 Early Hints): the real one follows
            break
        self.head = head
        version_ok = head.version == "1.1"
        conn = head.tokens("connection")
        self._keep_alive = ("close" not in conn) if version_ok else ("keep-alive" in conn)
        self._decoder = _decoder_for(head, self._decode)
        self._sink.on_head(head, t_ns)
        if head.status in _NO_BODY_STATUSES:
            self._finish(t_ns)
            return b""
        if "chunked" in head.tokens("transfer-encoding"):
            self._state = _CHUNK_SIZE
        elif "content-length" in head.headers:
            length = head.headers["content-length"]
            if not (length.isascii() and length.isdigit()):
                # int() takes "-5" and "+5": a negative length never reaches 0.
                raise RequestFailed(errors.PROTOCOL, f"bad Content-Length {length[:40]!r}")
            self._remaining = int(length)
            self._state = _LENGTH
            if self._remaining == 0:
                self._finish(t_ns)
        else:
            self._keep_alive = False
            self._state = _UNTIL_EOF
        return buf

    def _feed_chunked(self, buf: bytes, t_ns: int) -> bool:
        if self._state == _CHUNK_SIZE:
            # The common read of a stream: exactly one whole chunk ("1a\r\n" data "\r\n"), one
            # event of an engine. Checked in a few C calls; anything else takes the loop below.
            nl = buf.find(b"\n")
            if 1 < nl <= 17 and buf[nl - 1] == 13:
                size_text = buf[: nl - 1]
                if not size_text.strip(_HEX_DIGITS):
                    stop = nl + 1 + int(size_text, 16)
                    if stop > nl + 1 and len(buf) == stop + 2 and buf[stop:] == b"\r\n":
                        return self._emit(buf[nl + 1 : stop], t_ns)
        pieces: list[bytes] = []
        pos, end = 0, len(buf)
        while pos < end:
            state = self._state
            if state == _CHUNK_DATA:
                take = min(self._remaining, end - pos)
                pieces.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                if buf[pos:nl].strip():
                    raise RequestFailed(errors.PROTOCOL, "chunk data not followed by CRLF")
                pos = nl + 1
                self._state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                size_text = buf[pos:nl].split(b";", 1)[0].rstrip(b" \t\r")
                if _CHUNK_SIZE_TEXT.fullmatch(size_text) is None:
                    raise RequestFailed(
                        errors.PROTOCOL, f"bad chunk size line {buf[pos:nl][:40]!r}"
                    )
                size = int(size_text, 16)
                pos = nl + 1
                if size == 0:
                    self._state = _TRAILER
                elif buf[pos + size : pos + size + 2] == b"\r\n":
                    # The common case: the whole chunk and its CRLF are in this read.
                    pieces.append(buf[pos : pos + size])
                    pos += size + 2
                else:
                    self._remaining = size
                    self._state = _CHUNK_DATA
            elif state == _TRAILER:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                line = buf[pos:nl].strip()
                self._trailer_bytes += nl + 1 - pos
                if self._trailer_bytes > MAX_HEAD_BYTES:
                    raise RequestFailed(errors.PROTOCOL, "trailers larger than 64 KiB")
                pos = nl + 1
                if not line:
                    if pos < end:
                        self._keep_alive = False
                    if pieces and self._emit(b"".join(pieces), t_ns):
                        return True
                    return self._finish(t_ns)
            else:  # pragma: no cover - states are exhaustive
                raise AssertionError(state)
        if pos < end:
            self._buf = buf[pos:]
            if self._state != _CHUNK_DATA and len(self._buf) > MAX_CHUNK_LINE_BYTES:
                # A size, CRLF or trailer line that does not end: held bytes would grow forever.
                raise RequestFailed(errors.PROTOCOL, "chunk framing line too long")
        if pieces:
            return self._emit(pieces[0] if len(pieces) == 1 else b"".join(pieces), t_ns)
        return False

    def _emit(self, piece: bytes, t_ns: int) -> bool:
        if self._decoder is not None:
            try:
                piece = self._decoder.decompress(piece)
            except zlib.error as exc:
                raise RequestFailed(errors.PROTOCOL, f"bad compressed body: {exc}") from None
            if not piece:
                return False
        if self._sink.on_body(piece, t_ns):
            self.stopped = True
            self._state = _DONE
            self.reusable = False
            return True
        return False

    def _finish(self, t_ns: int) -> bool:
        if self._decoder is not None:
            tail = self._decoder.flush()
            self._decoder = None
            if tail and self._sink.on_body(tail, t_ns):
                self.stopped = True
                self._state = _DONE
                return True
        self._state = _DONE
        self.reusable = self._keep_alive and not self._buf
        self._sink.on_end(t_ns)
        return True


def _decoder_for(head: ResponseHead, decode: bool = True) -> zlib._Decompress | None:
    coding = head.tokens("content-encoding") - {"identity"}
    if not coding:
        return None
    if not decode:
        raise RequestFailed(
            errors.PROTOCOL,
            f"the answer has Content-Encoding {', '.join(sorted(coding))} though it was asked "
            "for identity",
        )
    if coding <= {"gzip", "x-gzip", "deflate"}:
        return zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
    raise RequestFailed(
        errors.PROTOCOL,
        f"unsupported Content-Encoding {', '.join(sorted(coding))}: only gzip and deflate are "
        "decoded; send 'Accept-Encoding: identity' or 'gzip'",
    )
