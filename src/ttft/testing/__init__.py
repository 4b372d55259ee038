"""Measuring instruments for tests and benchmarks (scripted SSE servers with exact delays)."""
