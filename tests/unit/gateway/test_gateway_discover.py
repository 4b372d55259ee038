"""Engine discovery: slot counts from /props become caps, /v1/models names become aliases."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ttft.engines import control
from ttft.gateway.admission.lanes import LONG, SHORT
from ttft.gateway.config import GatewayConfig, from_mapping
from ttft.gateway.discover import apply_slots, discover_replica, model_names, total_slots
from ttft.gateway.errors import GatewayError
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.plan import Planner, _upstream_name
from ttft.gateway.proxy import Proxy
from ttft.gateway.runtime import ModelRuntime, Replica, build_runtime


def _runtime(engine: str = "llamacpp", **admission: Any) -> tuple[GatewayConfig, ModelRuntime]:
    raw = {
        "model": [{"name": "default", "engine": engine, "upstreams": ["http://127.0.0.1:9"]}],
        "admission": admission,
    }
    config = from_mapping(raw)
    return config, build_runtime(config, config.models[0], GatewayMetrics())


def _answers(answers: dict[str, dict[str, Any] | None]) -> Any:
    asked: list[str] = []

    async def get(replica: Replica, call: control.Call) -> dict[str, Any] | None:
        asked.append(call.path)
        return answers.get(call.path, {})

    get.asked = asked  # type: ignore[attr-defined]
    return get


def test_llama_server_slots_become_the_cap_when_the_user_gave_none() -> None:
    config, runtime = _runtime()
    replica = runtime.replicas[0]
    assert replica.admission.max_in_flight == 4 and replica.cap_from_engine
    get = _answers({"/props": {"total_slots": 2}, "/v1/models": {"data": [{"id": "gemma"}]}})
    asyncio.run(discover_replica(runtime, replica, config, get, retry_s=0))
    assert replica.admission.max_in_flight == 2
    assert replica.admission.long_cap == 1  # the short-lane reserve follows the new cap
    assert runtime.engine_names == {"gemma"}


def test_slots_from_props_with_a_reserve_are_pinned_and_pinning_can_be_turned_off() -> None:
    config, runtime = _runtime()
    get = _answers({"/props": {"total_slots": 3}})
    asyncio.run(discover_replica(runtime, runtime.replicas[0], config, get, retry_s=0))
    pins = runtime.replicas[0].slot_pins
    assert pins is not None and pins.slots == 3
    for admission in ({"pin_slots": False}, {"long_reserve": 0}, {"split_lanes": False}):
        config, runtime = _runtime(**admission)
        asyncio.run(discover_replica(runtime, runtime.replicas[0], config, get, retry_s=0))
        assert runtime.replicas[0].slot_pins is None, admission


def test_a_cap_the_user_gave_is_kept_and_props_is_not_asked() -> None:
    config, runtime = _runtime(max_in_flight=3)
    get = _answers({"/props": {"total_slots": 16}})
    asyncio.run(discover_replica(runtime, runtime.replicas[0], config, get, retry_s=0))
    assert runtime.replicas[0].admission.max_in_flight == 3
    assert "/props" not in get.asked


def test_batching_engines_default_to_a_higher_documented_cap() -> None:
    for engine in ("vllm", "sglang"):
        _, runtime = _runtime(engine)
        assert runtime.replicas[0].admission.max_in_flight == 64
    _, runtime = _runtime("openai")
    assert runtime.replicas[0].admission.max_in_flight == 4


def test_a_loading_engine_is_asked_again_until_it_answers() -> None:
    config, runtime = _runtime()
    calls = {"n": 0}

    async def get(replica: Replica, call: control.Call) -> dict[str, Any] | None:
        calls["n"] += 1
        if calls["n"] <= 2:
            return None  # 503 while loading
        return {"total_slots": 1} if call.path == "/props" else {"data": []}

    asyncio.run(discover_replica(runtime, runtime.replicas[0], config, get, retry_s=0))
    assert runtime.replicas[0].admission.max_in_flight == 1
    assert runtime.replicas[0].admission.long_reserve == 0


def test_a_grown_cap_starts_waiting_requests_at_once() -> None:
    async def scenario() -> int:
        config, runtime = _runtime(long_reserve=0)
        adm = runtime.replicas[0].admission
        adm.max_in_flight = 1
        await adm.acquire(SHORT)
        waiter = asyncio.create_task(adm.acquire(LONG))
        await asyncio.sleep(0)
        get = _answers({"/props": {"total_slots": 2}})
        await discover_replica(runtime, runtime.replicas[0], config, get, retry_s=0)
        await asyncio.wait_for(waiter, 0.5)
        return adm.in_flight

    assert asyncio.run(scenario()) == 2


@pytest.mark.parametrize(
    "props",
    [{"total_slots": 0}, {"total_slots": True}, {"total_slots": "2"}, {"total_slots": 10**9}, {}],
)
def test_odd_slot_counts_are_ignored(props: dict[str, Any]) -> None:
    assert total_slots(props) is None


def test_model_names_are_bounded() -> None:
    answer = {"data": [{"id": f"m{i}"} for i in range(500)] + [{"id": "x" * 10_000}, {"id": 3}]}
    assert len(model_names(answer)) == 64
    assert model_names({"data": [{"id": "x" * 10_000}, {"id": 3}, "s"]}) == []
    assert model_names({"data": "nope"}) == []


def test_a_client_sending_the_engines_model_name_is_served_not_404() -> None:
    config, runtime = _runtime()
    planner = Planner(config, {"default": runtime}, GatewayMetrics())
    with pytest.raises(GatewayError) as info:
        planner._model({"model": "google/gemma-3-270m"})
    assert info.value.status == 404
    runtime.engine_names.add("google/gemma-3-270m")
    assert planner._model({"model": "google/gemma-3-270m"}) is runtime
    # the engine's own name passes unchanged; the gateway's name becomes the engine's
    assert _upstream_name(runtime, "google/gemma-3-270m") is None
    assert _upstream_name(runtime, "default") == "google/gemma-3-270m"


def test_configured_aliases_are_accepted() -> None:
    raw = {"model": [{"name": "m", "aliases": ["gpt-4o"], "upstreams": ["http://127.0.0.1:9"]}]}
    config = from_mapping(raw)
    runtime = build_runtime(config, config.models[0], GatewayMetrics())
    planner = Planner(config, {"m": runtime}, GatewayMetrics())
    assert planner._model({"model": "gpt-4o"}) is runtime
    with pytest.raises(Exception, match="aliases"):
        from_mapping({"model": [{"name": "m", "aliases": "x", "upstreams": ["http://h:1"]}]})


def _plan(planner: Planner, body: dict[str, Any]) -> Any:
    from ttft.gateway.http.wire import Request
    from ttft.gateway.plan import COMPLETIONS

    raw = json.dumps(body).encode()
    request = Request("POST", "/v1/completions", "", "HTTP/1.1", {}, raw, 0, "t")
    return planner.plan(request, COMPLETIONS, json.loads(raw))


def test_a_client_cannot_pin_itself_into_the_short_lanes_slot() -> None:
    """With slot pinning, slot 0 is the short lane's: a long prompt that named it itself
    (``id_slot``) had its own choice kept, and every short request then waited for its
    prefill. The gateway's pins place it now; without pinning the client's choice passes."""
    config, runtime = _runtime()
    replica = runtime.replicas[0]
    planner = Planner(config, {"default": runtime}, GatewayMetrics())
    long_prompt = {"prompt": "word " * 8000, "id_slot": 0, "max_tokens": 1}
    kept = _plan(planner, dict(long_prompt))
    assert kept.body["id_slot"] == 0 and not kept.changed  # no pins: the engine's business
    apply_slots(replica, 4, None)
    assert replica.slot_pins is not None
    plan = _plan(planner, dict(long_prompt))
    assert plan.lane == LONG and "id_slot" not in plan.body and plan.changed
    sent = json.loads(
        Proxy(config, {"default": runtime}, GatewayMetrics())._upstream_body(plan, False)[1]
    )
    assert "id_slot" not in sent  # the proxy adds the slot its pins chose (3, a long one)


@pytest.mark.parametrize(
    "raw",
    [b"[" * 200_000 + b"]" * 200_000, b'{"data": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"],
    ids=["arrays", "in-data"],
)
def test_an_upstream_answer_nested_past_the_recursion_limit_is_no_answer(
    raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It raised RecursionError out of the discovery task, which died: never asked again."""
    from ttft.gateway import discover, prerender_setup

    async def fetch(replica: Replica, call: control.Call, timeout_s: float = 5.0) -> Any:
        return 200, raw

    monkeypatch.setattr(discover, "fetch", fetch)
    monkeypatch.setattr(prerender_setup, "fetch", fetch)
    _, rt = _runtime()
    assert asyncio.run(discover.fetch_json(rt.replicas[0], control.MODELS)) == {}
    assert asyncio.run(prerender_setup._first_json(rt, control.PROPS)) is None


def test_model_names_with_control_characters_are_dropped() -> None:
    answer = {"data": [{"id": "ok-name"}, {"id": "bad\r\nname"}, {"id": "\x1b[31mred"}]}
    assert model_names(answer) == ["ok-name"]
