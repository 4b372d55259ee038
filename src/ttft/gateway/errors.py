"""OpenAI-style error responses: every refusal is a JSON body a client library can show.

``{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}`` is what the OpenAI SDKs
parse into their exceptions, so a client sees the gateway's own words ("queue full, retry in 2 s")
instead of a bare status line.
"""

from __future__ import annotations

import json


class GatewayError(Exception):
    """A request the gateway refuses or cannot serve; becomes one JSON error response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.code, self.param)

    def event(self) -> bytes:
        """The same error as one SSE event, for a stream whose head is already sent."""
        return b"data: " + self.body() + b"\n\n"


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> bytes:
    payload = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return json.dumps(payload, ensure_ascii=False).encode()


def bad_request(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, message, param=param, code="invalid_request")


def unauthorized(message: str) -> GatewayError:
    return GatewayError(
        401, message, code="invalid_api_key", headers=(("WWW-Authenticate", "Bearer"),)
    )


def not_found(message: str, code: str = "not_found") -> GatewayError:
    return GatewayError(404, message, code=code)


def overloaded(status: int, message: str, retry_after_s: float, code: str) -> GatewayError:
    """429 (queue full) or 503 (waited too long / nobody healthy), with ``Retry-After``."""
    seconds = max(1, round(retry_after_s))
    return GatewayError(
        status,
        message,
        type="rate_limit_error" if status == 429 else "server_error",
        code=code,
        headers=(("Retry-After", str(seconds)),),
    )


def upstream_failed(message: str, status: int = 502) -> GatewayError:
    return GatewayError(status, message, type="server_error", code="upstream_error")
