"""Streaming HTTP/SSE client that fills the timestamp ladder (how to send).

``StreamingClient`` sends OpenAI-style streamed requests over its own HTTP/1.1 connections and
fills each ``RequestRecord``; ``errors`` lists the stable failure kinds it records.
"""

from ttft.client.errors import KINDS, RequestFailed
from ttft.client.openai import ChatRequest, CompletionRequest, Request
from ttft.client.pool import PoolStats
from ttft.client.sse import SseDecoder, SseEvent
from ttft.client.stream import StreamingClient

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
