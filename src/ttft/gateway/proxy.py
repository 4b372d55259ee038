"""One completion request through the gateway: admit it, route it, stream it back.

With its plan (``ttft.gateway.plan``) a replica is picked, a slot awaited in its lane, and the
request sent; a replica that fails before the client saw a byte is taken out of
routing and the request goes to another one (``routing.retries``). After the first byte has
gone out, an upstream failure becomes one clean error event at the end of the stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from typing import Any

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.gateway.admission.lanes import Shed
from ttft.gateway.admission.slot_pins import with_slot
from ttft.gateway.config import GatewayConfig, engine_adapter
from ttft.gateway.errors import GatewayError, error_body, overloaded, upstream_failed
from ttft.gateway.http.server import Request, Response
from ttft.gateway.log_limit import ThrottledLog
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.plan import CHAT, COMPLETIONS, PATHS, Plan, Planner
from ttft.gateway.routing import NONE
from ttft.gateway.runtime import ModelRuntime, Replica
from ttft.gateway.sinks import ChatJsonSink, ChatStreamSink, ForwardSink
from ttft.gateway.upstream import UpstreamConnection

_RETRYABLE = (errors.CONNECT, errors.DISCONNECT, errors.INCOMPLETE_STREAM)
_MARK_DOWN = (errors.CONNECT, errors.DISCONNECT, errors.INCOMPLETE_STREAM)
_clock = time.perf_counter_ns
_NOTHING_TRIED: frozenset[int] = frozenset()
log = logging.getLogger("ttft.gateway")
# What is read of a body once it went upstream: everything else of it is dropped then.
_KEPT_FIELDS = ("id_slot", "stream_options")
# What a streamed answer carries beside the upstream's own headers: no cache, no proxy buffer.
_STREAM_HEADERS = (("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"))
# What an engine's message must not hold to reach a client: a path, a URL, an address, a
# traceback's words.
_REVEALING = re.compile(
    r"[/\\]|://|\d+\.\d+\.\d+\.\d+|:\d{2,5}\b|\[[0-9a-fA-F:]+\]|Traceback|File \""
)


class Proxy:
    def __init__(
        self, config: GatewayConfig, models: dict[str, ModelRuntime], metrics: GatewayMetrics
    ) -> None:
        self.config = config
        self.models = models
        self.metrics = metrics
        self.planner = Planner(config, models, metrics)
        self._log = ThrottledLog(log)

    def plan(
        self, request: Request, endpoint: str, body: dict[str, Any], priority_boost: int = 0
    ) -> Plan:
        return self.planner.plan(request, endpoint, body, priority_boost)

    # -- sending ---------------------------------------------------------------------------

    async def run(self, request: Request, response: Response, plan: Plan, client: str = "") -> None:
        runtime = plan.runtime
        # What goes upstream, for each kind of replica of the model (usually one kind), built
        # once; then the parsed body is dropped, with what it was charged to the body budget:
        # 3.8 MB of small objects held ~100 MB for as long as its answer streamed.
        # (Loops, not comprehensions: each of those is a function call of its own.)
        rendered = plan.rendered is not None
        payloads: dict[bool, tuple[str, bytes]] = {}
        for r in runtime.replicas:
            flag = rendered and r.config.prerender is not False
            if flag not in payloads:
                payloads[flag] = self._upstream_body(plan, flag)
        body, kept = plan.body, {}
        for k in _KEPT_FIELDS:
            if k in body:
                kept[k] = body[k]
        plan.body = kept
        del body
        if request.uncharge is not None:
            request.uncharge()
        tried: set[int] = set()
        last: RequestFailed | None = None
        for attempt in range(1 + self.config.routing.retries):
            choice = runtime.router.pick(
                runtime.replicas, plan.key, frozenset(tried) if tried else _NOTHING_TRIED
            )
            if choice is None:
                break
            if attempt == 0:
                self.metrics.affinity.inc(
                    runtime.name, choice.affinity if plan.key is not None else NONE
                )
            else:
                self.metrics.retries.inc(runtime.name)
            replica = runtime.replicas[choice.index]
            try:
                waited = (
                    0
                    if replica.admission.try_start(plan.lane, client)
                    else await replica.admission.acquire(
                        plan.lane, plan.priority, self.config.admission.queue_timeout_s, client
                    )
                )
            except asyncio.CancelledError:
                self.metrics.cancelled.inc(runtime.name)  # left while it waited in the queue
                raise
            except Shed as exc:
                self.metrics.shed.inc(runtime.name, exc.reason)
                status = 429 if exc.reason == "queue_full" else 503
                raise overloaded(
                    status,
                    f"{runtime.name}: {exc.message}; retry later",
                    self.config.admission.queue_timeout_s / 4,
                    exc.reason,
                ) from None
            self.metrics.queue.observe(waited / 1e9, runtime.name, plan.lane)
            pins = replica.slot_pins
            # The planner drops a client's id_slot where slots are pinned; one still here came
            # before this replica's slot count was learned: leave it, never send two.
            slot = pins.take(plan.lane, plan.key) if pins and "id_slot" not in plan.body else None
            try:
                failure = await self._send(request, response, plan, replica, waited, slot, payloads)
            finally:
                replica.admission.release(plan.lane, client)
                if pins is not None:
                    pins.give_back(slot)
            if failure is None:
                return
            last = failure
            tried.add(replica.index)
        if last is not None:
            raise upstream_failed(
                _client_message(runtime.name, last), 504 if last.kind == errors.TIMEOUT else 502
            )
        if runtime.healthy_count() == 0:
            self.metrics.shed.inc(runtime.name, "no_healthy_upstream")
            raise overloaded(
                503, f"{runtime.name}: no healthy upstream", 2.0, "no_healthy_upstream"
            )
        self.metrics.shed.inc(runtime.name, "queue_full")
        raise overloaded(
            429,
            f"{runtime.name}: every upstream's queue is full; retry later",
            self.config.admission.queue_timeout_s / 4,
            "queue_full",
        )

    async def _send(
        self,
        request: Request,
        response: Response,
        plan: Plan,
        replica: Replica,
        waited_ns: int,
        slot: int | None,
        payloads: dict[bool, tuple[str, bytes]],
    ) -> RequestFailed | None:
        """One attempt. Returns the failure when it may be retried on another replica."""
        runtime = plan.runtime
        prerendered = plan.rendered is not None and replica.config.prerender is not False
        path, payload_body = payloads[prerendered]
        if slot is not None:
            payload_body = with_slot(payload_body, slot)
        head = replica.proxy_head(path, plan.stream)
        if plan.request_id:
            head += f"X-Request-Id: {plan.request_id}\r\n"
        head += f"Content-Length: {len(payload_body)}\r\n\r\n"
        payload = head.encode("latin-1") + payload_body
        rendered = plan.rendered if prerendered else None
        model, lane = runtime.name, plan.lane
        received = request.received_ns

        stage, replica_text = self.metrics.stage, str(replica.index)
        # The Server-Timing entries known before the upstream answers, formatted once.
        before = f"queue;dur={waited_ns / 1e6:.3f}, "
        if rendered is not None:
            before += (
                f"template;dur={rendered.template_ns / 1e6:.3f}, "
                f"tokenize;dur={rendered.tokenize_ns / 1e6:.3f}, "
            )

        def make_headers(status: int, content_type: str, ttfb_ns: int) -> list[tuple[str, str]]:
            stage.observe(ttfb_ns / 1e9, model, "upstream_ttfb")
            out = [
                ("Content-Type", content_type or "application/json"),
                ("Server-Timing", f"{before}upstream;dur={ttfb_ns / 1e6:.3f}"),
                ("X-Ttft-Replica", replica_text),
            ]
            if content_type.startswith("text/event-stream"):
                out += _STREAM_HEADERS
            if prerendered:
                out.append(("X-Ttft-Prerendered", "1"))
            return out

        def first_token(t_ns: int) -> None:
            self.metrics.ttft.observe((t_ns - received) / 1e9, model, lane)

        def upstream_error(status: int, sample: bytes) -> bytes:
            return self._error_answer(plan, replica, status, sample)

        sink: ForwardSink
        if prerendered and plan.stream:
            options = plan.body.get("stream_options") or {}
            usage = bool(options.get("include_usage"))
            sink = ChatStreamSink(response, make_headers, first_token, usage, upstream_error)
        elif prerendered:
            limit = self.config.limits.max_response_bytes
            sink = ChatJsonSink(response, make_headers, first_token, limit, upstream_error)
        else:
            sink = ForwardSink(response, make_headers, first_token, upstream_error)

        def attach(conn: UpstreamConnection) -> None:
            sink.upstream = conn
            response.on_pause = lambda paused: conn.pause() if paused else conn.resume()
            if response.paused:
                conn.pause()  # the client is behind already: not one upstream byte piles up

        sink.sent_ns = _clock()
        try:
            await replica.pool.exchange(payload, sink, on_connection=attach)
        except RequestFailed as exc:
            return self._failed(plan, replica, response, sink, exc)
        except asyncio.CancelledError:
            self.metrics.cancelled.inc(model)
            raise
        finally:
            response.on_pause = None
        if not response.finished:
            sink.on_end(_clock())  # the sink stopped reading because the client left
        return None

    def _failed(
        self,
        plan: Plan,
        replica: Replica,
        response: Response,
        sink: ForwardSink,
        exc: RequestFailed,
    ) -> RequestFailed | None:
        self.metrics.upstream_errors.inc(replica.name, exc.kind)
        # The details (host, port, the OS's words) go to the log, once per replica, kind and
        # interval (a client that can make requests fail must not flood it); the client gets
        # the kind.
        self._log.log(
            (replica.name, exc.kind),
            logging.WARNING,
            "%s: %s failed (%s): %s",
            plan.runtime.name,
            replica.name,
            exc.kind,
            exc.message,
        )
        if exc.kind in _MARK_DOWN:
            replica.mark_down(exc.message)
        if response.client_gone:
            return None
        if not sink.committed:
            if exc.kind in _RETRYABLE:
                return exc
            status = 504 if exc.kind == errors.TIMEOUT else 502
            response.send_error(upstream_failed(_client_message(plan.runtime.name, exc), status))
            return None
        if sink.streaming:
            # Mid-stream: the status line is long gone; end with an error event clients parse.
            response.write(
                upstream_failed(
                    f"the upstream failed in the middle of the answer ({exc.kind})"
                ).event()
            )
            response.end()
        else:
            response.abort()  # a length-framed body cannot carry an error: cut it
        return None

    def _error_answer(self, plan: Plan, replica: Replica, status: int, sample: bytes) -> bytes:
        """An upstream's error answer, for the client: its status and a request id; the
        upstream's own body (a traceback, file paths, an address) goes to the log only."""
        request_id = plan.request_id or secrets.token_hex(8)
        self._log.log(
            (replica.name, "status", status),
            logging.WARNING,
            "%s: %s answered %d to request %s: %r",
            plan.runtime.name,
            replica.name,
            status,
            request_id,
            sample[:1024],
        )
        if status < 500:
            # An engine's own refusal ("the request exceeds the available context size") is
            # what the client needs to fix its request: its message is kept when it is a short
            # line that names no path, URL or address.
            message = _plain_refusal(sample)
            if message is not None:
                return error_body(message, "invalid_request_error", "upstream_error")
        kind = "refused the request" if status < 500 else "failed"
        return error_body(
            f"{plan.runtime.name}: the upstream {kind} (status {status}, request id "
            f"{request_id}); the gateway's log has its answer",
            "invalid_request_error" if status < 500 else "server_error",
            "upstream_error",
        )

    def _upstream_body(self, plan: Plan, prerendered: bool) -> tuple[str, bytes]:
        if not prerendered:
            raw = (
                plan.raw
                if not plan.changed
                else json.dumps(plan.body, ensure_ascii=False, separators=(",", ":")).encode()
            )
            return PATHS[plan.endpoint], raw
        assert plan.rendered is not None
        dropped = ("messages", "max_completion_tokens")
        body = {k: v for k, v in plan.body.items() if k not in dropped}
        if "max_completion_tokens" in plan.body and "max_tokens" not in body:
            body["max_tokens"] = plan.body["max_completion_tokens"]
        rendered = plan.rendered
        body["prompt"] = rendered.ids if rendered.ids is not None else rendered.text
        adapter = engine_adapter(plan.runtime.config.engine)
        gets_bos = adapter is not None and adapter.completions_prompt_gets_bos
        if not gets_bos and rendered.ids is None:
            body["add_special_tokens"] = False  # the render already holds BOS (vLLM, SGLang)
        return PATHS[COMPLETIONS], json.dumps(
            body, ensure_ascii=False, separators=(",", ":")
        ).encode()


def _plain_refusal(sample: bytes) -> str | None:
    """The message of an OpenAI-style error body, when it is safe to show a client."""
    try:
        error = json.loads(sample).get("error")
    except (ValueError, RecursionError, AttributeError):
        return None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not 0 < len(message) <= 200 or not message.isprintable():
        return None
    return None if _REVEALING.search(message) else message


def _client_message(model: str, exc: RequestFailed) -> str:
    """What a client learns of an upstream failure: the kind, never the address."""
    return f"{model}: the upstream failed ({exc.kind}); retry later"


def check_method(request: Request, allowed: str) -> None:
    if request.method != allowed:
        raise GatewayError(
            405,
            f"{request.path} accepts {allowed}, not {request.method}",
            code="method_not_allowed",
            headers=(("Allow", allowed),),
        )


__all__ = ["CHAT", "COMPLETIONS", "Plan", "Proxy", "check_method"]
