"""Streaming HTTP/SSE client that fills the timestamp ladder (how to send)."""
