"""Planning one completion request, before any I/O: which model, which lane, which key.

Validates the fields the gateway reads, applies hygiene (opt-in), pre-renders chat requests when
that cannot change the answer, and derives the prompt's token count (its lane) and its affinity
key (the leading blocks of what a prefix cache can share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttft.core.errors import TtftError
from ttft.gateway.admission.lanes import lane_for
from ttft.gateway.config import GatewayConfig
from ttft.gateway.errors import GatewayError, bad_request
from ttft.gateway.http.wire import Request
from ttft.gateway.metrics import GatewayMetrics
from ttft.gateway.prerender import Rendered
from ttft.gateway.routing import affinity_key
from ttft.gateway.runtime import ModelRuntime
from ttft.gateway.validate import check_common, check_messages, check_prompt
from ttft.prompts.hygiene import HygieneLearner

CHAT, COMPLETIONS = "chat", "completions"
PATHS = {CHAT: "/v1/chat/completions", COMPLETIONS: "/v1/completions"}
# Chat fields whose meaning is the same on the completions endpoint; any other field (tools,
# response_format, logprobs, reasoning options...) makes the request go to the chat endpoint.
_PRERENDER_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "typical_p",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
        "repeat_last_n",
        "user",
        "priority",
        "n",
        "cache_prompt",
        "ignore_eos",
        "logit_bias",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "dynatemp_range",
        "dynatemp_exponent",
        "samplers",
        "id_slot",
    }
)
_PLAIN_ROLES = ("system", "user", "assistant")
# Hygiene scans text a client chose, on the event loop, with a dozen regular expressions
# (~5 MB/s): only the leading 32 Ki characters of the static messages (where a timestamp breaks
# the most cache), and at most 32 values are moved. 4 MB of timestamps took 15 s unbounded.
HYGIENE_SCAN_CHARS = 32 * 1024
HYGIENE_MAX_MOVES = 32
# Learning a new frame renders the conversation three times on the event loop (~100 ms for a
# 4 MB one: a client that changes its history each time pays that every request); a body
# larger than this goes to the engine's chat endpoint, which renders it once.
PRERENDER_MAX_BYTES = 1024 * 1024


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


def _history(messages: list[dict[str, Any]], limit: int) -> str:
    """The conversation before its last message as text, for the affinity key: only as far as
    the key reads (``limit`` characters), not the whole of a 4 MB history."""
    pieces: list[str] = []
    size = 0
    for m in messages[:-1]:
        piece = f"{m.get('role')}\n{_text(m.get('content'), limit)}\n"
        pieces.append(piece)
        size += len(piece)
        if size >= limit:
            break
    return "".join(pieces)


def _text(content: Any, limit: int) -> str:
    """A message's text: a string, or its parts' texts up to about ``limit`` characters (the
    repr of 100k parts took 45 ms)."""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    size = 0
    for part in content or ():
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str):
            pieces.append(text)
            size += len(text)
            if size >= limit:
                break
    return "".join(pieces)


def _upstream_name(runtime: ModelRuntime, sent: Any) -> str | None:
    """The model name to send upstream instead of ``sent``; None to leave it.

    The configured ``upstream_model`` wins. Otherwise a name the engine itself listed passes
    unchanged, and any other (the gateway's own name, an alias) becomes the engine's name: vLLM
    and SGLang refuse a model name they do not serve.
    """
    if runtime.config.upstream_model:
        return None if sent == runtime.upstream_model else runtime.upstream_model
    names = runtime.engine_names
    if not names or sent in names:
        return None
    return min(names)


class Planner:
    def __init__(
        self, config: GatewayConfig, models: dict[str, ModelRuntime], metrics: GatewayMetrics
    ) -> None:
        self.config = config
        self.models = models
        self.metrics = metrics
        self._learner = HygieneLearner(max_chars=HYGIENE_SCAN_CHARS, max_spans=HYGIENE_MAX_MOVES)

    # -- planning --------------------------------------------------------------------------

    def plan(
        self, request: Request, endpoint: str, body: dict[str, Any], priority_boost: int = 0
    ) -> Plan:
        runtime = self._model(body)
        limits = self.config.limits
        stream, priority = check_common(body, priority_boost, limits.max_tokens, limits.max_n)
        changed = False
        forward = _upstream_name(runtime, body.get("model"))
        if forward is not None:
            body["model"] = forward
            changed = True
        if "priority" in body:
            del body["priority"]  # ours: engines without priority scheduling reject it
            changed = True
        if "id_slot" in body and any(r.slot_pins is not None for r in runtime.replicas):
            # The gateway places requests in slots here (slot_pins): a long prompt that named
            # the short lane's slot 0 itself would defeat the reserve for everyone.
            del body["id_slot"]
            changed = True
        rendered: Rendered | None = None
        bypass = ""
        cpt = self.config.limits.chars_per_token
        if endpoint == CHAT:
            messages = check_messages(body, limits.max_messages)
            if runtime.config.hygiene:
                messages, kinds = self._hygiene(messages)
                if kinds:
                    body["messages"] = messages
                    changed = True
                    for kind in kinds:
                        self.metrics.hygiene.inc(runtime.name, kind)
            bypass = self._bypass_reason(runtime, body, messages)
            if not bypass and len(request.body) > PRERENDER_MAX_BYTES:
                bypass = "size"
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
                # Estimated from the whole body: any of it may become prompt (tools' schemas,
                # names, tool calls, content parts). Counting the contents alone let 4 MB of
                # tools ride in the short lane, and cost ~90 ms for 100k parts.
                n_tokens = round(len(request.body) / cpt)
                material = _history(messages, self._key_chars())
                whole = bool(material)
                if not material:
                    material = _text(messages[-1].get("content"), self._key_chars())
        else:
            prompt = check_prompt(body)
            if isinstance(prompt, str) or isinstance(prompt[0], str):
                n_tokens = round(len(request.body) / cpt)
                material, whole = prompt if isinstance(prompt, str) else prompt[0], False
            else:  # check_prompt: all ids or all strings
                # An id takes at most 12 bytes of JSON (10 digits, a comma, a space): the bytes
                # beyond that are text of other fields (a suffix...), estimated as text.
                text_bytes = max(0, len(request.body) - 12 * len(prompt))
                material, whole = prompt, False
                n_tokens = len(prompt) + round(text_bytes / cpt)
        routing = self.config.routing
        key = (
            affinity_key(material, routing.block_tokens, routing.max_blocks, whole_if_short=whole)
            if routing.affinity
            else None
        )
        admission = self.config.admission
        lane = lane_for(n_tokens, admission.long_prompt_tokens)
        request_id = request.headers.get("x-request-id")
        if request_id is not None and (len(request_id) > 128 or not request_id.isprintable()):
            request_id = None
        return Plan(
            runtime,
            endpoint,
            stream,
            body,
            request.body,
            changed,
            rendered,
            bypass,
            lane,
            priority,
            key,
            n_tokens,
            request_id,
        )

    def _key_chars(self) -> int:
        """The most characters ``affinity_key`` reads of text (``4 * block`` per block)."""
        return 4 * self.config.routing.block_tokens * self.config.routing.max_blocks

    def _model(self, body: dict[str, Any]) -> ModelRuntime:
        name = body.get("model")
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.values()))
            raise bad_request(
                f"'model' is required: this gateway serves {', '.join(sorted(self.models))}",
                "model",
            )
        if not isinstance(name, str):
            raise bad_request("'model' must be a string", "model")
        runtime = self.models.get(name)
        if runtime is None:
            # Configured names first, then aliases in configuration order: deterministic when
            # two models' engines report the same name.
            runtime = next((r for r in self.models.values() if r.answers_to(name)), None)
        if runtime is None:
            raise GatewayError(
                404,
                f"The model '{name[:200]}' does not exist on this gateway; available: "
                f"{', '.join(n for r in self.models.values() for n in r.listed_names())}",
                param="model",
                code="model_not_found",
            )
        return runtime

    def _hygiene(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        # The log analysis over the requests seen so far: the spans lint and doctor name.
        return self._learner.move(messages)

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
            if (
                message.get("role") not in _PLAIN_ROLES
                or not isinstance(message.get("content"), str)
                or len(message) != 2
            ):
                return "messages"
        if messages[-1].get("role") != "user":
            return "messages"
        return ""

    def _count_prerender(
        self, runtime: ModelRuntime, rendered: Rendered | None, bypass: str
    ) -> None:
        if rendered is not None:
            self.metrics.prerender.inc(runtime.name, rendered.cache, rendered.reason)
            self.metrics.stage.observe(rendered.template_ns / 1e9, runtime.name, "template")
            if rendered.ids is not None:
                self.metrics.stage.observe(rendered.tokenize_ns / 1e9, runtime.name, "tokenize")
        else:
            self.metrics.prerender.inc(runtime.name, "bypass", bypass)
