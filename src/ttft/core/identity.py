"""Request identity: every request is sent with an ``X-Request-Id``; a server that echoes one
(vLLM does, in its response headers) lets a record prove that what it read belongs to it.

The timings a record holds (llama-server's ``timings``, ``usage``) are read from that request's
own response stream, so they are joined to it by the connection, never by order. An echoed id
that differs from the one sent means something between client and server (a gateway, a proxy
with a cache, a buggy router) answered with another request's response: it is flagged.
"""

from __future__ import annotations

from collections.abc import Iterable

from ttft.core.records import RequestRecord
from ttft.core.stats import Notice

REQUEST_ID_MISMATCH = "request_id_mismatch"


def mismatched(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The records whose response echoed an X-Request-Id other than the one sent."""
    return [record for record in records if record.request_id_mismatch]


def mismatch_notice(records: Iterable[RequestRecord]) -> Notice | None:
    """A warning naming the first mismatched pair, or None when every echo matched (or none
    came back: a server that echoes nothing cannot contradict us)."""
    wrong = mismatched(records)
    if not wrong:
        return None
    first = wrong[0]
    return Notice(
        REQUEST_ID_MISMATCH,
        f"{len(wrong)} responses echoed another request's X-Request-Id (sent "
        f"{first.request_id!r}, got {first.server_request_id!r}): their timings and usage may "
        "belong to other requests; check the proxies and gateways between client and server",
    )
