"""Streaming HTTP/SSE client that fills the timestamp ladder (how to send).

``StreamingClient`` sends OpenAI-style streamed requests over its own HTTP/1.1 connections (no
cap unless asked, keep-alive reuse) and fills each ``RequestRecord``: sent, headers, first byte,
first event, first content, first output, every text chunk, done, usage, server timings. Failures
land in ``record.error`` with a stable kind from ``ttft.client.errors``; nothing is dropped::

    from ttft.client import ChatRequest, StreamingClient
    from ttft.core.records import RequestRecord, RunAnchor

    async def main() -> None:
        anchor = RunAnchor.now()
        async with StreamingClient("http://127.0.0.1:8080", model="gemma") as client:
            request = ChatRequest([{"role": "user", "content": "Hi"}], max_tokens=16)
            record = await client.send(request, RequestRecord(index=0), anchor)
        print(record.first_content_ns - record.sent_ns, record.error)

Modules: ``sse`` (incremental event-stream decoder), ``http`` (request heads, response parser),
``connection`` (one connection; kernel receive timestamps),
``pool`` (connections and keep-alive pool), ``openai`` (request bodies, chunk rules), ``stream``
(the client that joins them), ``errors`` (failure kinds).
"""

from ttft.client.errors import KINDS, RequestFailed
from ttft.client.openai import Request
from ttft.client.pool import PoolStats
from ttft.client.sse import SseDecoder, SseEvent
from ttft.client.stream import StreamingClient
from ttft.workload.request_log import ChatRequest, CompletionRequest

__all__ = [
    "KINDS",
    "ChatRequest",
    "CompletionRequest",
    "PoolStats",
    "Request",
    "RequestFailed",
    "SseDecoder",
    "SseEvent",
    "StreamingClient",
]
