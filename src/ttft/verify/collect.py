"""Run the regression set against one side: start it if it is embedded, then ask each prompt.

A side is llama-server (its native ``/completion`` with ``n_probs``, which gives token ids) or
any other OpenAI-compatible engine (vLLM, SGLang: ``logprobs`` / ``top_logprobs``). One request
at a time, so slot scheduling is identical on both sides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ttft.client.events import StreamRefused
from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import Call, ControlClient, ControlError
from ttft.engines.prometheus import scrape_url
from ttft.verify.generate import native_generate, openai_generate
from ttft.verify.logged import LoggedPrompt
from ttft.verify.probes import Probe
from ttft.verify.quality import Generation
from ttft.verify.sides import SideSpec

EngineKind = Literal["llama-server", "openai"]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Endpoint:
    target: Target  # where to send, with the side's auth headers
    window: int | None  # tokens per slot; None where the server does not say
    kind: EngineKind = "llama-server"
    model: str | None = None  # sent as "model" to an OpenAI engine; None: not known
    kv_mib: float | None = None  # the KV cache the server reported; None: not known

    @property
    def llama(self) -> bool:
        return self.kind == "llama-server"

    @property
    def base_url(self) -> str:
        return self.target.base_url


def engine_kind(target: Target) -> EngineKind:
    """llama-server answers ``GET /props`` with its generation settings; vLLM, SGLang and other
    OpenAI servers have no such endpoint."""
    props = ControlClient(target).props()
    return "llama-server" if "default_generation_settings" in props else "openai"


def _model(target: Target) -> str | None:
    try:
        return ControlClient(target).model_id()
    except ControlError:
        return None  # a server without /v1/models takes requests without a model name


@contextlib.contextmanager
def open_side(
    side: SideSpec, *, ctx_size: int, parallel: int, threads: int | None = None
) -> Iterator[Endpoint]:
    """A reachable endpoint for ``side``; an embedded engine is stopped on the way out."""
    if side.url is not None:
        target = side.target()
        kind = engine_kind(target)
        window = ControlClient(target).context_limit()
        model = None if kind == "llama-server" else _model(target)
        yield Endpoint(target, window, kind, model, _reported_kv_mib(target))
        return
    from ttft.engines.llamacpp.embedded import launch_embedded
    from ttft.engines.llamacpp.kv_log import VERBOSITY_ARGS, kv_cache_mib

    settings: dict[str, Any] = {"ctx_size": ctx_size, "parallel": parallel}
    if threads is not None:
        settings["threads"] = threads
    settings.update(side.overrides)
    # the log then states the KV cache size
    settings["extra_args"] = (*settings.get("extra_args", ()), *VERBOSITY_ARGS)
    with launch_embedded(**settings) as engine:
        log = engine.process.log_path.read_text(errors="replace")
        window = side.window(ctx_size, parallel)
        yield Endpoint(Target(engine.base_url), window, "llama-server", None, kv_cache_mib(log))


def _reported_kv_mib(target: Target) -> float | None:
    """The KV cache a running engine reports in its /metrics (vLLM's cache_config_info)."""
    from ttft.engines.vllm.metrics import kv_cache_mib

    url = target.root + "/metrics"
    try:
        return kv_cache_mib(scrape_url(url, timeout_s=5, headers=target.auth_headers()))
    except TtftError:
        return None


def count_tokens(endpoint: Endpoint) -> Callable[[str], int] | None:
    """The side's own tokenizer, as the prompt will be counted (BOS included); None where the
    engine offers no tokenizer endpoint."""
    client = ControlClient(endpoint.target, timeout_s=30)
    if endpoint.llama:
        return lambda text: len(client.tokenize(text, add_special=True))
    try:  # vLLM: POST /tokenize {"model", "prompt"} -> {"count", "tokens"}
        client.send(_vllm_tokenize(endpoint, {"prompt": "a"}))
    except ControlError:
        return None
    return lambda text: _vllm_count(client, endpoint, {"prompt": text})


def count_chat(endpoint: Endpoint) -> Callable[[Mapping[str, Any]], int] | None:
    """Prompt tokens of a chat body as the side's template renders it; None where it cannot."""
    client = ControlClient(endpoint.target, timeout_s=30)
    if endpoint.llama:

        def llama(payload: Mapping[str, Any]) -> int:
            prompt = client.apply_template(payload["messages"])
            if prompt is None:
                raise ControlError(f"{endpoint.base_url}/apply-template gave no prompt")
            return len(client.tokenize(prompt, add_special=True))

        return llama
    try:
        client.send(_vllm_tokenize(endpoint, {"messages": [{"role": "user", "content": "a"}]}))
    except ControlError:
        return None
    return lambda payload: _vllm_count(client, endpoint, {"messages": payload["messages"]})


def _vllm_tokenize(endpoint: Endpoint, what: dict[str, Any]) -> Call:
    body = {**what, **({"model": endpoint.model} if endpoint.model else {})}
    return Call("POST", "/tokenize", body)


def _vllm_count(client: ControlClient, endpoint: Endpoint, what: dict[str, Any]) -> int:
    answer = client.send(_vllm_tokenize(endpoint, what))
    count = answer.get("count")
    if isinstance(count, int):
        return count
    tokens = answer.get("tokens")
    if isinstance(tokens, list):
        return len(tokens)
    raise ControlError(f"{endpoint.base_url}/tokenize answered neither 'count' nor 'tokens'")


def collect(
    endpoint: Endpoint,
    probes: Sequence[Probe],
    *,
    n_predict: int,
    n_probs: int,
    progress: Progress | None = None,
) -> list[Generation]:
    """The side's answers to every probe, in order; one short warm-up request first so the
    first probe's TTFT is not the engine's first-request cost."""
    _complete(endpoint, "Warm up.", 1, 0)
    out: list[Generation] = []
    for done, probe in enumerate(probes, start=1):
        out.append(_complete(endpoint, probe.prompt, n_predict, n_probs))
        if progress is not None:
            progress(done, len(probes))
    return out


def _complete(endpoint: Endpoint, prompt: str, n_predict: int, n_probs: int) -> Generation:
    if endpoint.llama:
        return native_generate(endpoint.target, prompt, n_predict=n_predict, n_probs=n_probs)
    return openai_generate(
        endpoint.target,
        "completions",
        {"prompt": prompt},
        n_predict=n_predict,
        n_probs=n_probs,
        model=endpoint.model,
        llama=False,
    )


def collect_logged(
    endpoint: Endpoint,
    prompts: Sequence[LoggedPrompt],
    *,
    n_predict: int,
    n_probs: int,
    progress: Progress | None = None,
) -> list[Generation | None]:
    """The side's answers to the user's own chat prompts, through its chat endpoint (the
    template the user's traffic gets); None for a prompt the engine refused (HTTP 4xx: over
    its window, or a body it does not take)."""
    out: list[Generation | None] = []
    for done, prompt in enumerate(prompts, start=1):
        try:
            out.append(
                openai_generate(
                    endpoint.target,
                    "chat",
                    prompt.payload,
                    n_predict=n_predict,
                    n_probs=n_probs,
                    model=endpoint.model,
                    llama=endpoint.llama,
                )
            )
        except StreamRefused as exc:
            if not 400 <= exc.status < 500:
                raise
            out.append(None)
        if progress is not None:
            progress(done, len(prompts))
    return out
