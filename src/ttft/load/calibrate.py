"""How many tokens the server's chat template adds around a message, measured with one request.

Bucket lengths mean the prompt tokens the server processes (what its ``usage`` reports), so the
template's own tokens are measured once and subtracted from the content.
"""

from __future__ import annotations

from ttft.client.stream import StreamingClient
from ttft.core.errors import TtftError
from ttft.core.records import RequestRecord, RunAnchor
from ttft.core.target import Target
from ttft.engines.control import ControlClient, ControlError
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.requests import ApiStyle
from ttft.workload.tokenizer import Tokenizer

PROBE_TOKENS = 24


def template_overhead_without_inference(target: Target, tokenizer: Tokenizer) -> int | None:
    """llama-server renders and counts a chat prompt without running the model
    (``/apply-template`` then ``/tokenize`` with special tokens), vLLM with ``/tokenize`` given the
    messages; None where neither is offered.

    Sending no request keeps the server's first real request for the cold-start measurement.
    """
    content = text_of_tokens(tokenizer, PROBE_TOKENS, "ttft/calibration")
    client = ControlClient(target, timeout_s=30)
    messages = [{"role": "user", "content": content}]
    prompt = client.apply_template(messages)
    if prompt is None:
        counted = client.chat_tokens(messages)  # vLLM: no /apply-template, /tokenize renders
        return None if counted is None else counted - PROBE_TOKENS
    try:
        tokens = client.tokenize(prompt, add_special=True)
    except ControlError as exc:
        if exc.status in (401, 403):
            raise
        return None
    return len(tokens) - PROBE_TOKENS


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
