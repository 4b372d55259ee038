"""The real fleet a multi-replica point is validated on: N embedded llama-servers (or, for a vLLM
calibration, N of ttft's own local vLLMs) behind a real ``ttft gateway`` that routes as the
point says.

On one machine the replicas share its cores, which the simulation does not model (it gives every
replica the calibrated speed). So each replica runs the calibration's thread count and, when the
machine has the cores, is pinned to cores of its own: replica *i* gets the *i*-th group of
``threads`` cores, as the calibration's engine got the first group. Without those cores, the
cores are split evenly and each replica runs one thread per core of its group: slower than the
calibration's engine, but steadily so (engines that each spin a thread on every core slow each
other down by several times, and by how much changes from run to run). The gateway runs without
pre-rendering or slot pins (the simulation models neither), with its in-flight cap set to the
point's ``max_in_flight``, its routing to the point's policy, and its lanes off, or on with the
point's settings (a lanes point, one replica included); round-robin is a simulated policy only
(the gateway routes by prefix affinity or to the least loaded replica).
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.process import ServerProcess, free_loopback_port
from ttft.gateway.config import LimitsConfig, RoutingConfig
from ttft.gateway.config_checks import check_upstream_url
from ttft.gateway.routing import affinity_key
from ttft.simulate.cores import replica_cores
from ttft.simulate.gateway_sim import Lanes
from ttft.workload.requests import WorkItem

if TYPE_CHECKING:
    from ttft.engines.llamacpp.embedded import RunningEngine
    from ttft.engines.vllm.local import RunningVllm

GATEWAY_POLICIES = ("least-loaded", "prefix-affinity")


@dataclass(frozen=True)
class LiveFleet:
    gateway: Target  # where the point's requests go
    replica: Target  # replica 0, for the tokenizer and the speed probe
    names: tuple[str, ...]  # the replicas as the gateway's ring names them


def gateway_toml(
    urls: Sequence[str],
    model: str,
    policy: str,
    max_in_flight: int,
    lanes: Lanes | None = None,
    engine: str = "llamacpp",
) -> str:
    """The gateway's configuration for a point: no lanes (one first-come-first-served queue that
    never sheds), or the point's ``lanes`` with their queue size and timeout."""
    if policy not in GATEWAY_POLICIES:
        raise TtftError(
            f"ttft gateway has no {policy} routing: a {policy} point can be predicted, not run",
            f"validate {' or '.join(GATEWAY_POLICIES)} points",
        )
    upstreams = ", ".join(f'"{u}"' for u in urls)
    affinity = "true" if policy == "prefix-affinity" else "false"
    if lanes is None:
        admission = "split_lanes = false\nqueue_size = 4096\nqueue_timeout_s = 600.0\n"
    else:
        admission = (
            f"split_lanes = true\nlong_prompt_tokens = {lanes.long_prompt_tokens}\n"
            f"short_burst = {lanes.short_burst}\n"
            + ("" if lanes.long_reserve is None else f"long_reserve = {lanes.long_reserve}\n")
            + f"queue_size = {lanes.queue_size}\nqueue_timeout_s = {lanes.queue_timeout_s!r}\n"
        )
    return (
        f'listen = "127.0.0.1:{{port}}"\n'
        # One process: the simulator models one gateway's lanes, where every waiting request
        # is ordered against every other (several workers each order their own).
        "workers = 1\n"
        "[admission]\n"
        f"max_in_flight = {max_in_flight}\npin_slots = false\n{admission}"
        f"[routing]\naffinity = {affinity}\n"
        "[limits]\nmax_connections_per_client = 0\n"
        f'[[model]]\nname = "{model}"\nengine = "{engine}"\nprerender = false\n'
        f"upstreams = [{upstreams}]\n"
    )


def route_keys(items: Sequence[WorkItem]) -> list[int | None]:
    """The affinity key ``ttft gateway`` computes for each completion request (its default
    routing settings: the leading 8 blocks of 64 tokens, as text)."""
    routing = RoutingConfig()
    keys: list[int | None] = []
    for item in items:
        prompt = item.body.get("prompt")
        material = prompt[0] if isinstance(prompt, list) and prompt else prompt
        if isinstance(material, str) or (
            isinstance(material, list) and all(isinstance(t, int) for t in material)
        ):
            keys.append(
                affinity_key(
                    material, routing.block_tokens, routing.max_blocks, whole_if_short=False
                )
            )
        else:
            keys.append(None)
    return keys


def lane_tokens(items: Sequence[WorkItem]) -> list[int]:
    """The prompt length ``ttft gateway`` estimates for each request (its body's bytes over its
    characters per token), which picks the request's lane."""
    cpt = LimitsConfig().chars_per_token
    return [round(len(json.dumps(item.body).encode()) / cpt) for item in items]


@contextlib.contextmanager
def embedded_fleet(
    replicas: int,
    *,
    slots: int,
    policy: str,
    max_in_flight: int | None = None,
    batch_tokens: int | None = None,
    threads: int | None = None,
    lanes: Lanes | None = None,
    kind: str = "llamacpp",
    model: str | None = None,
) -> Iterator[LiveFleet]:
    """``replicas`` embedded llama-servers (``kind`` vllm: ttft's own local vLLMs serving the
    local ``model``) and a gateway in front, stopped when the block ends."""
    from ttft.simulate.targets import launch_own

    groups, own = replica_cores(replicas, threads)
    threads = threads if own else len(groups[0])
    with contextlib.ExitStack() as stack:
        engines: list[RunningEngine | RunningVllm] = []
        for i in range(replicas):
            running = launch_own(kind, slots, batch_tokens, threads, groups[i], model)
            stack.callback(running.stop)
            engines.append(running)
        urls = [check_upstream_url(e.base_url, "upstream") for e in engines]
        name = engines[0].model_name
        port = free_loopback_port()
        text = gateway_toml(urls, name, policy, max_in_flight or slots, lanes, kind).replace(
            "{port}", str(port)
        )
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ttft-fleet-")))
        config = folder / "gateway.toml"
        config.write_text(text, encoding="utf-8")
        gateway = ServerProcess(
            [sys.executable, "-m", "ttft", "gateway", "--config", str(config)],
            health_url=f"http://127.0.0.1:{port}/health",
            name="ttft gateway",
            log_path=folder / "gateway.log",
        )
        gateway.start()
        stack.callback(gateway.stop)
        gateway.wait_healthy(60.0)
        first = engines[0]
        yield LiveFleet(
            Target(f"http://127.0.0.1:{port}", name, None, kind),
            Target(first.base_url, first.model_name, first.metrics_url, kind),
            tuple(urls),
        )
