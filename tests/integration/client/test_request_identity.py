"""Every request carries an X-Request-Id stored in its record; an echoed id is kept, and one
that differs from the id sent is flagged (its timings may be another request's)."""

from __future__ import annotations

import asyncio

from ttft.client import StreamingClient
from ttft.core.identity import REQUEST_ID_MISMATCH
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.summary import summarize
from ttft.load.runner import CellPlan, Runner
from ttft.load.sender import ClientSender
from ttft.testing.scripted_server import ScriptedServer
from ttft.testing.sse_script import Script
from ttft.workload.arrival import ClosedLoop
from ttft.workload.requests import WorkItem


def run_cell(script: Script, n: int = 4) -> tuple[list[RequestRecord], list[dict[str, str]]]:
    async def scenario() -> tuple[list[RequestRecord], list[dict[str, str]]]:
        anchor = RunAnchor.now()
        server = ScriptedServer(script)
        async with server, StreamingClient(server.base_url) as client:
            runner = Runner(ClientSender(client, anchor), anchor, lambda _: None, id_prefix="run7")
            items = [WorkItem({"messages": [{"role": "user", "content": "hi"}]})] * n
            records = await runner.run_cell(CellPlan("c", items, ClosedLoop(2)))
            return records, [log.headers for log in server.snapshot().logs]

    return asyncio.run(scenario())


def test_each_request_is_sent_with_its_own_run_scoped_id_and_the_record_keeps_it() -> None:
    records, headers = run_cell(Script(n_tokens=2))
    sent = sorted(h["x-request-id"] for h in headers)
    assert sorted(r.request_id or "" for r in records) == sent
    assert sent == [f"run7-{i}" for i in range(4)]
    assert all(r.server_request_id is None and not r.request_id_mismatch for r in records)


def test_an_echoed_id_is_stored_and_matches() -> None:
    records, _ = run_cell(Script(n_tokens=2, echo_request_id="same"))
    assert all(r.server_request_id == r.request_id for r in records)
    assert all(n.kind != REQUEST_ID_MISMATCH for n in summarize(records).warnings)


def test_an_echo_of_another_id_is_flagged_in_the_record_and_the_summary() -> None:
    records, _ = run_cell(Script(n_tokens=2, echo_request_id="other"))
    assert all(r.request_id_mismatch for r in records)
    kinds = [n.kind for n in summarize(records).warnings]
    assert kinds[0] == REQUEST_ID_MISMATCH


def test_a_request_sent_outside_a_runner_still_gets_an_id() -> None:
    async def scenario() -> tuple[RequestRecord, str]:
        server = ScriptedServer(Script(n_tokens=1))
        async with server, StreamingClient(server.base_url) as client:
            record = await client.send({"prompt": "x"}, RequestRecord(0), RunAnchor.now())
            return record, server.snapshot().logs[0].headers["x-request-id"]

    record, header = asyncio.run(scenario())
    assert record.request_id == header and header.startswith("ttft-")


def test_a_user_supplied_request_id_header_is_sent_as_given_and_recorded() -> None:
    async def scenario() -> tuple[RequestRecord, str]:
        server = ScriptedServer(Script(n_tokens=1))
        async with server, StreamingClient(server.base_url, headers={"X-Request-Id": "mine"}) as c:
            record = await c.send({"prompt": "x"}, RequestRecord(0), RunAnchor.now())
            return record, server.snapshot().logs[0].headers["x-request-id"]

    record, header = asyncio.run(scenario())
    assert record.request_id == header == "mine"
