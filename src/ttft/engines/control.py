"""The control endpoints of an engine, in one place: what to send and how to read the answer.

llama-server offers ``GET /props`` (chat template, slots, model path), ``POST /tokenize`` and
``/detokenize``, ``POST /apply-template`` (the prompt its chat endpoint would build), ``GET
/health``; every OpenAI-compatible server offers ``GET /v1/models``. Each endpoint is a ``Call``
built here and parsed here. ``ControlClient`` sends them synchronously with the target's auth
headers; the gateway sends the same ``Call`` objects over its own async upstream connections.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: dict[str, Any] | None = None


PROPS = Call("GET", "/props")
MODELS = Call("GET", "/v1/models")
HEALTH = Call("GET", "/health")


def tokenize(text: str, *, add_special: bool) -> Call:
    # llama-server reads content/add_special, vLLM prompt/add_special_tokens; each ignores
    # the other's.
    body = {"content": text, "add_special": add_special}
    return Call("POST", "/tokenize", {**body, "prompt": text, "add_special_tokens": add_special})


def tokenize_chat(messages: Sequence[Mapping[str, Any]]) -> Call:
    """vLLM's ``/tokenize`` renders messages with the model's chat template and counts them."""
    msgs = [dict(m) for m in messages]
    return Call("POST", "/tokenize", {"messages": msgs, "add_generation_prompt": True})


def detokenize(ids: Sequence[int]) -> Call:
    return Call("POST", "/detokenize", {"tokens": list(ids)})


def text_of(answer: Mapping[str, Any]) -> str | None:
    """The text ``/detokenize`` answered: llama-server says ``content``, vLLM ``prompt``."""
    for key in ("content", "prompt"):
        if isinstance(answer.get(key), str):
            return str(answer[key])
    return None


def apply_template(messages: Sequence[Mapping[str, Any]]) -> Call:
    return Call("POST", "/apply-template", {"messages": [dict(m) for m in messages]})


def tokens_of(answer: Mapping[str, Any]) -> list[int] | None:
    tokens = answer.get("tokens")
    if not isinstance(tokens, list):
        return None
    # /tokenize with_pieces answers objects; plain answers are ids
    return [int(t["id"]) if isinstance(t, dict) else int(t) for t in tokens]


def prompt_of(answer: Mapping[str, Any]) -> str | None:
    prompt = answer.get("prompt")
    return prompt if isinstance(prompt, str) else None


class ControlError(TtftError):
    """A control endpoint could not be read; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


class ControlClient:
    """Synchronous control calls to one target, each with the target's auth headers."""

    def __init__(self, target: Target, timeout_s: float = 10.0) -> None:
        self.target = target
        self.timeout_s = timeout_s

    @property
    def root(self) -> str:
        return self.target.root

    def send(self, call: Call, timeout_s: float | None = None) -> dict[str, Any]:
        """The JSON object an endpoint answers; ``ControlError`` naming the fix otherwise."""
        url = self.root + call.path
        data = None if call.body is None else json.dumps(call.body).encode()
        headers = {"Content-Type": "application/json", **self.target.auth_headers()}
        req = urllib.request.Request(url, data=data, headers=headers, method=call.method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s or self.timeout_s) as resp:
                parsed = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                hint = (
                    "the key given with --api-key was refused: check it"
                    if self.target.api_key
                    else "the server wants an API key: pass --api-key"
                )
                raise ControlError(
                    f"{url} refused the request (HTTP {exc.code})", hint, exc.code
                ) from None
            raise ControlError(f"{url} answered HTTP {exc.code}", status=exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(
                f"cannot reach {url}: {getattr(exc, 'reason', exc)}",
                "check --url (is the server running and listening there?)",
            ) from None
        except ValueError:
            raise ControlError(f"{url} did not answer JSON") from None
        if not isinstance(parsed, dict):
            raise ControlError(f"{url} answered {parsed!r}, not a JSON object")
        return parsed

    def props(self) -> dict[str, Any]:
        """llama-server's /props; an empty dict for engines without it (or when unreachable)."""
        try:
            return self.send(PROPS, timeout_s=5)
        except ControlError as exc:
            if exc.status in (401, 403):
                raise
            return {}

    def tokenize(self, text: str, *, add_special: bool) -> list[int]:
        tokens = tokens_of(self.send(tokenize(text, add_special=add_special)))
        if tokens is None:
            raise ControlError(f"{self.root}/tokenize answered without a 'tokens' list")
        return tokens

    def detokenize(self, ids: Sequence[int]) -> str:
        content = text_of(self.send(detokenize(ids)))
        if content is None:
            raise ControlError(f"{self.root}/detokenize answered without its text")
        return content

    def chat_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int | None:
        """Tokens the chat endpoint would prefill for ``messages`` (vLLM's ``/tokenize`` with
        messages); None where the server cannot say."""
        try:
            answer = self.send(tokenize_chat(messages), timeout_s=30)
        except ControlError as exc:
            if exc.status in (401, 403):
                raise
            return None
        tokens = tokens_of(answer)
        return None if tokens is None else len(tokens)

    def apply_template(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        """The prompt the chat endpoint would build; None where the server cannot say."""
        try:
            return prompt_of(self.send(apply_template(messages), timeout_s=30))
        except ControlError as exc:
            if exc.status in (401, 403):
                raise
            return None

    def models(self) -> list[dict[str, Any]]:
        data = self.send(MODELS).get("data")
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []

    def model_id(self) -> str:
        """The first model id from ``GET /v1/models``, for targets given without ``--model``."""
        try:
            models = self.models()
        except ControlError as exc:
            if exc.status is not None and exc.status not in (401, 403):
                raise ControlError(exc.problem, "pass --model explicitly", exc.status) from None
            raise
        if not models or not isinstance(models[0].get("id"), str):
            raise ControlError(f"{self.root}/v1/models did not list a model", "pass --model")
        return str(models[0]["id"])

    def context_limit(self) -> int | None:
        """Tokens one request may use, as ``GET /v1/models`` reports it (vLLM's
        ``max_model_len``, llama-server's per-slot ``meta.n_ctx``); None when it does not say."""
        try:
            models = self.models()
        except ControlError:
            return None
        first = models[0] if models else None
        chosen = next((m for m in models if m.get("id") == self.target.model), first)
        if chosen is None:
            return None
        meta = chosen.get("meta")
        n_ctx = meta.get("n_ctx") if isinstance(meta, dict) else None
        for value in (chosen.get("max_model_len"), n_ctx):
            if isinstance(value, int) and value > 0:
                return value
        return None


class ServerTokenizer:
    """A ``Tokenizer`` backed by a server's ``/tokenize`` and ``/detokenize`` (llama-server): the
    text's own tokens, without special ones."""

    def __init__(self, target: Target, timeout_s: float = 30.0) -> None:
        self.client = ControlClient(target, timeout_s)

    def encode(self, text: str) -> list[int]:
        try:
            return self.client.tokenize(text, add_special=False)
        except ControlError as exc:
            if exc.fix:
                raise
            raise ControlError(
                f"could not tokenize through {self.client.root}/tokenize: {exc.problem}",
                "give a server that offers /tokenize (llama-server and vLLM do), "
                "or a tokenizer.json",
                exc.status,
            ) from None

    def decode(self, ids: list[int]) -> str:
        return self.client.detokenize(ids)


def complete_target(target: Target) -> Target:
    """The target with what the user left out filled in from the server: the metrics URL (the
    server's ``/metrics``) and the model (the first of ``GET /v1/models``)."""
    metrics_url = target.metrics_url or target.root + "/metrics"
    model = target.model or ControlClient(target).model_id()
    return replace(target, metrics_url=metrics_url, model=model)
