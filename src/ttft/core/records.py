"""The timestamp ladder of one request, and the run it belongs to.

All ``*_ns`` fields are readings of one monotonic clock (``time.perf_counter_ns()``), stored as
integer nanoseconds *relative to the run's monotonic anchor* so a JSONL file is readable on its own.
Wall-clock time appears once per run (``RunAnchor.wall_time``) and is never used for a duration.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class RunAnchor:
    """Where a run's relative timestamps start: one monotonic reading and one wall reading."""

    monotonic_ns: int
    wall_time: float

    @classmethod
    def now(cls) -> RunAnchor:
        return cls(monotonic_ns=time.perf_counter_ns(), wall_time=time.time())


@dataclass(slots=True)
class ErrorInfo:
    """Why a request failed. ``kind`` is a short stable class (``http_4xx``, ``timeout``, ...)."""

    kind: str
    message: str
    status: int | None = None


@dataclass(slots=True)
class RequestRecord:
    """One request's ladder, token counts, server-reported timings and error (if any).

    Rungs that were never reached stay ``None``; a failed request keeps every rung it did reach.
    """

    index: int
    cell: str = ""
    phase: str = "warm"  # "warm", "cold" or "warmup" (warm-up requests are kept but not counted)
    scheduled_ns: int | None = None
    sent_ns: int | None = None
    headers_ns: int | None = None
    first_byte_ns: int | None = None
    first_event_ns: int | None = None
    first_content_ns: int | None = None  # first non-empty content or reasoning text
    first_output_ns: int | None = None  # first non-empty content, reasoning excluded
    chunk_ns: list[int] = field(default_factory=list)  # every chunk that carried text
    done_ns: int | None = None
    status: int | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    output_text_chars: int = 0
    server_timings: dict[str, float] | None = None
    content_encoding: str | None = None  # of the response: "gzip" on a stream is a red flag
    error: ErrorInfo | None = None
    # Appended later, all with defaults, so files written before them still read back.
    first_role_ns: int | None = None  # first chunk whose delta announces a role (may carry text)
    first_reasoning_ns: int | None = None  # first non-empty reasoning text
    first_tool_call_ns: int | None = None  # first chunk with a non-empty delta.tool_calls
    request_id: str | None = None  # the X-Request-Id this request was sent with
    server_request_id: str | None = None  # the x-request-id the response echoed, if any
    response_id: str | None = None  # the stream's own chunk "id" (chatcmpl-...), if any

    @property
    def request_id_mismatch(self) -> bool:
        """The server echoed an X-Request-Id other than ours: its timings may be another's."""
        return (
            self.request_id is not None
            and self.server_request_id is not None
            and self.server_request_id != self.request_id
        )

    repeat: int | None = None  # --repeat: which run of its cell (0-based); None without repeats
    session: int | None = None  # multi-turn: which conversation (0-based)
    turn: int | None = None  # multi-turn: which turn of its conversation (1-based)

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_content_ns is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        payload = dict(data)
        err = payload.pop("error", None)
        record = cls(**payload)
        if err is not None:
            record.error = ErrorInfo(**err)
        return record
