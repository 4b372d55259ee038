"""A multi-replica validation mirrors the real gateway: its ring names, its prompt keys, and a
gateway configuration that routes as the simulated point says."""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest

from ttft.core.errors import TtftError
from ttft.gateway.routing import Router
from ttft.simulate.cores import core_groups, replica_cores, shared_cores
from ttft.simulate.fleet import simulate
from ttft.simulate.live_fleet import gateway_toml, route_keys
from ttft.simulate.model import CostModel, EngineSettings
from ttft.simulate.requests import synthetic
from ttft.workload.requests import WorkItem, completion_body

COST = CostModel(step_base_s=0.01, prefill_token_s=0.002, decode_seq_s=0.01)
URLS = ("http://127.0.0.1:18001", "http://127.0.0.1:18002", "http://127.0.0.1:18003")


class _Idle:
    healthy = True
    load = 0
    has_room = True
    has_free_slot = True


def test_a_route_key_sends_each_request_where_the_gateways_ring_with_those_names_would() -> None:
    """Requests far apart (an idle fleet each time) land on the ring owner of their key under
    the given names, which is what ttft gateway with these upstream URLs does."""
    reqs = synthetic(24, prompt_tokens=64, output_tokens=2, seed=3)
    keys = [(i * 0x9E3779B97F4A7C15) & ((1 << 64) - 1) for i in range(24)]
    reqs = [
        replace(r, arrival_s=10.0 * i, route_key=k)
        for i, (r, k) in enumerate(zip(reqs, keys, strict=True))
    ]
    result = simulate(
        reqs, COST, EngineSettings(slots=2), replicas=3, policy="prefix-affinity", names=URLS
    )
    router = Router(list(URLS))
    expected = [router.pick([_Idle()] * 3, k) for k in keys]
    placed = {o.request.index: o.replica for o in result.outcomes}
    assert [placed[i] for i in range(24)] == [c.index for c in expected if c is not None]
    assert len(set(placed.values())) > 1  # the keys do spread: the check is not vacuous


def test_replica_names_must_match_the_replica_count() -> None:
    reqs = synthetic(2, prompt_tokens=64, output_tokens=2)
    with pytest.raises(TtftError, match="2 replica names for 3 replicas"):
        simulate(reqs, COST, EngineSettings(), replicas=3, names=URLS[:2])


def test_the_gateway_config_routes_as_the_point_says_and_models_no_lanes_or_pins() -> None:
    for policy, affinity in (("least-loaded", False), ("prefix-affinity", True)):
        text = gateway_toml(URLS[:2], "m", policy, 3).replace("{port}", "8000")
        doc = tomllib.loads(text)
        assert doc["routing"]["affinity"] is affinity
        assert doc["admission"]["max_in_flight"] == 3
        assert doc["admission"]["split_lanes"] is False and doc["admission"]["pin_slots"] is False
        assert doc["model"][0]["upstreams"] == list(URLS[:2])


def test_round_robin_cannot_be_run_through_the_gateway_and_says_which_can() -> None:
    with pytest.raises(TtftError, match="no round-robin routing") as caught:
        gateway_toml(URLS[:2], "m", "round-robin", 4)
    assert "least-loaded or prefix-affinity" in (caught.value.fix or "")


def test_route_keys_are_the_gateways_text_keys_and_none_for_short_prompts() -> None:
    long_text = "word " * 600  # > 8 blocks of 256 characters
    items = [
        WorkItem(completion_body(long_text, 4), "completions", "sim"),
        WorkItem(completion_body(long_text[:2048] + "other tail", 4), "completions", "sim"),
        WorkItem(completion_body("short", 4), "completions", "sim"),
    ]
    keys = route_keys(items)
    assert keys[0] is not None and keys[0] == keys[1]  # the key reads the leading 2048 chars
    assert keys[2] is None


def test_core_groups_are_disjoint_or_none_when_the_cores_are_too_few() -> None:
    import os

    cores = len(os.sched_getaffinity(0))
    groups = core_groups(cores, 1)
    assert groups is not None and sorted(c for g in groups for c in g) == sorted(
        os.sched_getaffinity(0)
    )
    assert core_groups(cores + 1, 1) is None
    assert core_groups(2, None) is None


def test_shared_cores_split_the_cores_evenly_and_wrap_when_replicas_outnumber_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replicas without cores of their own each get an equal group (the remainder unused, so
    they run alike); more replicas than cores share single cores round the list."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 5})
    assert shared_cores(2) == [[0, 1], [2, 3]]
    assert shared_cores(1) == [[0, 1, 2, 3, 5]]
    assert shared_cores(7) == [[0], [1], [2], [3], [5], [0], [1]]
    assert replica_cores(2, 2) == ([[0, 1], [2, 3]], True)  # the calibration's threads fit
    assert replica_cores(2, 3) == ([[0, 1], [2, 3]], False)  # they do not: split evenly
    assert replica_cores(2, None) == ([[0, 1], [2, 3]], False)
