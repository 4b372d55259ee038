"""The ``pre-render`` request transform: the chat template rendered by the client, not the engine.

A chat request makes the engine render its chat template (Jinja in vLLM and SGLang, C++ in
llama-server) before it can tokenize. With ``pre-render`` the client renders the conversation
itself, with the engine's own template (``/props`` on llama-server), and sends the text to
``/v1/completions``: the arm measures what the engine's template rendering costs its TTFT (the
article pre-rendered and cached the template by hash: -60 ms with dynamic content moved last).
The BOS text is left out of the rendered prompt when the engine adds BOS to every text prompt
itself (llama-server), so the engine sees the same tokens either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.engines.registry import adapter_for
from ttft.prompts.chat_template import ChatTemplate, TemplateRenderer
from ttft.prompts.sources import template_from_props
from ttft.tune.workload import TuneWorkload

PRE_RENDER = "pre-render"


def template_of(target: Target) -> ChatTemplate:
    """The engine's own chat template and special tokens, from its ``/props``."""
    template = template_from_props(ControlClient(target).props(), target.root)
    if template is None:
        raise TtftError(
            f"{target.root} does not report its chat template (GET /props), so requests cannot "
            "be pre-rendered with it",
            "drop the pre-render step, or measure it through `ttft gateway` (a routing step)",
        )
    return template


def with_template(workload: TuneWorkload, target: Target) -> TuneWorkload:
    """The workload with a renderer for ``pre-render``; unchanged when the arm does not use it."""
    if PRE_RENDER not in workload.transforms:
        return workload
    template = template_of(target)
    renderer = TemplateRenderer(template)
    kind = target.engine_kind
    bos = template.special_tokens.get("bos_token", "")
    strip = bool(bos) and kind is not None and adapter_for(kind).completions_prompt_gets_bos

    def render(messages: list[dict[str, Any]]) -> str:
        text = renderer.render(messages)
        return text[len(bos) :] if strip and text.startswith(bos) else text

    return dataclasses.replace(workload, render=render)
