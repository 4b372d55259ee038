"""Incremental Server-Sent Events decoder: bytes in, complete events out.

Follows the WHATWG event-stream rules that matter for LLM servers: lines end with ``\\n``,
``\\r\\n`` or a lone ``\\r``; a line starting with ``:`` is a comment; ``data`` lines of one event
are joined with ``\\n``; a blank line dispatches the event; an event without data is not dispatched.
Bytes may be split anywhere between reads (inside a line, inside a UTF-8 character, between the
``\\r`` and ``\\n`` of one line end): the decoder keeps the unfinished line and waits for more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class SseEvent:
    """One dispatched event. ``event`` is ``"message"`` unless the server named it."""

    data: str
    event: str = "message"
    id: str | None = None


class SseDecoder:
    """Feed it body bytes as they arrive; it returns the events those bytes completed."""

    __slots__ = ("_data", "_event", "_id", "_pending", "_skip_lf")

    def __init__(self) -> None:
        self._pending = b""  # the unfinished last line of previous reads
        self._skip_lf = False  # the previous read ended in "\r": a leading "\n" belongs to it
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode one read; return the events completed by it (possibly none)."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._pending + chunk if self._pending else chunk
        if not buf:
            return []
        # The fast path: LLM servers end lines with "\n"; the regex is only for "\r".
        if b"\r" in buf:
            lines = _LINE_END.split(buf)
            if buf.endswith(b"\r"):
                self._skip_lf = True
        else:
            lines = buf.split(b"\n")
        self._pending = lines.pop()  # after the last line end: unfinished (often b"")
        events: list[SseEvent] = []
        data = self._data
        for line in lines:
            # Inlined fast path for the two lines LLM servers send: "data: ..." and "".
            if line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value.decode("utf-8", "replace"))
            elif not line and len(data) == 1 and not self._event:
                events.append(SseEvent(data[0], "message", self._id))
                data.clear()
            else:
                event = self._line(line)
                if event is not None:
                    events.append(event)
                    data = self._data
        return events

    def finish(self) -> list[SseEvent]:
        """The stream ended: return an event left without its closing blank line, if any.

        The standard discards such an event; we return it so that a server that forgets the
        final blank line after ``data: [DONE]`` is still seen to have finished.
        """
        events: list[SseEvent] = []
        if self._pending:
            line, self._pending = self._pending, b""
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._line(b"")
        if event is not None:
            events.append(event)
        self._skip_lf = False
        return events

    def _line(self, raw: bytes) -> SseEvent | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", errors="replace")
        if line[0] == ":":
            return None  # a comment (servers send them as keep-alives)
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        # "retry" and unknown fields are ignored: a client measuring one request never reconnects.
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event = SseEvent(data=data, event=self._event or "message", id=self._id)
        self._data = []
        self._event = ""
        return event
