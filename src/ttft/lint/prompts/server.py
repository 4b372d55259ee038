"""What lint reads from a running llama-server: the template it applies, how it tokenizes,
and how fast it prefills (to turn saved tokens into saved milliseconds of TTFT).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines import control
from ttft.engines.control import ControlClient
from ttft.prompts.chat_template import ChatTemplate
from ttft.prompts.sources import template_from_props
from ttft.weights.gguf import read_gguf


def fetch_server_props(target: Target) -> dict[str, Any]:
    """llama-server's ``GET /props``: the chat template it applies, slots, special tokens."""
    return ControlClient(target).send(control.PROPS)


def template_from_server(target: Target) -> ChatTemplate:
    """The template a running llama-server applies (its own, or its built-in fallback)."""
    template = template_from_props(fetch_server_props(target), target.root)
    if template is None:
        raise TtftError(
            f"{target.root}/props has no chat_template",
            "give the template with --template (a .jinja, tokenizer_config.json or .gguf)",
        )
    return template


def server_prefix_ids(target: Target) -> list[int]:
    """The tokens llama-server puts before every prompt (the BOS token, if the model adds one)."""
    return ControlClient(target).tokenize("", add_special=True)


def prefill_rate_for(given: float | None, server: Target | None, requests: int) -> float | None:
    """``--prefill-rate``; else measured on the server when there is one and the log has more
    than one request (a single request shares a prefix with nothing)."""
    if given is None and server is not None and requests > 1:
        return measure_prefill_rate(server)
    return given


def measure_prefill_rate(target: Target, n_words: int = 300, timeout_s: float = 120.0) -> float:
    """Prompt tokens per second of an uncached prefill, from the server's own ``timings``.

    The prompt is new words (no cache hit) and ``cache_prompt`` is off, so the whole prompt is
    computed; one short warm-up request first keeps a cold start out of the number.
    """
    client = ControlClient(target, timeout_s)
    url = target.root + "/completion"

    def complete(prompt: str) -> dict[str, Any]:
        return client.send(
            control.Call(
                "POST", "/completion", {"prompt": prompt, "n_predict": 1, "cache_prompt": False}
            )
        )

    complete("warm up")
    prompt = " ".join(f"measure{i} prefill{i * 7 % 13}" for i in range(n_words // 2))
    rates = []
    # Best of two: on a shared machine a neighbour's burst slows one run, never speeds it up.
    for _ in range(2):
        out = complete(prompt)
        timings = out.get("timings")
        rate = timings.get("prompt_per_second") if isinstance(timings, dict) else None
        if not isinstance(rate, int | float) or rate <= 0:
            raise TtftError(
                f"{url} reported no prompt_per_second in its timings",
                "give the prefill rate with --prefill-rate TOKENS_PER_S",
            )
        rates.append(float(rate))
    return max(rates)


def server_sliding_window(props: dict[str, Any]) -> int | None:
    """The sliding attention window of the model a local llama-server serves, if it has one.

    Read from the GGUF named in ``/props`` (``model_path``) when this machine can read it: the
    server itself does not report it, and it decides how much of a prefix the server can reuse.
    """
    model_path = props.get("model_path")
    if not isinstance(model_path, str) or not model_path.endswith(".gguf"):
        return None
    path = Path(model_path)
    if not path.is_file():
        return None
    try:
        return read_gguf(path).sliding_window()
    except TtftError:
        return None
