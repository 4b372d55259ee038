"""Verbatim relay of an engine's chunked answer: whole chunks go to the client as they came.

Once a pass-through sink has sent the client its head (chunked, HTTP/1.1) and has nothing left to
look for in the events (the first token was seen), a read from the engine that holds only whole
chunks of data is written to the client as it is, chunk framing and all, instead of being unframed
by the parser and framed again by the response (``UpstreamConnection.data_received``). Every other
read (a partial chunk, a chunk extension, trailers, anything malformed) goes through the parser,
with its bounds; so does the last chunk, which ends the exchange and returns the connection.
Only what this module accepts as a whole, plain chunk is relayed, so the upstream cannot put
anything into the client's framing that the parser would not have put there itself.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

HEX_DIGITS = b"0123456789abcdefABCDEF"
# The last chunk without trailers: what usually follows an engine's last event.
LAST_CHUNK = b"0\r\n\r\n"


class RelayTarget(Protocol):
    """The client connection a relayed answer goes to (``http.conn.Connection``)."""

    transport: asyncio.Transport | None
    closed: bool


def whole_chunks(data: bytes) -> int:
    """How many bytes at the start of ``data`` are whole chunks of data, each a plain size line
    (hex digits and CRLF, no extension), its bytes and their CRLF. Stops at the first that is
    not (a partial chunk, the last chunk, an extension, anything malformed): 0 if that is the
    first. The size line is looked for in its first 18 bytes only, so an endless one costs
    nothing here: it goes to the parser, which bounds it."""
    pos, end = 0, len(data)
    while pos < end:
        nl = data.find(b"\n", pos, pos + 18)
        if nl < pos + 2 or data[nl - 1] != 13:
            break
        size_text = data[pos : nl - 1]
        if size_text.strip(HEX_DIGITS):
            break
        stop = nl + 1 + int(size_text, 16)
        if stop == nl + 1 or stop + 2 > end or data[stop : stop + 2] != b"\r\n":
            break
        pos = stop + 2
    return pos
