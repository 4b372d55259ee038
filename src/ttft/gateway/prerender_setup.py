"""Switching pre-rendering on for a model, once its chat template is known and checks out.

Pre-rendering starts disabled and is switched on per model once the template is known: read from
a file, or (``chat_template = "auto"``) from a llama-server's ``GET /props``, or for other engines
from the model folder they serve when it is on this machine (``engine_facts.template_place``).
It is then checked against the engine: llama-server's ``POST /apply-template``, vLLM's ``POST
/tokenize`` with the messages (its own chat rendering) against ``/tokenize`` of the text rendered
here, on a probe conversation. Any disagreement leaves it off, with the reason logged and
exported, because a pre-rendered prompt that differs from the engine's would silently change
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from ttft.client.errors import RequestFailed
from ttft.core.errors import TtftError
from ttft.engines import control
from ttft.engines.adapter import EngineAdapter
from ttft.engines.registry import adapter_for
from ttft.gateway.config import GatewayConfig, engine_adapter
from ttft.gateway.engine_facts import template_place
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
    if model.chat_template == "auto" and not llama:
        if not runtime.listed.is_set():
            # Discovery has not read the engine's model listing yet: wait for it, not a retry.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runtime.listed.wait(), 30)
            if not runtime.listed.is_set():
                return None
        found = _engine_template(runtime)
        if isinstance(found, str):
            return (
                f"disabled (no chat template obtainable from the engine: {found}; to "
                "pre-render, give the model's template: chat_template = "
                '"/path/to/tokenizer_config.json" or ttft gateway --chat-template FILE)'
            )
        adapter = adapter or _launched_as(runtime)
        if adapter is None or not adapter.tokenizes_chat:
            # Found on disk but not confirmable: the engine may have been started with another.
            return (
                f"disabled (found {found.origin}, but {model.engine} cannot confirm it is the "
                "template it serves; to pre-render with it, give it: chat_template = FILE)"
            )
        template = found
    elif model.chat_template == "auto":
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
    elif adapter is not None and adapter.tokenizes_chat:
        verdict = await _check_engine_renders_alike(runtime, pre, model.chat_template == "auto")
        if verdict != "on":
            return verdict
    runtime.prerenderer = pre
    log.info("model %s: pre-rendering with the chat template of %s", model.name, template.origin)
    if tokenizer is None and llama:
        pre.on_new_frame = lambda frame: _count_prefix_later(runtime, frame)
    return "on"


async def _check_engine_renders_alike(
    runtime: ModelRuntime, pre: Any, found_on_disk: bool
) -> str | None:
    """The tokenize check, and what an unanswered one means: a template found on disk waits
    for the engine's confirmation (None: asked again) or is refused; a template the user
    configured is kept with a warning when the engine cannot be asked (no /tokenize, or an
    answer that is not one), as on engines that have no such check."""
    name = runtime.config.name
    try:
        verdict = await _check_with_tokenize(runtime, pre)
    except TtftError as exc:
        if found_on_disk:
            raise
        log.warning("model %s: chat template not checked against the engine: %s", name, exc)
        return "on"
    if verdict is None and not found_on_disk and any(r.healthy for r in runtime.replicas):
        log.warning(
            "model %s: chat template not checked against the engine: POST /tokenize gave "
            "no usable answer",
            name,
        )
        return "on"
    return verdict


def _launched_as(runtime: ModelRuntime) -> EngineAdapter | None:
    """The adapter of the engine a generic upstream turned out to be (its launch command)."""
    line = next((r.launch for r in runtime.replicas if r.launch is not None), None)
    return None if line is None else adapter_for(line.engine)


def _engine_template(runtime: ModelRuntime) -> Any:
    """The chat template of the model folder the engine serves (a ``ChatTemplate``), or why
    there is none (a string)."""
    from ttft.prompts.chat_template import ChatTemplate
    from ttft.prompts.sources import load_template

    line = next((r.launch for r in runtime.replicas if r.launch is not None), None)
    place, why = template_place(line, runtime.engine_models)
    if place is None:
        return why
    try:
        if place.path is not None:
            return load_template(place.path)
        return ChatTemplate(place.text or "", place.origin)
    except TtftError as exc:
        return exc.problem


async def _check_with_tokenize(runtime: ModelRuntime, pre: Any) -> str | None:
    """``on`` when the engine's own chat rendering (vLLM: ``POST /tokenize`` with messages)
    gives the same tokens as this rendering tokenized by the engine; else why not. A template
    that cannot be checked is not used: a wrong one would silently change every answer.
    None: no upstream answered yet (asked again later)."""
    mine = pre.render_full(_PROBE)
    if pre.render(_PROBE).text != mine:
        return "disabled (the cached frame of the template does not rebuild its full render)"
    named = {"model": next(iter(runtime.engine_models))} if runtime.engine_models else {}
    chat, text = control.tokenize_chat(_PROBE), control.tokenize(mine, add_special=False)
    theirs = await _first_json(runtime, replace(chat, body={**(chat.body or {}), **named}))
    if theirs is None:
        return None
    ours = await _first_json(runtime, replace(text, body={**(text.body or {}), **named}))
    if ours is None:
        return None
    expected, got = control.tokens_of(theirs[1]), control.tokens_of(ours[1])
    if expected is None or got is None:
        return f"disabled ({theirs[0].name}'s POST /tokenize answered no tokens)"
    if expected != got:
        return (
            f"disabled (the template here renders a probe conversation differently from "
            f"{theirs[0].name}'s own chat template: {len(got)} tokens against "
            f"{len(expected)}; give the template the engine uses: chat_template = FILE)"
        )
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
