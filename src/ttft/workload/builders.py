"""Workloads: length buckets, shared-prefix sets, and prompts read from files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.workload.exact_length import BARE, PromptFrame, text_of_tokens
from ttft.workload.request_log import parse_request, read_bodies
from ttft.workload.requests import ApiStyle, WorkItem, chat_body, completion_body
from ttft.workload.tokenizer import Tokenizer

Progress = Callable[[int, int], None]


def length_buckets(
    tokenizer: Tokenizer,
    buckets: Sequence[int],
    per_bucket: int,
    *,
    max_tokens: int = 1,
    api: ApiStyle = "chat",
    frame: PromptFrame = BARE,
    seed: str = "ttft",
    progress: Progress | None = None,
    start: int = 0,
) -> list[WorkItem]:
    """``per_bucket`` prompts of each length; each prompt totals ``bucket`` tokens as the server
    counts them (``frame``: the server's template and special tokens around the content),
    distinct from each other from the first token. ``start`` numbers them from there (a timed
    cell building more of the same series).
    """
    items: list[WorkItem] = []
    total = len(buckets) * per_bucket
    for length in buckets:
        if length - frame.overhead < 1:
            raise TtftError(
                f"bucket {length} is shorter than the server's own {frame.overhead} tokens "
                "around a prompt (its chat template)",
                "use longer buckets, or --api completions",
            )
        for i in range(start, start + per_bucket):
            text = frame.content(tokenizer, length, f"{seed}/{length}/{i}")
            body = (
                chat_body([{"role": "user", "content": text}], max_tokens)
                if api == "chat"
                else completion_body(text, max_tokens)
            )
            items.append(WorkItem(body, api, str(length), length, {"index_in_bucket": i}))
            if progress:
                progress(len(items), total)
    return items


def shared_prefix(
    tokenizer: Tokenizer,
    prefix_tokens: int,
    suffix_tokens: int,
    count: int,
    *,
    max_tokens: int = 1,
    seed: str = "ttft",
    progress: Progress | None = None,
    start: int = 0,
) -> list[WorkItem]:
    """A common system prompt of ``prefix_tokens`` plus a unique user message of
    ``suffix_tokens`` per request: the shape that prefix caching is built for. ``start``
    numbers the suffixes from there."""
    system = text_of_tokens(tokenizer, prefix_tokens, f"{seed}/system/{prefix_tokens}")
    items = []
    for i in range(start, start + count):
        user = text_of_tokens(tokenizer, suffix_tokens, f"{seed}/suffix/{i}")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        items.append(
            WorkItem(
                chat_body(messages, max_tokens),
                "chat",
                f"prefix={prefix_tokens}+{suffix_tokens}",
                None,
                {"prefix_tokens": prefix_tokens},
            )
        )
        if progress:
            progress(i + 1 - start, count)
    return items


def _read_lines(path: Path) -> Iterable[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TtftError(f"prompt file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TtftError(f"cannot read {path}: {exc}", "give a UTF-8 JSONL file") from exc
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield line_no, line


def from_jsonl(path: Path, *, max_tokens: int | None = None) -> list[WorkItem]:
    """One OpenAI chat (``messages``) or completions (``prompt``) body per line, checked as
    strictly as ``ttft lint prompts`` checks them; streaming settings and the model are the
    run's own, so they are dropped."""
    items = []
    for line_no, body in read_bodies(path, "prompt file"):
        if isinstance(body.get("prompt"), str) and "messages" not in body:
            api: ApiStyle = "completions"
        elif "messages" in body:
            parse_request(body, str(path), line_no)  # the same checks as every request log
            api = "chat"
        else:
            raise TtftError(
                f"{path}:{line_no}: a request needs a 'messages' list or a 'prompt' string",
                'e.g. {"messages": [{"role": "user", "content": "Hi"}]}',
            )
        body = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "model")}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        items.append(WorkItem(body, api, "file", None, {"line": line_no}))
    return items


def _sharegpt_records(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TtftError(f"ShareGPT file not found: {path}") from None
    except json.JSONDecodeError:
        # Some dumps are JSONL: one conversation per line.
        out = []
        for line_no, line in _read_lines(path):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TtftError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
        return out
    if not isinstance(data, list):
        raise TtftError(f"{path}: a ShareGPT file is a JSON list of conversations")
    return data


def from_sharegpt(path: Path, *, max_tokens: int = 128, limit: int | None = None) -> list[WorkItem]:
    """The first human turn of each ShareGPT conversation, as a chat request."""
    items = []
    for index, record in enumerate(_sharegpt_records(path)):
        turns = record.get("conversations") if isinstance(record, dict) else None
        if not isinstance(turns, list):
            raise TtftError(
                f"{path}: conversation {index} has no 'conversations' list",
                'ShareGPT records look like {"conversations": [{"from": "human", "value": "..."}]}',
            )
        first = next(
            (t for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None
        )
        if first is None or not isinstance(first.get("value"), str):
            continue  # a conversation without a human turn has nothing to send
        messages = [{"role": "user", "content": first["value"]}]
        items.append(WorkItem(chat_body(messages, max_tokens), "chat", "sharegpt", None))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise TtftError(f"{path} holds no conversation with a human turn")
    return items
