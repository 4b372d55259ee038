"""The scripted SSE server instrument: it follows its script and logs every write it makes."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

from ttft.client import StreamingClient
from ttft.core.records import RequestRecord, RunAnchor
from ttft.testing.scripted_server import ScriptedServer, ScriptedServerProcess
from ttft.testing.sse_script import Script, render


def post(base_url: str, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def events_of(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


def test_chat_stream_has_role_chunk_tokens_finish_usage_and_done_in_order() -> None:
    script = Script(first_token_delay_ms=0, n_tokens=2, tokens=("Hel", "lo"))
    with ScriptedServer(script).in_thread() as server:
        status, raw = post(server.base_url, "/v1/chat/completions", {"messages": []})
    data = events_of(raw)
    assert status == 200 and data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["Hel", "lo"]
    assert chunks[3]["choices"][0]["finish_reason"] == "stop"
    assert chunks[4]["choices"] == [] and chunks[4]["usage"]["completion_tokens"] == 2
    assert "timings" in chunks[4]


def test_log_records_the_write_time_of_each_piece_at_its_scripted_offset() -> None:
    script = Script(
        headers_delay_ms=5,
        role_delay_ms=5,
        first_token_delay_ms=30,
        token_interval_ms=10,
        n_tokens=3,
    )
    with ScriptedServer(script).in_thread() as server:
        post(server.base_url, "/v1/chat/completions", {"messages": [], "ttft_tag": "a"})
        log = server.snapshot().logs[0]
    assert log.tag == "a"
    kinds = [kind for kind, _ in log.events]
    assert kinds == ["head", "role", "token", "token", "token", "finish", "usage", "done"]
    offsets_ms = [(t - log.received_ns) / 1e6 for _, t in log.events]
    # Scripted: head 5, role 10, tokens 40/50/60. Writes are never early, and late by little
    # (the bound allows for this shared machine descheduling the process now and then).
    for got, want in zip(offsets_ms[:5], [5, 10, 40, 50, 60], strict=True):
        assert want <= got < want + 15, offsets_ms


def test_a_request_overrides_its_script_through_ttft_script_and_a_callable_picks_per_path() -> None:
    def pick(path: str, body: dict[str, Any]) -> Script:
        return Script(status=503 if path == "/v1/completions" else 200, first_token_delay_ms=0)

    with ScriptedServer(pick).in_thread() as server:
        assert post(server.base_url, "/v1/completions", {"prompt": "x"})[0] == 503
        assert post(server.base_url, "/v1/chat/completions", {"messages": []})[0] == 200
        status, raw = post(
            server.base_url,
            "/v1/chat/completions",
            {"messages": [], "ttft_script": {"status": 400}},
        )
        assert status == 400 and json.loads(raw)["error"]["message"] == "scripted error"
        assert (
            post(
                server.base_url,
                "/v1/chat/completions",
                {"messages": [], "ttft_script": {"nope": 1}},
            )[0]
            == 400
        )


def test_completions_stream_uses_text_and_an_empty_first_text_chunk() -> None:
    pieces = render(Script(n_tokens=1, framing="close"), "completions", 1, "m")
    body = b"".join(p.data for p in pieces[1:])
    chunks = [json.loads(d) for d in events_of(body)[:-1]]
    assert chunks[0]["choices"][0]["text"] == "" and chunks[1]["choices"][0]["text"] == " t0"


def test_gzip_script_sends_a_gzip_body_that_decodes_to_the_events() -> None:
    import zlib

    pieces = render(Script(n_tokens=2, gzip=True, framing="close"), "chat", 1, "m")
    assert b"Content-Encoding: gzip" in pieces[0].data
    body = zlib.decompress(b"".join(p.data for p in pieces[1:]), wbits=31)
    assert events_of(body)[-1] == "[DONE]"


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_early_close_is_abrupt_in_every_framing(framing: str) -> None:
    pieces = render(
        Script(n_tokens=4).merged({"close_after": 1, "framing": framing}), "chat", 1, "m"
    )
    assert pieces[-1].close
    assert not pieces[-1].data.endswith(b"0\r\n\r\n")


def test_subprocess_server_serves_the_client_and_returns_its_log_over_http() -> None:
    with ScriptedServerProcess(Script(first_token_delay_ms=1, n_tokens=3)) as server:

        async def scenario() -> RequestRecord:
            async with StreamingClient(server.base_url) as client:
                return await client.send(
                    {"prompt": "x", "ttft_tag": 7}, RequestRecord(0), RunAnchor.now()
                )

        record = asyncio.run(scenario())
        snap = server.snapshot(clear=True)
        assert server.snapshot().logs == []
    assert record.ok and len(record.chunk_ns) == 3
    assert [log.tag for log in snap.logs] == [7] and snap.connections_opened == 1
    assert snap.logs[0].first_token_ns is not None
