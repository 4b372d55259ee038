"""HTTP/1.1 on the wire: request heads parsed strictly, status lines and error heads written.

Strict on purpose: one space-separated request line, header names that are HTTP tokens, no
whitespace before the colon, one Content-Length. What a lenient parser would accept is exactly
what request smuggling through a chain of proxies relies on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: str
    version: str
    headers: dict[str, str]  # names lower-cased; repeated headers comma-joined
    body: bytes
    received_ns: int  # perf_counter_ns when the request's first bytes arrived
    peer: str


def plain_head(status: int, length: int, *, close: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        "Server: ttft-gateway",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(raw: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise ValueError("undecodable head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise ValueError(f"bad request line {lines[0][:80]!r}")
    method, target, version = parts
    if not TOKEN.match(method):
        raise ValueError(f"bad method {method[:20]!r}")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise ValueError(f"unsupported version {version[:20]!r}")
    if not target.startswith("/"):
        raise ValueError("the target must be a path (this gateway is not a forward proxy)")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not TOKEN.match(name):
            raise ValueError(f"bad header line {line[:60]!r}")
        key = name.lower()
        value = value.strip(" \t")
        if key == "content-length" and key in headers and headers[key] != value:
            raise ValueError("conflicting Content-Length headers")
        headers[key] = (
            f"{headers[key]}, {value}" if key in headers and key != "content-length" else value
        )
    return method, target, version, headers
