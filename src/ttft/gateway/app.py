"""The gateway service: endpoints, API keys, and the life cycle of models and health checks.

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (proxied), ``GET
/v1/models`` (the configured names and the engines' own), ``GET /health`` (200 while every
model has a healthy replica, 503 otherwise, with the details) and ``GET /metrics``
(Prometheus text; with several workers, all of theirs merged, ``?worker=self`` this one's).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

from ttft.gateway.admission.shares import ClientShares
from ttft.gateway.admission.slot_table import SlotTable, drain
from ttft.gateway.body_cost import body_cost
from ttft.gateway.config import GatewayConfig
from ttft.gateway.discover import discover_replica
from ttft.gateway.errors import GatewayError, bad_request, not_found, unauthorized
from ttft.gateway.hosts import allowed_hosts, host_name
from ttft.gateway.http.budget import server_busy
from ttft.gateway.http.server import HttpServer, Request, Response
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.metrics_shared import SharedMetrics
from ttft.gateway.prerender_setup import setup_prerender
from ttft.gateway.proxy import CHAT, COMPLETIONS, Proxy, check_method
from ttft.gateway.runtime import (
    ModelRuntime,
    build_runtime,
    check_health,
    health_loop,
)
from ttft.gateway.validate import parse_body

log = logging.getLogger("ttft.gateway")
_clock = time.perf_counter_ns

_ENDPOINTS = {"/v1/chat/completions": CHAT, "/v1/completions": COMPLETIONS}
_COUNTED_BYTES = 4 * 1024  # bodies from this size have their parsing cost counted first
_OFF_LOOP_BYTES = 64 * 1024  # and from this size are parsed in the parser thread


class Gateway:
    """Build with a checked ``GatewayConfig``; ``await start()``; ``await stop()``."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.metrics = GatewayMetrics()
        workers = config.partition.count
        self.metrics.worker.track(lambda: float(workers), str(config.partition.index))
        share = config.metrics_share
        self.shared = SharedMetrics(self.metrics, share) if share is not None else None
        # With several workers: the replicas' in-flight counts shared with the other workers.
        slot_share = config.slot_share
        self.slot_table = SlotTable.open(slot_share.path) if slot_share is not None else None
        self.models: dict[str, ModelRuntime] = {
            m.name: build_runtime(config, m, self.metrics, self.slot_table) for m in config.models
        }
        self.proxy = Proxy(config, self.models, self.metrics)
        part = config.partition  # with several workers, this process's part of each limit
        self.shares = ClientShares(
            part.limit(config.admission.max_requests_per_client),
            self.metrics,
            keyed=bool(config.api_keys),
        )
        limits = config.limits
        self.server = HttpServer(
            self.handle,
            precheck=self.precheck,
            max_header_bytes=limits.max_header_bytes,
            max_body_bytes=limits.max_body_bytes,
            max_bodies_in_flight_bytes=part.part(limits.max_bodies_in_flight_bytes),
            max_bodies_in_flight_bytes_per_client=part.limit(
                limits.max_bodies_in_flight_bytes_per_client
            ),
            body_timeout_s=limits.body_timeout_s,
            max_connections=limits.max_connections,
            max_connections_per_client=limits.max_connections_per_client,
            first_request_timeout_s=limits.first_request_timeout_s,
            read_timeout_s=limits.read_timeout_s,
            idle_timeout_s=limits.idle_timeout_s,
            write_timeout_s=limits.write_timeout_s,
            stall_timeout_s=limits.stream_stall_timeout_s,
        )
        self._keys = tuple(k.encode() for k in config.api_keys)
        self._boosts = dict(config.key_priority_boosts)
        self._hosts = allowed_hosts(config)
        self._tasks: list[asyncio.Task[None]] = []
        # One thread for large bodies: parsing is CPU work under the GIL, so more threads
        # would only take more turns from the loop.
        self._parser = ThreadPoolExecutor(1, thread_name_prefix="ttft-gateway-parse")
        self.started_at = time.time()

    @property
    def url(self) -> str:
        host = self.server.host
        return f"http://{host if ':' not in host else f'[{host}]'}:{self.server.port}"

    async def start(self, *, wait_prerender_s: float = 5.0) -> None:
        """Check every upstream once, load templates, then listen.

        Pre-rendering setup is waited for up to ``wait_prerender_s`` (the first requests are
        then already pre-rendered); it keeps retrying in the background after that.
        """
        routing = self.config.routing
        await asyncio.gather(
            *(
                check_health(r, routing.health_timeout_s)
                for m in self.models.values()
                for r in m.replicas
            )
        )
        loop = asyncio.get_running_loop()
        setups = []
        for runtime in self.models.values():
            for replica in runtime.replicas:
                if replica.fails:
                    replica.mark_down(replica.last_error or "not answering")
            setup = loop.create_task(setup_prerender(runtime, self.config, self.metrics))
            setups.append(setup)
            self._tasks.append(setup)
            for replica in runtime.replicas:
                # Model names and slot counts from the engines: waited for with the templates,
                # so the first requests already see them.
                ask = loop.create_task(discover_replica(runtime, replica, self.config))
                self._tasks.append(ask)
                if replica.healthy:  # a replica that is down is asked in the background only
                    setups.append(ask)
            self._tasks.append(
                loop.create_task(
                    health_loop(runtime, routing.health_interval_s, routing.health_timeout_s)
                )
            )
        if setups:
            await asyncio.wait(setups, timeout=wait_prerender_s)
        if self.shared is not None:
            self._tasks.append(loop.create_task(self.shared.run()))
        if slot_share := self.config.slot_share:
            # Another worker released a slot of a replica this one has waiters for.
            loop.add_reader(slot_share.wake_read_fd, self._slots_freed, slot_share.wake_read_fd)
        await self.server.start(
            self.config.host, self.config.port, reuse_port=self.config.workers > 1
        )
        if not self._keys:
            log.warning(
                "no API keys configured: the gateway is open to anyone who can reach %s", self.url
            )

    async def stop(self, drain_s: float = 0.0) -> None:
        """Stop; with ``drain_s``, first let running answers finish for up to that long."""
        if drain_s > 0:
            await self.server.drain(drain_s)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        await self.server.stop()
        if self.config.slot_share is not None:
            asyncio.get_running_loop().remove_reader(self.config.slot_share.wake_read_fd)
        if self.shared is not None:
            self.shared.write(force=True)  # the supervisor folds it into the retired totals
        self._parser.shutdown(wait=False, cancel_futures=True)
        for runtime in self.models.values():
            for replica in runtime.replicas:
                replica.pool.close()

    def _slots_freed(self, fd: int) -> None:
        drain(fd)
        for runtime in self.models.values():
            for replica in runtime.replicas:
                if replica.admission.waiting:
                    replica.admission.dispatch()

    # -- requests --------------------------------------------------------------------------

    def precheck(self, request: Request) -> str | None:
        """What the head alone decides, before any body byte is read: key, route, method.
        Returns whom the request's body counts against (its key; None: its address).

        The key comes first: without one, an unknown route is a 401 like any other, so the
        route list is not readable without a key. With no keys, the Host must be a loopback
        name (or ``allowed_hosts``) and a POST must be ``application/json``: a web page the
        user visits cannot then reach an open gateway on localhost, neither by DNS rebinding
        nor by a form post (which needs no CORS preflight).
        """
        path = request.path
        host = request.headers.get("host")
        if host is None and request.version == "HTTP/1.1":
            # RFC 9112, 3.2: a 400; and the Host check below must not be skipped by leaving
            # the header out.
            raise bad_request("an HTTP/1.1 request needs a Host header")
        public = self.config.public_metrics and path in ("/health", "/metrics")
        if self._keys and not public:
            self._authorize(request)
        expect = request.headers.get("expect")
        if expect is not None and expect.lower() != "100-continue":
            # RFC 9110, 10.1.1: an expectation we cannot meet is a 417, not silently ignored.
            raise GatewayError(
                417, "the only expectation supported is 100-continue", code="expectation_failed"
            )
        if path in _ENDPOINTS:
            check_method(request, "POST")
        elif path in ("/v1/models", "/health", "/metrics"):
            check_method(request, "GET")
        else:
            raise not_found(
                f"no route {request.method} {path[:200]}; this gateway "
                "serves /v1/chat/completions, /v1/completions, /v1/models, "
                "/health and /metrics"
            )
        if self._keys:
            return None if public else "key:" + _bearer(request)
        if host is not None and host_name(host) not in self._hosts:
            raise GatewayError(
                403,
                "this gateway has no API keys, so it answers only requests addressed to "
                "localhost; set api_keys or allowed_hosts to serve other names",
                code="host_not_allowed",
            )
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if request.method == "POST" and media != "application/json":
            raise GatewayError(
                415,
                "send the body as Content-Type: application/json",
                code="unsupported_media_type",
            )
        return None

    async def handle(self, request: Request, response: Response) -> None:
        endpoint = _ENDPOINTS.get(request.path)
        label, model = endpoint or request.path, "-"
        received = request.received_ns
        response.server_timing = lambda: f"gateway;dur={(_clock() - received) / 1e6:.3f}"
        try:
            if endpoint is not None:
                raw = request.body
                # A small body is parsed here, without the coroutine ``_parse`` costs.
                body = parse_body(raw) if len(raw) < _COUNTED_BYTES else await self._parse(request)
                plan = self.proxy.plan(request, endpoint, body, self._boost(request))
                del body  # the plan holds it until it has gone upstream (Proxy.run)
                model = plan.runtime.name
                client = self._client(request)
                held = self.shares.take(client, plan.runtime)
                try:
                    await self.proxy.run(request, response, plan, client)
                finally:
                    self.shares.give_back(held)
            elif request.path == "/v1/models":
                self._send_json(response, 200, self._models_body())
            elif request.path == "/health":
                ok, body = self._health_body()
                self._send_json(response, 200 if ok else 503, body)
            else:
                response.send(
                    200, [("Content-Type", "text/plain; version=0.0.4")], self._metrics(request)
                )
        except GatewayError as exc:
            if response.started:
                raise
            response.send_error(exc)
        finally:
            if response.status is not None and label in ("chat", "completions", "/v1/models"):
                self.metrics.requests.inc(model, label, str(response.status))

    def _metrics(self, request: Request) -> bytes:
        """``/metrics``: every worker's, merged; ``?worker=self``: this process's only."""
        which = parse_qs(request.query).get("worker", [])
        if which and which != ["self"]:
            raise bad_request("/metrics takes worker=self (this worker's only) or no query")
        if self.shared is None or which:
            return self.metrics.render()
        return self.shared.render_merged()

    async def _parse(self, request: Request) -> dict[str, Any]:
        """The body, parsed where it cannot stall other connections for long.

        Past a few KiB its cost is counted first (``body_cost``, C passes over the bytes): over
        ``limits.max_body_cost`` it is a 413 without being parsed, and what the parsed body
        will hold is charged to the body budget (503 when spent). Past 64 KiB it is parsed in
        the gateway's parser thread: the loop keeps serving while it runs (objects, the costly
        kind, call back into Python, which lets the loop take its turns).
        """
        raw = request.body
        if len(raw) < _COUNTED_BYTES:
            return parse_body(raw)
        cost = body_cost(raw)
        limit = self.config.limits.max_body_cost
        if cost.units > limit:
            raise GatewayError(
                413,
                f"the request body holds too many JSON values to parse here (cost {cost.units}, "
                f"at most {limit}); send fewer, longer values",
                code="body_too_complex",
            )
        if request.charge is not None and not request.charge(cost.memory):
            raise server_busy()
        if len(raw) < _OFF_LOOP_BYTES:
            return parse_body(raw)
        loop = self.server.loop or asyncio.get_running_loop()
        return await loop.run_in_executor(self._parser, parse_body, raw)

    def _boost(self, request: Request) -> int:
        """How far below 0 this request's key may set ``priority`` (checked by ``plan``)."""
        default = self.config.admission.max_priority_boost
        if not self._boosts:
            return default
        token = _bearer(request)
        # The key was verified in constant time already; this lookup only reads its settings.
        return self._boosts.get(token, default)

    def _client(self, request: Request) -> str:
        """Who a request's share counts against: its key (verified already), else its address."""
        if self._keys:
            return "key:" + _bearer(request)
        return "addr:" + request.peer.rpartition(":")[0]

    def _authorize(self, request: Request) -> None:
        if not self._keys:
            return
        header = request.headers.get("authorization")
        if header is None:
            raise unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthorized("the Authorization header must be 'Bearer <key>'")
        given = token.strip().encode()
        # Compare with every key, in constant time per key: no early exit that leaks a prefix.
        match = False
        for key in self._keys:
            match |= hmac.compare_digest(given, key)
        if not match:
            raise unauthorized("invalid API key")

    @staticmethod
    def _send_json(response: Response, status: int, payload: Any) -> None:
        response.send(
            status,
            [("Content-Type", "application/json")],
            json.dumps(payload, ensure_ascii=False).encode(),
        )

    def _models_body(self) -> dict[str, Any]:
        """Every name a request may use, once: configured names, then what the engines listed
        (a name two models' engines both list is served by the first, as routing does)."""
        created = int(self.started_at)
        data: dict[str, dict[str, Any]] = {}
        for runtime in self.models.values():
            for name in runtime.listed_names():
                data.setdefault(
                    name,
                    {
                        "id": name,
                        "object": "model",
                        "created": created,
                        "owned_by": "ttft-gateway",
                        **_length(runtime.engine_models.get(name)),
                    },
                )
        return {"object": "list", "data": list(data.values())}

    def _health_body(self) -> tuple[bool, dict[str, Any]]:
        models = {}
        ok = True
        for name, runtime in self.models.items():
            healthy = runtime.healthy_count()
            ok = ok and healthy > 0
            models[name] = {
                "healthy_upstreams": healthy,
                "prerender": runtime.prerender_state,
                "upstreams": [
                    {
                        "url": r.name,
                        "healthy": r.healthy,
                        "in_flight": r.admission.busy,  # every worker's (shared slots)
                        "queued": r.admission.waiting,
                        "max_in_flight": r.admission.max_in_flight,
                        "limit_source": r.limit_source,
                        **({"last_error": r.last_error} if r.last_error else {}),
                    }
                    for r in runtime.replicas
                ],
            }
        return ok, {"status": "ok" if ok else "degraded", "models": models}


def _length(facts: dict[str, Any] | None) -> dict[str, Any]:
    """The engine's ``max_model_len`` for a name it listed (clients size prompts by it)."""
    if facts is None or "max_model_len" not in facts:
        return {}
    return {"max_model_len": facts["max_model_len"]}


def _bearer(request: Request) -> str:
    """The key of ``Authorization: Bearer <key>`` (checked by ``_authorize`` before use)."""
    return request.headers.get("authorization", "").partition(" ")[2].strip()
