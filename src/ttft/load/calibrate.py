"""How the server counts a prompt around its content: read from its control endpoints, or
measured with one request where it has none.

Bucket lengths mean the prompt tokens the server processes (what its ``usage`` reports): where
the server can count a rendered prompt, each content is checked in its frame; elsewhere the
template's own tokens are measured once and subtracted from the content.
"""

from __future__ import annotations

from ttft.client.stream import StreamingClient
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.engines.control import ControlClient, ControlError
from ttft.workload.exact_length import Count, PromptFrame, text_of_tokens
from ttft.workload.requests import ApiStyle
from ttft.workload.tokenizer import Tokenizer

PROBE_TOKENS = 24


_MARK = "TTFTCONTENTMARK"  # one word no template writes itself: where the content goes


def prompt_frame(target: Target, tokenizer: Tokenizer, api: ApiStyle) -> PromptFrame | None:
    """How the server counts a prompt around a content, read without running the model: for
    chat, llama-server renders the message (``/apply-template``) and the rendered prompt is
    counted with special tokens (``/tokenize``), vLLM counts the messages itself (``/tokenize``
    with messages); a completion prompt is counted with the BOS the server adds. None where the
    server offers neither.

    Every content is counted in its frame (one ``/tokenize`` a check), so a merge across the seam
    cannot make a prompt a token short. Sending no request keeps the server's first real
    request for the cold-start measurement.
    """
    client = ControlClient(target, timeout_s=30)
    count = _chat_count(client) if api == "chat" else _plain_count(client)
    if count is None:
        return None
    probe = text_of_tokens(tokenizer, PROBE_TOKENS, "ttft/calibration")
    try:
        return PromptFrame(count(probe) - PROBE_TOKENS, count)
    except ControlError as exc:
        if exc.status in (401, 403):
            raise
        return None


def _chat_count(client: ControlClient) -> Count | None:
    def rendered(content: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": content}]

    prompt = client.apply_template(rendered(_MARK))
    if prompt is not None and prompt.count(_MARK) == 1:
        before, after = prompt.split(_MARK)
        return lambda text: len(client.tokenize(before + text + after, add_special=True))
    if client.chat_tokens(rendered(_MARK)) is None:  # vLLM renders and counts in one call
        return None

    def counted(text: str) -> int:
        n = client.chat_tokens(rendered(text))
        if n is None:
            raise ControlError(f"{client.root}/tokenize stopped counting chat messages")
        return n

    return counted


def _plain_count(client: ControlClient) -> Count | None:
    try:
        client.tokenize(_MARK, add_special=True)
    except ControlError as exc:
        if exc.status in (401, 403):
            raise
        return None
    return lambda text: len(client.tokenize(text, add_special=True))


async def template_overhead(target: Target, tokenizer: Tokenizer, api: ApiStyle) -> int | None:
    """Prompt tokens the server counts beyond the content's own; None if it reports no usage."""
    content = text_of_tokens(tokenizer, PROBE_TOKENS, "ttft/calibration")
    if api == "chat":
        body: dict[str, object] = {"messages": [{"role": "user", "content": content}]}
    else:
        body = {"prompt": content}
    body.update({"max_tokens": 1, "stream": True, "stream_options": {"include_usage": True}})
    record = RequestRecord(index=-1, cell="calibration")
    async with StreamingClient(
        target.root, model=target.model, api_key=target.api_key, headers=target.headers
    ) as client:
        await client.send(body, record, RunAnchor.now())
    if record.error is not None:
        raise TtftError(
            f"the calibration request to {target.root} failed: {record.error.kind}: "
            f"{record.error.message}",
            "check --url, --model and --api-key; the server must answer a streamed request",
        )
    if record.prompt_tokens is None:
        return None
    return record.prompt_tokens - PROBE_TOKENS
