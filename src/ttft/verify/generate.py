"""One greedy answer from one side: llama-server's native ``/completion`` or the OpenAI API.

Every request is greedy (temperature 0), seeded, streamed, one at a time. llama-server also gets
``cache_prompt`` false, so no probe rides on the prefix cache of another and a side's cache state
can never change its numbers; engines that are not llama-server are sent only OpenAI fields.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ttft.client.events import stream_events
from ttft.core.target import Target
from ttft.verify.logprobs import TokenProbs, native_probs, openai_probs
from ttft.verify.quality import Generation

SEED = 42
Api = Literal["chat", "completions"]


def _generation(
    probs: Sequence[TokenProbs], ids: Sequence[int], text: str, ttft_ms: float, asked: bool
) -> Generation:
    """Keep the probabilities only when every position has them (a partial top-k is no top-k)."""
    full = asked and bool(probs) and all(p.top_texts for p in probs)
    with_ids = bool(probs) and all(p.id is not None for p in probs)
    tokens = tuple(int(p.id) for p in probs if p.id is not None) if with_ids else tuple(ids)
    top_ids = [p.top_ids for p in probs]
    topk: tuple[Mapping[int, float], ...] | None = None
    if full and with_ids and all(top_ids):
        topk = tuple(t for t in top_ids if t)
    return Generation(
        tokens=tokens,
        text=text,
        topk=topk,
        ttft_ms=ttft_ms,
        pieces=tuple(p.text for p in probs),
        topk_pieces=tuple(p.top_texts for p in probs) if full else None,
    )


def native_generate(
    target: Target, prompt: str, *, n_predict: int, n_probs: int, timeout_s: float = 600.0
) -> Generation:
    """llama-server ``POST /completion``: token ids, top-k log-probabilities and TTFT."""
    body = {
        "prompt": prompt,
        "n_predict": n_predict,
        "temperature": 0.0,
        "seed": SEED,
        "n_probs": n_probs,
        "cache_prompt": False,
        "return_tokens": True,  # token ids even where an engine gives no probabilities
        "stream": True,
    }
    probs: list[TokenProbs] = []
    ids: list[int] = []
    text: list[str] = []
    first_ns: int | None = None
    sent_ns = _now()
    done_ns = sent_ns
    url = target.base_url + "/completion"
    events = stream_events(url, body, headers=target.auth_headers(), timeout_s=timeout_s)
    for done_ns, event in events:
        got = native_probs(event)
        if first_ns is None and (event.get("content") or got):
            first_ns = done_ns
        text.append(str(event.get("content") or ""))
        probs.extend(got)
        ids.extend(int(t) for t in event.get("tokens") or [])
        if event.get("stop"):
            break
    ttft = ((first_ns or done_ns) - sent_ns) / 1e6
    # probabilities for some tokens only (an engine that drops them mid-stream) count as none
    if probs and len(probs) != len(ids or probs):
        probs = []
    return _generation(probs, ids, "".join(text), ttft, n_probs > 0)


def openai_generate(
    target: Target,
    api: Api,
    payload: Mapping[str, Any],
    *,
    n_predict: int,
    n_probs: int,
    model: str | None,
    llama: bool,
    timeout_s: float = 600.0,
) -> Generation:
    """``/v1/chat/completions`` (``payload`` has messages) or ``/v1/completions`` (a prompt),
    with OpenAI ``logprobs`` / ``top_logprobs``: what vLLM and SGLang answer with."""
    body: dict[str, Any] = {
        **payload,
        "max_tokens": n_predict,
        "temperature": 0.0,
        "seed": SEED,
        "stream": True,
    }
    if model is not None:
        body["model"] = model
    if n_probs > 0:
        if api == "chat":
            body.update(logprobs=True, top_logprobs=n_probs)
        else:
            body["logprobs"] = n_probs
    if llama:
        body["cache_prompt"] = False
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    probs: list[TokenProbs] = []
    text: list[str] = []
    first_ns: int | None = None
    sent_ns = _now()
    done_ns = sent_ns
    events = stream_events(
        target.base_url + path, body, headers=target.auth_headers(), timeout_s=timeout_s
    )
    for done_ns, event in events:
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            continue  # a usage-only chunk
        choice = choices[0]
        delta = choice.get("delta")
        piece = (delta.get("content") if isinstance(delta, Mapping) else None) or choice.get("text")
        got = openai_probs(choice)
        if first_ns is None and (piece or got):
            first_ns = done_ns
        text.append(str(piece or ""))
        probs.extend(got)
    ttft = ((first_ns or done_ns) - sent_ns) / 1e6
    return _generation(probs, [], "".join(text), ttft, n_probs > 0)


def _now() -> int:
    return time.perf_counter_ns()
