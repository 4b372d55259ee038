"""The user's own prompts, from a request log, as a row of the regression set.

The log is read by the one request-log reader (``ttft.workload.request_log``: a JSONL file of
OpenAI chat bodies, errors naming ``file:line``). Each body keeps what shapes the prompt the
engine builds (messages, tools, template arguments); sampling settings are replaced by the
check's own (greedy, seeded, ``--tokens`` tokens), so both sides answer the same question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ttft.engines.control import ControlError
from ttft.workload.request_log import load_request_log


@dataclass(frozen=True)
class LoggedPrompt:
    where: str  # file:line
    payload: dict[str, Any] = field(default_factory=dict)  # messages (+ tools, template kwargs)
    tokens: int | None = None  # prompt tokens by a side's template and tokenizer; None: unknown


def load_logged(path: Path, limit: int) -> list[LoggedPrompt]:
    """The first ``limit`` requests of the log, as chat payloads."""
    out = []
    for request in load_request_log(path)[:limit]:
        payload: dict[str, Any] = {"messages": request.messages}
        if request.tools:
            payload["tools"] = request.tools
        if request.template_kwargs:
            payload["chat_template_kwargs"] = request.template_kwargs
        out.append(LoggedPrompt(request.where, payload))
    return out


@dataclass(frozen=True)
class Fitted:
    kept: list[LoggedPrompt]
    too_long: list[LoggedPrompt]  # over the smallest window of the two sides


def fit_window(
    prompts: Sequence[LoggedPrompt],
    count: Callable[[Mapping[str, Any]], int] | None,
    window: int | None,
    n_tokens: int,
) -> Fitted:
    """Count each prompt (where a side can) and set aside those that leave no room for
    ``n_tokens`` generated tokens in ``window``; an unknown count or window keeps the prompt
    (a side that then refuses it is counted as refused)."""
    kept: list[LoggedPrompt] = []
    too_long: list[LoggedPrompt] = []
    for prompt in prompts:
        tokens = None
        if count is not None:
            try:
                tokens = count(prompt.payload)
            except ControlError:
                tokens = None
        counted = replace(prompt, tokens=tokens)
        if tokens is not None and window is not None and tokens + n_tokens > window:
            too_long.append(counted)
        else:
            kept.append(counted)
    return Fitted(kept, too_long)
