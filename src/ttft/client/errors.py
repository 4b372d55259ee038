"""The stable error kinds a request can end with, and the exception that carries one.

Kinds are part of the results schema (``RequestRecord.error.kind``): reports group failures by
them and CI gates on them, so a kind is never renamed, only added.
"""

from __future__ import annotations

from ttft.core.client_health import WORKER_LOST
from ttft.core.records import ErrorInfo

HTTP_4XX = "http_4xx"  # the server answered 4xx (400 context too long, 429 rate limited, ...)
HTTP_5XX = "http_5xx"  # the server answered 5xx
HTTP_OTHER = "http_status"  # an unexpected status outside 2xx/4xx/5xx (3xx redirects, ...)
CONNECT = "connect"  # no connection: refused, unreachable, name not resolved
DISCONNECT = "disconnect"  # connection closed or reset before the response's status line
TIMEOUT = "timeout"  # the request (or its connect) ran past its time limit
STREAM_ERROR = "stream_error"  # the server reported an error inside the stream
INCOMPLETE_STREAM = "incomplete_stream"  # the response started but ended without [DONE]
PROTOCOL = "protocol"  # malformed HTTP, or a body that is not the expected event stream
CANCELLED = "cancelled"  # the caller cancelled the request (a run stopped early)
# WORKER_LOST (from core): the client worker (child process, Ray actor) carrying it died

KINDS = (
    HTTP_4XX,
    HTTP_5XX,
    HTTP_OTHER,
    CONNECT,
    DISCONNECT,
    TIMEOUT,
    STREAM_ERROR,
    INCOMPLETE_STREAM,
    PROTOCOL,
    CANCELLED,
    WORKER_LOST,
)


def kind_for_status(status: int) -> str:
    if 400 <= status < 500:
        return HTTP_4XX
    if 500 <= status < 600:
        return HTTP_5XX
    return HTTP_OTHER


class RequestFailed(Exception):
    """A request could not complete; ``kind`` is one of the stable kinds above."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.status = status

    def info(self) -> ErrorInfo:
        return ErrorInfo(kind=self.kind, message=self.message, status=self.status)
