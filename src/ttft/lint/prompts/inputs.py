"""What ``ttft lint prompts`` reads: the requests, and the template and tokenizer to judge
them with, from files, a running server, or the embedded engine started for the purpose.

Whatever the files do not give comes from the server (its ``/props`` template, its
``/tokenize``), so the lint renders and counts as the server does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ttft.core.errors import TtftError
from ttft.core.target import Target
from ttft.engines.control import ServerTokenizer
from ttft.engines.llamacpp.on_demand import EmbeddedSize, target_or_embedded
from ttft.lint.prompts.server import (
    fetch_server_props,
    server_prefix_ids,
    server_sliding_window,
    template_from_server,
)
from ttft.lint.prompts.tokens import PromptTokens
from ttft.prompts.chat_template import ChatTemplate
from ttft.workload.request_log import ChatRequest
from ttft.workload.tokenizer import Tokenizer


@dataclass
class PromptSources:
    template: ChatTemplate
    tokens: PromptTokens
    server: Target | None  # where the prefill rate can be measured
    sliding_window: bool  # the served model uses sliding-window attention (checkpoint reuse)


@contextlib.contextmanager
def prompt_sources(
    template_path: Path | None,
    template_name: str | None,
    tokenizer_path: Path | None,
    url: str | None,
    api_key: str | None,
    say: Callable[[str], None] | None = None,
) -> Iterator[PromptSources]:
    """Template and tokenizer from files, a running server, or the embedded engine (started here
    and stopped on exit) for whatever the files do not give. ``say`` is told of an engine
    being started and of token counts taken from a server for another model's template."""
    from ttft.prompts.sources import load_template
    from ttft.workload.hf_tokenizer import HFTokenizer

    template = load_template(template_path, template_name) if template_path else None
    if tokenizer_path is None and template_path is not None and template_path.suffix == ".json":
        beside = template_path.with_name("tokenizer.json")
        tokenizer_path = beside if beside.is_file() else None
    tokenizer: Tokenizer | None = HFTokenizer.from_file(tokenizer_path) if tokenizer_path else None
    if template is not None and tokenizer is not None and url is None:
        yield PromptSources(template, PromptTokens(tokenizer), None, sliding_window=False)
        return
    given = Target(url, api_key=api_key) if url is not None else None

    def starting(size: EmbeddedSize) -> None:
        if say is not None:
            say("starting the embedded engine (llama-server, Gemma 3 270M) ...")

    with target_or_embedded(given, _EMBEDDED, complete=False, on_start=starting) as served:
        target = served.target
        url = target.base_url
        sliding = server_sliding_window(fetch_server_props(target)) is not None
        if template is None:
            template = template_from_server(target)
        if tokenizer is None:
            if template_path is not None and say is not None:
                say(
                    f"note: counting tokens with {url}/tokenize; give --tokenizer with the "
                    "model's tokenizer.json for exact counts of another model"
                )
            tokens = PromptTokens(ServerTokenizer(target), server_prefix_ids(target))
        else:
            tokens = PromptTokens(tokenizer)
        yield PromptSources(template, tokens, target, sliding)


# One slot with room for a long system prompt: the engine is only asked for its template,
# its tokenizer and a prefill rate.
_EMBEDDED = EmbeddedSize(4096, slots=1)


def load_requests(log: Path | None, messages: Path | None) -> list[ChatRequest]:
    from ttft.workload.request_log import load_request_log, load_sample

    if (log is None) == (messages is None):
        raise TtftError(
            "give a request log (LOG.jsonl) or one conversation (--messages FILE.json)",
            "ttft lint prompts requests.jsonl   or   ttft lint prompts --messages sample.json",
        )
    if log is not None:
        return load_request_log(log)
    assert messages is not None
    return [load_sample(messages)]
