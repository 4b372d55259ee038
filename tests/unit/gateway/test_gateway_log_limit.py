"""Client-caused log lines: one per kind and interval, the rest counted in the next line."""

from __future__ import annotations

import logging

import pytest

from ttft.gateway.log_limit import ThrottledLog


def test_a_flood_of_one_kind_is_one_line_then_one_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    throttled = ThrottledLog(logging.getLogger("ttft.test"), 10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "ttft.test"):
        for _ in range(500):  # 500 failures within the same second
            throttled.log(("up", "disconnect"), logging.WARNING, "%s failed", "up")
        throttled.log(("up", "timeout"), logging.WARNING, "%s timed out", "up")  # another kind
        now[0] += 10.0
        throttled.log(("up", "disconnect"), logging.WARNING, "%s failed", "up")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "up failed",
        "up timed out",
        "up failed (499 more like it in the last 10 s, not logged)",
    ]


def test_nothing_is_counted_while_the_level_is_off(caplog: pytest.LogCaptureFixture) -> None:
    throttled = ThrottledLog(logging.getLogger("ttft.test.quiet"), 10.0, clock=lambda: 0.0)
    with caplog.at_level(logging.WARNING, "ttft.test.quiet"):
        assert not throttled.log("k", logging.INFO, "dropping %s", "x")
    assert not caplog.records
