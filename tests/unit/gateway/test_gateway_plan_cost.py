"""Planning a request costs event-loop time in proportion to what it asks, whatever its body holds.

Every stream of the gateway waits while one request is planned, so a 4 MB body built for cost
(thousands of timestamps for hygiene, 100k tiny messages, tools the estimate ignored) must not
hold the loop for seconds or buy a long prompt a place in the short lane.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ttft.gateway.admission.lanes import LONG, SHORT
from ttft.gateway.config import from_mapping
from ttft.gateway.errors import GatewayError
from ttft.gateway.http.wire import Request
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.plan import CHAT, COMPLETIONS, HYGIENE_MAX_MOVES, Plan, Planner
from ttft.gateway.prerender import Prerenderer
from ttft.gateway.runtime import build_runtime
from ttft.prompts.chat_template import ChatTemplate

CHATML = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def planner(*, hygiene: bool = False, prerender: bool = False, **limits: Any) -> Planner:
    raw = {
        "model": [{"name": "m", "upstreams": ["http://127.0.0.1:9"], "hygiene": hygiene}],
        "limits": limits,
    }
    config = from_mapping(raw)
    runtime = build_runtime(config, config.models[0], GatewayMetrics())
    if prerender:
        runtime.prerenderer = Prerenderer(ChatTemplate(CHATML, "test", {}))
    return Planner(config, {"m": runtime}, GatewayMetrics())


def plan(p: Planner, body: dict[str, Any], endpoint: str = CHAT) -> Plan:
    raw = json.dumps(body).encode()
    request = Request("POST", "/v1/chat/completions", "", "HTTP/1.1", {}, raw, 0, "t")
    return p.plan(request, endpoint, json.loads(raw))


def system(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "system", "content": text}, user("q")]}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def moves(p: Planner) -> float:
    family = p.metrics.registry.get_sample_value
    return sum(
        family("ttft_gateway_hygiene_moves_total", {"model": "m", "kind": kind}) or 0.0
        for kind in ("timestamp", "date", "request-id", "counter")
    )


def test_hygiene_moves_at_most_a_bounded_number_of_values() -> None:
    """20,000 timestamp lines: every one was scanned and moved (4 MB of them: 15 s)."""
    p = planner(hygiene=True)
    out = plan(p, system("2024-01-01 12:00\n" * 20_000))
    assert 0 < moves(p) <= HYGIENE_MAX_MOVES
    assert out.changed and out.body["messages"][-1]["content"].startswith("q\n\n2024-01-01")


def test_hygiene_on_one_long_line_of_ids_is_not_quadratic() -> None:
    """Values on one long line: each one's sentence was searched on a copy of the line (4,000
    values: ~1 s; 16,000: 15 s; a 4 MB body: minutes of a blocked event loop)."""

    def cost(values: int) -> float:
        """The best of three plans of a body with ``values`` ids on one line: the least
        disturbed by other tenants of the machine."""
        best = float("inf")
        for _ in range(3):
            p = planner(hygiene=True)
            started = time.perf_counter()
            plan(p, system("request id=a1b2c3 " * values))
            best = min(best, time.perf_counter() - started)
            assert moves(p) <= HYGIENE_MAX_MOVES
        return best

    # Four times the values cost about four times as much (linear), not sixteen (quadratic):
    # a relation measured in one run, whatever the machine's speed.
    small, large = cost(2_000), cost(8_000)
    assert large < 8 * small, f"2,000 ids: {small * 1e3:.1f} ms, 8,000: {large * 1e3:.1f} ms"


def test_hygiene_leaves_values_past_the_scanned_head_alone() -> None:
    p = planner(hygiene=True)
    late = "Plain words here. " * 3_000 + "\nToday is 2024-01-01.\n"  # past 32 Ki characters
    assert not plan(p, system(late)).changed
    assert plan(p, system("Today is 2024-01-01.\n" + late)).changed


def test_more_messages_than_max_messages_is_a_400() -> None:
    """100k one-character messages: 0.7 s of template renders for each new history."""
    p = planner(prerender=True, max_messages=100)
    body = {"model": "m", "messages": [user("a")] * 101}
    with pytest.raises(GatewayError) as refused:
        plan(p, body)
    assert refused.value.status == 400 and refused.value.param == "messages"
    assert plan(p, {"model": "m", "messages": [user("a")] * 100}).rendered is not None


@pytest.mark.parametrize(
    "body",
    [
        {"tools": [{"type": "function", "function": {"name": "f", "description": "x" * 8000}}]},
        {"messages": [{"role": "user", "content": "hi", "name": "x" * 8000}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "y"}] * 2000}]},
        {"response_format": {"type": "json_schema", "json_schema": {"d": "z" * 8000}}},
    ],
    ids=["tools", "name", "many-parts", "schema"],
)
def test_text_outside_the_contents_counts_toward_the_lane(body: dict[str, Any]) -> None:
    """Only message contents were counted: 8,000 characters of tools rode in the short lane
    (and took its reserved slot) as a two-character question."""
    full = {"model": "m", "messages": [user("hi")], **body}
    assert plan(planner(), full).lane == LONG
    assert plan(planner(), {"model": "m", "messages": [user("hi")]}).lane == SHORT


def test_a_token_id_prompt_with_a_long_suffix_is_long() -> None:
    p = planner()
    ids = {"model": "m", "prompt": list(range(100, 400))}
    assert plan(p, ids, COMPLETIONS).lane == SHORT
    assert plan(p, {**ids, "suffix": "s" * 8000}, COMPLETIONS).lane == LONG
    assert plan(p, {"model": "m", "prompt": ["a"] * 20 + ["b" * 8000]}, COMPLETIONS).lane == LONG


def test_a_body_above_one_mib_is_not_prerendered() -> None:
    """A new frame renders the conversation three times here (~100 ms for 4 MB); the engine's
    chat endpoint renders a large one once."""
    p = planner(prerender=True)
    small = plan(p, system("s" * 1000))
    assert small.rendered is not None and small.bypass == ""
    large = plan(p, system("s" * (1024 * 1024)))
    assert large.rendered is None and large.bypass == "size"
