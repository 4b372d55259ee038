"""Every rung of the ladder lands on the server write it belongs to (in-process server)."""

from __future__ import annotations

import asyncio
from typing import Any

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.scripted_server import RequestLog, ScriptedServer
from ttft.testing.sse_script import Script

MS = 1_000_000


def ladder(script: Script, body: dict[str, Any]) -> tuple[RequestRecord, RequestLog, int]:
    async def scenario() -> tuple[RequestRecord, RequestLog, int]:
        anchor = RunAnchor.now()
        async with ScriptedServer(script) as server, StreamingClient(server.base_url) as client:
            record = await client.send(body, RequestRecord(0), anchor)
            return record, server.logs[0], anchor.monotonic_ns

    return asyncio.run(scenario())


def near(rung: int | None, anchor_ns: int, written_ns: int | None) -> bool:
    """The client saw it after the server wrote it, and within 5 ms."""
    assert rung is not None and written_ns is not None
    return 0 < rung + anchor_ns - written_ns < 5 * MS


def test_chat_rungs_match_head_role_and_token_writes_and_role_chunk_is_no_token() -> None:
    script = Script(
        headers_delay_ms=15,
        role_delay_ms=15,
        first_token_delay_ms=15,
        token_interval_ms=5,
        n_tokens=4,
    )
    record, log, anchor_ns = ladder(script, {"messages": [{"role": "user", "content": "hi"}]})
    assert record.ok
    assert record.scheduled_ns is not None and record.sent_ns is not None
    assert record.scheduled_ns <= record.sent_ns
    assert near(record.headers_ns, anchor_ns, log.first("head"))
    assert near(record.first_event_ns, anchor_ns, log.first("role"))  # an event ...
    assert near(record.first_content_ns, anchor_ns, log.first("token"))  # ... but not a token
    assert record.first_output_ns == record.first_content_ns
    token_writes = [t for kind, t in log.events if kind == "token"]
    assert len(record.chunk_ns) == 4
    assert all(near(c, anchor_ns, w) for c, w in zip(record.chunk_ns, token_writes, strict=True))
    assert near(record.done_ns, anchor_ns, log.first("done"))
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (8, 4, 0)
    assert record.server_timings is not None and record.server_timings["predicted_n"] == 4.0


def test_reasoning_tokens_reach_first_content_and_only_answer_text_reaches_first_output() -> None:
    script = Script(first_token_delay_ms=5, token_interval_ms=15, n_tokens=4, reasoning_tokens=2)
    record, log, anchor_ns = ladder(script, {"messages": []})
    writes = [t for kind, t in log.events if kind in ("reasoning", "token")]
    assert near(record.first_content_ns, anchor_ns, writes[0])
    assert near(record.first_output_ns, anchor_ns, writes[2])


def test_timings_on_the_finish_chunk_are_read_as_with_the_extra_usage_chunk() -> None:
    record, _, _ = ladder(Script(first_token_delay_ms=1, usage="finish"), {"prompt": "x"})
    assert record.ok and record.server_timings is not None and record.completion_tokens == 16


def test_completions_first_empty_text_chunk_is_no_token() -> None:
    script = Script(role_delay_ms=0, first_token_delay_ms=20, n_tokens=2)
    record, log, anchor_ns = ladder(script, {"prompt": "Once"})
    assert log.path == "/v1/completions"
    assert near(record.first_event_ns, anchor_ns, log.first("role"))
    assert near(record.first_content_ns, anchor_ns, log.first("token"))
