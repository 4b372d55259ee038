"""The live state behind each configured model: replicas, their health, and the template cache.

A replica is taken out of routing at once when a request to it fails at the transport level
(refused, reset, closed mid-answer), and after two failed health checks in a row; one passing
check (``GET /health`` answering 200; llama-server answers 503 while it loads) brings it back.

Pre-rendering starts disabled; ``prerender_setup`` switches it on per model once the template
checks out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.engines import control
from ttft.gateway.admission.lanes import Admission, default_max_in_flight, resolve_long_reserve
from ttft.gateway.admission.shared_slots import SharedPins, SharedSlots
from ttft.gateway.admission.slot_pins import SlotPins
from ttft.gateway.admission.slot_table import SlotTable
from ttft.gateway.config import (
    GatewayConfig,
    ModelConfig,
    UpstreamConfig,
)
from ttft.gateway.engine_facts import EngineCommandLine
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.routing import Router
from ttft.gateway.upstream import CollectSink, UpstreamPool, request_bytes

log = logging.getLogger("ttft.gateway")

_FAILS_TO_DOWN = 2


@dataclass
class Replica:
    index: int
    config: UpstreamConfig
    pool: UpstreamPool
    admission: Admission
    host_header: str
    healthy: bool = True
    fails: int = 0
    last_error: str = ""
    # True while the in-flight cap is a default that the engine's own slot count may replace.
    cap_from_engine: bool = False
    # llama-server's slots, once /props named them and pinning is on (admission/slot_pins.py).
    slot_pins: SlotPins | SharedPins | None = None
    # Where the in-flight cap came from, in words (logged, and shown in /health).
    limit_source: str = ""
    # The engine's launch command, when it listens on loopback here (gateway/engine_facts.py).
    launch: EngineCommandLine | None = None

    @property
    def name(self) -> str:
        return self.config.url

    @property
    def load(self) -> int:
        return self.admission.load

    @property
    def has_room(self) -> bool:
        return self.admission.has_room

    @property
    def has_free_slot(self) -> bool:
        return self.admission.has_free_slot

    def mark_down(self, reason: str) -> None:
        if self.healthy:
            log.warning("upstream %s taken out of routing: %s", self.name, reason)
        self.healthy = False
        self.fails = max(self.fails, _FAILS_TO_DOWN)
        self.last_error = reason

    def path(self, api_path: str) -> str:
        return self._root + api_path

    @cached_property
    def _root(self) -> str:
        # Looked up once: ``config.root`` splits the URL, and it was asked on every request.
        return self.config.root

    @cached_property
    def auth_headers(self) -> tuple[tuple[str, str], ...]:
        """What every request to this replica carries (its own headers, its API key): the
        configuration is frozen, so built once rather than as a new dict per request."""
        return tuple(self.config.target.auth_headers().items())

    @cached_property
    def _proxy_heads(self) -> dict[tuple[str, bool], str]:
        return {}

    def proxy_head(self, api_path: str, stream: bool) -> str:
        """The head of a proxied POST to ``api_path`` up to its request id and length: the
        same for every request of a kind, so built once (it was a list and a join each time)."""
        head = self._proxy_heads.get((api_path, stream))
        if head is None:
            headers = [("Content-Type", "application/json"), ("Accept-Encoding", "identity")]
            if stream:
                headers.append(("Accept", "text/event-stream"))
            headers.extend(self.auth_headers)
            head = f"POST {self.path(api_path)} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            head += "".join([f"{k}: {v}\r\n" for k, v in headers])
            self._proxy_heads[(api_path, stream)] = head
        return head


@dataclass
class ModelRuntime:
    config: ModelConfig
    replicas: list[Replica]
    router: Router
    prerenderer: Any = None  # a ttft.gateway.prerender.Prerenderer once pre-rendering is on
    prerender_state: str = "off"
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    counting: set[asyncio.Task[None]] = field(default_factory=set)  # /tokenize in background
    # Names the upstreams' /v1/models list (the engine's real model name), accepted as aliases.
    engine_names: set[str] = field(default_factory=set)
    # The same names in the engines' order with what each listed about them (vLLM: root,
    # max_model_len), for the gateway's own /v1/models.
    engine_models: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Set once a replica answered /v1/models and its launch command was looked for: what the
    # template discovery of engines without /props waits for.
    listed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def upstream_model(self) -> str:
        return self.config.upstream_model or self.config.name

    def client_room(self) -> int:
        """Requests this worker's replicas of the model hold at once, in flight and queued:
        what a client's default share is half of (``admission/shares.py``). Read per request:
        the in-flight caps change when an engine reports its slots."""
        room = 0
        for replica in self.replicas:  # a loop: this runs on every keyed request
            admission = replica.admission
            room += admission.own_part + admission.queue_size
        return room

    def answers_to(self, name: str) -> bool:
        return name in self.config.aliases or name in self.engine_names

    def listed_names(self) -> list[str]:
        """What the gateway's ``/v1/models`` lists for this model: the configured name, then
        the engines' own names; without a configured name (``ttft gateway --upstream`` with no
        ``--model``), only the engines' names once one answered."""
        implicit = self.config.name_from_upstream and self.engine_models
        names = [] if implicit else [self.name]
        return names + [n for n in self.engine_models if n not in names]

    def healthy_count(self) -> int:
        return sum(1 for r in self.replicas if r.healthy)


def build_runtime(
    config: GatewayConfig,
    model: ModelConfig,
    metrics: GatewayMetrics,
    slots: SlotTable | None = None,
) -> ModelRuntime:
    """A model's replicas with their pools and admission. ``slots``: the in-flight counts
    shared with the other workers (``config.slot_share``'s table, opened by this process)."""
    limits, admission = config.limits, config.admission
    replicas: list[Replica] = []
    part = config.partition  # with several workers, this process's part of each limit
    for i, up in enumerate(model.upstreams):
        given = up.max_in_flight or admission.max_in_flight
        whole = given or default_max_in_flight(model.engine)
        if up.max_in_flight:
            source = "configured (the upstream's max_in_flight)"
        elif admission.max_in_flight:
            source = "configured (max_in_flight / --max-in-flight)"
        else:
            source = f"the gateway's default for {model.engine}"
        # Alone, or with several workers that count in the shared slot table: the whole cap.
        cap = whole
        pool = UpstreamPool(
            up.host,
            up.port,
            use_tls=up.scheme == "https",
            connect_timeout_s=limits.connect_timeout_s,
            idle_timeout_s=limits.upstream_idle_timeout_s,
            max_idle=max(16, 2 * cap),
        )
        host_header = up.host if ":" not in up.host else f"[{up.host}]"
        replica = Replica(
            i,
            up,
            pool,
            Admission(
                cap,
                part.part(admission.queue_size, i),
                split_lanes=admission.split_lanes,
                short_burst=admission.short_burst,
                long_reserve=resolve_long_reserve(admission.long_reserve, cap),
                client_slots=part.limit(admission.max_slots_per_client, i)
                if admission.max_slots_per_client is not None or config.api_keys
                else 0,
            ),
            f"{host_header}:{up.port}",
            cap_from_engine=given is None,
            limit_source=source,
        )
        share = config.slot_share
        if share is not None and slots is not None:
            at = share.replica_index(model.name, up.url)
            if at is None:
                raise ValueError(f"{model.name} {up.url}: not in the shared slot table")
            replica.admission.shared = SharedSlots(slots, share, at, part)
        replicas.append(replica)
        _track(metrics, replica)
    router = Router(
        [r.name for r in replicas],
        virtual_nodes=config.routing.virtual_nodes,
        load_factor=config.routing.load_factor,
    )
    runtime = ModelRuntime(model, replicas, router)
    metrics.frames.track(
        lambda: float(runtime.prerenderer.cached_frames) if runtime.prerenderer else 0.0,
        model.name,
    )
    metrics.frame_bytes.track(
        lambda: float(runtime.prerenderer.cached_bytes) if runtime.prerenderer else 0.0,
        model.name,
    )
    return runtime


def _track(metrics: GatewayMetrics, replica: Replica) -> None:
    url, admission = replica.name, replica.admission
    metrics.in_flight.track(lambda: admission.in_flight, url)
    metrics.queued.track(lambda: admission.queued["short"], url, "short")
    metrics.queued.track(lambda: admission.queued["long"], url, "long")
    metrics.healthy.track(lambda: 1.0 if replica.healthy else 0.0, url)


async def fetch(replica: Replica, call: control.Call, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """A control call to a replica over its pool (health checks, /props, /apply-template)."""
    method, path, body = call.method, call.path, call.body
    raw = None if body is None else json.dumps(body).encode()
    headers = [("Accept-Encoding", "identity")]
    if raw is not None:
        headers.append(("Content-Type", "application/json"))
    headers.extend(replica.auth_headers)
    payload = request_bytes(method, replica.host_header, replica.path(path), raw, headers)
    sink = CollectSink()
    async with asyncio.timeout(timeout_s):
        await replica.pool.exchange(payload, sink)
    return sink.status, bytes(sink.body)


async def check_health(replica: Replica, timeout_s: float) -> None:
    try:
        status, _ = await fetch(replica, control.HEALTH, timeout_s=timeout_s)
        # 503 is llama-server loading its model; 404 a server without /health that answered.
        ok, why = status < 500, f"GET /health answered {status}"
    except (RequestFailed, TimeoutError, OSError) as exc:
        timed_out = isinstance(exc, TimeoutError) or (
            isinstance(exc, RequestFailed) and exc.kind == errors.TIMEOUT
        )
        if timed_out and replica.pool.sent_within(timeout_s):
            # Busy, not dead: a Python engine streaming 100 MB to one client answered its
            # health check late, and the gateway's /health said 503 for over a second.
            return
        ok, why = False, str(exc) or type(exc).__name__
    if ok:
        if not replica.healthy:
            log.warning("upstream %s is back", replica.name)
        replica.healthy, replica.fails, replica.last_error = True, 0, ""
        return
    replica.fails += 1
    replica.last_error = why
    if replica.fails >= _FAILS_TO_DOWN and replica.healthy:
        replica.mark_down(why)


async def health_loop(runtime: ModelRuntime, interval_s: float, timeout_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await asyncio.gather(*(check_health(r, timeout_s) for r in runtime.replicas))
