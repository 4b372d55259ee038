"""Switching pre-rendering on for a model, once its chat template is known and checks out.

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
from pathlib import Path
from typing import Any

from ttft.client.errors import RequestFailed
from ttft.core.errors import TtftError
from ttft.engines import control
from ttft.gateway.config import GatewayConfig, engine_adapter
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.runtime import ModelRuntime, Replica, fetch

log = logging.getLogger("ttft.gateway")

_PROBE = [
    {"role": "system", "content": "You are a careful assistant. Answer briefly."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3 + 3?"},
]


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
    from ttft.prompts.sources import load_template, template_from_props

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
        found = template_from_props(data, source.name)
        if found is None:
            raise TtftError(f"{source.name}/props has no chat_template")
        template = found
    else:
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
