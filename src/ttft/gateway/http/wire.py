"""HTTP/1.1 on the wire: request heads parsed by llhttp (httptools), status lines written here.

The head goes through llhttp, the parser of Node.js (and of uvicorn through httptools): strict by
default and fuzzed by many more people than a hand-written parser. It rejects what request
smuggling through a chain of proxies relies on: bare CR or LF, NUL and other control bytes in
header values, whitespace before the colon, obsolete line folding, more than one Content-Length,
Content-Length together with Transfer-Encoding, and anything but ASCII digits in Content-Length.

Only the head is fed to it: the caller finds the end of the head itself (one scan of each byte)
and frames the body by Content-Length, so the body is never copied through a Python callback and
pipelined requests are not parsed before the server wants them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httptools

from ttft.gateway.errors import GatewayError

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    417: "Expectation Failed",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}
# Headers that must appear once: two Hosts are two different requests to two proxies.
_SINGLE = frozenset({"host", "content-length", "content-type", "authorization"})


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: str
    version: str
    headers: dict[str, str]  # names lower-cased; repeated headers comma-joined
    body: bytes  # empty until the whole body arrived (the head is checked before that)
    received_ns: int  # perf_counter_ns when the request's first bytes arrived
    peer: str
    # Holds ``n`` more bytes of the body budget for this request (what its parsed body will
    # cost beyond its bytes) until it has been answered; False when the budget is spent.
    charge: Callable[[int], bool] | None = None
    uncharge: Callable[[], None] | None = None  # gives back what ``charge`` held

    @property
    def content_length(self) -> int:
        return int(self.headers.get("content-length", "0"))


def framing(headers: dict[str, str], http11: bool, max_body_bytes: int) -> tuple[int, bool]:
    """A request's body length and whether its connection stays open; GatewayError (411,
    413) for a body the gateway will not read."""
    if "transfer-encoding" in headers:
        raise GatewayError(
            411,
            "chunked request bodies are not accepted; send Content-Length",
            code="length_required",
        )
    length = int(headers.get("content-length", "0"))
    if length > max_body_bytes:
        raise GatewayError(
            413,
            f"request body of {length} bytes is over the gateway's limit of {max_body_bytes} bytes",
            code="body_too_large",
        )
    connection = headers.get("connection")
    if connection is None:  # the usual request: no set of tokens to build
        return length, http11
    tokens = {t.strip().lower() for t in connection.split(",")}
    return length, ("close" not in tokens) if http11 else ("keep-alive" in tokens)


class BadHead(ValueError):
    """A request head llhttp (or our own rules) refused; the message is safe to show."""


class HeadParser:
    """One request head, fed in pieces as they arrive; ``complete`` once the blank line came.

    A new parser per request: only heads are fed, so llhttp would otherwise wait for the body.
    """

    __slots__ = ("_parser", "_repeated", "_url", "complete", "headers")

    def __init__(self) -> None:
        self._url: list[bytes] = []
        self.headers: dict[str, str] = {}
        self._repeated: dict[str, list[str]] = {}
        self.complete = False
        self._parser = httptools.HttpRequestParser(self)

    # llhttp's callbacks ------------------------------------------------------------------

    def on_url(self, url: bytes) -> None:
        self._url.append(url)  # may come in pieces when the head arrives in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        # Trailing whitespace is not part of a value (RFC 9110, 5.5); llhttp leaves it in, and
        # "Content-Length: 5 " or "Expect: 100-continue " are well-formed.
        text = value.decode("latin-1").rstrip(" \t")
        old = self.headers.get(key)
        if old is None:
            self.headers[key] = text
        elif key in _SINGLE:
            raise BadHead(f"more than one {key} header")
        else:
            # Joined once in ``finish``: joining each repeat as it came copied the value so far
            # every time, quadratic in the head size (which the configuration may raise).
            self._repeated.setdefault(key, [old]).append(text)

    def on_headers_complete(self) -> None:
        self.complete = True

    # ----------------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # CONNECT or an Upgrade header: the head is whole; we never switch protocols, and
            # CONNECT's authority target fails the path check in ``finish``.
            self.complete = True
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            raise BadHead(str(cause) if isinstance(cause, BadHead) else "bad header") from None
        except httptools.HttpParserError as exc:
            raise BadHead(str(exc) or "malformed request") from None

    def finish(self) -> tuple[str, str, str, dict[str, str]]:
        """(method, target, version, headers) of a complete head, checked."""
        if not self.complete:
            raise BadHead("incomplete request head")
        version = "HTTP/" + self._parser.get_http_version()
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadHead(f"unsupported version {version[:20]!r}")
        target = b"".join(self._url).decode("latin-1")
        if not target.startswith("/"):
            raise BadHead("the target must be a path (this gateway is not a forward proxy)")
        for key, values in self._repeated.items():
            self.headers[key] = ", ".join(values)
        length = self.headers.get("content-length")
        if length is not None and not (length.isascii() and length.isdigit()):
            raise BadHead(f"bad Content-Length {length[:40]!r}")  # llhttp checks it too
        method = self._parser.get_method().decode("ascii")
        # llhttp's parser holds our callbacks and we hold it: a reference cycle per request,
        # which only the garbage collector could free (6 objects a request, a young-generation
        # collection every ~100 requests). Dropped here, both go when the request's head does.
        del self._parser
        return method, target, version, self.headers


def plain_head(
    status: int, length: int, *, close: bool, extra: tuple[tuple[str, str], ...] = ()
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        "Server: ttft-gateway",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    lines.extend(f"{k}: {v}" for k, v in extra)
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
