"""Multi-turn conversations: synthesised (turns, lengths, think time) or read from a JSONL file.

A conversation here is its user turns (plus any leading system messages); the assistant turns
are not part of it, because ``load/multiturn.py`` fills them with the model's real answers as
they stream: the history the server sees is the one it would see from a real user.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttft.core.errors import TtftError
from ttft.workload.exact_length import text_of_tokens
from ttft.workload.request_log import read_bodies
from ttft.workload.run_mark import mark_start
from ttft.workload.tokenizer import Tokenizer

_FILE_HELP = (
    'one conversation per line: {"messages": [{"role": "user", "content": "..."}, '
    '{"role": "assistant", "content": "..."}, {"role": "user", "content": "..."}]}'
)


@dataclass(frozen=True)
class SessionsSpec:
    """What ``--sessions`` and its companions asked for."""

    sessions: int | None = None  # conversations at once (None with a file: every one in it)
    turns: int = 4
    think_s: tuple[float, float] = (1.0, 1.0)  # uniform between the two (equal: fixed)
    first_tokens: int = 256  # the first user turn
    next_tokens: int = 32  # every later user turn
    conversations_file: Path | None = None

    def longest_prompt(self, max_tokens: int) -> int:
        """Tokens of the last turn of a synthesised conversation (answers included), plus a
        margin for the chat template's tokens around each message."""
        history = self.first_tokens + (self.turns - 1) * self.next_tokens
        return history + (self.turns - 1) * max_tokens + 16 * self.turns

    def think_time(self, rng: random.Random) -> float:
        low, high = self.think_s
        return low if high <= low else rng.uniform(low, high)


@dataclass(frozen=True)
class Conversation:
    """Leading messages kept as they are (system prompts), then the user turns in order."""

    prefix: tuple[dict[str, Any], ...]
    users: tuple[str, ...]


def parse_think_time(text: str) -> tuple[float, float]:
    """``2`` (always 2 s) or ``1-3`` (uniform between 1 and 3 s)."""
    low_text, dash, high_text = text.strip().partition("-")
    try:
        low = float(low_text)
        high = float(high_text) if dash else low
    except ValueError:
        raise TtftError(
            f"--think-time {text!r} is not seconds or a range",
            "e.g. --think-time 2 (seconds) or --think-time 1-3 (uniform between 1 and 3 s)",
        ) from None
    if low < 0 or high < low:
        raise TtftError(f"--think-time {text!r}: seconds of at least 0, as LOW-HIGH with LOW<=HIGH")
    return low, high


def parse_turn_tokens(text: str) -> tuple[int, int]:
    """``FIRST:NEXT``: tokens of the first user turn and of every later one."""
    first, sep, later = text.partition(":")
    try:
        if not sep:
            raise ValueError
        values = (int(first), int(later))
    except ValueError:
        raise TtftError(
            f"--turn-tokens {text!r} is not FIRST:NEXT",
            "e.g. --turn-tokens 256:32 (a 256-token first question, 32-token follow-ups)",
        ) from None
    if min(values) < 1:
        raise TtftError("--turn-tokens needs FIRST and NEXT of at least 1 token")
    return values


def synthesize(
    tokenizer: Tokenizer,
    spec: SessionsSpec,
    count: int,
    *,
    seed: str,
    progress: Callable[[int, int], None] | None = None,
) -> list[Conversation]:
    """``count`` conversations of ``spec.turns`` user turns of exact lengths; each conversation
    differs from the others from its first word, so none rides on another's prefix cache."""
    conversations = []
    for i in range(count):
        users = [text_of_tokens(tokenizer, spec.first_tokens, f"{seed}/session{i}/turn1")]
        for turn in range(2, spec.turns + 1):
            users.append(
                text_of_tokens(tokenizer, spec.next_tokens, f"{seed}/session{i}/turn{turn}")
            )
        conversations.append(Conversation((), tuple(users)))
        if progress is not None:
            progress(i + 1, count)
    return conversations


def _conversation(path: Path, line_no: int, body: dict[str, Any]) -> Conversation:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise TtftError(f"{path}:{line_no}: no 'messages' list", _FILE_HELP)
    prefix: list[dict[str, Any]] = []
    users: list[str] = []
    for position, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role in ("system", "developer") and not users:
            prefix.append({"role": role, "content": content})
        elif role == "user":
            if not isinstance(content, str) or not content:
                raise TtftError(
                    f"{path}:{line_no}: message {position} is a user turn without text content",
                    _FILE_HELP,
                )
            users.append(content)
        elif role != "assistant":  # assistant turns are replaced by the model's answers
            raise TtftError(
                f"{path}:{line_no}: message {position} has role {role!r}; a conversation holds "
                "system, user and assistant messages",
                _FILE_HELP,
            )
    if not users:
        raise TtftError(f"{path}:{line_no}: the conversation has no user turn", _FILE_HELP)
    return Conversation(tuple(prefix), tuple(users))


def marked_conversation(conversation: Conversation, mark: str) -> Conversation:
    """``conversation`` starting with the run's ``mark`` (``workload/run_mark.py``): in front of
    its system prompt, else of its first user turn."""
    if conversation.prefix:
        return Conversation(tuple(mark_start(list(conversation.prefix), mark)), conversation.users)
    first, *rest = conversation.users
    return Conversation((), (mark + first, *rest))


def read_conversations(path: Path, limit: int | None = None) -> list[Conversation]:
    """The conversations of a JSONL file, in file order (the first ``limit`` when given)."""
    conversations = [_conversation(path, n, body) for n, body in read_bodies(path, "conversations")]
    if not conversations:
        raise TtftError(f"{path} holds no conversation", _FILE_HELP)
    if limit is not None:
        if limit > len(conversations):
            raise TtftError(
                f"--sessions {limit} asks for more conversations than {path} holds "
                f"({len(conversations)})",
                f"use --sessions {len(conversations)} or fewer, or add conversations to the file",
            )
        conversations = conversations[:limit]
    return conversations
