"""The first-token rungs over a real socket: a scripted stream with a role-only chunk, then
reasoning text, then content; each rung lands after the server wrote its piece, in order."""

from __future__ import annotations

from collections.abc import Callable

from ttft.core.metrics import get_metric
from ttft.core.records import RequestRecord
from ttft.testing.scripted_server import Snapshot

OneRequest = Callable[..., tuple[RequestRecord, Snapshot]]  # the one_request fixture

MS = 1_000_000


def test_role_reasoning_content_and_second_token_are_told_apart(one_request: OneRequest) -> None:
    script = {"role_delay_ms": 60, "first_token_delay_ms": 180, "token_interval_ms": 90,
              "n_tokens": 4, "reasoning_tokens": 2}  # fmt: skip
    record, snapshot = one_request(script)
    assert record.ok
    (log,) = snapshot.logs
    written = {kind: t for kind, t in reversed(log.events)}  # the first write of each kind
    assert record.first_role_ns is not None and record.first_reasoning_ns is not None
    assert record.first_output_ns is not None and record.first_content_ns is not None
    # Order and spacing as scripted: role, reasoning at 180 ms (= TTFT), +90 second token,
    # +90 the first content (output) token. The bounds leave room for a late read on a busy
    # machine (a delayed first read shortens the gap after it), not for a wrong rung: the next
    # chunk is 90 ms away, a wrong rung is off by a whole step.
    assert record.first_role_ns < record.first_reasoning_ns == record.first_content_ns
    assert record.chunk_ns[1] - record.chunk_ns[0] >= 45 * MS
    assert record.first_output_ns - record.first_content_ns >= 135 * MS
    role_to_first = written["reasoning"] - written["role"]
    assert abs((record.first_content_ns - record.first_role_ns) - role_to_first) < 50 * MS
    ttft = get_metric("ttft")
    role = get_metric("time_to_role_chunk")
    second = get_metric("time_to_second_token")
    assert ttft and role and second
    assert role.values(record)[0] < ttft.values(record)[0] < second.values(record)[0]
