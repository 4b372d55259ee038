"""Run the regression set against one side: start it if it is embedded, stream each probe.

Every request is greedy (temperature 0, top_k 1 is implied by temperature 0 in llama-server),
seeded, and sent with ``cache_prompt`` false: no probe may ride on the prefix cache of another,
and a side's cache state can never change its numbers. One request at a time, so slot
scheduling is identical on both sides.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ControlClient
from ttft.verify.probes import Probe
from ttft.verify.quality import Generation
from ttft.verify.sides import SideSpec

SEED = 42


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    window: int | None  # tokens per slot; None where the server does not say


@contextlib.contextmanager
def open_side(
    side: SideSpec, *, ctx_size: int, parallel: int, threads: int | None = None
) -> Iterator[Endpoint]:
    """A reachable endpoint for ``side``; an embedded engine is stopped on the way out."""
    if side.url is not None:
        yield Endpoint(side.url, ControlClient(Target(side.url)).context_limit())
        return
    from ttft.engines.llamacpp.embedded import launch_embedded

    settings: dict[str, Any] = {"ctx_size": ctx_size, "parallel": parallel}
    if threads is not None:
        settings["threads"] = threads
    settings.update(side.overrides)
    with launch_embedded(**settings) as engine:
        yield Endpoint(engine.base_url, side.window(ctx_size, parallel))


def count_tokens(base_url: str) -> Callable[[str], int]:
    """The side's own tokenizer, as the prompt will be counted (BOS included)."""
    client = ControlClient(Target(base_url), timeout_s=30)
    return lambda text: len(client.tokenize(text, add_special=True))


def generate(
    base_url: str, prompt: str, *, n_predict: int, n_probs: int, timeout_s: float = 600.0
) -> Generation:
    """One greedy streamed completion: its tokens, top-k log-probabilities and TTFT."""
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
    req = urllib.request.Request(
        base_url + "/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    tokens: list[int] = []
    topk: list[Mapping[int, float]] = []
    text: list[str] = []
    saw_probs = True
    first_ns: int | None = None
    sent_ns = time.perf_counter_ns()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                probs = event.get("completion_probabilities")
                if first_ns is None and (event.get("content") or probs):
                    first_ns = time.perf_counter_ns()
                text.append(str(event.get("content") or ""))
                if isinstance(probs, list) and probs:
                    for entry in probs:
                        tokens.append(int(entry["id"]))
                        topk.append(
                            {
                                int(c["id"]): float(c["logprob"])
                                for c in entry.get("top_logprobs", [])
                            }
                        )
                elif event.get("content"):
                    saw_probs = False
                    tokens.extend(int(t) for t in event.get("tokens") or [])
                if event.get("stop"):
                    break
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise TtftError(f"{base_url}/completion answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise TtftError(f"cannot reach {base_url}/completion: {exc}") from None
    done_ns = time.perf_counter_ns()
    ttft_ns = (first_ns or done_ns) - sent_ns
    probs_ok = saw_probs and len(topk) == len(tokens) and all(topk)
    return Generation(
        tuple(tokens), "".join(text), tuple(topk) if probs_ok else None, ttft_ns / 1e6
    )


def collect(
    endpoint: Endpoint,
    probes: Sequence[Probe],
    *,
    n_predict: int,
    n_probs: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Generation]:
    """The side's answers to every probe, in order; one short warm-up request first so the
    first probe's TTFT is not the engine's first-request cost."""
    generate(endpoint.base_url, "Warm up.", n_predict=1, n_probs=0)
    out: list[Generation] = []
    for done, probe in enumerate(probes, start=1):
        out.append(generate(endpoint.base_url, probe.prompt, n_predict=n_predict, n_probs=n_probs))
        if progress is not None:
            progress(done, len(probes))
    return out
