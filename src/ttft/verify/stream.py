"""One streamed request of the regression set: POST a JSON body, yield its SSE events as they come.

Synchronous on purpose: the set sends one request at a time (both sides see the same slot
scheduling), so an event loop would add nothing but a second clock to reason about.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from ttft.core.errors import TtftError


class EngineRefused(TtftError):
    """The engine answered an HTTP error (a prompt over its window answers 400)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def stream_events(
    url: str, body: Mapping[str, Any], *, timeout_s: float = 600.0
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(perf_counter_ns at arrival, event)`` for each ``data:`` line but ``[DONE]``."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            for raw in resp:
                now = time.perf_counter_ns()
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise TtftError(
                        f"{url} streamed a line that is not JSON: {data[:120]!r}"
                    ) from None
                if isinstance(event, dict):
                    if "error" in event:
                        raise TtftError(f"{url} streamed an error: {str(event['error'])[:300]}")
                    yield now, event
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise EngineRefused(f"{url} answered HTTP {exc.code}: {detail}", exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise TtftError(f"cannot reach {url}: {exc}") from None
