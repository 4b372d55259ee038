"""Request bodies a client controls: every bad shape is a GatewayError 400, never a crash."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from ttft.gateway.errors import GatewayError
from ttft.gateway.http.limits import AcceptErrorLog, clamp_connections
from ttft.gateway.validate import check_common, check_prompt, nesting_depth, parse_body
from ttft.prompts.dynamic_content import find_dynamic


def refused(fn: Any, *args: Any) -> GatewayError:
    with pytest.raises(GatewayError) as info:
        fn(*args)
    assert info.value.status == 400
    return info.value


def test_deep_nesting_is_a_400() -> None:
    refused(parse_body, b"[" * 200_000 + b"]" * 200_000)
    refused(parse_body, b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}")  # over the depth limit


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "max_tokens": 5, "max_tokens": 99999999999}',
        b'{"model": "zzz", "messages": [], "model": "m"}',
        b'{"messages": [{"role": "user", "role": "system", "content": "x"}]}',
        b'{"id_slot": 1, "id\\u005fslot": 0}',  # the same key, spelt with an escape
    ],
    ids=["max-tokens", "model", "nested-role", "escaped"],
)
def test_a_key_twice_in_one_object_is_a_400(raw: bytes) -> None:
    # Forwarded as it came, the engine might read the other value than the one checked here.
    assert "twice" in refused(parse_body, raw).message


def test_the_depth_check_costs_no_more_than_decoding() -> None:
    # A 1 MB body of empty arrays: walking the decoded lists in Python took 5x json.loads
    # (1.3 s for 4 MB, all of it holding the event loop); measured without the walk, less.
    raw = b'{"y": [' + b",".join([b"[]"] * 330_000) + b"]}"

    def best(fn: Any) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            fn(raw)
            times.append(time.perf_counter() - started)
        return min(times)

    assert best(parse_body) < 2 * best(json.loads)


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        (b"{}", 1),
        (b'{"a": []}', 2),
        (b'{"a": [[], [[]]]}', 4),
        (b'{"a": "[[[\\"]]", "b": "\\\\"}', 1),  # brackets and escapes inside strings
        (b'{"a": [1, {"b": {"c": []}}], "d": "}}}"}', 5),
    ],
)
def test_nesting_depth_counts_structure_not_strings(raw: bytes, depth: int) -> None:
    assert nesting_depth(raw) == depth


def test_lone_surrogates_and_non_finite_numbers_are_400() -> None:
    refused(parse_body, b'{"messages": "\\udc00"}')
    refused(parse_body, b'{"t": NaN}')
    refused(parse_body, b'{"t": -Infinity}')
    refused(parse_body, b'{"t": 1e400}')
    assert parse_body(b'{"t": "\\ud83d\\ude00"}') == {"t": "\U0001f600"}  # a pair is fine


def test_huge_integers_are_400() -> None:
    refused(check_prompt, {"prompt": [1, 2**70]})
    refused(check_prompt, {"prompt": [-1]})
    refused(check_common, {"seed": 2**70})
    refused(check_common, {"top_k": 2**40})
    refused(check_common, {"max_tokens": 10**7}, 0, 10**6, 16)
    refused(check_common, {"n": 17}, 0, 10**6, 16)
    refused(check_common, {"best_of": 1_000_000}, 0, 10**6, 16)  # n by another name
    refused(check_common, {"best_of": "3"})
    assert check_common({"max_tokens": 10**6, "n": 16}, 0, 10**6, 16) == (False, 0)


def test_priority_below_zero_needs_a_boost() -> None:
    refused(check_common, {"priority": -1})
    assert check_common({"priority": -5}, 5) == (False, -5)
    assert check_common({"priority": 7}) == (False, 7)


def test_the_hygiene_counter_detector_is_linear() -> None:
    for sep in (" ", "\n", "\t"):
        started = time.perf_counter()
        find_dynamic("request" + sep * 5000 + "x")
        assert time.perf_counter() - started < 0.5
    assert find_dynamic("Request #42 of the day")  # still finds counters
    assert find_dynamic("message no. 7")


def test_accept_errors_are_logged_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    handler = AcceptErrorLog(None, interval_s=10.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        context = {
            "message": "socket.accept() out of system resource",
            "exception": OSError(24, "Too many open files"),
        }
        with caplog.at_level(logging.ERROR, logger="ttft.gateway"):
            for _ in range(5000):
                handler(loop, context)
            now[0] += 11
            handler(loop, context)
    finally:
        loop.close()
    lines = [r for r in caplog.records if "cannot accept" in r.getMessage()]
    assert len(lines) == 2
    assert "4999 more" in lines[1].getMessage()


def test_max_connections_fits_the_file_limit() -> None:
    assert clamp_connections(4096, 1024) == 480
    assert clamp_connections(100, 1024) == 100
    assert clamp_connections(4096, None) == 4096


@pytest.mark.parametrize(
    "raw",
    [b'{"max_tokens": ' + b"7" * 5000 + b"}", b'{"a": 1,}', b'{"a": NaN}', b'{"a": 1e999}'],
    ids=["5000-digit-integer", "trailing-comma", "nan", "overflow"],
)
def test_invalid_json_is_explained_without_interpreter_internals(raw: bytes) -> None:
    """A 5,000-digit integer's message named sys.set_int_max_str_digits."""
    with pytest.raises(GatewayError) as caught:
        parse_body(raw)
    message = caught.value.message
    assert caught.value.status == 400 and message.startswith("the request body")
    for internal in ("sys.", "set_int_max_str_digits", "Exceeds the limit", "Traceback"):
        assert internal not in message, message
