"""The live state behind each configured model: replicas, their health, and the template cache.

A replica is taken out of routing at once when a request to it fails at the transport level
(refused, reset, closed mid-answer), and after two failed health checks in a row; one passing
check (``GET /health`` answering 200; llama-server answers 503 while it loads) brings it back.

Pre-rendering starts disabled and is switched on per model once the template is known: read from
a file, or (``chat_template = "auto"``) from a llama-server's ``GET /props``, and then checked
against that server's own ``POST /apply-template`` on a probe conversation. Any disagreement
leaves it off, with the reason logged and exported, because a pre-rendered prompt that differs
from the engine's would silently change answers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttft.client import errors
from ttft.client.errors import RequestFailed
from ttft.core.errors import TtftError
from ttft.engines import control
from ttft.gateway.admission.lanes import Admission, default_max_in_flight, resolve_long_reserve
from ttft.gateway.admission.slot_pins import SlotPins
from ttft.gateway.config import (
    GatewayConfig,
    ModelConfig,
    UpstreamConfig,
    engine_adapter,
)
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.routing import Router
from ttft.gateway.upstream import CollectSink, UpstreamPool, request_bytes

log = logging.getLogger("ttft.gateway")

_PROBE = [
    {"role": "system", "content": "You are a careful assistant. Answer briefly."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3 + 3?"},
]
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
    slot_pins: SlotPins | None = None

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
        return self.config.root + api_path


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

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def upstream_model(self) -> str:
        return self.config.upstream_model or self.config.name

    def answers_to(self, name: str) -> bool:
        return name in self.config.aliases or name in self.engine_names

    def healthy_count(self) -> int:
        return sum(1 for r in self.replicas if r.healthy)


def build_runtime(
    config: GatewayConfig, model: ModelConfig, metrics: GatewayMetrics
) -> ModelRuntime:
    limits, admission = config.limits, config.admission
    replicas: list[Replica] = []
    for i, up in enumerate(model.upstreams):
        given = up.max_in_flight or admission.max_in_flight
        cap = given or default_max_in_flight(model.engine)
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
                admission.queue_size,
                split_lanes=admission.split_lanes,
                short_burst=admission.short_burst,
                long_reserve=resolve_long_reserve(admission.long_reserve, cap),
                client_slots=admission.max_slots_per_client
                if admission.max_slots_per_client is not None or config.api_keys
                else 0,
            ),
            f"{host_header}:{up.port}",
            cap_from_engine=given is None,
        )
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
    headers.extend(replica.config.target.auth_headers().items())
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


async def setup_prerender(
    runtime: ModelRuntime, config: GatewayConfig, metrics: GatewayMetrics, retry_s: float = 2.0
) -> None:
    """Load the template and switch pre-rendering on once it checks out (retries until then)."""
    model = runtime.config
    if not model.prerender:
        runtime.prerender_state = "off (configuration)"
        return
    if not any(r.config.prerender is not False for r in runtime.replicas):
        runtime.prerender_state = "off (every upstream opts out)"
        return
    runtime.prerender_state = "pending (template not loaded yet)"
    while True:
        try:
            state = await _try_setup(runtime, config)
        except TtftError as exc:
            runtime.prerender_state = f"disabled ({exc.problem})"
            log.warning("model %s: pre-rendering disabled: %s", model.name, exc)
            return
        if state is not None:
            runtime.prerender_state = state
            if state != "on":
                log.warning("model %s: pre-rendering %s", model.name, state)
            return
        await asyncio.sleep(retry_s)


async def _try_setup(runtime: ModelRuntime, config: GatewayConfig) -> str | None:
    """The new state, or None to try again later (no upstream answered yet)."""
    from ttft.gateway.prerender import Prerenderer  # needs jinja2 (the lint extra)
    from ttft.prompts.chat_template import ChatTemplate

    model = runtime.config
    adapter = engine_adapter(model.engine)
    llama = adapter is not None and adapter.control_endpoints  # /props, /apply-template, /tokenize
    source: Replica | None = None
    if model.chat_template == "auto":
        if not llama:
            raise TtftError(
                f'chat_template = "auto" needs a llama.cpp engine ({model.engine} has no /props)',
                "set chat_template to the model's .jinja or tokenizer_config.json",
            )
        props = await _first_json(runtime, control.PROPS)
        if props is None:
            return None
        source, data = props
        text = data.get("chat_template")
        if not isinstance(text, str) or not text:
            raise TtftError(f"{source.name}/props has no chat_template")
        special = {
            k: str(data[k]) for k in ("bos_token", "eos_token") if isinstance(data.get(k), str)
        }
        template = ChatTemplate(text, f"GET {source.name}/props (chat_template)", special)
    else:
        from ttft.prompts.sources import load_template

        template = load_template(Path(model.chat_template))
    if "<think>" in template.source or "reasoning_content" in template.source:
        return (
            "disabled (a reasoning template: the engine's chat endpoint splits the answer "
            "into reasoning and content, a completions answer cannot)"
        )
    tokenizer = None
    if model.tokenizer:
        from ttft.workload.hf_tokenizer import HFTokenizer

        tokenizer = HFTokenizer.from_file(Path(model.tokenizer))
    pre = Prerenderer(
        template,
        tokenizer=tokenizer,
        strip_bos=adapter is not None and adapter.completions_prompt_gets_bos,
        chars_per_token=config.limits.chars_per_token,
        max_entries=config.limits.prerender_cache_entries,
        max_bytes=config.limits.prerender_cache_bytes,
    )
    if llama:
        answer = await _first_json(runtime, control.apply_template(_PROBE), prefer=source)
        if answer is None:
            return None
        _, data = answer
        expected = control.prompt_of(data)
        mine = pre.render_full(_PROBE)
        fast = pre.render(_PROBE).text
        if expected != mine or fast != mine:
            return (
                f"disabled (the template rendered here differs from {answer[0].name}'s "
                "POST /apply-template on a probe conversation)"
            )
        if model.check_prefix_reuse:
            reuse = await _completions_reuse_prefix(answer[0])
            if reuse is None:
                return None
            if not reuse:
                return (
                    f"disabled ({answer[0].name} does not reuse a shared prefix on its "
                    "completions endpoint, only on its chat endpoint: a sliding-window "
                    "model served without --swa-full; start llama-server with --swa-full "
                    "to pre-render)"
                )
    runtime.prerenderer = pre
    if tokenizer is None and llama:
        pre.on_new_frame = lambda frame: _count_prefix_later(runtime, frame)
    return "on"


async def _completions_reuse_prefix(replica: Replica) -> bool | None:
    """Does the engine reuse a shared prompt prefix on ``/v1/completions``? None: no answer.

    llama-server restores a sliding-window model's cache only at checkpoints, and (without
    ``--swa-full``) sets one at the last user message of chat requests only: two completions
    that share a prefix then reuse nothing. Two short prompts tell.
    """
    shared = f"ttft gateway prefix probe {uuid.uuid4().hex}: " + " ".join(
        f"item {i} is on shelf {i % 7}." for i in range(24)
    )
    cached = 0
    # Tails as long as a user question: an engine may keep a checkpoint a few tokens before
    # the end of each prompt, which a one-word difference would still hit.
    tails = [" Question: " + " ".join(f"{w}{i}" for i in range(16)) + "?" for w in ("a", "b")]
    for tail in tails:
        body = {"prompt": shared + tail, "max_tokens": 1, "temperature": 0, "cache_prompt": True}
        try:
            call = control.Call("POST", "/v1/completions", body)
            status, raw = await fetch(replica, call, timeout_s=60)
            if status != 200:
                return None
            timings = json.loads(raw).get("timings") or {}
        except (RequestFailed, TimeoutError, OSError, ValueError, AttributeError):
            return None
        cached = int(timings.get("cache_n", 0) or 0)
    return cached >= 64  # the shared part is ~200 tokens


async def _first_json(
    runtime: ModelRuntime, call: control.Call, prefer: Replica | None = None
) -> tuple[Replica, dict[str, Any]] | None:
    order = sorted(runtime.replicas, key=lambda r: (r is not prefer, not r.healthy))
    for replica in order:
        if replica.config.prerender is False:
            continue
        try:
            status, raw = await fetch(replica, call)
        except (RequestFailed, TimeoutError, OSError):
            continue
        if status == 200:
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):  # nested past the recursion limit: not JSON
                continue
            if isinstance(data, dict):
                return replica, data
        elif status in (404, 405, 501):
            raise TtftError(f"{replica.name} has no {call.method} {call.path} (answered {status})")
        elif status in (401, 403):
            # a server started with --api-key: retrying would only be refused again
            raise TtftError(
                f"{replica.name} refused {call.method} {call.path} (HTTP {status})",
                'give this upstream the server\'s key: { url = "...", api_key = "..." }',
            )
    return None


def _count_prefix_later(runtime: ModelRuntime, frame: Any) -> None:
    """Count a new frame's prefix tokens with the engine's /tokenize, off the request path."""
    if len(runtime.counting) >= 8:
        return  # a burst of new prefixes: estimates will do for those

    async def count() -> None:
        replica = next((r for r in runtime.replicas if r.healthy), None)
        if replica is None:
            return
        try:
            call = control.tokenize(frame.prefix, add_special=True)
            status, raw = await fetch(replica, call)
            tokens = control.tokens_of(json.loads(raw)) if status == 200 else None
            if tokens is not None:
                frame.static_tokens = len(tokens)
        except (RequestFailed, TimeoutError, OSError, ValueError, AttributeError):
            pass

    task = asyncio.get_running_loop().create_task(count())
    runtime.counting.add(task)
    task.add_done_callback(runtime.counting.discard)
