"""``client/events.py``: the synchronous stream verify reads, through the client's own HTTP
parser and SSE decoder, against the scripted server."""

from __future__ import annotations

import pytest

from ttft.client.events import StreamRefused, stream_events
from ttft.core.errors import TtftError
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script


def test_events_arrive_in_order_with_their_arrival_times_and_the_headers_are_sent() -> None:
    script = Script(tokens=("a", "b", "c"), first_token_delay_ms=1)
    with ScriptedServer(script).in_thread() as server:
        body = {"prompt": "x", "stream": True}
        got = list(
            stream_events(server.base_url + "/v1/completions", body, headers={"X-Team": "infra"})
        )
        logs = list(server.logs)
    texts = "".join(str(e["choices"][0].get("text") or "") for _, e in got if e.get("choices"))
    assert texts == "abc"
    stamps = [t for t, _ in got]
    assert stamps == sorted(stamps)
    assert logs[0].headers.get("x-team") == "infra"


def test_an_http_error_is_refused_with_its_status_and_body() -> None:
    with ScriptedServer(Script()).in_thread() as server, pytest.raises(StreamRefused) as refused:
        list(stream_events(server.base_url + "/nowhere", {"prompt": "x"}))
    assert refused.value.status == 404 and "no route" in str(refused.value)


def test_an_unreachable_server_is_a_clear_error() -> None:
    from ttft.engines.process import free_loopback_port

    url = f"http://127.0.0.1:{free_loopback_port()}/v1/completions"
    with pytest.raises(TtftError, match="cannot reach"):
        list(stream_events(url, {"prompt": "x"}, timeout_s=5))
