"""What lint reads from a running llama-server: the template it applies, how it tokenizes,
and how fast it prefills (to turn saved tokens into saved milliseconds of TTFT).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.lint.prompts_gguf import read_gguf_sliding_window
from ttft.prompts.chat_template import ChatTemplate


def _get_json(url: str, body: dict[str, Any] | None, timeout_s: float) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            parsed = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TtftError(
            f"could not read {url}: {exc}",
            "give the base URL of a running llama-server, or the template file with --template",
        ) from None
    if not isinstance(parsed, dict):
        raise TtftError(f"{url} answered {parsed!r}, not a JSON object")
    return parsed


def fetch_server_props(base_url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """llama-server's ``GET /props``: the chat template it applies, slots, special tokens."""
    return _get_json(base_url.rstrip("/") + "/props", None, timeout_s)


def template_from_server(base_url: str, timeout_s: float = 10.0) -> ChatTemplate:
    """The template a running llama-server applies (its own, or its built-in fallback)."""
    props = fetch_server_props(base_url, timeout_s)
    template = props.get("chat_template")
    if not isinstance(template, str) or not template:
        raise TtftError(
            f"{base_url}/props has no chat_template",
            "give the template with --template (a .jinja, tokenizer_config.json or .gguf)",
        )
    special = {
        k: str(props[k]) for k in ("bos_token", "eos_token") if isinstance(props.get(k), str)
    }
    return ChatTemplate(template, f"GET {base_url.rstrip('/')}/props (chat_template)", special)


def server_prefix_ids(base_url: str, timeout_s: float = 10.0) -> list[int]:
    """The tokens llama-server puts before every prompt (the BOS token, if the model adds one)."""
    out = _get_json(
        base_url.rstrip("/") + "/tokenize", {"content": "", "add_special": True}, timeout_s
    )
    tokens = out.get("tokens")
    if not isinstance(tokens, list):
        raise TtftError(f"{base_url}/tokenize answered without a 'tokens' list")
    return [int(t) for t in tokens]


def measure_prefill_rate(base_url: str, n_words: int = 300, timeout_s: float = 120.0) -> float:
    """Prompt tokens per second of an uncached prefill, from the server's own ``timings``.

    The prompt is new words (no cache hit) and ``cache_prompt`` is off, so the whole prompt is
    computed; one short warm-up request first keeps a cold start out of the number.
    """
    url = base_url.rstrip("/") + "/completion"
    _get_json(url, {"prompt": "warm up", "n_predict": 1, "cache_prompt": False}, timeout_s)
    prompt = " ".join(f"measure{i} prefill{i * 7 % 13}" for i in range(n_words // 2))
    rates = []
    # Best of two: on a shared machine a neighbour's burst slows one run, never speeds it up.
    for _ in range(2):
        out = _get_json(url, {"prompt": prompt, "n_predict": 1, "cache_prompt": False}, timeout_s)
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
        return read_gguf_sliding_window(path)
    except TtftError:
        return None
