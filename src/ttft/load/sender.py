"""How the load layer sends: the streaming client for a Target, and the one streamed body.

Every measurement that runs a cell (``ttft bench`` in this process or in worker processes,
the doctor's probes) opens its client with ``client_for`` and sends through ``ClientSender``,
so the body a server sees (``stream: true``, usage asked for unless the workload says
otherwise, the run's extra fields on top) is the same whichever command sent it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ttft.client.stream import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.workload.requests import WorkItem


def client_for(
    target: Target, *, timeout_s: float = 600.0, headers: Mapping[str, str] | None = None
) -> StreamingClient:
    """A streaming client to ``target``'s root with its model, key and headers; ``headers``
    are added to the target's own (a probe that marks its requests)."""
    return StreamingClient(
        target.root,
        model=target.model,
        api_key=target.api_key,
        headers={**target.headers, **(headers or {})},
        timeout_s=timeout_s,
    )


def request_body(item: WorkItem, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The streamed body of ``item``: its own fields, ``extra`` over them, streaming on, and
    usage in the stream unless the item set ``stream_options`` itself."""
    body = {**item.body, **extra, "stream": True}
    body.setdefault("stream_options", {"include_usage": True})
    return body


class ClientSender:
    """The load layer's ``Sender`` on top of the streaming client."""

    def __init__(
        self,
        client: StreamingClient,
        anchor: RunAnchor,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.anchor = anchor
        self.extra_body = dict(extra_body or {})

    async def send(self, item: WorkItem, record: RequestRecord) -> None:
        await self.client.send(request_body(item, self.extra_body), record, self.anchor)

    async def send_collecting(self, item: WorkItem, record: RequestRecord) -> str:
        """``send``, and the answer's text (multi-turn runs send it back in the next turn)."""
        texts: list[str] = []
        body = request_body(item, self.extra_body)
        await self.client.send(body, record, self.anchor, text_out=texts)
        return "".join(texts)
