"""One completion request through the gateway: plan it, admit it, route it, stream it back.

Planning (no I/O): hygiene (opt-in), pre-rendering of chat requests, the prompt's token count
(which picks the lane) and its affinity key. Then a replica is picked, a slot awaited in its
lane, and the request sent; a replica that fails before the client saw a byte is taken out of
routing and the request goes to another one (``routing.retries``). After the first byte has
gone out, an upstream failure becomes one clean error event at the end of the stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.core.errors import TtftError
from ttft.gateway.admission import Shed, lane_for
from ttft.gateway.config import GatewayConfig
from ttft.gateway.errors import GatewayError, bad_request, overloaded, upstream_failed
from ttft.gateway.http_server import Request, Response
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.prerender import Rendered
from ttft.gateway.routing import NONE, affinity_key
from ttft.gateway.runtime import ModelRuntime, Replica
from ttft.gateway.sinks import ChatJsonSink, ChatStreamSink, ForwardSink
from ttft.gateway.upstream import request_bytes
from ttft.gateway.validate import check_common, check_messages, check_prompt

CHAT, COMPLETIONS = "chat", "completions"
PATHS = {CHAT: "/v1/chat/completions", COMPLETIONS: "/v1/completions"}
_RETRYABLE = (errors.CONNECT, errors.DISCONNECT, errors.INCOMPLETE_STREAM)
_MARK_DOWN = (errors.CONNECT, errors.DISCONNECT, errors.INCOMPLETE_STREAM)
# Chat fields whose meaning is the same on the completions endpoint; any other field (tools,
# response_format, logprobs, reasoning options...) makes the request go to the chat endpoint.
_PRERENDER_FIELDS = frozenset({
    "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
    "temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "stop", "presence_penalty",
    "frequency_penalty", "repeat_penalty", "repeat_last_n", "user", "priority", "n",
    "cache_prompt", "ignore_eos", "logit_bias", "mirostat", "mirostat_tau", "mirostat_eta",
    "dynatemp_range", "dynatemp_exponent", "samplers", "id_slot",
})
_PLAIN_ROLES = ("system", "user", "assistant")
_clock = time.perf_counter_ns


@dataclass(slots=True)
class Plan:
    runtime: ModelRuntime
    endpoint: str
    stream: bool
    body: dict[str, Any]
    raw: bytes
    changed: bool
    rendered: Rendered | None
    bypass: str  # why a chat request is not pre-rendered ("" when it is, or for completions)
    lane: str
    priority: int
    key: int | None
    n_tokens: int
    request_id: str | None


class Proxy:
    def __init__(
        self, config: GatewayConfig, models: dict[str, ModelRuntime], metrics: GatewayMetrics
    ) -> None:
        self.config = config
        self.models = models
        self.metrics = metrics

    # -- planning --------------------------------------------------------------------------

    def plan(self, request: Request, endpoint: str, body: dict[str, Any]) -> Plan:
        runtime = self._model(body)
        stream, priority = check_common(body)
        changed = False
        if runtime.config.upstream_model and body.get("model") != runtime.upstream_model:
            body["model"] = runtime.upstream_model
            changed = True
        if "priority" in body:
            del body["priority"]  # ours: engines without priority scheduling reject it
            changed = True
        rendered: Rendered | None = None
        bypass = ""
        cpt = self.config.limits.chars_per_token
        if endpoint == CHAT:
            messages = check_messages(body)
            if runtime.config.hygiene:
                messages, kinds = self._hygiene(messages)
                if kinds:
                    body["messages"] = messages
                    changed = True
                    for kind in kinds:
                        self.metrics.hygiene.inc(runtime.name, kind)
            bypass = self._bypass_reason(runtime, body, messages)
            if not bypass:
                try:
                    rendered = runtime.prerenderer.render(messages)
                except TtftError:
                    bypass = "template_error"  # the engine gives the authoritative error
            self._count_prerender(runtime, rendered, bypass)
            if rendered is not None:
                # The key is the rendered static prefix: the part a prefix cache can share.
                n_tokens = rendered.n_tokens
                static = rendered.static_text
                material: str | list[Any] = static if static else rendered.text
                whole = bool(static)
            else:
                texts = [m.get("content") for m in messages]
                n_tokens = round(sum(len(str(t or "")) for t in texts) / cpt)
                material = "".join(
                    f"{m.get('role')}\n{m.get('content') or ''}\n" for m in messages[:-1]
                )
                whole = bool(material)
                if not material:
                    material = str(messages[-1].get("content") or "")
        else:
            prompt = check_prompt(body)
            if isinstance(prompt, str):
                material, n_tokens, whole = prompt, round(len(prompt) / cpt), False
            elif all(isinstance(x, int) for x in prompt):
                material, n_tokens, whole = prompt, len(prompt), False
            else:
                material = str(prompt[0]) if prompt else ""
                n_tokens = round(sum(len(str(p)) for p in prompt) / cpt)
                whole = False
        routing = self.config.routing
        key = affinity_key(material, routing.block_tokens, routing.max_blocks,
                           whole_if_short=whole) if routing.affinity else None
        admission = self.config.admission
        lane = lane_for(n_tokens, admission.long_prompt_tokens)
        request_id = request.headers.get("x-request-id")
        if request_id is not None and (len(request_id) > 128 or not request_id.isprintable()):
            request_id = None
        return Plan(runtime, endpoint, stream, body, request.body, changed, rendered, bypass,
                    lane, priority, key, n_tokens, request_id)

    def _model(self, body: dict[str, Any]) -> ModelRuntime:
        name = body.get("model")
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.values()))
            raise bad_request("'model' is required: this gateway serves "
                              f"{', '.join(sorted(self.models))}", "model")
        if not isinstance(name, str):
            raise bad_request("'model' must be a string", "model")
        runtime = self.models.get(name)
        if runtime is None:
            raise GatewayError(
                404, f"The model '{name[:200]}' does not exist on this gateway; available: "
                f"{', '.join(sorted(self.models))}", param="model", code="model_not_found",
            )
        return runtime

    @staticmethod
    def _hygiene(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        from ttft.gateway.hygiene import move_dynamic

        return move_dynamic(messages)

    @staticmethod
    def _bypass_reason(
        runtime: ModelRuntime, body: dict[str, Any], messages: list[dict[str, Any]]
    ) -> str:
        if runtime.prerenderer is None:
            return "off"
        extra = set(body) - _PRERENDER_FIELDS
        if extra:
            return "fields"
        if body.get("n", 1) != 1:
            return "fields"
        for message in messages:
            if message.get("role") not in _PLAIN_ROLES or not isinstance(
                message.get("content"), str
            ) or len(message) != 2:
                return "messages"
        if messages[-1].get("role") != "user":
            return "messages"
        return ""

    def _count_prerender(self, runtime: ModelRuntime, rendered: Rendered | None, bypass: str
                         ) -> None:
        if rendered is not None:
            self.metrics.prerender.inc(runtime.name, rendered.cache, rendered.reason)
            self.metrics.stage.observe(rendered.template_ns / 1e9, runtime.name, "template")
            if rendered.ids is not None:
                self.metrics.stage.observe(rendered.tokenize_ns / 1e9, runtime.name, "tokenize")
        else:
            self.metrics.prerender.inc(runtime.name, "bypass", bypass)

    # -- sending ---------------------------------------------------------------------------

    async def run(self, request: Request, response: Response, plan: Plan) -> None:
        runtime = plan.runtime
        tried: set[int] = set()
        last: RequestFailed | None = None
        for attempt in range(1 + self.config.routing.retries):
            choice = runtime.router.pick(runtime.replicas, plan.key, frozenset(tried))
            if choice is None:
                break
            if attempt == 0:
                self.metrics.affinity.inc(runtime.name, choice.affinity if plan.key is not None
                                          else NONE)
            else:
                self.metrics.retries.inc(runtime.name)
            replica = runtime.replicas[choice.index]
            try:
                waited = await replica.admission.acquire(
                    plan.lane, plan.priority, self.config.admission.queue_timeout_s)
            except Shed as exc:
                self.metrics.shed.inc(runtime.name, exc.reason)
                status = 429 if exc.reason == "queue_full" else 503
                raise overloaded(status, f"{runtime.name}: {exc.message}; retry later",
                                 self.config.admission.queue_timeout_s / 4, exc.reason) from None
            self.metrics.queue.observe(waited / 1e9, runtime.name, plan.lane)
            try:
                failure = await self._send(request, response, plan, replica, waited)
            finally:
                replica.admission.release()
            if failure is None:
                return
            last = failure
            tried.add(replica.index)
        if last is not None:
            kind = "timeout" if last.kind == errors.TIMEOUT else "upstream"
            raise upstream_failed(f"{runtime.name}: the upstream failed ({kind}): {last.message}",
                                  504 if last.kind == errors.TIMEOUT else 502)
        if runtime.healthy_count() == 0:
            self.metrics.shed.inc(runtime.name, "no_healthy_upstream")
            raise overloaded(503, f"{runtime.name}: no healthy upstream", 2.0,
                             "no_healthy_upstream")
        self.metrics.shed.inc(runtime.name, "queue_full")
        raise overloaded(429, f"{runtime.name}: every upstream's queue is full; retry later",
                         self.config.admission.queue_timeout_s / 4, "queue_full")

    async def _send(
        self, request: Request, response: Response, plan: Plan, replica: Replica, waited_ns: int
    ) -> RequestFailed | None:
        """One attempt. Returns the failure when it may be retried on another replica."""
        runtime = plan.runtime
        prerendered = plan.rendered is not None and replica.config.prerender is not False
        path, payload_body = self._upstream_body(plan, prerendered)
        headers = [("Content-Type", "application/json"), ("Accept-Encoding", "identity")]
        if plan.stream:
            headers.append(("Accept", "text/event-stream"))
        if replica.config.api_key:
            headers.append(("Authorization", f"Bearer {replica.config.api_key}"))
        if plan.request_id:
            headers.append(("X-Request-Id", plan.request_id))
        payload = request_bytes("POST", replica.host_header, replica.path(path), payload_body,
                                headers)
        rendered = plan.rendered if prerendered else None
        model, lane = runtime.name, plan.lane
        received = request.received_ns

        def make_headers(status: int, content_type: str, ttfb_ns: int) -> list[tuple[str, str]]:
            self.metrics.stage.observe(ttfb_ns / 1e9, model, "upstream_ttfb")
            timing = [f"queue;dur={waited_ns / 1e6:.3f}"]
            if rendered is not None:
                timing.append(f"template;dur={rendered.template_ns / 1e6:.3f}")
                timing.append(f"tokenize;dur={rendered.tokenize_ns / 1e6:.3f}")
            timing.append(f"upstream;dur={ttfb_ns / 1e6:.3f}")
            out = [("Content-Type", content_type or "application/json"),
                   ("Server-Timing", ", ".join(timing)),
                   ("X-Ttft-Replica", str(replica.index))]
            if content_type.startswith("text/event-stream"):
                out += [("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]
            if prerendered:
                out.append(("X-Ttft-Prerendered", "1"))
            return out

        def first_token(t_ns: int) -> None:
            self.metrics.ttft.observe((t_ns - received) / 1e9, model, lane)

        sink: ForwardSink
        if prerendered and plan.stream:
            options = plan.body.get("stream_options") or {}
            sink = ChatStreamSink(response, make_headers, first_token,
                                  bool(options.get("include_usage")))
        elif prerendered:
            sink = ChatJsonSink(response, make_headers, first_token,
                                self.config.limits.max_response_bytes)
        else:
            sink = ForwardSink(response, make_headers, first_token)

        def attach(conn: Any) -> None:
            response.on_pause = lambda paused: conn.pause() if paused else conn.resume()

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
        self, plan: Plan, replica: Replica, response: Response, sink: ForwardSink,
        exc: RequestFailed,
    ) -> RequestFailed | None:
        self.metrics.upstream_errors.inc(replica.name, exc.kind)
        if exc.kind in _MARK_DOWN:
            replica.mark_down(exc.message)
        if response.client_gone:
            return None
        if not sink.committed:
            if exc.kind in _RETRYABLE:
                return exc
            status = 504 if exc.kind == errors.TIMEOUT else 502
            response.send_error(upstream_failed(
                f"{plan.runtime.name}: the upstream failed ({exc.kind}): {exc.message}", status))
            return None
        if sink.streaming:
            # Mid-stream: the status line is long gone; end with an error event clients parse.
            response.write(upstream_failed(
                f"the upstream failed in the middle of the answer ({exc.kind}): {exc.message}"
            ).event())
            response.end()
        else:
            response.abort()  # a length-framed body cannot carry an error: cut it
        return None

    def _upstream_body(self, plan: Plan, prerendered: bool) -> tuple[str, bytes]:
        if not prerendered:
            raw = plan.raw if not plan.changed else json.dumps(
                plan.body, ensure_ascii=False, separators=(",", ":")).encode()
            return PATHS[plan.endpoint], raw
        assert plan.rendered is not None
        dropped = ("messages", "max_completion_tokens")
        body = {k: v for k, v in plan.body.items() if k not in dropped}
        if "max_completion_tokens" in plan.body and "max_tokens" not in body:
            body["max_tokens"] = plan.body["max_completion_tokens"]
        rendered = plan.rendered
        body["prompt"] = rendered.ids if rendered.ids is not None else rendered.text
        if plan.runtime.config.engine != "llama.cpp" and rendered.ids is None:
            body["add_special_tokens"] = False  # the render already holds BOS (vLLM, SGLang)
        return PATHS[COMPLETIONS], json.dumps(body, ensure_ascii=False,
                                              separators=(",", ":")).encode()


def check_method(request: Request, allowed: str) -> None:
    if request.method != allowed:
        raise GatewayError(405, f"{request.path} accepts {allowed}, not {request.method}",
                           code="method_not_allowed", headers=(("Allow", allowed),))


__all__ = ["CHAT", "COMPLETIONS", "Plan", "Proxy", "bad_request", "check_method"]
