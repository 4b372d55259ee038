"""Prefix hygiene for a stream of requests: the log analysis, learned from the requests seen so far.

The gateway sees one request at a time. :class:`HygieneLearner` keeps the static parts of the
last few requests and runs :func:`ttft.prompts.log_analysis.analyse_log` on them and the new one,
so a value that changes between requests (a customer id on line 2, a date in any format, a name)
is moved like a timestamp, as soon as a second version of the field has been seen. The known
patterns always count here, even when recent requests happen to share them: a request must not be
moved one way now and another way later, which would change its prefix again.

Bounded for an event loop: only the leading ``max_chars`` of each field are read, at most
``max_spans`` values are moved, and ``memory`` requests are kept (their static fields only).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ttft.prompts.log_analysis import analyse_log
from ttft.prompts.static_prefix import last_user_index
from ttft.prompts.transform import move_to_end
from ttft.workload.request_log import ChatRequest


class HygieneLearner:
    def __init__(self, *, memory: int = 8, max_chars: int = 32 * 1024, max_spans: int = 32):
        self.max_chars = max_chars
        self.max_spans = max_spans
        self._recent: deque[ChatRequest] = deque(maxlen=memory)

    def move(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        """``messages`` with their dynamic spans' lines moved to the end of the last user
        message, and the kinds moved (empty: unchanged)."""
        target = last_user_index(messages)
        if not messages or messages[target].get("role") != "user":
            return messages, []
        request = ChatRequest(messages=messages)
        analysis = analyse_log(
            [*self._recent, request], max_chars=self.max_chars, trust_patterns=True
        )
        self._recent.append(self._static_copy(messages, target))
        spans = [s for s in analysis.spans[-1] if s.place is not None][: self.max_spans]
        if not spans:
            return messages, []
        places = [s.place for s in spans if s.place is not None]
        return move_to_end(request, places).messages, [s.kind for s in spans]

    def _static_copy(self, messages: list[dict[str, Any]], target: int) -> ChatRequest:
        """What later requests are compared with: the static messages, cut to what is read."""
        kept: list[dict[str, Any]] = []
        for message in messages[:target]:
            content = message.get("content")
            if isinstance(content, str):
                kept.append({"role": message.get("role"), "content": content[: self.max_chars]})
            else:
                kept.append({"role": message.get("role"), "content": ""})
        return ChatRequest(messages=[*kept, {"role": "user", "content": ""}])
